"""``Tokens`` and ``Words``: the text modalities behind ``explain_tokens`` and ``explain_text``.

The same seed gives the same bits through ``Explainer(...).explain(model, x, Tokens(...))`` as through the
front door; the typed record is on ``explanation.info``; the ``meta`` keys readers use are still there.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch

import torchlime
from torchlime.engine import Call, Explainer
from torchlime.text import Infiller, Tokens, Words, explain_text, explain_tokens
from torchlime.text._tokens import TokensInfo
from torchlime.text._words import WordsInfo

from tests.helpers.doors import check_door_form
from tests.helpers.text import CLS, MASK, SEP, CheatMLM, PositionBag, ToyMLM, batch_with_padding

SPECIAL = [CLS, SEP]
WORDS = torch.tensor([[-1, 0, 0, 1, 2, 2, 3, 3, 4, 5]])


def same(a, b):
    for name in ("coef", "intercept", "score", "local_pred", "features"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert a.input_shape == b.input_shape


def positive(texts):
    p = torch.tensor([min(1.0, 0.2 + 0.4 * t.split().count("good")) for t in texts])
    return torch.stack((1 - p, p), 1)


# ------------------------------------------------------------------ Tokens
@pytest.mark.parametrize(
    "mode, infill",
    [
        ("replace", None),
        ("delete", None),
        ("infill", "joint"),
        ("infill", "single"),
        ("infill", "neutral"),
    ],
)
def test_explainer_with_tokens_equals_explain_tokens(mode, infill):
    ids, attn = batch_with_padding()
    settings = dict(attention_mask=attn, word_ids=WORDS, special_ids=SPECIAL, mode=mode, mask_id=MASK)
    if infill is not None:
        objective = "neutral" if infill == "neutral" else None
        protocol = "joint" if infill == "joint" else "single"
        settings["infill"] = Infiller(ToyMLM(), protocol=protocol, objective=objective, k=3, synonym_threshold=None)
    call = dict(target="all", n_samples=40, generator=5, return_samples=True)
    old = explain_tokens(PositionBag(), ids, surrogate="ridge", **settings, **call)
    new = Explainer(surrogate="ridge").explain(PositionBag(), ids, Tokens(**settings), **call)
    same(old, new)
    assert torch.equal(old.samples, new.samples)
    assert new.features.shape == ids.shape and new.input_shape == (ids.shape[1],)
    assert old.meta["model_rows"] == new.meta["model_rows"] and old.meta["mode"] == new.meta["mode"] == mode
    assert isinstance(new.info, TokensInfo) and new.info == old.info
    assert new.info.mode == mode and new.info.special_ids == (CLS, SEP) and new.info.mask_id == MASK
    assert new.meta["text_tokens"] == new.info.as_plain()
    if infill is not None:  # the rows counted while the explanation ran
        for key in ("infill", "objective", "strategy", "mlm_rows"):
            assert new.meta[key] == getattr(new.info, key) == old.meta[key]
        assert new.info.mlm_rows > 0 and new.info.infill == ("joint" if infill == "joint" else "single")
        if infill == "neutral":  # the prediction and 3 candidates per word: rows besides the samples
            assert new.info.scoring_rows == 3 + 3 * int(new.n_features.sum())
            assert new.meta["model_rows"] == 3 * 40 + new.info.scoring_rows
    else:
        assert new.info.infill is None and new.info.mlm_rows is None and "mlm_rows" not in new.meta


def test_a_tokens_modality_is_reusable_and_its_counts_are_per_call():
    ids, attn = batch_with_padding()
    infill = Infiller(CheatMLM(ids[0]), synonym_threshold=None)
    tokens = Tokens(attention_mask=attn, special_ids=SPECIAL, mode="infill", mask_id=MASK, infill=infill)
    lime = Explainer()
    a = lime.explain(PositionBag(), ids, tokens, n_samples=30, generator=1)
    b = lime.run(PositionBag(), ids, tokens, Call(n_samples=30, generator=1))
    same(a, b)
    assert a.info.mlm_rows == b.info.mlm_rows == a.meta["mlm_rows"] > 0  # not summed over calls


def test_tokens_refuses_a_fill_and_the_hooks_it_sets():
    ids, attn = batch_with_padding()
    tokens = Tokens(attention_mask=attn, mask_id=MASK)
    with pytest.raises(TypeError, match=r"Tokens does not take \['baseline'\]: .* from `mode`"):
        Explainer(baseline=0.0).explain(PositionBag(), ids, tokens, n_samples=8)
    with pytest.raises(TypeError, match=r"Tokens does not take \['normalize'\]"):
        Explainer().explain(PositionBag(), ids, tokens, n_samples=8, normalize=([0.0], [1.0]))
    with pytest.raises(ValueError, match=r"`mode` must be one of"):
        Explainer().explain(PositionBag(), ids, Tokens(mode="drop", mask_id=MASK), n_samples=8)


def test_explain_tokens_signature_is_the_modality_then_the_named_call_fields_then_the_options():
    params = inspect.signature(explain_tokens).parameters
    fields = [f.name for f in dataclasses.fields(Tokens)]
    assert list(params) == ["model", "input_ids", *fields, "target", "n_samples", "generator", "options"]
    check_door_form(explain_tokens, Tokens, batch_with_padding()[0], mask_id=MASK)
    assert "word_ids" in fields and "features" not in params  # the feature map keeps its name
    with pytest.raises(TypeError, match="unexpected keyword argument 'features'"):
        explain_tokens(PositionBag(), batch_with_padding()[0], mask_id=MASK, features=WORDS)


# ------------------------------------------------------------------ Words over strings
@pytest.mark.parametrize("settings", [dict(), dict(bow=False, mask_string="[X]"), dict(char_level=True)])
def test_explainer_with_words_equals_explain_text(settings):
    texts = ["a good movie with a good cast", "bad plot , bad acting but good music"]
    call = dict(target=1, n_samples=100, generator=2, return_samples=True)
    old = explain_text(positive, texts, preset="lime", **settings, **call)
    new = Explainer(preset="lime").explain(positive, texts, Words(**settings), **call)
    same(old, new)
    assert torch.equal(old.samples, new.samples)
    info = new.info
    assert isinstance(info, WordsInfo) and info == old.info
    assert info.texts == texts and info.tokens is None and info.token_info is None
    for key in ("texts", "words", "pieces", "piece_features"):  # what viz, notebooks and lime's wrapper read
        assert new.meta[key] == getattr(info, key) == old.meta[key]
    assert "".join(info.pieces[1]) == texts[1]
    assert new.meta["text_words"] == info.as_plain()
    one = new[1]  # the record follows the input
    assert one.info.texts == [texts[1]] and one.info.words == [info.words[1]]
    assert one.meta["text_words"]["words"] == [info.words[1]]


def test_an_unknown_keyword_to_explain_text_is_a_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'n_sample'"):
        explain_text(positive, "a good day", n_sample=10)
    with pytest.raises(TypeError, match="unexpected keyword argument 'baseline'"):
        explain_text(positive, "a good day", baseline=0.0)
    params = inspect.signature(explain_text).parameters
    fields = [f.name for f in dataclasses.fields(Words)]
    assert list(params) == ["model", "texts", *fields, "target", "n_samples", "generator", "options"]
    check_door_form(explain_text, Words, "a good day")


def test_words_without_a_tokenizer_refuse_token_settings_by_name():
    with pytest.raises(ValueError, match=r"`mask_id` and `pad_id` apply with a `tokenizer`"):
        explain_text(positive, "a good day", mask_id=3, pad_id=0)
    with pytest.raises(TypeError, match=r"Words does not take \['baseline'\]"):
        Explainer(baseline="mean").explain(positive, ["a good day"], Words())


# ------------------------------------------------------------------ Words with a tokenizer
VOCAB_SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB_WORDS = ["the", "film", "was", "great", "a", "movie", "i", "saw", "it", "plot", "bad", "of", "good", "."]


@pytest.fixture(scope="module")
def tok():
    transformers = pytest.importorskip("transformers")  # a test extra
    return transformers.BertTokenizerFast(vocab={t: i for i, t in enumerate(VOCAB_SPECIAL + VOCAB_WORDS)})


class Planted(torch.nn.Module):
    def __init__(self, word_id):
        super().__init__()
        self.word_id = word_id
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask):
        n = ((input_ids == self.word_id) & (attention_mask != 0)).sum(1).float()
        return torch.stack((torch.zeros_like(n), n), 1) + self.w + 0.01 * input_ids.float().sum(1, keepdim=True)


@pytest.mark.parametrize("mode", [None, "delete", "replace", "infill"])
def test_explainer_with_words_and_a_tokenizer_equals_explain_text(tok, mode):
    texts = ["zzz the film was great", "a good movie. i saw it great"]
    model = Planted(tok.convert_tokens_to_ids("great"))
    settings = dict(tokenizer=tok, bow=mode != "replace", mode=mode)
    if mode == "infill":
        vocab = len(VOCAB_SPECIAL) + len(VOCAB_WORDS)
        settings["infill"] = Infiller(CheatMLM(torch.full((32,), 17), vocab=vocab), synonym_threshold=None)
    call = dict(target=1, n_samples=64, generator=3)
    old = explain_text(model, texts, **settings, **call)
    new = Explainer().explain(model, texts, Words(**settings), **call)
    same(old, new)
    info = new.info
    assert isinstance(info, WordsInfo) and isinstance(info.token_info, TokensInfo)
    assert info.words[0] == ["zzz", "the", "film", "was", "great"]  # [UNK] stands for a word: a feature
    assert info.token_info.mode == (mode or "delete") and info.token_info.mask_id == tok.mask_token_id
    assert tok.unk_token_id not in info.token_info.special_ids
    for key in ("texts", "words", "pieces", "piece_features", "tokens"):
        assert new.meta[key] == getattr(info, key) == old.meta[key]
    assert new.meta["tokens"][0][0] == "[CLS]" and new.meta["mode"] == (mode or "delete")
    assert new.meta["text_words"]["token_info"] == info.token_info.as_plain()
    if mode == "infill":
        assert new.meta["mlm_rows"] == info.token_info.mlm_rows > 0


def test_a_loaded_text_explanation_rebuilds_its_words_record(tmp_path):
    exp = explain_text(lambda texts: torch.rand(len(texts), 2), ["good film", "a bad, bad plot"], n_samples=16)
    exp.save(tmp_path / "text.pt")
    back = torchlime.Explanation.load(tmp_path / "text.pt")
    assert isinstance(back.info, WordsInfo) and back.info == exp.info
    assert back.info.feature_labels(1) == exp.info.words[1] == ["a", "bad", "plot"]
    assert back.info.text_pieces(0) == (exp.info.pieces[0], exp.info.piece_features[0])
    assert back[1:].info.texts == ["a bad, bad plot"]
