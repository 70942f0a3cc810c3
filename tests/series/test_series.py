"""``Series``: planted signals found in windows, channels and cells; the fills; the door; the picture."""

from __future__ import annotations

import dataclasses
import warnings

import matplotlib
import pytest
import torch

import torchlime.metrics
import torchlime.series
from torchlime.engine import Explainer
from torchlime.series import Series, SeriesFill, SeriesInfo, explain_series, plot_series

matplotlib.use("Agg")
#: the few-sample calls that only look at fills, features and errors warn that their fits are unreliable
pytestmark = pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")

B, C, T, K = 6, 4, 50, 10  # window 3 of 10 is steps 15..19
CHANNEL, WINDOW = 2, 3
STEPS = slice(15, 20)
FILLS = ("mean", "interpolate", "noise", "shuffle")
PLANTED = {"window": WINDOW, "channel": CHANNEL, "window_channel": CHANNEL * K + WINDOW}


def planted(x: torch.Tensor) -> torch.Tensor:
    """Looks at channel 2 in window 3 only."""
    return x[:, CHANNEL, STEPS].mean(1)


def data(seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Random series, with a bump where the model looks (so hiding it lowers the score)."""
    x = torch.randn(B, C, T, generator=torch.Generator().manual_seed(seed), dtype=dtype)
    x[:, CHANNEL, STEPS] += 3.0
    return x


@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("segments", list(PLANTED))
def test_the_planted_feature_ranks_first_for_every_input(segments, fill):
    exp = explain_series(planted, data(), segments=segments, n_windows=K, baseline=SeriesFill(fill), n_samples=300)
    n_features = {"window": K, "channel": C, "window_channel": C * K}[segments]
    assert exp.coef.shape == (B, 1, n_features)
    assert exp.top_features(1)[0].flatten().tolist() == [PLANTED[segments]] * B
    assert bool((exp.coef[:, 0, PLANTED[segments]] > 0).all())


@pytest.mark.parametrize("fill", FILLS)
def test_fills_are_reproducible_and_random_ones_follow_the_seed(fill):
    x = data()

    def run(seed):
        return explain_series(
            planted, x, segments="window_channel", baseline=SeriesFill(fill), n_samples=64, generator=seed
        )

    a, b, c = run(1), run(1), run(2)
    assert torch.equal(a.coef, b.coef) and torch.equal(a.perturbation.baseline, b.perturbation.baseline)
    same_fill = torch.equal(a.perturbation.baseline, c.perturbation.baseline)
    assert same_fill == (fill in ("mean", "interpolate"))
    assert not torch.equal(a.coef, c.coef)  # other masks


def test_random_fills_depend_on_the_index_not_the_batch():
    x = data()
    for fill in ("noise", "shuffle"):
        whole = explain_series(planted, x, baseline=SeriesFill(fill), n_samples=32, generator=5)
        one = explain_series(
            planted, x[3:4], baseline=SeriesFill(fill), n_samples=32, generator=5, index=torch.tensor([3])
        )
        assert torch.equal(whole.perturbation.baseline[3], one.perturbation.baseline[0])


def total(x: torch.Tensor) -> torch.Tensor:
    return x.sum((1, 2))


def fill_of(x, fill, n_windows=K, generator=0):
    """The fill the engine used for ``x``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # too few samples for a fit: only the fill is looked at
        exp = explain_series(
            total,
            x,
            segments="window_channel",
            n_windows=n_windows,
            baseline=SeriesFill(fill),
            n_samples=8,
            generator=generator,
        )
    return exp.perturbation.baseline


def test_mean_noise_and_shuffle_keep_each_channel_statistics():
    x = data()
    assert torch.allclose(fill_of(x, "mean"), x.mean(2, keepdim=True).expand_as(x))
    shuffled = fill_of(x, "shuffle")
    assert torch.equal(shuffled.sort(2).values, x.sort(2).values)  # a permutation of every channel's steps
    assert not torch.equal(shuffled, x)
    noise = fill_of(torch.randn(2, 3, 20_000) * torch.tensor([1.0, 5.0, 0.1]).view(1, 3, 1) + 7, "noise")
    assert torch.allclose(noise.mean(2), torch.full((2, 3), 7.0), atol=0.1)
    assert torch.allclose(noise.std(2), torch.tensor([1.0, 5.0, 0.1]).expand(2, 3), rtol=0.03)
    assert bool(torch.isfinite(noise).all())


def slow_interpolation(x: torch.Tensor, n_windows: int) -> torch.Tensor:
    """Window by window, step by step, in Python floats."""
    out = torch.empty_like(x)
    n = x.shape[2]
    for b in range(x.shape[0]):
        for c in range(x.shape[1]):
            row = x[b, c].tolist()
            for w in range(n_windows):
                start, stop = -(-w * n // n_windows), -(-(w + 1) * n // n_windows)
                for t in range(start, stop):
                    if start > 0 and stop < n:
                        left, right = row[start - 1], row[stop]
                        value = left + (right - left) * (t - start + 1) / (stop - start + 1)
                    elif start > 0:
                        value = row[start - 1]
                    elif stop < n:
                        value = row[stop]
                    else:
                        value = sum(row) / n
                    out[b, c, t] = value
    return out


@pytest.mark.parametrize("n_windows,n_steps", [(10, 50), (7, 23), (1, 9), (23, 23), (2, 3)])
def test_interpolation_equals_a_slow_reference(n_windows, n_steps):
    x = torch.randn(3, 2, n_steps, generator=torch.Generator().manual_seed(n_steps), dtype=torch.float64)
    fill = SeriesFill("interpolate", n_windows)(x, None)  # the interpolation needs nothing but the series
    torch.testing.assert_close(fill, slow_interpolation(x, n_windows), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(fill_of(x, "interpolate", n_windows), fill, rtol=0, atol=0)


def test_channel_features_interpolate_over_the_whole_series():
    x = data()
    exp = explain_series(planted, x, segments="channel", baseline=SeriesFill("interpolate"), n_samples=8)
    assert torch.allclose(exp.perturbation.baseline, x.mean(2, keepdim=True).expand_as(x))
    assert exp.meta["series"] == {"segments": "channel", "n_windows": 1, "windows": [[0, T]], "fill": "interpolate"}


def test_the_explainer_and_the_door_agree_bit_for_bit():
    x = data()
    explainer = Explainer(kernel="lime", baseline=SeriesFill("noise"))
    a = explainer.explain(planted, x, Series("window_channel", 5), n_samples=100, generator=3)
    b = explain_series(
        planted,
        x,
        segments="window_channel",
        n_windows=5,
        baseline=SeriesFill("noise"),
        n_samples=100,
        generator=3,
        kernel="lime",
    )
    for name in ("coef", "intercept", "score", "local_pred", "features"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert a.info == b.info and isinstance(a.info, SeriesInfo)


def test_the_info_record_and_meta():
    exp = explain_series(planted, data(), segments="window_channel", n_windows=4, n_samples=16)
    assert exp.info == SeriesInfo("window_channel", 4, ((0, 13), (13, 25), (25, 38), (38, 50)), "mean")
    assert exp.meta["series"]["windows"] == [[0, 13], [13, 25], [25, 38], [38, 50]]
    assert exp[1:3].info == exp.info


def test_baseline_is_the_one_fill_keyword():
    x = data()
    exp = explain_series(planted, x, baseline=0.0, n_samples=16)
    assert bool((exp.perturbation.baseline == 0).all()) and exp.info.fill is None
    preset = explain_series(planted, x, preset="lime", n_samples=16, target=None)
    assert preset.info.fill == "mean"  # the modality's default fill wins over the preset's
    preset = explain_series(planted, x, baseline=SeriesFill("interpolate"), preset="lime", n_samples=16, target=None)
    assert preset.info.fill == "interpolate"
    assert preset.meta["baseline"] == repr(SeriesFill("interpolate", K))  # fitted to the modality's windows


def test_features_of_each_segmentation():
    x = data()
    feats = {s: explain_series(planted, x, segments=s, n_windows=5, n_samples=8).features for s in PLANTED}
    assert feats["window"].shape == (B, 1, T) and feats["window"][0, 0, ::10].tolist() == [0, 1, 2, 3, 4]
    assert feats["channel"].shape == (B, C, 1) and feats["channel"][0, :, 0].tolist() == [0, 1, 2, 3]
    assert torch.equal(feats["window_channel"][0], torch.arange(C).view(C, 1) * 5 + torch.arange(T).view(1, T) // 10)


def test_dtypes_and_normalize():
    x = data(dtype=torch.float64)
    exp = explain_series(planted, x, segments="window_channel", n_samples=200)
    assert exp.top_features(1)[0].flatten().tolist() == [CHANNEL * K + WINDOW] * B
    stats = ([0.0] * C, [2.0] * C)  # the model sees x / 2: the same ranking
    half = explain_series(planted, data(), normalize=stats, n_samples=200)
    assert half.top_features(1)[0].flatten().tolist() == [WINDOW] * B


@pytest.mark.parametrize(
    "call,error,words",
    [
        (lambda: Series(segments="time"), ValueError, "`segments`"),
        (lambda: Series(n_windows=0), ValueError, "`n_windows`"),
        (lambda: Series(n_windows=2.5), TypeError, "`n_windows`"),
        (lambda: Series(fill="noise"), TypeError, "unexpected keyword argument 'fill'"),
        (lambda: SeriesFill("zero"), ValueError, "`name`"),
        (lambda: SeriesFill("mean", 0), ValueError, "`n_windows`"),
        (lambda: explain_series(planted, torch.randn(4, 50)), ValueError, r"`series` must have shape \(B, C, T\)"),
        (lambda: explain_series(planted, torch.randn(1, 2, 4, 50)), ValueError, "`series`"),
        (lambda: explain_series(planted, torch.ones(2, 3, 50, dtype=torch.long)), TypeError, "`series`.*float"),
        (lambda: explain_series(planted, [[1.0]]), TypeError, "`series`"),
        (lambda: explain_series(planted, data(), n_windows=51), ValueError, r"`n_windows`.*\[1, 50\].*51"),
        (lambda: explain_series(planted, data(), segments="cells"), ValueError, "`segments`"),
        (lambda: explain_series(planted, data(), fill="noise"), TypeError, "unexpected keyword argument 'fill'"),
        (
            lambda: explain_series(planted, data(), baseline="interpolate"),
            ValueError,
            r"`baseline` string must be one of .* got 'interpolate'",
        ),
        (lambda: explain_series(planted, data(), windows=3), TypeError, "windows"),
        (lambda: explain_series(planted, data(), perturb_fn=None), TypeError, "perturb_fn"),
        (
            lambda: Explainer().explain(planted, data(), Series(), additional_forward_args=1),
            ValueError,
            "`additional_forward_args`",
        ),
    ],
)
def test_bad_arguments_raise_named_errors(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_channel_segments_ignore_n_windows_beyond_t():
    exp = explain_series(total, data()[:, :, :8], segments="channel", n_windows=10, n_samples=16)
    assert exp.coef.shape == (B, 1, C)


def test_series_is_a_frozen_modality():
    s = Series()
    assert (s.segments, s.n_windows) == ("window", 10)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.n_windows = 3
    assert "perturb_fn" in Series.owns and "additional_forward_args" in Series.owns


@pytest.mark.parametrize("fill", ["mean", "noise"])
def test_the_metrics_take_a_series_explanation(fill):
    x = data()
    exp = explain_series(planted, x, segments="window_channel", baseline=SeriesFill(fill), n_samples=300)
    deletion = torchlime.metrics.deletion(planted, x, exp)
    insertion = torchlime.metrics.insertion(planted, x, exp)
    assert deletion.shape == insertion.shape == (B, 1)
    assert bool((deletion < insertion).all())  # the planted cell goes first: the score falls at once
    correlation = torchlime.metrics.faithfulness_correlation(planted, x, exp)
    assert correlation.shape == (B, 1)


@pytest.mark.parametrize("segments", list(PLANTED))
def test_the_picture_is_a_figure(segments):
    from matplotlib.figure import Figure

    x = data()
    exp = explain_series(planted, x, segments=segments, n_samples=64)
    fig = plot_series(exp, x, index=1, title="planted")
    assert isinstance(fig, Figure) and len(fig.axes) == C + 1  # one panel per channel and the colorbar
    assert "RdBu_r" in fig.axes[-1].get_xlabel()  # the colour bar, under the panels
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_the_picture_refuses_other_series():
    x = data()
    exp = explain_series(planted, x, n_samples=16)
    with pytest.raises(ValueError, match="`series`"):
        plot_series(exp, x[:2])
    with pytest.raises(ValueError, match="`index`"):
        plot_series(exp, x, index=B)
    with pytest.raises(IndexError, match="`target_index`"):
        plot_series(exp, x, target_index=1)


def test_public_names_document_every_argument():
    from tests.test_docstrings import check_arguments

    assert set(torchlime.series.__all__) == {"Series", "SeriesFill", "SeriesInfo", "explain_series", "plot_series"}
    for name in torchlime.series.__all__:
        obj = getattr(torchlime.series, name)
        check_arguments(name, obj, obj)
    check_arguments("Series.prepare", Series.prepare, Series.prepare)


def test_the_door_offers_the_fields_of_series_and_the_options_but_those_series_owns():
    import inspect

    from tests.helpers.doors import check_door_form

    offered = list(inspect.signature(explain_series).parameters)
    own = [f.name for f in dataclasses.fields(Series)]
    assert offered == ["model", "series", *own, "target", "n_samples", "generator", "options"]
    check_door_form(explain_series, Series, torch.randn(2, 3, 20))
