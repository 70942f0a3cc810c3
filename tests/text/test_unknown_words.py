"""Words a tokenizer maps to [UNK] stay features: one coefficient per word of ``meta["words"]``."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from torchlime.text import explain_text, explain_tokens, word_ids_from_encoding
from torchlime.text.infill import Infiller
from torchlime.text.viz import text_html

from tests.helpers.text import CheatMLM


@pytest.fixture(autouse=True)
def full_length_rows(monkeypatch):
    """These tests check deletion itself on full-length rows in their own order (packing by length:
    tests/text/test_delete_packing.py)."""
    from torchlime.text._tokens import Tokens

    monkeypatch.setattr(Tokens, "_pack_rows", False)


transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# no "zzz", no "honestly", no "," ";" "!" "(": those become [UNK]
WORDS = ["the", "film", "was", "great", "a", "movie", "i", "saw", "it", "plot", "bad", "of", "which", "good", "."]
SENTENCE = "The film, which I saw, was great; the plot of it was bad!"  # 17 words, 4 of them unknown


@pytest.fixture(scope="module")
def tok():
    return transformers.BertTokenizerFast(vocab={t: i for i, t in enumerate(SPECIAL + WORDS)})


class Planted(torch.nn.Module):
    """logits (c, 2) = [0, number of attended `word` tokens]; keeps every batch it sees."""

    def __init__(self, word_id):
        super().__init__()
        self.word_id, self.seen = word_id, []
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask):
        self.seen.append((input_ids.clone(), attention_mask.clone()))
        n = ((input_ids == self.word_id) & (attention_mask != 0)).sum(1).float()
        return torch.stack((torch.zeros_like(n), n), 1) + self.w


def planted(tok, word="great"):
    return Planted(tok.convert_tokens_to_ids(word))


def check_aligned(exp):
    """One coefficient per word, for every text, and the pictures work."""
    for b, words in enumerate(exp.info.words):
        assert int(exp.n_features[b]) == len(words)
        used = {f for f in exp.info.piece_features[b] if f >= 0}
        assert used == set(range(len(words)))
        assert {int(f) for f in exp.features[b].tolist() if f >= 0} == set(range(len(words)))
        assert "torchlime-text" in text_html(exp, index=b)
    assert exp.coef.shape[-1] == max(len(w) for w in exp.info.words)
    assert isinstance(exp._repr_html_(), str)


@pytest.mark.parametrize("bow", [True, False])  # "delete" / "replace"
@pytest.mark.parametrize(
    "text, words",
    [
        ("zzz film was great", ["zzz", "film", "was", "great"]),
        ("zzz qqq film, great!", ["zzz", "qqq", "film", ",", "great", "!"]),
    ],
)
def test_unknown_words_are_features_and_the_planted_word_is_on_top(tok, bow, text, words):
    model = planted(tok)
    exp = explain_text(model, text, tokenizer=tok, bow=bow, target=1, n_samples=64, generator=0)
    assert exp.info.words == [words]
    check_aligned(exp)
    assert words[int(exp.coef[0, 0].abs().argmax())] == "great"
    ids = torch.cat([s[0] for s in model.seen])
    attn = torch.cat([s[1] for s in model.seen])
    unk = ((ids == tok.unk_token_id) & (attn != 0)).sum(1)
    assert unk.min() < unk.max()  # the [UNK] words are hidden in some samples and not in others


@pytest.mark.parametrize("bow, n_words", [(False, 17), (True, 15)])  # "The"/"the" differ; "," and "was" twice
def test_a_sentence_with_unknown_punctuation(tok, bow, n_words):
    exp = explain_text(planted(tok), SENTENCE, tokenizer=tok, bow=bow, target=1, n_samples=128, generator=0)
    words = exp.info.words[0]
    assert len(words) == n_words and words[:4] == ["The", "film", ",", "which"]
    check_aligned(exp)
    assert words[int(exp.coef[0, 0].abs().argmax())] == "great"


def test_a_batch_mixing_known_and_unknown_words(tok):
    texts = ["zzz film was great", "the film was great", SENTENCE]
    exp = explain_text(planted(tok), texts, tokenizer=tok, bow=False, target=1, n_samples=96, generator=1)
    check_aligned(exp)
    for b, words in enumerate(exp.info.words):
        assert words[int(exp.coef[b, 0, : len(words)].abs().argmax())] == "great"


def test_every_token_unknown(tok):
    text = " ".join(f"x{i}y" for i in range(19))  # 19 unknown words, 21 tokens with [CLS] and [SEP]
    model = planted(tok, "[UNK]")  # the score counts unknown words
    exp = explain_text(model, text, tokenizer=tok, bow=False, target=1, n_samples=200, generator=0)
    assert len(exp.info.tokens[0]) == 21 and exp.info.words[0][:2] == ["x0y", "x1y"]
    check_aligned(exp)
    assert bool((exp.coef[0, 0] > 0.5).all())  # every word counts (about 1 each)


def test_same_seed_same_bits(tok):
    a = explain_text(planted(tok), SENTENCE, tokenizer=tok, n_samples=64, generator=7)
    b = explain_text(planted(tok), SENTENCE, tokenizer=tok, n_samples=64, generator=7)
    assert torch.equal(a.coef, b.coef) and torch.equal(a.intercept, b.intercept)
    assert a.info.words == b.info.words


def test_special_tokens_written_in_a_text_are_left_out_of_the_words(tok):
    model = planted(tok)
    exp = explain_text(model, "film [SEP] was great", tokenizer=tok, target=1, n_samples=48, generator=0)
    assert exp.info.words == [["film", "was", "great"]]
    assert "[SEP]" in exp.info.pieces[0]
    check_aligned(exp)
    ids = torch.cat([s[0] for s in model.seen])
    attn = torch.cat([s[1] for s in model.seen])
    assert bool(((ids == tok.sep_token_id) & (attn != 0)).sum(1).eq(2).all())  # never perturbed


def test_infill_perturbs_unknown_words_but_never_proposes_unk(tok):
    unk, film = tok.unk_token_id, tok.convert_tokens_to_ids("film")
    vocab = len(SPECIAL) + len(WORDS)
    mlm = CheatMLM(torch.full((32,), unk), vocab=vocab, second=torch.full((32,), film))
    infill = Infiller(mlm, strategy="argmax", synonym_threshold=None)
    model = planted(tok)
    exp = explain_text(
        model, "zzz the movie was great", tokenizer=tok, mode="infill", infill=infill, n_samples=48, generator=0
    )
    check_aligned(exp)
    ids = torch.cat([s[0] for s in model.seen])
    n_unk = (ids == unk).sum(1)
    assert set(n_unk.tolist()) == {0, 1}  # the unknown word is hidden in some rows, and no [UNK] proposed
    assert bool((ids[n_unk == 0, 1] == film).all())  # hidden, it became the MLM's next choice


@pytest.mark.parametrize(
    "texts, match",
    [
        (["good film", ""], r"`texts` \[1\] have fewer: text 1 '' has 0 word\(s\) \[\], from tokens \['\[CLS\]', '\["),
        ("[SEP] [MASK]", r"text 0 '\[SEP\] \[MASK\]' has 0 word\(s\) \[\], from tokens .*special tokens are never"),
        (["zzz", "film"], r"`texts` \[0, 1\] have fewer: text 0 'zzz' has 1 word\(s\) \['zzz'\]"),
    ],
)
def test_texts_without_two_words_say_why(tok, texts, match):
    with pytest.raises(ValueError, match=r"every text needs at least 2 words to explain; .*" + match):
        explain_text(planted(tok), texts, tokenizer=tok, n_samples=16)


def test_truncation_is_named_when_it_leaves_one_word(tok):
    with pytest.raises(ValueError, match=r"1 word\(s\) \['zzz'\], from tokens .* after truncation to max_length=3"):
        explain_text(planted(tok), "zzz film was great", tokenizer=tok, max_length=3, n_samples=16)


def count_good(texts):
    p = np.array([0.2 + 0.3 * t.split().count("good") for t in texts]).clip(0, 1)
    return np.stack((1 - p, p), 1)


def test_without_tokenizer_words_and_coefficients_align():
    texts = ["zzz good, (!!) ünï good", "good bad", "  !! good... x_y 42 "]
    for bow in (True, False):
        exp = explain_text(count_good, texts, bow=bow, n_samples=64, generator=0)
        check_aligned(exp)
    with pytest.raises(
        ValueError, match=r"`texts` \[1\] have fewer: text 1 '\?\? !!' has 0 word\(s\) \[\], from split"
    ):
        explain_text(count_good, ["good day", "?? !!"], n_samples=16)
    with pytest.raises(ValueError, match=r"1 word\(s\) \['a'\], from characters"):
        explain_text(count_good, "a", char_level=True, n_samples=16)


def test_text_html_refuses_words_that_do_not_match_the_coefficients(tok):
    exp = explain_text(planted(tok), "zzz film was great", tokenizer=tok, n_samples=32, generator=0)
    bad = dataclasses.replace(exp, info=dataclasses.replace(exp.info, words=[exp.info.words[0] + ["extra"]]))
    with pytest.raises(
        ValueError, match=r"`explanation` must have one coefficient per word of text 0: .* 5 words, got n_features 4"
    ):
        text_html(bad)


# ------------------------------------------------------------------ texts without unknown tokens: unchanged
@pytest.mark.parametrize("mode", ["delete", "replace", "infill"])
@pytest.mark.parametrize("bow", [True, False])
def test_known_words_give_the_numbers_of_before(tok, mode, bow):
    """Without [UNK], explain_text equals the pre-fix path: all special ids (with [UNK]) never perturbed."""
    texts = ["the film was great", "a good movie. i saw it great"]  # every word in the vocabulary
    mlm = CheatMLM(torch.full((32,), tok.convert_tokens_to_ids("bad")), vocab=len(SPECIAL) + len(WORDS))
    kw = dict(target=1, n_samples=64, generator=3)
    if mode == "infill":
        kw["infill"] = Infiller(mlm, synonym_threshold=None)
    got = explain_text(planted(tok), texts, tokenizer=tok, bow=bow, mode=mode, **kw)
    enc = tok(texts, padding=True, return_tensors="pt")
    old = explain_tokens(
        planted(tok),
        enc["input_ids"],
        attention_mask=enc["attention_mask"],
        word_ids=word_ids_from_encoding(enc),
        special_ids=tok.all_special_ids,  # what explain_text passed before: [UNK] included
        mode=mode,
        mask_id=tok.mask_token_id,
        pad_id=tok.pad_token_id,
        **kw,
    )
    assert torch.equal(got.coef, old.coef) and torch.equal(got.intercept, old.intercept)
    assert torch.equal(got.features, old.features)


def test_explain_tokens_takes_special_ids_as_given(tok):
    """With [UNK] among special_ids its word is no feature and ``features`` says so; without, it is."""
    enc = tok(["zzz film was great"], return_tensors="pt")
    words = word_ids_from_encoding(enc)
    kw = dict(attention_mask=enc["attention_mask"], word_ids=words, mask_id=tok.mask_token_id, n_samples=32)
    fixed = explain_tokens(planted(tok), enc["input_ids"], special_ids=tok.all_special_ids, **kw)
    assert fixed.features.tolist() == [[-1, -1, 0, 1, 2, -1]] and fixed.coef.shape[-1] == 3
    specials = [i for i in tok.all_special_ids if i != tok.unk_token_id]
    free = explain_tokens(planted(tok), enc["input_ids"], special_ids=specials, **kw)
    assert torch.equal(free.features, words) and free.coef.shape[-1] == 4
