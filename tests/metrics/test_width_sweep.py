"""torchlime.metrics.width_sweep: the explanation refitted at several widths, tabulated, without model calls."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

import torchlime
from torchlime._util.colours import BLUE_HEX, RED_HEX
from torchlime.metrics import width_sweep
from torchlime.metrics.width import WidthSweep
from torchlime.stages.weighting import ExponentialKernel


class Counting(torch.nn.Module):
    """A small tabular model (a nonlinear score of 10 columns) that counts its calls."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(10, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.net(x)


X = torch.rand(3, 10, generator=torch.Generator().manual_seed(2))
FEATURES = torch.arange(10).view(1, 10)


def explain(model: torch.nn.Module, **kw: object) -> torchlime.Explanation:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torchlime.UnreliableExplanationWarning)
        return torchlime.explain(model, X, FEATURES, n_samples=120, target="top2", **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def model() -> Counting:
    return Counting()


@pytest.fixture(scope="module")
def auto(model: Counting) -> torchlime.Explanation:
    return explain(model, kernel=ExponentialKernel(width="auto"), return_samples=True)


def test_the_table_holds_the_refits(auto):
    widths = [0.1, 0.3, 1.0]
    table = width_sweep(auto, widths, k=3)
    assert table.widths == (0.1, 0.3, 1.0) and table.k == 3
    assert table.compared_width == auto.run.width_auto.chosen
    assert table.reference == auto.run.width_auto.reference
    valid = auto.valid.unsqueeze(1)
    for i, width in enumerate(widths):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", torchlime.UnreliableExplanationWarning)
            fitted = auto.refit(kernel=ExponentialKernel(width))
        assert table.r2[i] == float(fitted.score.double()[torch.ones_like(fitted.score, dtype=torch.bool)].mean())
        assert table.sign_flips[i] == int(((fitted.coef * auto.coef < 0) & valid).sum())
        ours, theirs = fitted.top_features(3)[0], auto.top_features(3)[0]
        jaccard = [
            len(set(a) & set(b)) / len(set(a) | set(b))
            for a, b in zip(ours.flatten(0, 1).tolist(), theirs.flatten(0, 1).tolist())
        ]
        assert table.jaccard[i] == pytest.approx(sum(jaccard) / len(jaccard))


def test_heldout_error_is_the_criterion_of_width_auto(auto):
    choice = auto.run.width_auto
    table = width_sweep(auto, choice.candidates)
    assert table.heldout_error == pytest.approx(choice.heldout_error, rel=1e-12)
    chosen = choice.candidates.index(choice.chosen)
    assert table.jaccard[chosen] == 1.0 and table.sign_flips[chosen] == 0  # the explanation itself


def test_the_sweep_calls_the_model_never():
    model = Counting()
    exp = explain(model, return_samples=True)
    before = model.calls
    table = width_sweep(exp, torch.tensor([0.2, 0.25, 0.5]))
    assert model.calls == before
    assert table.compared_width == 0.25  # the default kernel's width
    assert table.sign_flips[1] == 0 and table.jaccard[1] == 1.0


@pytest.mark.parametrize("widths", [[], [0.1, -1.0], "0.1", [True], [0.1, float("inf")], torch.ones(2, 2), None])
def test_bad_widths_are_named(auto, widths):
    with pytest.raises(ValueError, match=r"`widths` must be a non-empty sequence of finite numbers > 0"):
        width_sweep(auto, widths)


def test_bad_arguments_are_named(model, auto):
    with pytest.raises(ValueError, match="`k`"):
        width_sweep(auto, [0.2], k=0)
    with pytest.raises(TypeError, match="`explanation`"):
        width_sweep("exp", [0.2])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"keeps no samples.*return_samples=True"):
        width_sweep(explain(model), [0.2])
    with pytest.raises(ValueError, match=r"ExponentialKernel.*UniformKernel"):
        width_sweep(explain(model, kernel="uniform", return_samples=True), [0.2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torchlime.UnreliableExplanationWarning)
        few = auto.refit(n_samples=8, kernel=0.3)
    with pytest.raises(ValueError, match=r"at least 11 samples per input.*got 8"):
        width_sweep(few, [0.2])


def test_the_table_prints_and_plots(auto):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    table = width_sweep(auto, [0.1, 1.0])
    text = str(table)
    assert text.splitlines()[0].split()[0] == "width" and len(text.splitlines()) == 4
    assert "<table>" in table._repr_html_() and "held-out error" in table._repr_html_()
    fig = table.plot()
    lines = [line for ax in fig.axes for line in ax.get_lines() if line.get_marker() in ("o", "s")]
    assert {to_hex(line.get_color()) for line in lines} == {RED_HEX, BLUE_HEX}
    assert list(lines[0].get_xdata()) == [0.1, 1.0]
    plt.close(fig)
    assert isinstance(dataclasses.replace(table, k=2), WidthSweep)
