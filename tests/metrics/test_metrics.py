"""torchlime.metrics curves and hiding tests against slow references written with plain loops, the closed
form of a linear model, explanations loaded from a file, chunking and host synchronisations."""

from __future__ import annotations

import math

import pytest
import torch

from torchlime import Explanation, explain
from torchlime.metrics import (
    GaussianNoise,
    deletion,
    faithfulness_correlation,
    infidelity,
    insertion,
    label_flip,
    region_perturbation,
)

from tests.helpers import SegmentLinear, grid_labels
from tests.helpers.syncs import count_syncs


class Net(torch.nn.Module):
    """A small non-linear model of (c, 1, 4, 4) inputs: 3 scores."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(16, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)
        )

    def forward(self, x):
        return self.body(x)


def features() -> torch.Tensor:
    """(2, 1, 4, 4): input 0 has 4 features (quadrants), input 1 has 3 and a never-perturbed row."""
    f0 = grid_labels(4, 4, 2, 2)
    f1 = grid_labels(4, 4, 1, 3).clone()
    f1[0] = -1
    return torch.stack((f0, f1)).view(2, 1, 4, 4)


@pytest.fixture(scope="module")
def case():
    x = torch.rand(2, 1, 4, 4, generator=torch.Generator().manual_seed(1))
    model = Net()
    exp = explain(model, x, features(), target="top2", n_samples=200, baseline="mean")
    return model, x, exp


# ----------------------------------------------------------------------------- slow references


def order_of(coef_row: list[float], n: int, descending: bool = True) -> list[int]:
    """Features 0..n-1 by decreasing (or increasing) coefficient, ties by index."""
    return sorted(range(n), key=lambda f: (-coef_row[f] if descending else coef_row[f], f))


def counts_of(n: int, steps) -> list[int]:
    return list(range(n + 1)) if steps is None else [math.floor(j * n / steps + 0.5) for j in range(steps + 1)]


def mean_fill(x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Each feature's own mean (one channel), elements outside every feature unchanged."""
    out = x.clone()
    for f in labels.unique().tolist():
        if f >= 0:
            out[labels == f] = x[labels == f].mean()
    return out


def hidden_input(x: torch.Tensor, labels: torch.Tensor, fill: torch.Tensor, hidden) -> torch.Tensor:
    out = x.clone()
    for f in hidden:
        out[labels == f] = fill[labels == f]
    return out


def score(model, x: torch.Tensor, target: int) -> float:
    with torch.no_grad():
        return float(model(x.unsqueeze(0))[0, target])


def reference_curves(model, x, exp, fills, reveal=False, descending=True, steps=None):
    """Per (b, t): the list of scores and the list of fractions, built one input at a time."""
    out = {}
    for b in range(x.shape[0]):
        n = int(exp.n_features[b])
        labels = exp.features[b].expand_as(x[b])
        for t in range(exp.target.shape[1]):
            order = order_of(exp.coef[b, t].tolist(), n, descending)
            ys = []
            for k in counts_of(n, steps):
                hidden = order[k:] if reveal else order[:k]
                ys.append(score(model, hidden_input(x[b], labels, fills[b], hidden), int(exp.target[b, t])))
            out[b, t] = ys, [k / n for k in counts_of(n, steps)]
    return out


def trapezoid_loop(ys, xs) -> float:
    return sum((xs[i + 1] - xs[i]) * (ys[i] + ys[i + 1]) / 2 for i in range(len(ys) - 1))


# ----------------------------------------------------------------------------- curves


@pytest.mark.parametrize("reveal", [False, True], ids=["deletion", "insertion"])
@pytest.mark.parametrize("steps", [None, 3])
def test_curves_match_the_loop_reference(case, reveal, steps):
    model, x, exp = case
    fn = insertion if reveal else deletion
    auc, curves, xs = fn(model, x, exp, steps=steps, return_curves=True)
    fills = [mean_fill(x[b], exp.features[b].expand_as(x[b])) for b in range(2)]
    ref = reference_curves(model, x, exp, fills, reveal=reveal, steps=steps)
    assert curves.shape == (2, 2, 5 if steps is None else 4) and xs.shape == (2, curves.shape[-1])
    for (b, t), (ys, fr) in ref.items():
        p = len(ys)
        assert curves[b, t, :p].tolist() == pytest.approx(ys, abs=1e-5)
        assert xs[b, :p].tolist() == pytest.approx(fr)
        assert torch.all(curves[b, t, p:] == curves[b, t, p - 1]) and torch.all(xs[b, p:] == 1)
        assert float(auc[b, t]) == pytest.approx(trapezoid_loop(ys, fr), abs=1e-5)
    assert torch.equal(fn(model, x, exp, steps=steps), auc)


def test_the_first_point_is_the_unperturbed_score(case):
    model, x, exp = case
    curves = deletion(model, x, exp, return_curves=True).curves
    with torch.no_grad():
        full = model(x).gather(1, exp.target)
    assert torch.allclose(curves[..., 0], full, atol=1e-6)
    ins = insertion(model, x, exp, return_curves=True).curves
    assert torch.allclose(ins[..., -1], full, atol=1e-6)  # every feature revealed
    assert torch.allclose(ins[..., 0], curves[..., -1], atol=1e-6)  # everything hidden, either way


@pytest.mark.parametrize("order", ["morf", "lerf"])
def test_region_perturbation_aopc(case, order):
    model, x, exp = case
    res = region_perturbation(model, x, exp, order=order)
    fills = [mean_fill(x[b], exp.features[b].expand_as(x[b])) for b in range(2)]
    ref = reference_curves(model, x, exp, fills, descending=order == "morf")
    for (b, t), (ys, _) in ref.items():
        aopc = sum(ys[0] - y for y in ys) / len(ys)
        assert float(res.score[b, t]) == pytest.approx(aopc, abs=1e-5)
        assert res.curves[b, t, : len(ys)].tolist() == pytest.approx(ys, abs=1e-5)
    steps = region_perturbation(model, x, exp, order=order, steps=2)
    ref2 = reference_curves(model, x, exp, fills, descending=order == "morf", steps=2)
    for (b, t), (ys, _) in ref2.items():
        assert float(steps.score[b, t]) == pytest.approx(sum(ys[0] - y for y in ys) / 3, abs=1e-5)


def test_linear_model_closed_form():
    """SegmentLinear with a constant fill c: f(z) = f(nothing) + Σ_f z_f d_f, d_f = (m_f - c) · W_f (m_f the
    feature's mean), so after hiding the top j features (by coefficient, the order of d) the score is
    f(x) - Σ_{i<=j} d_(i), and the trapezoid over x = j / F gives
    AUC_del = f(x) - 1/F Σ_i (F - i + 1/2) d_(i),  AUC_ins = f(nothing) + 1/F Σ_i (F - i + 1/2) d_(i)."""
    labels = grid_labels(8, 8, 3, 3)
    model = SegmentLinear(labels, 9, n_out=3, seed=4)
    x = torch.rand(3, 3, 8, 8, generator=torch.Generator().manual_seed(5))
    c = 0.3
    exp = explain(model, x, labels.view(1, 1, 8, 8), target="all", n_samples=1000, baseline=c, batch_size=1000)
    means = torch.stack([x.mean(1)[:, labels == f].mean(1) for f in range(9)], 1)  # (B, F)
    d = ((means - c).unsqueeze(2) * model.weight.detach()).transpose(1, 2)  # (B, T, F)
    assert torch.equal(exp.coef.argsort(-1, descending=True), d.argsort(-1, descending=True))
    sorted_d = d.sort(-1, descending=True).values.double()
    n = 9
    w = (n - torch.arange(1, n + 1, dtype=torch.float64) + 0.5) / n
    with torch.no_grad():
        full = model(x).double()
        empty = model(torch.full_like(x, c)).double()
    del_form = full - (sorted_d * w).sum(-1)
    ins_form = empty + (sorted_d * w).sum(-1)
    assert torch.allclose(deletion(model, x, exp).double(), del_form, atol=1e-5)
    assert torch.allclose(insertion(model, x, exp).double(), ins_form, atol=1e-5)


def test_chunking_does_not_change_the_curves(case):
    model, x, exp = case
    whole = deletion(model, x, exp, batch_size=64, return_curves=True).curves
    for size in (1, 3, 7):
        assert torch.allclose(deletion(model, x, exp, batch_size=size, return_curves=True).curves, whole, atol=1e-6)


@pytest.mark.parametrize(
    "metric, kwargs",
    [(deletion, {}), (label_flip, dict(k=2)), (faithfulness_correlation, dict(n_subsets=8))],
    ids=["deletion", "label_flip", "faithfulness"],
)
def test_no_host_synchronisation(case, metric, kwargs):
    model, x, exp = case
    metric(model, x, exp, batch_size=2, **kwargs)
    with count_syncs() as few:
        metric(model, x, exp, batch_size=10, **kwargs)
    with count_syncs() as many:
        metric(model, x, exp, batch_size=2, **kwargs)
    assert few == many == [], many


def test_softmax_and_output_selection(case):
    model, x, exp = case
    probs = deletion(model, x, exp, softmax=True, return_curves=True).curves
    with torch.no_grad():
        full = model(x).softmax(1).gather(1, exp.target)
    assert torch.allclose(probs[..., 0], full, atol=1e-6)
    as_dict = lambda v: {"scores": model(v)}
    picked = deletion(as_dict, x, exp, output="scores")
    assert torch.allclose(picked, deletion(model, x, exp), atol=1e-6)


def test_metrics_score_as_the_explanation_did_unless_told_otherwise(case, tmp_path):
    """softmax=None (the default) reads the explanation's own softmax: a softmax=True explanation is
    scored on probabilities without repeating softmax=True, on logits only when softmax=False is given."""
    model, x, _ = case
    exp = explain(model, x, features(), target="top2", n_samples=200, baseline="mean", softmax=True)
    assert exp.run.softmax is True
    own = deletion(model, x, exp, return_curves=True).curves
    assert torch.equal(own, deletion(model, x, exp, softmax=True, return_curves=True).curves)
    logits = deletion(model, x, exp, softmax=False, return_curves=True).curves
    assert not torch.allclose(own, logits)
    assert bool(((own >= 0) & (own <= 1)).all()) and bool((logits < 0).any())  # probabilities, then logits
    exp.save(tmp_path / "e.pt")  # the setting travels with the file
    loaded = deletion(model, x, Explanation.load(tmp_path / "e.pt"), baseline="mean", return_curves=True).curves
    torch.testing.assert_close(loaded, own)
    for metric, kwargs in (
        (insertion, {}),
        (region_perturbation, {}),
        (faithfulness_correlation, dict(n_subsets=8)),
        (infidelity, dict(perturbations=GaussianNoise(n=4))),
    ):
        default = metric(model, x, exp, **kwargs)
        default = default.score if isinstance(default, tuple) else default
        given = metric(model, x, exp, softmax=True, **kwargs)
        assert torch.equal(default, given.score if isinstance(given, tuple) else given), metric.__name__


# ----------------------------------------------------------------------------- explanations from a file


def test_loaded_explanation_uses_the_given_baseline(tmp_path):
    x = torch.rand(2, 1, 4, 4, generator=torch.Generator().manual_seed(2))
    model = Net()
    for fill in (0.0, "mean"):
        exp = explain(model, x, features(), target="top2", n_samples=64, baseline=fill)
        exp.save(tmp_path / "e.pt")
        back = Explanation.load(tmp_path / "e.pt")
        assert back.perturbation is None
        expected = deletion(model, x, exp, return_curves=True)
        got = deletion(model, x, back, baseline=fill, return_curves=True)
        assert torch.allclose(got.curves, expected.curves, atol=1e-6)
        assert torch.allclose(insertion(model, x, exp.to("cpu"), baseline=fill), insertion(model, x, exp), atol=1e-6)
    exp0 = explain(model, x, features(), target="top2", n_samples=64, baseline=0.0)
    moved = exp0.to("cpu")
    assert torch.allclose(deletion(model, x, moved), deletion(model, x, exp0), atol=1e-6)  # default fill: 0
    # a recorded perturbation with another fill
    other = deletion(model, x, exp0, baseline=0.5, return_curves=True).curves
    with torch.no_grad():
        empty = model(torch.where(features() >= 0, torch.full_like(x, 0.5), x)).gather(1, exp0.target)
    assert torch.allclose(other[..., -1], empty, atol=1e-6)


# ----------------------------------------------------------------------------- label flips and correlation


@pytest.mark.parametrize("by", ["value", "abs"])
def test_label_flip_matches_the_loop_reference(case, by):
    model, x, exp = case
    fills = [mean_fill(x[b], exp.features[b].expand_as(x[b])) for b in range(2)]
    for k in (1, 2, 5):
        got = label_flip(model, x, exp, k=k, by=by)
        assert got.dtype == torch.bool and got.shape == (2, 2)
        for b in range(2):
            n = int(exp.n_features[b])
            labels = exp.features[b].expand_as(x[b])
            with torch.no_grad():
                pred = int(model(x[b : b + 1]).argmax())
            for t in range(2):
                key = exp.coef[b, t].abs() if by == "abs" else exp.coef[b, t]
                top = order_of(key.tolist(), n)[:k]
                with torch.no_grad():
                    now = int(model(hidden_input(x[b], labels, fills[b], top).unsqueeze(0)).argmax())
                assert bool(got[b, t]) == (now != pred)


def test_faithfulness_correlation_matches_the_loop_reference(case):
    model, x, exp = case
    got = faithfulness_correlation(model, x, exp, n_subsets=12, subset_size=2, generator=3)
    assert got.shape == (2, 2)
    # the subsets it drew, read back from the rows the model saw
    seen = []
    recorder = lambda v: seen.append(v.clone()) or model(v)
    again = faithfulness_correlation(recorder, x, exp, n_subsets=12, subset_size=2, generator=3, batch_size=5)
    assert torch.allclose(again, got, atol=1e-6)
    rows = torch.cat(seen).view(2, 13, 1, 4, 4)
    fills = [mean_fill(x[b], exp.features[b].expand_as(x[b])) for b in range(2)]
    for b in range(2):
        labels = exp.features[b].expand_as(x[b])
        n = int(exp.n_features[b])
        base = [score(model, x[b], int(exp.target[b, t])) for t in range(2)]
        sums, drops = [[] for _ in range(2)], [[] for _ in range(2)]
        for i in range(1, 13):
            subset = [
                f
                for f in range(n)
                if torch.allclose(rows[b, i][labels == f], fills[b][labels == f])
                and not torch.allclose(x[b][labels == f], fills[b][labels == f])
            ]
            assert len(subset) == 2
            for t in range(2):
                sums[t].append(sum(float(exp.coef[b, t, f]) for f in subset))
                drops[t].append(
                    base[t] - score(model, hidden_input(x[b], labels, fills[b], subset), int(exp.target[b, t]))
                )
        for t in range(2):
            assert float(got[b, t]) == pytest.approx(pearson_loop(sums[t], drops[t]), abs=1e-4)
    other = faithfulness_correlation(model, x, exp, n_subsets=12, subset_size=2, generator=4)
    assert not torch.equal(other, got)


def pearson_loop(a: list[float], b: list[float]) -> float:
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    cov = sum((u - ma) * (v - mb) for u, v in zip(a, b))
    return cov / math.sqrt(sum((u - ma) ** 2 for u in a) * sum((v - mb) ** 2 for v in b))


def test_faithfulness_correlation_of_a_linear_model():
    labels = grid_labels(8, 8, 2, 4)
    model = SegmentLinear(labels, 8, n_out=2)
    x = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(6))
    exp = explain(model, x, labels.view(1, 1, 8, 8), target="all", n_samples=1000, batch_size=1000)
    corr = faithfulness_correlation(model, x, exp, n_subsets=64, subset_size=0.5)
    assert torch.all(corr > 0.999)
    assert torch.isnan(faithfulness_correlation(model, x, exp, n_subsets=4, subset_size=8)).all()  # S = everything


def test_cuda_matches_cpu(cuda):
    x = torch.rand(2, 1, 4, 4, generator=torch.Generator().manual_seed(1)).to(cuda)
    model = Net().to(cuda)
    exp = explain(model, x, features().to(cuda), target="top2", n_samples=200, baseline="mean")
    on_cpu = exp.to("cpu")  # no perturbation: rebuilt from the inputs with the same fill
    cpu_model, cpu_x = Net(), x.cpu()
    got = deletion(model, x, exp, return_curves=True)
    assert got.curves.device.type == "cuda"
    want = deletion(cpu_model, cpu_x, on_cpu, baseline="mean", return_curves=True)
    torch.testing.assert_close(got.curves.cpu(), want.curves, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        faithfulness_correlation(model, x, exp, n_subsets=16).cpu(),
        faithfulness_correlation(cpu_model, cpu_x, on_cpu, n_subsets=16, baseline="mean"),
        atol=1e-4,
        rtol=1e-4,
    )
    assert torch.equal(label_flip(model, x, exp, k=2).cpu(), label_flip(cpu_model, cpu_x, on_cpu, k=2, baseline="mean"))


def test_max_sensitivity_takes_an_explainer_and_a_modality():
    import torchlime
    from torchlime.metrics import UniformNoise, max_sensitivity

    model = torch.nn.Linear(8, 3)
    x = torch.rand(2, 8)
    feats = (torch.arange(8) // 2).view(1, -1)
    how, call = torchlime.Explainer(kernel="lime"), torchlime.Call(target="all", n_samples=64, generator=0)
    three = UniformNoise(n=3)
    ours = max_sensitivity(model, x, explainer=how, modality=feats, call=call, perturbations=three)
    fn = lambda m, v: torchlime.explain(m, v, feats, kernel="lime", target="all", n_samples=64, generator=0)  # noqa: E731
    assert torch.equal(ours, max_sensitivity(model, x, fn, perturbations=three))
    with pytest.raises(TypeError, match="not both"):
        max_sensitivity(model, x, fn, explainer=how)
    with pytest.raises(TypeError, match="needs how to explain"):
        max_sensitivity(model, x)


def test_label_flip_scores_the_output_the_explanation_was_made_with():
    weight = torch.randn(8, 3, generator=torch.Generator().manual_seed(2))
    model = lambda v: {"aux": -(v @ weight), "logits": v @ weight}  # noqa: E731
    x = torch.rand(4, 8, generator=torch.Generator().manual_seed(3))
    exp = explain(model, x, torch.arange(8).view(1, 8) // 2, output="logits", n_samples=64, target="top2")
    own = label_flip(model, x, exp, k=2)
    assert torch.equal(own, label_flip(model, x, exp, k=2, output="logits"))
    assert not torch.equal(own, label_flip(model, x, exp, k=2, output="aux"))
