"""Masked-LM infill (joint and single-mask protocols), the synonym guard and the hybrid kernel."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from torchlime.text import explain_tokens
from torchlime.text.infill import Infiller, is_trivial, mlm_candidates
from torchlime.text.proximity import HybridKernel

from tests.helpers.text import CLS, MASK, PAD, SEP, VOCAB, CheatMLM, PositionBag, Recorder, ToyMLM, batch_with_padding

SPECIAL = [CLS, SEP]


def run(model, ids, attn, infill, **kw):
    return explain_tokens(
        model,
        ids,
        attention_mask=attn,
        special_ids=SPECIAL,
        mode="infill",
        mask_id=MASK,
        infill=infill,
        return_samples=True,
        **kw,
    )


@pytest.mark.parametrize("strategy", ["sample", "argmax"])
@pytest.mark.parametrize("protocol", ["joint", "single"])
def test_infill_never_returns_the_original_token(strategy, protocol):
    ids, attn = batch_with_padding()
    # an MLM whose favourite is the original token and whose runner-up is a special id
    mlm = CheatMLM(ids[0], second=torch.full((10,), SEP))
    rec = Recorder(PositionBag())
    exp = run(rec, ids, attn, Infiller(mlm, strategy=strategy, protocol=protocol, synonym_threshold=None), n_samples=60)
    seen, seen_attn = rec.perturbed(3, 60)
    rows = torch.arange(3).repeat_interleave(60)
    lab = exp.features[rows]  # (B·S, L)
    masks = exp.samples.reshape(180, -1)
    hidden = (lab >= 0) & ~masks.gather(1, lab.clamp_min(0))
    assert int(hidden.sum()) > 100
    assert bool((seen[hidden] != ids[rows][hidden]).all())  # never the original
    assert not bool(torch.isin(seen[hidden], torch.tensor([CLS, SEP, MASK, PAD])).any())
    assert torch.equal(seen[~hidden], ids[rows][~hidden])  # everything else untouched
    assert torch.equal(seen_attn, attn[rows])
    if protocol == "single":  # exactly one feature changes per perturbed sample
        changed = (~exp.samples[:, 1:]).sum(-1)
        assert bool((changed == 1).all())


def test_single_protocol_round_robin_over_words():
    ids = torch.tensor([[CLS, 10, 11, 12, 13, 14, SEP]])
    words = torch.tensor([[-1, 0, 0, 1, 2, 2, -1]])
    rec = Recorder(PositionBag())
    exp = explain_tokens(
        rec,
        ids,
        word_ids=words,
        special_ids=SPECIAL,
        mode="infill",
        mask_id=MASK,
        infill=Infiller(ToyMLM(), protocol="single", synonym_threshold=None),
        n_samples=10,
        return_samples=True,
        model_inputs="positional",
    )
    hidden_feature = (~exp.samples[0, 1:]).float().argmax(-1)
    assert hidden_feature.tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2]
    seen, _ = rec.perturbed(1, 10)
    diff = seen != ids
    assert bool((diff[0] == 0).all())
    assert torch.equal(diff[1:, 1], diff[1:, 2]) and torch.equal(diff[1:, 4], diff[1:, 5])  # whole words


def test_neutral_and_boundary_objectives():
    # class 0 wins as soon as token 9 appears anywhere; the MLM's favourite everywhere is 9
    class Detector(torch.nn.Module):
        def forward(self, input_ids, attention_mask):
            n9 = ((input_ids == 9) & (attention_mask != 0)).sum(1).float()
            return torch.stack([n9 - 0.5, 0.5 - n9], 1)

    ids = torch.tensor([[CLS, 10, 11, 12, 13, 14, SEP]])
    mlm = CheatMLM(torch.full((7,), 9), second=torch.full((7,), 20))
    seen = {}
    for objective in ("neutral", "boundary"):
        rec = Recorder(Detector())
        exp = explain_tokens(
            rec,
            ids,
            attention_mask=torch.ones_like(ids),
            special_ids=SPECIAL,
            mode="infill",
            mask_id=MASK,
            n_samples=21,
            return_samples=True,
            infill=Infiller(mlm, protocol="single", objective=objective, k=3, synonym_threshold=None),
        )
        assert exp.run.model_rows == 1 + 21 + 5 * 3  # prediction, the 21 samples, 3 candidates x 5 words
        seen[objective] = torch.cat([c[0] for c in rec.calls])[-20:]  # the 20 perturbed samples
    assert bool((seen["boundary"] == 9).any(1).all())  # every sample flips the label
    assert not bool((seen["neutral"] == 9).any())  # none does


def test_synonym_guard():
    emb = torch.randn(VOCAB, 8, generator=torch.Generator().manual_seed(0))
    emb[21] = emb[20] + 1e-3  # 21 is a synonym of 20
    ids = torch.tensor([[CLS, 20, 20, 30, 31, SEP]])
    attn = torch.ones_like(ids)
    hidden = torch.tensor([[False, True, True, True, False, False]])
    mlm = CheatMLM(torch.full((6,), 21), embedding=emb)  # always proposes the synonym first
    guarded = Infiller(mlm, strategy="argmax", synonym_threshold=0.9)
    open_ = Infiller(mlm, strategy="argmax", synonym_threshold=None)
    cand_g, _ = mlm_candidates(guarded, ids, attn, hidden, MASK, SPECIAL)
    cand_o, _ = mlm_candidates(open_, ids, attn, hidden, MASK, SPECIAL)
    assert cand_o[:, 0].tolist() == [21, 21, 21]  # unguarded: the synonym trap
    assert cand_g[:2, 0].tolist() != [21, 21] and 21 not in cand_g[:2].tolist()[0]
    assert cand_g[2, 0] == 21  # 21 is no synonym of 30
    assert is_trivial(torch.tensor([20, 20, 30]), torch.tensor([21, 20, 21]), emb, 0.9).tolist() == [True] * 2 + [False]
    assert is_trivial(torch.tensor([20]), torch.tensor([21]), emb, None).tolist() == [False]
    # and through explain_tokens, with the MLM's own embedding found automatically
    rec = Recorder(PositionBag())
    run(rec, ids, attn, Infiller(mlm, synonym_threshold=0.9), n_samples=40)
    seen, _ = rec.perturbed(1, 40)
    assert not bool((seen[:, 1:3] == 21).any())


def hand_hybrid(p: list[int], o: list[int], emb: np.ndarray, alpha: float) -> float:
    cp, co = Counter(p), Counter(o)
    dot = sum(cp[t] * co[t] for t in cp)
    bow = dot / np.sqrt(sum(v * v for v in cp.values()) * sum(v * v for v in co.values()))
    a, b = emb[p].mean(0), emb[o].mean(0)
    cos = float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    return max(alpha * bow + (1 - alpha) * cos, 0.0)


def test_hybrid_kernel_matches_hand_computation():
    emb = torch.randn(VOCAB, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    kernel = HybridKernel(emb, alpha=0.3)
    orig = torch.tensor([[CLS, 7, 8, 7, 9, SEP, PAD]])
    attn = torch.tensor([[1, 1, 1, 1, 1, 1, 0]])
    pert = torch.tensor(
        [
            [CLS, 7, MASK, 10, 9, SEP, PAD],
            [CLS, 11, 11, 11, 12, SEP, PAD],
            [CLS, 7, 8, 7, 9, SEP, PAD],
            [CLS, 9, 7, SEP, PAD, PAD, PAD],
        ]
    )
    pattn = (pert != PAD).long()
    w = kernel.weights(pert, pattn, orig, attn, ignore_ids=[CLS, SEP, MASK, PAD])
    o = [7, 8, 7, 9]
    want = [
        hand_hybrid([7, 10, 9], o, emb.numpy(), 0.3),
        hand_hybrid([11, 11, 11, 12], o, emb.numpy(), 0.3),
        1.0,
        hand_hybrid([9, 7], o, emb.numpy(), 0.3),
    ]
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-5, atol=1e-6)
    bow_only = HybridKernel(emb, alpha=1.0, ignore_ids=(CLS, SEP, PAD))
    assert bow_only.weights(pert[1:2], pattn[1:2], orig, attn).item() == 0.0  # no shared word


def test_hybrid_kernel_weights_reach_the_fit():
    ids, attn = batch_with_padding()
    mlm = ToyMLM()
    kernel = HybridKernel(mlm, alpha=0.5)
    rec = Recorder(PositionBag())
    exp = run(rec, ids, attn, Infiller(mlm, synonym_threshold=None), n_samples=30, kernel=kernel)
    seen, seen_attn = rec.perturbed(3, 30)
    rows = torch.arange(3).repeat_interleave(30)
    want = kernel.weights(seen, seen_attn, ids[rows], attn[rows], ignore_ids=[CLS, SEP, MASK, PAD])
    torch.testing.assert_close(exp.weights.reshape(-1), want)
    assert torch.allclose(exp.weights[:, 0], torch.ones(3))
    assert "HybridKernel" in exp.run.kernel


def test_infill_device_variants(device):
    ids, attn = batch_with_padding()
    mlm = ToyMLM().to(device)
    exp = explain_tokens(
        PositionBag().to(device),
        ids.to(device),
        attention_mask=attn.to(device),
        special_ids=SPECIAL,
        mode="infill",
        mask_id=MASK,
        n_samples=50,
        infill=Infiller(mlm),
        kernel=HybridKernel(mlm),
    )
    assert exp.coef.device.type == device.type and bool(torch.isfinite(exp.coef).all())
