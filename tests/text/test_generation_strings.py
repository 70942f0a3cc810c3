"""``explain_generation`` on text prompts with a tokenizer, and the views of its explanations: the prompt's
tokens name the features, each generated token names its target's row, every string escaped."""

from __future__ import annotations

import html
import re

import pytest
import torch

from torchlime.engine import Explainer
from torchlime.engine.explanation import Explanation
from torchlime.targets import Continuation
from torchlime.text import Generation, explain_generation, explain_tokens, generated_tokens, prompt_tokens
from torchlime.text.viz import explanation_html

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

WORDS = ["[PAD]", "[UNK]", "the", "cat", "sat", "on", "<b>", "mat", "a", "dog", "ran", "&", "'"]
KW = dict(mask_id=1, target=Continuation(max_new_tokens=3), n_samples=32, generator=0)


@pytest.fixture(scope="module")
def tokenizer() -> object:
    """A word-level fast tokenizer over ``WORDS`` ("<b>" is a word like any other)."""
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]")


@pytest.fixture(scope="module")
def lm() -> torch.nn.Module:
    """A one-layer GPT-2 with random weights over the tokenizer's vocabulary."""
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        n_layer=1, n_head=2, n_embd=16, vocab_size=len(WORDS), n_positions=32, bos_token_id=0, eos_token_id=0
    )
    return transformers.GPT2LMHeadModel(cfg).eval()


@pytest.fixture(scope="module")
def explained(lm, tokenizer) -> Explanation:
    return explain_generation(lm, ["the cat <b> sat on the mat", "a dog ran"], tokenizer=tokenizer, **KW)


def test_text_prompts_give_the_coefficients_of_their_ids(lm, tokenizer, explained):
    one = explain_generation(lm, "the cat <b> sat on the mat", tokenizer=tokenizer, **KW)
    enc = tokenizer(["the cat <b> sat on the mat"], return_tensors="pt")
    ids = explain_generation(lm, enc["input_ids"], attention_mask=enc["attention_mask"], **KW)
    for name in ("coef", "intercept", "score", "target", "features"):
        assert torch.equal(getattr(one, name), getattr(ids, name)), name
    batch = tokenizer(["the cat <b> sat on the mat", "a dog ran"], padding=True, return_tensors="pt")
    both = explain_generation(lm, batch["input_ids"], attention_mask=batch["attention_mask"], **KW)
    assert torch.equal(explained.coef, both.coef) and torch.equal(explained.intercept, both.intercept)
    assert prompt_tokens(explained, 0) == ["the", "cat", "<b>", "sat", "on", "the", "mat"]
    assert prompt_tokens(explained, 1) == ["a", "dog", "ran"]  # padding is no feature
    cont = explained.info.continuation.tolist()
    assert generated_tokens(explained, 1) == [WORDS[i] for i in cont[1]]


def test_text_prompts_through_the_generation_modality_give_the_door_s_bits(lm, tokenizer, explained):
    kw = {k: v for k, v in KW.items() if k != "mask_id"}
    engine = Explainer().explain(
        lm, ["the cat <b> sat on the mat", "a dog ran"], Generation(mask_id=1, tokenizer=tokenizer), **kw
    )
    for name in ("coef", "intercept", "score", "local_pred", "target", "features"):
        assert torch.equal(getattr(engine, name), getattr(explained, name)), name
    assert engine.info == explained.info and engine.info.continuation_text == explained.info.continuation_text


def test_text_without_a_tokenizer_is_refused_naming_it(lm, tokenizer):
    with pytest.raises(TypeError, match=r"`tokenizer=`.*got tokenizer=None"):
        explain_generation(lm, "the cat sat", **KW)
    with pytest.raises(TypeError, match=r"`tokenizer=`"):
        explain_generation(lm, ["the cat sat", "a dog"], **KW)
    with pytest.raises(ValueError, match=r"`attention_mask` must be None with text prompts"):
        explain_generation(lm, "the cat sat", tokenizer=tokenizer, attention_mask=torch.ones(1, 3), **KW)


def test_explanation_html_shows_prompt_and_generated_tokens_escaped(explained):
    page = explanation_html(explained, 0)  # the input's index where the tokens would go: the recorded ones
    assert page == explanation_html(explained, index=0)
    assert "&lt;b&gt;" in page and "<b>" not in page
    for word in ("the", "cat", "sat", "mat"):
        assert f">{word}</span>" in page
    assert "the whole continuation" in page
    for g, token in enumerate(generated_tokens(explained, 0)):
        assert html.escape(f"token {g}: {token}") in page
    one_row = explanation_html(explained, 1, target_index=2)
    assert one_row.count("torchlime-text") == 1 and f"token 1: {generated_tokens(explained, 1)[1]}" in one_row
    tokens_only = explain_tokens(lambda t: t.float().sum(1, keepdim=True), torch.tensor([[3, 4, 5]]), mask_id=0)
    with pytest.raises(ValueError, match=r"`tokens` must be the L token strings of input 0"):
        explanation_html(tokens_only, 0)


def test_the_notebook_table_names_columns_by_prompt_tokens_and_rows_by_generated_ones(explained, tmp_path):
    page = explained._repr_html_()
    for b in (0, 1):
        header = re.findall(r"<tr><th></th>(.*?)</tr>", page)[b]
        assert re.findall(r"<th>(.*?)</th>", header) == [html.escape(t) for t in prompt_tokens(explained, b)]
        rows = [html.escape(f"token {g}: {t}") for g, t in enumerate(generated_tokens(explained, b))]
        assert all(f"<tr><th>{r}</th>" in page for r in rows) and "f0" not in header
    explained.save(tmp_path / "generation.pt")
    assert Explanation.load(tmp_path / "generation.pt")._repr_html_().count("&lt;b&gt;") == page.count("&lt;b&gt;")
    assert explained[1]._repr_html_().count("<tr><th></th><th>a</th><th>dog</th><th>ran</th></tr>") == 1


def test_without_a_tokenizer_the_views_name_tokens_by_their_ids():
    lm = lambda input_ids: torch.nn.functional.one_hot(input_ids.roll(1, 1), 16).float() * 4  # noqa: E731
    exp = explain_generation(
        lm, torch.tensor([[3, 5, 7]]), mask_id=0, n_samples=16, target=Continuation(max_new_tokens=2)
    )
    assert prompt_tokens(exp) == ["3", "5", "7"] and generated_tokens(exp) is None
    page = exp._repr_html_()
    first = int(exp.info.continuation[0, 0])
    assert "<th></th><th>3</th><th>5</th><th>7</th></tr>" in page and f"<th>token 0 (id {first})</th>" in page


def test_several_texts_need_a_padding_token(lm):
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    unpadded = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    assert explain_generation(lm, "the cat", tokenizer=unpadded, **KW).coef.shape == (1, 4, 2)  # one needs none
    with pytest.raises(ValueError, match=r"`tokenizer` must have a padding token to pad 2 texts"):
        explain_generation(lm, ["the cat", "a dog ran"], tokenizer=unpadded, **KW)
