"""``explain_text``: raw strings with a function over strings, or a tokenizer and a token-ID model."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from torchlime.text import explain_text
from torchlime.text.split import split_text
from torchlime.text.viz import text_html

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def positive(texts):
    """P(positive) grows with "good" and falls with "bad": a planted ground truth."""
    score = [0.5 + 0.2 * t.split().count("good") - 0.2 * t.split().count("bad") for t in texts]
    p = np.clip(np.array(score), 0.0, 1.0)
    return np.stack((1 - p, p), 1)


class Recorder:
    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __call__(self, texts):
        self.calls.append(list(texts))
        return self.fn(texts)


# ------------------------------------------------------------------ words as lime cuts them
LIME_STRINGS = [
    "Please, take your time. Please",
    "This is a good movie. This, it is a great movie.",
    "  leading spaces and trailing punctuation!!",
    "ünïcödé wörds, ok",
    "",
]


@pytest.mark.parametrize("text", LIME_STRINGS)
@pytest.mark.parametrize("bow", [True, False])
def test_split_matches_lime_indexed_string(text, bow):
    lime_text = pytest.importorskip("lime.lime_text")
    ref = lime_text.IndexedString(text, bow=bow)
    ours = split_text(text, bow=bow)
    assert ours.pieces == list(ref.as_list)
    assert ours.words == list(ref.inverse_vocab)
    rng = np.random.default_rng(0)
    for _ in range(5 if ours.n_features else 0):  # lime's own removal fails on a text without words
        k = int(rng.integers(0, ours.n_features + 1))
        hidden = rng.choice(ours.n_features, size=k, replace=False).tolist() if ours.n_features else []
        assert ours.without(hidden, None if bow else "UNKWORDZ") == ref.inverse_removing(hidden)


def test_split_callable_and_characters_match_lime():
    lime_text = pytest.importorskip("lime.lime_text")

    def pairs(s):
        return [s[i : i + 2] for i in range(0, len(s) - 1, 2)]

    ref = lime_text.IndexedString("aabbccddaa", split_expression=pairs)
    ours = split_text("aabbccddaa", pairs)
    assert (ours.pieces, ours.words) == (list(ref.as_list), list(ref.inverse_vocab))
    for bow in (True, False):
        ref_c = lime_text.IndexedCharacters("Please, take your time", bow=bow)
        ours_c = split_text("Please, take your time", bow=bow, char_level=True)
        assert ours_c.words == list(ref_c.inverse_vocab)
        assert ours_c.without([2, 5], None if bow else chr(0)) == ref_c.inverse_removing([2, 5])


def test_split_rejects_tokens_not_in_the_text():
    with pytest.raises(ValueError, match="split_expression"):
        split_text("abc", lambda s: ["zz"])


# ------------------------------------------------------------------ a function over strings
def test_planted_words_rank_first_for_several_texts():
    texts = ["a good movie with a good cast", "bad plot , bad acting but good music"]
    exp = explain_text(positive, texts, target=1, n_samples=600, generator=0)
    assert exp.coef.shape == (2, 1, 6)
    words = exp.info.words
    assert words[0] == ["a", "good", "movie", "with", "cast"] and words[1][0] == "bad"
    top = exp.coef[:, 0].argmax(1).tolist()
    bottom = exp.coef[:, 0].argmin(1).tolist()
    assert words[0][top[0]] == "good" and words[1][top[1]] == "good" and words[1][bottom[1]] == "bad"
    assert exp.n_features.tolist() == [5, 6]


def test_the_function_sees_lime_perturbed_strings():
    rec = Recorder(positive)
    text = "good, bad and good again"
    exp = explain_text(rec, text, n_samples=40, generator=1, return_samples=True, batch_size=16)
    seen = [t for call in rec.calls for t in call]
    assert [len(c) for c in rec.calls] == [16, 16, 8]  # chunks of strings, one call each
    split = split_text(text)
    masks = exp.samples[0]
    expected = [split.without((~m).nonzero().flatten().tolist()) for m in masks]
    assert seen == expected and seen[0] == text


def test_without_bow_hidden_words_become_the_mask_string():
    rec = Recorder(positive)
    explain_text(rec, "good good bad", bow=False, n_samples=30, generator=0, mask_string="[X]")
    seen = [t for call in rec.calls for t in call]
    assert all(re.fullmatch(r"(good|\[X\]) (good|\[X\]) (bad|\[X\])", t) for t in seen)
    assert any(t.startswith("good [X]") for t in seen)  # occurrences are separate features


def test_same_seed_same_bits_and_numpy_or_tensor_outputs():
    a = explain_text(positive, "a good day", n_samples=100, generator=3)
    b = explain_text(lambda t: torch.from_numpy(positive(t)), "a good day", n_samples=100, generator=3)
    assert torch.equal(a.coef, b.coef) and torch.equal(a.intercept, b.intercept)


def test_lime_text_preset_is_lime_text_sampling():
    exp = explain_text(positive, "good bad good ok", preset="lime", target=1, n_samples=300, generator=0)
    assert exp.run.n_samples == 300 and "UniformCount" in exp.run.sampler


def test_text_html_highlights_words_in_place_and_escapes():
    exp = explain_text(positive, "good <b>bad</b> good", target=1, n_samples=200, generator=0)
    page = text_html(exp)
    assert "&lt;" in page and "<b>bad" not in page
    assert page.count("<span title=") == 5  # good, b, bad, b, good: the separators are plain text
    assert "good" in exp._repr_html_()


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(texts=3), TypeError, "texts"),
        (dict(texts=["ok", 2]), TypeError, "texts"),
        (dict(texts="ok", bow=1), TypeError, "bow"),
        (dict(texts="ok", mask_string=0), TypeError, "mask_string"),
        (dict(texts="ok", features=1), TypeError, "features"),
        (dict(texts="ok", mode="delete"), ValueError, "tokenizer"),
        (dict(texts="ok", kernel="captum"), ValueError, "kernel"),
        (dict(texts="ok", split_expression=3), TypeError, "split_expression"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        explain_text(positive, **kwargs)


def test_a_function_returning_words_is_refused():
    with pytest.raises(TypeError, match="scores"):
        explain_text(lambda t: ["yes"] * len(t), "good day", n_samples=20)


# ------------------------------------------------------------------ a tokenizer and a token model
try:
    import tokenizers
    import transformers
except ImportError:  # a test extra: pip install -e '.[test]'
    tokenizers = transformers = None
needs_hf = pytest.mark.skipif(transformers is None, reason="transformers is a test extra")

WORDS = ["good", "bad", "movie", "the", "was", "plot", "mov", "##ie", ",", "."]
SPECIAL = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"]


@pytest.fixture(scope="module")
def tokenizer():
    if transformers is None:
        pytest.skip("transformers is a test extra")
    vocab = {t: i for i, t in enumerate(SPECIAL + WORDS)}
    tok = tokenizers.Tokenizer(tokenizers.models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = tokenizers.normalizers.Lowercase()
    tok.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    tok.post_processor = tokenizers.processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)]
    )
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        unk_token="[UNK]",
    )


class CountGood(torch.nn.Module):
    """logits (c, 2): [0, #"good" tokens attended]; records what it sees."""

    def __init__(self, good_id):
        super().__init__()
        self.good_id, self.seen = good_id, []
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask):
        self.seen.append((input_ids.clone(), attention_mask.clone()))
        n = ((input_ids == self.good_id) & (attention_mask != 0)).sum(1).float()
        return torch.stack((torch.zeros_like(n), n), 1) + self.w


def test_tokenizer_words_are_features_specials_never_perturbed(tokenizer):
    good = tokenizer.convert_tokens_to_ids("good")
    model = CountGood(good)
    texts = ["The movie was good, the plot good", "bad movie"]
    exp = explain_text(model, texts, tokenizer=tokenizer, target=1, n_samples=64, generator=0)
    words = exp.info.words
    assert words[0] == ["The", "movie", "was", "good", ",", "the", "plot"]  # "good" twice: one feature
    assert words[1] == ["bad", "movie"]
    assert words[0][int(exp.coef[0, 0].argmax())] == "good"
    ids = torch.cat([s[0] for s in model.seen])
    attn = torch.cat([s[1] for s in model.seen])
    assert bool((ids[:, 0] == 1).all())  # [CLS] stays first in every row
    assert bool(((ids == 2) & (attn != 0)).sum(1).eq(1).all())  # one attended [SEP] in every row
    # "delete" (the default with bow): every row's attention mask counts the tokens it kept
    kept_good = ((ids == good) & (attn != 0)).sum(1)
    assert set(kept_good.tolist()) <= {0, 2} | {0}  # both "good" tokens go together (one feature)


def test_tokenizer_multi_token_word_and_replace_mode(tokenizer):
    mask = tokenizer.mask_token_id
    model = CountGood(tokenizer.convert_tokens_to_ids("good"))
    exp = explain_text(model, "good movie", tokenizer=tokenizer, bow=False, n_samples=32, generator=0)
    assert exp.info.words[0] == ["good", "movie"]
    assert exp.meta["mode"] == "replace"
    ids = torch.cat([s[0] for s in model.seen])
    assert bool((ids == mask).any()) and ids.shape[1] == 4  # [CLS] good movie [SEP]: no deletion
    html = text_html(exp)
    assert "movie" in html and "good" in html


@needs_hf
def test_hf_model_from_a_config(tokenizer):
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(SPECIAL) + len(WORDS),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        num_labels=2,
    )
    model = transformers.BertForSequenceClassification(config).eval()
    exp = explain_text(model, ["the movie was bad", "good plot"], tokenizer=tokenizer, n_samples=50, generator=0)
    assert exp.coef.shape == (2, 1, 4) and bool(torch.isfinite(exp.coef).all())
    again = explain_text(model, ["the movie was bad", "good plot"], tokenizer=tokenizer, n_samples=50, generator=0)
    assert torch.equal(exp.coef, again.coef)


def test_slow_tokenizers_are_refused():
    class Slow:
        def __call__(self, texts, **kw):
            return {"input_ids": torch.ones(len(texts), 3, dtype=torch.long)}

    with pytest.raises(TypeError, match="fast tokenizer"):
        explain_text(CountGood(5), "good", tokenizer=Slow())
