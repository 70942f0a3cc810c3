"""The synthetic sentiment data, the committed CNN and the bigram MLM."""

from __future__ import annotations

import pytest
import torch

from torchlime.demo.text_data import (
    CLS,
    MASK,
    NEG_IDS,
    NOT_ID,
    PAD,
    POS_IDS,
    SEP,
    VOCAB,
    decode,
    encode,
    make_text_dataset,
)
from torchlime.demo.text_models import BigramMLM, load_text_model
from torchlime.text import explain_tokens


def test_dataset_is_deterministic_and_labelled_by_the_rationale():
    a, b = make_text_dataset(300, seed=4), make_text_dataset(300, seed=4)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.input_ids, make_text_dataset(300, seed=5).input_ids)
    ids, attn, rat = a.input_ids, a.attention_mask, a.rationale
    assert bool((ids[:, 0] == CLS).all()) and bool((ids[attn == 0] == PAD).all())
    assert torch.equal((ids == SEP).sum(1), torch.ones(300, dtype=torch.long))
    assert not bool((rat & (attn == 0)).any())
    sentiment = torch.isin(ids, POS_IDS) | torch.isin(ids, NEG_IDS) | (ids == NOT_ID)
    assert torch.equal(rat, sentiment)  # the rationale is exactly the planted phrases
    # label rule: a plain word has the label's polarity, "not" + word the opposite one
    prev_not = torch.nn.functional.pad(ids[:, :-1] == NOT_ID, (1, 0))
    pos_vote = (torch.isin(ids, POS_IDS) & ~prev_not) | (torch.isin(ids, NEG_IDS) & prev_not)
    neg_vote = (torch.isin(ids, NEG_IDS) & ~prev_not) | (torch.isin(ids, POS_IDS) & prev_not)
    assert torch.equal(pos_vote.any(1) & ~neg_vote.any(1), a.labels == 1)
    assert decode(encode(["not", "good", "film"])[0]) == ["[CLS]", "not", "good", "film", "[SEP]"]


def test_committed_model_loads_and_is_accurate():
    model, vocab = load_text_model()
    assert tuple(vocab) == VOCAB
    held = make_text_dataset(1000, seed=1)
    with torch.inference_mode():
        acc = (model(held.input_ids, held.attention_mask).argmax(1) == held.labels).float().mean()
        good = model(encode(["the", "film", "was", "good"]), None).argmax(1)
        not_good = model(encode(["the", "film", "was", "not", "good"]), None).argmax(1)
    assert float(acc) >= 0.95
    assert good.item() == 1 and not_good.item() == 0  # it uses word order
    # its explanations point at the planted words
    exp = explain_tokens(
        model,
        held.input_ids[:8],
        attention_mask=held.attention_mask[:8],
        special_ids=[CLS, SEP],
        mask_id=MASK,
        preset="lime_text",
        n_samples=300,
    )
    top, _ = exp.top_features(1)
    first = exp.features[:8].eq(top[:, 0]).float().argmax(1)  # position of each top feature
    assert bool(held.rationale[:8].gather(1, first.unsqueeze(1)).all())


def test_bigram_mlm_shapes_and_fluency():
    corpus = make_text_dataset(500, seed=0)
    mlm = BigramMLM.from_corpus(corpus.input_ids, corpus.attention_mask, len(VOCAB), MASK)
    ids = encode(["the", "film", "was", "not", "good"])
    masked = ids.clone()
    masked[0, 5] = MASK  # the word after "not"
    logits = mlm(masked, (ids != PAD).long())
    assert logits.shape == (1, ids.shape[1], len(VOCAB))
    top = logits[0, 5].topk(5).indices
    assert bool((torch.isin(top, POS_IDS) | torch.isin(top, NEG_IDS)).all())  # after "not": a sentiment word
    assert mlm.get_input_embeddings().weight.shape[0] == len(VOCAB)


@pytest.mark.cuda
def test_text_model_loads_onto_the_device_named(cuda):
    model, _ = load_text_model(map_location=cuda)
    assert all(p.device.type == "cuda" for p in model.parameters())
