"""Explanation.refit (the kept samples fitted again, no model calls) and ExponentialKernel(width="auto")."""

from __future__ import annotations

import warnings

import pytest
import torch

import torchlime
from torchlime.engine.fit import GRID, N_FOLDS, TOP_K, pick_width
from torchlime.image import explain_image
from torchlime.stages.surrogate import Ridge
from torchlime.stages.weighting import ExponentialKernel, mask_distance

FIT_FIELDS = ("coef", "intercept", "score", "local_pred")


class Counting(torch.nn.Module):
    """A tiny image classifier that counts its calls."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 16 * 16, 5)
        )
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.net(x)


IMAGES = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))
CALL = dict(segments="grid", n_segments=16, target="top2")  # 16 segments


def explain(model: torch.nn.Module, **kw: object) -> torchlime.Explanation:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torchlime.UnreliableExplanationWarning)
        return explain_image(model, IMAGES, **CALL, **kw)  # type: ignore[arg-type]


def refit(exp: torchlime.Explanation, **kw: object) -> torchlime.Explanation:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torchlime.UnreliableExplanationWarning)
        return exp.refit(**kw)  # type: ignore[arg-type]


def assert_same_fit(a: torchlime.Explanation, b: torchlime.Explanation) -> None:
    for name in FIT_FIELDS:
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert (a.coef_std is None) == (b.coef_std is None)
    if a.coef_std is not None:
        assert torch.equal(a.coef_std, b.coef_std)


@pytest.fixture(scope="module")
def model() -> Counting:
    return Counting()


@pytest.fixture(scope="module")
def kept(model: Counting) -> torchlime.Explanation:
    return explain(model, n_samples=96, return_samples=True)


@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel=0.6),
        dict(surrogate="lasso"),
        dict(kernel=ExponentialKernel(0.5, distance="hamming"), surrogate="bayes"),
    ],
    ids=["width", "lasso", "hamming-bayes"],
)
def test_refit_is_bit_identical_to_a_fresh_call_on_the_same_masks(model, kept, kw):
    fresh = explain(model, n_samples=96, masks=kept.samples, return_samples=True, **kw)
    again = refit(kept, **kw)
    assert_same_fit(again, fresh)
    assert torch.equal(again.weights, fresh.weights)
    assert again.run.kernel == fresh.run.kernel and again.run.surrogate == fresh.run.surrogate


def test_refit_calls_the_model_never(kept):
    model = Counting()
    exp = explain(model, n_samples=96, return_samples=True)
    before = model.calls
    for kw in (
        dict(kernel=0.4),
        dict(kernel="captum"),
        dict(kernel=ExponentialKernel(width="auto")),
        dict(n_samples=40),
    ):
        refit(exp, **kw)
    assert model.calls == before
    assert refit(exp, kernel=0.4).run.model_rows == 0


def test_refit_without_arguments_gives_the_explanation_back(kept):
    again = refit(kept)
    assert_same_fit(again, kept)
    assert again.run.refit_from == 96 and again.meta["refit"] == {"from_samples": 96}


def test_n_samples_fits_the_first_m_samples_like_a_fresh_call(model, kept):
    m = 40
    again = refit(kept, n_samples=m, kernel=0.3)
    fresh = explain(model, n_samples=m, masks=kept.samples[:, :m], kernel=0.3, return_samples=True)
    assert torch.equal(fresh.outputs, kept.outputs[:, :m])  # the model scores rows the same in any batch
    assert_same_fit(again, fresh)
    assert again.samples.shape == (2, m, 16) and again.outputs.shape == (2, m, 2) and again.weights.shape == (2, m)
    assert again.run.n_samples == m and again.call.n_samples == m


@pytest.mark.parametrize("kernel", ["captum", "wasserstein"])
def test_input_space_kernels_rebuild_the_perturbed_inputs(model, kept, kernel):
    # the distances are measured on the inputs rebuilt from the recorded perturbation (SMILE's also
    # normalised by each input's largest distance): the same bits as the engine's
    m = 80
    again = refit(kept, kernel=kernel, n_samples=m)
    fresh = explain(model, n_samples=m, masks=kept.samples[:, :m], kernel=kernel, return_samples=True)
    assert_same_fit(again, fresh)
    assert torch.equal(again.weights, fresh.weights)


def test_input_space_kernel_refused_without_the_recorded_perturbation(kept, tmp_path):
    sliced = kept[0:2]  # a slice drops the batch's perturbation record
    with pytest.raises(ValueError, match=r"`kernel` .*space='input'.*recorded perturbation.*mask-space kernel"):
        sliced.refit(kernel="captum")
    refit(sliced, kernel=0.5)  # mask-space kernels need only the masks


def test_explanation_without_samples_is_refused_naming_return_samples(model):
    exp = explain(model, n_samples=32)
    with pytest.raises(ValueError, match=r"keeps no samples.*return_samples=True"):
        exp.refit(kernel=0.5)


@pytest.mark.parametrize(
    "n, error, match",
    [
        (1, ValueError, "`n_samples`"),
        (97, ValueError, r"`n_samples` must be at most the 96"),
        ("8", TypeError, "`n_samples`"),
    ],
)
def test_bad_n_samples_named(kept, n, error, match):
    with pytest.raises(error, match=match):
        kept.refit(n_samples=n)


def test_a_loaded_explanation_needs_its_kernel_and_surrogate(kept, tmp_path):
    kept.save(tmp_path / "e.pt")
    back = torchlime.Explanation.load(tmp_path / "e.pt")
    with pytest.raises(ValueError, match=r"`kernel` must be given"):
        back.refit()
    given = dict(kernel=ExponentialKernel(0.25), surrogate=Ridge(1.0))
    assert_same_fit(refit(back, **given), refit(kept, **given))


# ---------------------------------------------------------------- width="auto"
def test_auto_width_is_reproducible_and_recorded(model, kept):
    auto = ExponentialKernel(width="auto")
    a = explain(model, n_samples=96, generator=3, kernel=auto)
    b = explain(model, n_samples=96, generator=3, kernel=auto)
    assert_same_fit(a, b)
    choice = a.run.width_auto
    assert choice == b.run.width_auto and choice.chosen in choice.candidates
    assert len(choice.candidates) == len(GRID) and choice.folds == N_FOLDS and choice.k == TOP_K
    assert f"width={choice.chosen!r}" in a.run.kernel
    # the explanation is the fit at the chosen width, and refit chooses the same from the kept samples
    assert_same_fit(a, explain(model, n_samples=96, generator=3, kernel=ExponentialKernel(choice.chosen)))
    again, fresh = refit(kept, kernel=auto), explain(model, n_samples=96, kernel=auto)
    assert_same_fit(again, fresh)
    assert again.run.width_auto == fresh.run.width_auto


def _slow_criterion(exp: torchlime.Explanation, widths: list[float], reference: float):
    """The held-out error, its standard error and the fold stability, one width and fold at a time."""
    masks, scores, valid = exp.samples, exp.outputs, exp.valid
    d = mask_distance(masks, valid.unsqueeze(1), "cosine").double()
    w_ref = torch.exp(-(d**2) / (2 * reference**2))
    s = masks.shape[1]
    fold_of = torch.tensor([-1] + [(i - 1) % N_FOLDS for i in range(1, s)])
    errors, se, stability = [], [], []
    for width in widths:
        w = torch.exp(-(d**2) / (2 * width**2))
        per_fold, tops = [], []
        for k in range(N_FOLDS):
            train, test = fold_of != k, fold_of == k
            fit = Ridge(1.0).fit(masks[:, train], scores[:, train], w[:, train], valid)
            pred = fit.intercept.double().unsqueeze(1) + masks[:, test].double() @ fit.coef.double().transpose(1, 2)
            y, wr = scores[:, test].double(), w_ref[:, test].unsqueeze(-1)
            mean = (wr * y).sum(1) / wr.sum(1)
            per_fold.append(((wr * (y - pred) ** 2).sum(1) / (wr * (y - mean.unsqueeze(1)) ** 2).sum(1)).mean())
            tops.append(fit.coef.abs().double().argsort(dim=-1, descending=True, stable=True)[..., :TOP_K])
        per_fold_t = torch.stack(per_fold)
        errors.append(float(per_fold_t.mean()))
        se.append(float(per_fold_t.std() / N_FOLDS**0.5))
        jac = []
        for i in range(N_FOLDS):
            for j in range(i + 1, N_FOLDS):
                for b in range(masks.shape[0]):
                    for t in range(scores.shape[2]):
                        a, c = set(tops[i][b, t].tolist()), set(tops[j][b, t].tolist())
                        jac.append(len(a & c) / len(a | c))
        stability.append(sum(jac) / len(jac))
    return errors, se, stability


def test_auto_width_follows_its_rule_on_a_slow_reference_loop(kept):
    auto = refit(kept, kernel=ExponentialKernel(width="auto"), surrogate=Ridge(1.0))
    choice = auto.run.width_auto
    d = mask_distance(kept.samples, kept.valid.unsqueeze(1), "cosine")
    assert choice.reference == pytest.approx(float(d[:, 1:].double().median()))
    assert choice.candidates == pytest.approx([choice.reference * g for g in GRID])
    errors, se, stability = _slow_criterion(kept, choice.candidates, choice.reference)
    assert choice.heldout_error == pytest.approx(errors, rel=1e-4)
    assert choice.heldout_se == pytest.approx(se, rel=1e-3, abs=1e-7)
    assert choice.stability == pytest.approx(stability)
    best = min(range(len(errors)), key=lambda i: errors[i])
    ok = [i for i in range(len(errors)) if errors[i] <= errors[best] + se[best] and stability[i] >= stability[best]]
    assert choice.candidates.index(choice.chosen) == max(ok) == pick_width(errors, se, stability)
    assert errors[max(ok)] <= min(errors) + se[best]  # within one standard error of the smallest held-out error


def test_auto_width_picks_the_widest_for_a_planted_linear_model():
    # the scores are linear in the masks plus pseudo-noise: every width is unbiased and the widest has
    # the least variance, so it must win (held-out error and stability)
    coef = torch.tensor([3.0, -2.5, 2.0, -1.6, 1.3, -1.0, 0.8, -0.6, 0.4, -0.3, 0.2, -0.1])

    def planted(x: torch.Tensor) -> torch.Tensor:
        noise = torch.sin(x @ torch.arange(1.0, 13.0) * 37.0)
        return (x @ coef + 0.5 * noise).unsqueeze(1)

    for seed in range(2):
        exp = torchlime.explain(
            planted,
            torch.ones(3, 12),
            torch.arange(12).view(1, 12),
            n_samples=200,
            generator=seed,
            kernel=ExponentialKernel(width="auto"),
            target=0,
        )
        choice = exp.run.width_auto
        assert choice.chosen == max(choice.candidates)
        assert exp.top_features(5)[0][:, 0].tolist() == [[0, 1, 2, 3, 4]] * 3


def test_auto_width_needs_an_int_n_samples_and_enough_of_them():
    model = Counting()
    with pytest.raises(ValueError, match=r"`kernel` .*width='auto'.*int n_samples"):
        explain(model, n_samples="auto", kernel=ExponentialKernel(width="auto"))
    assert model.calls == 0  # refused before any model call
    with pytest.raises(ValueError, match=rf"n_samples >= {2 * N_FOLDS + 1}, got 8"):
        explain(model, n_samples=8, kernel=ExponentialKernel(width="auto"))


@pytest.mark.parametrize(
    "width, error",
    [
        ("wide", ValueError),
        (0.0, ValueError),
        (-1.0, ValueError),
        (float("nan"), ValueError),
        (None, TypeError),
        (True, TypeError),
    ],
)
def test_bad_widths_are_named(width, error):
    with pytest.raises(error, match=r"`width` must be .*'auto'"):
        ExponentialKernel(width=width)


def test_an_unchosen_auto_width_weighs_nothing():
    with pytest.raises(ValueError, match=r"`width='auto'` is chosen"):
        ExponentialKernel(width="auto").weigh(torch.zeros(3))
