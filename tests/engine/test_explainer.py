"""The engine end to end: slow reference, determinism, targets, model kinds, planted truth."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchlime import BernoulliSampler, ExponentialKernel, Ridge, explain

from tests.helpers import SegmentLinear, grid_labels
from tests.helpers.reference import reference_lime


def setup(b=2, f_rows=3, f_cols=4, n_out=3, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(b, 3, 12, 12, generator=g).to(device)
    labels = grid_labels(12, 12, f_rows, f_cols)
    model = SegmentLinear(labels, f_rows * f_cols, n_out, seed=seed).to(device)
    return model, x, labels.view(1, 1, 12, 12).to(device)


def test_matches_slow_reference():
    model, x, feats = setup()
    base = torch.rand(x.shape, generator=torch.Generator().manual_seed(5))
    exp = explain(
        model,
        x,
        feats,
        n_samples=200,
        target="all",
        baseline=base,
        surrogate=Ridge(alpha=1.0, dtype=torch.float64),
        return_samples=True,
    )
    for b in range(2):
        for t in range(3):

            def score(img, b=b, t=t):
                with torch.no_grad():
                    return float(model(torch.from_numpy(img)[None].float())[0, t])

            ref = reference_lime(score, x[b].numpy(), base[b].numpy(), feats[0].numpy(), exp.samples[b].numpy())
            np.testing.assert_allclose(exp.outputs[b, :, t].numpy(), ref["outputs"], atol=1e-5)
            np.testing.assert_allclose(exp.weights[b].numpy(), ref["weights"], rtol=1e-5)
            np.testing.assert_allclose(exp.coef[b, t].numpy(), ref["coef"], atol=1e-4)
            np.testing.assert_allclose(exp.intercept[b, t].item(), ref["intercept"], atol=1e-4)
            np.testing.assert_allclose(exp.score[b, t].item(), ref["score"], atol=1e-4)
            np.testing.assert_allclose(exp.local_pred[b, t].item(), ref["local_pred"], atol=1e-4)


def test_same_seed_same_result_any_chunk_size():
    model, x, feats = setup()
    runs = [explain(model, x, feats, n_samples=90, batch_size=bs, generator=7) for bs in (180, 60, 30, 7, 1)]
    for r in runs[1:]:
        torch.testing.assert_close(r.coef, runs[0].coef, atol=1e-5, rtol=1e-5)
    other = explain(model, x, feats, n_samples=90, generator=8)
    assert not torch.allclose(other.coef, runs[0].coef)
    again = explain(model, x, feats, n_samples=90, generator=7)
    torch.testing.assert_close(again.coef, runs[0].coef)
    gen = [explain(model, x, feats, n_samples=90, generator=torch.Generator().manual_seed(7)) for _ in range(2)]
    torch.testing.assert_close(gen[0].coef, gen[1].coef)  # the same generator state, the same masks
    g = torch.Generator().manual_seed(7)
    first = explain(model, x, feats, n_samples=90, generator=g)
    second = explain(model, x, feats, n_samples=90, generator=g)
    assert not torch.allclose(first.coef, second.coef)  # one generator object advances


def test_masks_drawn_at_once_or_per_chunk_are_the_same(monkeypatch):
    """A small pass draws its masks at once and the fit reads them again; per chunk gives the same bits."""
    from torchlime.engine import rows

    model, x, feats = setup(b=3)
    at_once = explain(model, x, feats, n_samples=90, batch_size=16, generator=5, return_samples=True)
    monkeypatch.setattr(rows, "_PASS_ELEMENTS", 0)  # every chunk draws its own, the fit draws again
    per_chunk = explain(model, x, feats, n_samples=90, batch_size=16, generator=5, return_samples=True)
    assert torch.equal(at_once.samples, per_chunk.samples) and torch.equal(at_once.weights, per_chunk.weights)
    assert torch.equal(at_once.coef, per_chunk.coef) and torch.equal(at_once.intercept, per_chunk.intercept)


def test_default_is_reproducible():
    model, x, feats = setup()
    torch.testing.assert_close(explain(model, x, feats, n_samples=50).coef, explain(model, x, feats, n_samples=50).coef)


def test_batch_equals_one_by_one():
    model, x, feats = setup(b=3)
    masks = BernoulliSampler()(torch.tensor([12, 12, 12]), 64, 12, torch.Generator().manual_seed(0))
    whole = explain(model, x, feats, n_samples=64, masks=masks, target="all")
    for b in range(3):
        one = explain(model, x[b : b + 1], feats, n_samples=64, masks=masks[b : b + 1], target="all")
        torch.testing.assert_close(one.coef[0], whole.coef[b], atol=1e-5, rtol=1e-5)


def test_targets():
    model, x, feats = setup(b=2, n_out=5)
    with torch.no_grad():
        ref = model(x)
    top = explain(model, x, feats, n_samples=20)
    assert top.target.tolist() == ref.argmax(1, keepdim=True).tolist()
    assert explain(model, x, feats, n_samples=20, target=3).target.tolist() == [[3], [3]]
    assert explain(model, x, feats, n_samples=20, target=torch.tensor([1, 4])).target.tolist() == [[1], [4]]
    tt = torch.tensor([[0, 2], [4, 1]])
    assert explain(model, x, feats, n_samples=20, target=tt).target.tolist() == tt.tolist()
    assert explain(model, x, feats, n_samples=20, target="all").coef.shape == (2, 5, 12)
    top3 = explain(model, x, feats, n_samples=20, target="top3").target
    assert top3.tolist() == ref.topk(3, 1).indices.tolist()
    assert explain(model, x, feats, n_samples=20, target=[[0, 1]]).target.tolist() == [[0, 1], [0, 1]]
    assert explain(model, x, feats, n_samples=20, target=[1, 4]).target.tolist() == [[1], [4]]  # as a tensor
    assert explain(model, x, feats, n_samples=20, target=[[0, 2], [4, 1]]).target.tolist() == tt.tolist()


def test_target_list_is_shaped_like_a_tensor():
    """A flat list is one class per input, as captum's target and ``labels.tolist()``: equal to the (B,) tensor;
    a flat list of another length is refused with both spellings, before the model runs."""
    model, x, feats = setup(n_out=5)
    calls = []

    def counted(t):
        calls.append(t.shape[0])
        return model(t)

    per_input = explain(model, x, feats, n_samples=20, target=[1, 4], generator=3)
    as_tensor = explain(model, x, feats, n_samples=20, target=torch.tensor([1, 4]), generator=3)
    assert torch.equal(per_input.coef, as_tensor.coef) and per_input.target.tolist() == [[1], [4]]
    with pytest.raises(
        ValueError, match=r"list of 3 ints for 2 input\(s\).*one row, e\.g\. \[\[3, 5\]\].*\[\[0, 1, 2\]\]"
    ):
        explain(counted, x, feats, n_samples=20, target=[0, 1, 2])
    with pytest.raises(ValueError, match=r"one row .* or 2 rows of equal"):
        explain(counted, x, feats, n_samples=20, target=[[0, 1], [2]])
    with pytest.raises(TypeError, match="`target` rows must hold ints"):
        explain(counted, x, feats, n_samples=20, target=[[0.5]])
    assert calls == []


def test_multi_target_equals_single_target_fits():
    model, x, feats = setup()
    both = explain(model, x, feats, n_samples=80, target=torch.tensor([[0, 2], [1, 2]]))
    one = explain(model, x, feats, n_samples=80, target=torch.tensor([2, 2]))
    torch.testing.assert_close(both.coef[:, 1], one.coef[:, 0])


def test_different_feature_counts_in_one_batch():
    model, x, _ = setup(b=2)
    f = torch.stack([grid_labels(12, 12, 3, 4), grid_labels(12, 12, 2, 2) + 10]).unsqueeze(1)
    exp = explain(model, x, f, n_samples=64, return_samples=True)
    assert exp.n_features.tolist() == [12, 4]
    assert exp.coef.shape == (2, 1, 12)
    assert (exp.coef[1, :, 4:] == 0).all()
    alone = explain(model, x[1:], f[1:], n_samples=64, masks=exp.samples[1:, :, :4], target=exp.target[1:])
    torch.testing.assert_close(alone.coef[0, :, :4], exp.coef[1, :, :4], atol=1e-5, rtol=1e-5)


class TupleModel(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x), {"aux": 1}


class Logits:
    def __init__(self, logits):
        self.logits = logits


def test_model_output_kinds():
    model, x, feats = setup()
    plain = explain(model, x, feats, n_samples=40)
    tup = explain(TupleModel(model), x, feats, n_samples=40)
    obj = explain(lambda v: Logits(model(v)), x, feats, n_samples=40)
    dct = explain(lambda v: {"scores": model(v)}, x, feats, n_samples=40, output="scores")
    fn = explain(lambda v: model(v), x, feats, n_samples=40, output=lambda o: o)
    for e in (tup, obj, dct, fn):
        torch.testing.assert_close(e.coef, plain.coef)
    reg = explain(lambda v: model(v)[:, 0], x, feats, n_samples=40)
    assert reg.coef.shape == (2, 1, 12)
    sm = explain(model, x, feats, n_samples=40, softmax=True, return_samples=True)
    assert (sm.outputs >= 0).all() and (sm.outputs <= 1).all()


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
def test_script_module_and_float64_model():
    model, x, feats = setup()
    scripted = torch.jit.script(model)
    torch.testing.assert_close(
        explain(scripted, x, feats, n_samples=30).coef, explain(model, x, feats, n_samples=30).coef
    )
    m64 = setup()[0].double()
    e = explain(m64, x, feats, n_samples=30)
    torch.testing.assert_close(e.coef, explain(model, x, feats, n_samples=30).coef, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    "surrogate", ["ridge", Ridge(alpha=1.0, dtype=torch.float64)], ids=["float32-fit", "float64-fit"]
)
def test_a_float64_model_s_small_effects_survive_a_large_offset(surrogate):
    x = torch.rand(2, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    w = torch.linspace(-1, 1, 8, dtype=torch.float64) * 1e-3  # effects of 1e-3 on an output of 1e6
    kw = dict(n_samples=300, target=0, baseline=0.0, kernel="uniform", surrogate=surrogate, generator=0)
    near = explain(lambda z: (z @ w)[:, None], x, **kw)
    far = explain(lambda z: (1e6 + z @ w)[:, None], x, **kw)
    assert far.outputs is None or far.outputs.dtype == torch.float64
    torch.testing.assert_close(far.coef.double(), near.coef.double(), rtol=1e-4, atol=1e-9)
    torch.testing.assert_close(far.coef[:, 0].double(), x * w, rtol=0.05, atol=1e-6)  # LIME's answer, not zeros


def test_inputs_untouched_and_mode_restored():
    model, x, feats = setup()
    model.train()
    model.pool.requires_grad_(False)
    sub = torch.nn.Sequential(model)
    sub[0].train()
    x0, f0 = x.clone(), feats.clone()
    explain(sub, x, feats, n_samples=30, baseline="mean")
    assert torch.equal(x, x0) and torch.equal(feats, f0)
    assert sub.training and sub[0].training


def test_model_sees_eval_mode():
    model, x, feats = setup()
    modes = []

    class Spy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, v):
            modes.append(self.training)
            return self.m(v)

    s = Spy().train()
    explain(s, x, feats, n_samples=10)
    assert modes and not any(modes) and s.training


class OOMAbove(torch.nn.Module):
    """Raises an out-of-memory error for batches larger than ``limit``."""

    def __init__(self, inner, limit):
        super().__init__()
        self.inner, self.limit, self.calls = inner, limit, []

    def forward(self, x):
        self.calls.append(x.shape[0])
        if x.shape[0] > self.limit:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return self.inner(x)


def test_oom_halves_chunk_and_keeps_results():
    model, x, feats = setup()
    ref = explain(model, x, feats, n_samples=64, batch_size=64)
    flaky = OOMAbove(model, limit=20)
    with pytest.warns(RuntimeWarning) as record:
        got = explain(flaky, x, feats, n_samples=64, batch_size=64)
    halvings = [str(w.message).split(";")[0] for w in record]
    assert halvings == ["out of memory with a chunk of 64 samples", "out of memory with a chunk of 32 samples"]
    torch.testing.assert_close(got.coef, ref.coef, atol=1e-5, rtol=1e-5)
    assert max(c for c in flaky.calls if c <= 20) == 16
    assert got.run.batch_size == 16


def test_planted_sparse_ground_truth_recall():
    """A sparse linear model over 40 segments: LIME's top 5 must be the 5 true features."""
    g = torch.Generator().manual_seed(0)
    labels = grid_labels(40, 40, 5, 8)
    recalls = []
    for trial in range(5):
        w = torch.zeros(40)
        true = torch.randperm(40, generator=g)[:5]
        w[true] = torch.rand(5, generator=g) + 0.5
        pool = torch.nn.functional.one_hot(labels.flatten(), 40).float()
        pool = pool / pool.sum(0)

        def model(v, w=w, pool=pool):
            return torch.sigmoid(v.mean(1).flatten(1) @ pool @ w - 1.0)

        x = torch.rand(1, 3, 40, 40, generator=g) * 0.5 + 0.5
        exp = explain(model, x, labels.view(1, 1, 40, 40), generator=trial)  # default N=1000
        found = exp.top_features(5)[0][0, 0]
        recalls.append(len(set(found.tolist()) & set(true.tolist())) / 5)
    assert np.mean(recalls) >= 0.9, recalls


def test_input_space_kernel_and_explicit_components():
    model, x, feats = setup()
    e = explain(
        model,
        x,
        feats,
        n_samples=50,
        kernel=ExponentialKernel(1.0, space="input"),
        surrogate="lasso",
        sampler="uniform_count",
        return_samples=True,
    )
    assert e.weights.shape == (2, 50) and torch.allclose(e.weights[:, 0], torch.ones(2))
    e2 = explain(model, x, feats, preset="captum")
    assert e2.coef.shape == (2, 1, 12) and e2.run.n_samples == 25


def test_fixed_elements_never_change():
    model, x, feats = setup()
    f = feats.clone()
    f[..., :2, :] = -1
    seen = []
    exp = explain(lambda v: (seen.append(v.clone()), model(v))[1], x, f, n_samples=20, batch_size=20)
    rows = torch.cat(seen)  # the 2 unperturbed inputs, then 19 samples of input 0, then 19 of input 1
    owner = torch.tensor([0, 1] + [0] * 19 + [1] * 19)
    assert rows.shape[0] == 40 and torch.equal(rows[:, :, :2], x[owner][:, :, :2])
    assert not torch.equal(rows[:, :, 2:], x[owner][:, :, 2:])
    assert exp.n_features.tolist() == [12, 12]
    assert (exp.heatmap(0)[:, :, :2] == 0).all()
