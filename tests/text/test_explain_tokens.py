"""``explain_tokens``: parity with a slow per-sample reference, deletion, fixed tokens, chunking, words."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchlime import Ridge
from torchlime.text import explain_tokens, token_features, word_ids_from_encoding
from torchlime.text.edits import delete_tokens

from tests.helpers.reference import cosine_distance_to_ones, weighted_ridge
from tests.helpers.text import CLS, MASK, PAD, SEP, PositionBag, Recorder, batch_with_padding


@pytest.fixture(autouse=True)
def full_length_rows(monkeypatch):
    """These tests check deletion itself on full-length rows in their own order (packing by length:
    tests/text/test_delete_packing.py)."""
    from torchlime.text._tokens import Tokens

    monkeypatch.setattr(Tokens, "_pack_rows", False)


def perturb_reference(
    ids: list[int], attn: list[int], feats: list[int], mask: np.ndarray, mode: str, mask_id: int, pad_id: int
) -> tuple[list[int], list[int]]:
    """One perturbed row, token by token (obviously correct, slow)."""
    hidden = [f >= 0 and not mask[f] for f in feats]
    if mode == "replace":
        return [mask_id if h else t for t, h in zip(ids, hidden)], list(attn)
    kept = [t for t, a, h in zip(ids, attn, hidden) if a and not h]
    pad = len(ids) - len(kept)
    return kept + [pad_id] * pad, [1] * len(kept) + [0] * pad


@pytest.mark.parametrize("mode", ["replace", "delete"])
def test_lime_text_preset_matches_slow_reference(mode):
    ids, attn = batch_with_padding()
    model = PositionBag().eval()
    exp = explain_tokens(
        model,
        ids,
        attention_mask=attn,
        special_ids=[CLS, SEP],
        mode=mode,
        mask_id=MASK,
        pad_id=PAD,
        preset="lime_text",
        n_samples=300,
        return_samples=True,
        surrogate=Ridge(alpha=1.0, dtype=torch.float64),
        generator=5,
    )
    assert exp.coef.shape == (3, 1, 8)
    assert exp.features.shape == (3, 10) and exp.input_shape == (10,)
    for b in range(3):
        feats = exp.features[b].tolist()
        n_f = int(exp.n_features[b])
        masks = exp.samples[b, :, :n_f].numpy()
        target = int(exp.target[b, 0])
        outputs, weights = [], []
        for m in masks:  # the slow way: one sample at a time
            p_ids, p_attn = perturb_reference(ids[b].tolist(), attn[b].tolist(), feats, m, mode, MASK, PAD)
            with torch.no_grad():
                out = model(torch.tensor([p_ids]), torch.tensor([p_attn]))
            outputs.append(float(out[0, target]))
            d = cosine_distance_to_ones(m.astype(float)) * 100.0
            weights.append(np.exp(-d * d / (2 * 25.0**2)))
        outputs, weights = np.array(outputs), np.array(weights)
        coef, intercept = weighted_ridge(masks.astype(float), outputs, weights, alpha=1.0)
        np.testing.assert_allclose(exp.outputs[b, :, 0].numpy(), outputs, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(exp.weights[b].numpy(), weights, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(exp.coef[b, 0, :n_f].numpy(), coef, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(float(exp.intercept[b, 0]), intercept, rtol=1e-4, atol=1e-5)


def test_delete_tokens_repads_left_aligned():
    ids = torch.tensor([[1, 5, 6, 7, 8, 2, 0], [0, 0, 1, 9, 9, 2, 0]])
    attn = torch.tensor([[1, 1, 1, 1, 1, 1, 0], [0, 0, 1, 1, 1, 1, 0]])  # row 1 is left-padded
    keep = torch.tensor([[True, False, True, False, True, True, True], [True] * 4 + [False] + [True] * 2])
    out, mask = delete_tokens(ids, attn, keep, pad_id=0)
    assert out.tolist() == [[1, 6, 8, 2, 0, 0, 0], [1, 9, 2, 0, 0, 0, 0]]
    assert mask.tolist() == [[1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 0, 0, 0, 0]]
    assert mask.dtype == attn.dtype


def test_delete_mode_feeds_the_model_repadded_rows():
    ids, attn = batch_with_padding()
    rec = Recorder(PositionBag())
    exp = explain_tokens(
        rec,
        ids,
        attention_mask=attn,
        special_ids=[CLS, SEP],
        mode="delete",
        pad_id=PAD,
        n_samples=40,
        return_samples=True,
    )
    seen_ids, seen_attn = rec.perturbed(3, 40)
    seen_ids, seen_attn = seen_ids.view(3, 40, -1), seen_attn.view(3, 40, -1)
    for b in range(3):
        feats = exp.features[b].tolist()
        for s in range(40):
            want = perturb_reference(
                ids[b].tolist(), attn[b].tolist(), feats, exp.samples[b, s].numpy(), "delete", MASK, PAD
            )
            assert seen_ids[b, s].tolist() == want[0] and seen_attn[b, s].tolist() == want[1]
    # attention masks are a prefix of ones; CLS stays first; SEP right after the last kept token
    n = seen_attn.sum(-1)
    assert torch.equal(seen_attn, (torch.arange(10) < n.unsqueeze(-1)).long())
    assert bool((seen_ids[..., 0] == CLS).all())
    assert bool((seen_ids.gather(2, (n - 1).unsqueeze(-1)) == SEP).all())


@pytest.mark.parametrize("mode", ["replace", "delete"])
def test_special_tokens_and_padding_never_change(mode):
    ids, attn = batch_with_padding()
    rec = Recorder(PositionBag())
    explain_tokens(
        rec, ids, attention_mask=attn, special_ids=[CLS, SEP], mode=mode, mask_id=MASK, n_samples=64, batch_size=50
    )
    seen_ids, seen_attn = rec.perturbed(3, 64)
    rows = torch.arange(3).repeat_interleave(64)
    if mode == "replace":
        fixed = (attn == 0) | (ids == CLS) | (ids == SEP)
        assert torch.equal(torch.where(fixed[rows], seen_ids, 0), torch.where(fixed[rows], ids[rows], 0))
        assert torch.equal(seen_attn, attn[rows])
    else:  # the special tokens survive, in order, and padding stays padding
        assert torch.equal((seen_ids == CLS).sum(1), torch.ones(192, dtype=torch.long))
        assert torch.equal((seen_ids == SEP).sum(1), torch.ones(192, dtype=torch.long))
        assert bool((seen_ids[seen_attn == 0] == PAD).all())


def test_lime_text_preset_is_chunked():
    ids = torch.randint(4, 40, (1, 16))
    rec = Recorder(PositionBag())
    explain_tokens(rec, ids, mode="replace", mask_id=MASK, preset="lime_text", model_inputs="positional")
    sizes = [c[0].shape[0] for c in rec.calls]
    # N = 5000 rows in chunks of the default rule (token rows: at most 8192 tokens a chunk, 512 rows of 16)
    assert sum(sizes) == 5000 and sizes == [512] * 9 + [392]
    rec.calls.clear()
    explain_tokens(rec, ids, mode="delete", preset="lime_text", n_samples=500, batch_size=64, model_inputs="positional")
    assert max(c[0].shape[0] for c in rec.calls) == 64


def test_word_features_hide_whole_words():
    ids = torch.tensor([[CLS, 10, 11, 12, 13, 14, 15, SEP]])
    words = torch.tensor([[-1, 0, 0, 1, 2, 2, 2, -1]])
    rec = Recorder(PositionBag())
    exp = explain_tokens(
        rec,
        ids,
        attention_mask=torch.ones_like(ids),
        word_ids=words,
        special_ids=[CLS, SEP],
        mask_id=MASK,
        n_samples=50,
        return_samples=True,
    )
    assert exp.coef.shape == (1, 1, 3)
    assert exp.features.tolist() == [[-1, 0, 0, 1, 2, 2, 2, -1]]
    seen, _ = rec.perturbed(1, 50)
    hidden = seen == MASK
    assert torch.equal(hidden[:, 1], hidden[:, 2]) and torch.equal(hidden[:, 4], hidden[:, 6])
    assert torch.equal(hidden[:, [1, 3, 4]], ~exp.samples[0])


def test_keywords_logits_objects_and_probabilities():
    class HFLike(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = PositionBag()

        def forward(self, *, input_ids, attention_mask):
            return type("Out", (), {"logits": self.inner(input_ids, attention_mask)})()

    ids, attn = batch_with_padding()
    a = explain_tokens(
        HFLike(),
        ids,
        attention_mask=attn,
        special_ids=[CLS, SEP],
        mask_id=MASK,
        model_inputs="keywords",
        n_samples=80,
        target="all",
    )
    b = explain_tokens(
        PositionBag(), ids, attention_mask=attn, special_ids=[CLS, SEP], mask_id=MASK, n_samples=80, target="all"
    )
    torch.testing.assert_close(a.coef, b.coef)
    probs = explain_tokens(
        lambda i, m: PositionBag()(i, m).softmax(1),
        ids,
        attention_mask=attn,
        special_ids=[CLS, SEP],
        mask_id=MASK,
        n_samples=80,
    )
    soft = explain_tokens(
        PositionBag(), ids, attention_mask=attn, special_ids=[CLS, SEP], mask_id=MASK, n_samples=80, softmax=True
    )
    torch.testing.assert_close(probs.coef, soft.coef)


def test_token_features_and_word_ids_from_encoding():
    ids = torch.tensor([[CLS, 7, 8, SEP, PAD]])
    attn = torch.tensor([[1, 1, 1, 1, 0]])
    special = torch.tensor([CLS, SEP])
    assert token_features(ids, attn, None, special).tolist() == [[-1, 1, 2, -1, -1]]

    class Encoding(dict):
        def word_ids(self, i):
            return [None, 0, 0, 1, None]

    enc = Encoding(input_ids=[[0] * 5, [0] * 5])
    assert word_ids_from_encoding(enc).tolist() == [[-1, 0, 0, 1, -1]] * 2


def test_reproducible_and_generator_sensitive():
    ids, attn = batch_with_padding()
    kw = dict(attention_mask=attn, special_ids=[CLS, SEP], mask_id=MASK, n_samples=60)
    a = explain_tokens(PositionBag(), ids, generator=3, **kw)
    b = explain_tokens(PositionBag(), ids, generator=3, **kw)
    c = explain_tokens(PositionBag(), ids, generator=4, **kw)
    assert torch.equal(a.coef, b.coef) and not torch.equal(a.coef, c.coef)


@pytest.mark.parametrize("mode", ["replace", "delete"])
def test_device_variants(device, mode):
    ids, attn = batch_with_padding()
    rec = Recorder(PositionBag()).to(device)
    exp = explain_tokens(
        rec,
        ids.to(device),
        attention_mask=attn.to(device),
        special_ids=[CLS, SEP],
        mask_id=MASK,
        mode=mode,
        n_samples=100,
        return_samples=True,
    )
    assert exp.coef.device.type == device.type and exp.coef.shape == (3, 1, 8)
    assert bool(torch.isfinite(exp.coef).all())
    assert all(c[0].device.type == device.type for c in rec.calls)
    # every perturbed row is still what the masks say (the device path builds the same rows)
    seen, seen_attn = rec.perturbed(3, 100)
    b, s = 1, 7
    want = perturb_reference(
        ids[b].tolist(), attn[b].tolist(), exp.features[b].tolist(), exp.samples[b, s].cpu().numpy(), mode, MASK, PAD
    )
    assert seen[b * 100 + s].tolist() == want[0] and seen_attn[b * 100 + s].tolist() == want[1]


def test_delete_mode_keeps_left_padding_on_the_left():
    """Decoder-only models are fed left-padded batches: deleting tokens must not move the padding to the
    right (the unperturbed row would then be another input), and the last token stays last."""
    ids = torch.tensor([[PAD, PAD, PAD, 11, 12, 13, 14], [PAD, 21, 22, 23, 24, 25, 26]])
    attn = (ids != PAD).long()

    class LastToken(torch.nn.Module):  # reads the id at the last position, as a GPT-2 classifier does
        def forward(self, input_ids, attention_mask):
            return torch.stack([(input_ids[:, -1] == 14).float(), (input_ids[:, -1] == 26).float()], 1)

    rec = Recorder(LastToken())
    exp = explain_tokens(
        rec,
        ids,
        attention_mask=attn,
        mode="delete",
        pad_id=PAD,
        n_samples=32,
        target=0,
        return_samples=True,
        generator=0,
    )
    seen_ids, seen_attn = rec.perturbed(2, 32)
    seen_ids, seen_attn = seen_ids.view(2, 32, -1), seen_attn.view(2, 32, -1)
    assert torch.equal(seen_ids[:, 0], ids) and torch.equal(seen_attn[:, 0], attn)  # row 0: the input itself
    n = seen_attn.sum(-1)
    assert torch.equal(seen_attn, (torch.arange(7) >= 7 - n.unsqueeze(-1)).long())  # a suffix of ones
    assert exp.outputs[0, 0, 0] == 1.0
    top, _ = exp.top_features(1)
    assert top[0, 0, 0] == 3  # the last token (feature 3 of input 0) decides its class


def test_int32_token_ids_reach_the_model_as_int32():
    ids = torch.tensor([[5, 6, 7, 8]], dtype=torch.int32)
    dtypes = set()

    def model(input_ids):
        dtypes.add(input_ids.dtype)
        return (input_ids == 7).float().sum(1, keepdim=True)

    explain_tokens(model, ids, mask_id=0, n_samples=8)
    assert dtypes == {torch.int32}


def test_feature_positions_map_feature_ids_to_token_positions():
    from torchlime.text import feature_positions

    ids, attn = batch_with_padding()
    exp = explain_tokens(PositionBag(), ids, attention_mask=attn, special_ids=[CLS, SEP], mask_id=MASK, n_samples=16)
    pos = feature_positions(exp)
    for b in range(ids.shape[0]):
        feats = exp.features[b].tolist()
        want = [feats.index(f) for f in range(int(exp.n_features[b]))]
        got = pos[b].tolist()
        assert got[: len(want)] == want and all(p == -1 for p in got[len(want) :])


def test_delete_tokens_leaves_a_row_with_every_token_kept_as_it_came():
    ids = torch.tensor([[0, 0, 1, 9, 9, 2, 0]])  # padded on both sides
    attn = (ids != 0).long()
    out, mask = delete_tokens(ids, attn, torch.ones_like(ids, dtype=torch.bool), pad_id=0)
    assert torch.equal(out, ids) and torch.equal(mask, attn)


def test_ids_passed_again_are_not_checked_again_unless_written():
    from tests.helpers.ops import count_ops

    def model(t):
        return (t == 7).float().sum(1, keepdim=True)

    ids = torch.tensor([[5, 6, 7, 8, 7]])
    first = explain_tokens(model, ids, mask_id=0, vocab_size=10, n_samples=16, generator=0)
    with count_ops() as again:
        second = explain_tokens(model, ids, mask_id=0, vocab_size=10, n_samples=16, generator=0)
    assert "isin" not in again.ops and "sort" not in again.ops  # features and map kept
    assert torch.equal(first.coef, second.coef) and torch.equal(first.features, second.features)
    with pytest.raises(TypeError, match=r"`mask_id` must be an int token id, got float 0\.0"):  # 0.0 == 0: not kept
        explain_tokens(model, ids, mask_id=0.0, vocab_size=10, n_samples=16)
    ids[0, 0] = 12  # written in place: checked again, and refused
    with pytest.raises(ValueError, match=r"`input_ids` must be in \[0, 10\)"):
        explain_tokens(model, ids, mask_id=0, vocab_size=10, n_samples=16, generator=0)
