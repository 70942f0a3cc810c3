"""Hugging Face models built from tiny configs (random weights, nothing downloaded)."""

from __future__ import annotations

import pytest
import torch

from torchlime.text import explain_tokens
from torchlime.text.infill import Infiller
from torchlime.text.proximity import HybridKernel

from tests.helpers.text import Recorder

transformers = pytest.importorskip("transformers")

VOCAB, PAD, CLS, SEP, MASK = 60, 0, 1, 2, 3


def tiny_config(**kw):
    return transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        pad_token_id=PAD,
        **kw,
    )


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    clf = transformers.BertForSequenceClassification(tiny_config(num_labels=3)).eval()
    mlm = transformers.BertForMaskedLM(tiny_config()).eval()
    return clf, mlm


def batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, VOCAB, (2, 12), generator=g)
    ids[:, 0] = CLS
    ids[0, 11], ids[1, 8] = SEP, SEP
    ids[1, 9:] = PAD
    return ids, (ids != PAD).long()


class HFRecorder(Recorder):
    def forward(self, input_ids, attention_mask):  # keyword call from explain_tokens
        self.calls.append((input_ids.clone(), attention_mask.clone()))
        return self.model(input_ids=input_ids, attention_mask=attention_mask)


@pytest.mark.parametrize("mode", ["replace", "delete", "infill"])
def test_bert_classifier_with_bert_mlm(models, mode):
    clf, mlm = models
    ids, attn = batch()
    rec = HFRecorder(clf)
    infill = Infiller(mlm, mlm_inputs="keywords", synonym_threshold=0.95)
    exp = explain_tokens(
        rec,
        ids,
        attention_mask=attn,
        special_ids=[CLS, SEP],
        mode=mode,
        mask_id=MASK,
        model_inputs="keywords",
        infill=infill,
        n_samples=64,
        target="all",
        softmax=True,
        return_samples=True,
        kernel=HybridKernel(mlm) if mode == "infill" else 25.0,
    )
    assert exp.coef.shape == (2, 3, 10) and bool(torch.isfinite(exp.coef).all())
    assert exp.n_features.tolist() == [10, 7]
    if mode == "infill":
        seen, _ = rec.perturbed(2, 64)
        rows = torch.arange(2).repeat_interleave(64)
        lab = exp.features[rows]
        hidden = (lab >= 0) & ~exp.samples.reshape(128, -1).gather(1, lab.clamp_min(0))
        assert bool((seen[hidden] != ids[rows][hidden]).all())
        assert not bool(torch.isin(seen[hidden], torch.tensor([PAD, CLS, SEP, MASK])).any())
        # the synonym guard, against the MLM's own input embedding
        e = torch.nn.functional.normalize(mlm.get_input_embeddings().weight, dim=1)
        cos = (e[seen[hidden]] * e[ids[rows][hidden]]).sum(1)
        assert bool((cos <= 0.95).all())


def test_bert_vocab_inferred_and_single_protocol(models):
    clf, mlm = models
    ids, attn = batch()
    bad = ids.clone()
    bad[0, 3] = VOCAB + 5
    with pytest.raises(ValueError, match=r"`input_ids` must be in \[0, 60\)"):
        explain_tokens(clf, bad, attention_mask=attn, mask_id=MASK)
    exp = explain_tokens(
        clf,
        ids,
        attention_mask=attn,
        special_ids=[CLS, SEP],
        mode="infill",
        mask_id=MASK,
        infill=Infiller(mlm, protocol="single", objective="boundary", k=3),
        n_samples=31,
        return_samples=True,
    )
    assert bool(((~exp.samples[:, 1:]).sum(-1) <= 1).all())
    assert exp.meta["objective"] == "boundary"
