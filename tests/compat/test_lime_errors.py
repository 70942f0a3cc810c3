"""``torchlime.compat.lime``: every argument checked before the classifier runs, in lime's words.

Each refusal names lime's argument (never torchlime's ``n_samples``, ``target`` or ``inputs``) and comes
before ``classifier_fn`` / ``predict_fn`` is called (a function that counts its calls); what only the
output shows is a clear error too, and torchlime's quality warning gives advice a lime user can follow.
"""

from __future__ import annotations

import numpy as np
import pytest

from torchlime import UnreliableExplanationWarning
from torchlime.compat._vocabulary import reword_quality
from torchlime.compat.lime import LimeImageExplainer, LimeTabularExplainer, LimeTextExplainer
from torchlime.compat.lime._checks import lime_advice

# tiny neighbourhoods fit poorly; the tests that read the warning catch it with pytest.warns
pytestmark = pytest.mark.filterwarnings("ignore::torchlime.UnreliableExplanationWarning")
TORCHLIME_WORDS = ("`n_samples`", "`target`", "`inputs`", "`texts`", "`X`", "softmax", "the model")
IMAGE = np.random.RandomState(0).rand(4, 4, 3)
TRAIN = np.random.RandomState(1).rand(20, 3)


def grid(image):
    """Four 2x2 superpixels."""
    h, w = image.shape[:2]
    return (np.arange(h)[:, None] * 2 // max(h, 1)) * 2 + np.arange(w)[None, :] * 2 // max(w, 1)


class Counting:
    """A classifier over numpy batches (or lists of strings) returning (c, 2) probabilities; counts its calls."""

    def __init__(self, transform=None) -> None:
        self.calls = 0
        self.transform = transform

    def __call__(self, batch):
        self.calls += 1
        if isinstance(batch, list):
            score = np.array([0.2 + 0.6 * ("good" in s) for s in batch])
        else:
            flat = np.asarray(batch, dtype=float).reshape(len(batch), -1)
            score = 1 / (1 + np.exp(-4 * (flat[:, 0] - 0.5)))
        out = np.stack([1 - score, score], 1)
        return out if self.transform is None else self.transform(out)


def explain_image(fn, image=IMAGE, **kw):
    kw = dict(dict(segmentation_fn=grid, num_samples=12, progress_bar=False, random_seed=0), **kw)
    return LimeImageExplainer(random_state=0).explain_instance(image, fn, **kw)


def explain_text(fn, text="good bad ugly", **kw):
    return LimeTextExplainer(random_state=0).explain_instance(text, fn, **dict(dict(num_samples=12), **kw))


def explain_row(fn, row=TRAIN[0], **kw):
    return LimeTabularExplainer(TRAIN, random_state=0).explain_instance(row, fn, **dict(dict(num_samples=12), **kw))


RUN = {"image": explain_image, "text": explain_text, "tabular": explain_row}
COMMON = [
    # (id, keywords, error, match): refused by every explainer
    ("n0", dict(num_samples=0), ValueError, "`num_samples` must be an int >= 2.*got 0"),
    ("n1", dict(num_samples=1), ValueError, "`num_samples` must be an int >= 2.*got 1"),
    ("n_negative", dict(num_samples=-5), ValueError, "`num_samples` must be an int >= 2.*got -5"),
    ("n_string", dict(num_samples="10"), TypeError, "`num_samples` must be an int"),
    ("features0", dict(num_features=0), ValueError, "`num_features` must be an int >= 1"),
    ("labels_negative", dict(labels=(-1,), top_labels=None), ValueError, r"`labels` must be >= 0.*\[-1\]"),
    ("labels_string", dict(labels=("cat",), top_labels=None), TypeError, "`labels` must be ints"),
    ("labels_none", dict(labels=(), top_labels=None), ValueError, "`labels` must name at least one class"),
    ("top_negative", dict(top_labels=-1), ValueError, "`top_labels` must be >= 0"),
    ("top_float", dict(top_labels=1.5), TypeError, "`top_labels` must be None or an int"),
]


@pytest.mark.parametrize("kind", list(RUN))
@pytest.mark.parametrize("case", COMMON, ids=[c[0] for c in COMMON])
def test_refused_before_the_classifier_runs(kind, case):
    _, kw, error, match = case
    fn = Counting()
    with pytest.raises(error, match=match) as info:
        RUN[kind](fn, **kw)
    assert fn.calls == 0
    assert not any(word in str(info.value) for word in TORCHLIME_WORDS)


NAN = float("nan")
IMAGE_REFUSED = [
    ("0x0", dict(image=np.zeros((0, 0, 3))), ValueError, r"`image` must have at least one pixel.*\(0, 0, 3\)"),
    ("0_channels", dict(image=np.zeros((4, 4, 0))), ValueError, "`image` must have at least one pixel"),
    ("nan", dict(image=np.full((4, 4, 3), NAN)), ValueError, "`image` must be finite, got 48 NaN/inf"),
    ("list", dict(image=IMAGE.tolist()), TypeError, "`image` must be a numpy array"),
    ("strings", dict(image=np.full((4, 4, 3), "a")), TypeError, "`image` must be a numpy array"),
    ("one_superpixel", dict(segmentation_fn=lambda im: np.zeros(im.shape[:2], int)), ValueError,
     "`segmentation_fn` must split the image into at least 2 superpixels"),
    ("flat_default", dict(image=np.zeros((8, 8, 3)), segmentation_fn=None), ValueError,
     "the default quickshift segmentation must split the image.*pass a `segmentation_fn`"),
    ("batch0", dict(batch_size=0), ValueError, "`batch_size` must be an int >= 1"),
    ("hide_string", dict(hide_color="red"), TypeError, "`hide_color` must be None or a number"),
    ("hide_nan", dict(hide_color=NAN), ValueError, "`hide_color` must be None, or 1 or 3 finite numbers"),
    ("hide_count", dict(hide_color=(0, 0)), ValueError, "`hide_color` must be None, or 1 or 3 finite numbers"),
    ("not_callable", dict(fn="model"), TypeError, "`classifier_fn` must be a function"),
]  # fmt: skip


@pytest.mark.parametrize("case", IMAGE_REFUSED, ids=[c[0] for c in IMAGE_REFUSED])
def test_image_refusals(case):
    _, kw, error, match = case
    fn = Counting()
    with pytest.raises(error, match=match):
        explain_image(kw.pop("fn", fn), **kw)
    assert fn.calls == 0


TABLE_REFUSED = [
    ("0_columns", lambda: LimeTabularExplainer(np.zeros((5, 0))), ValueError, r"`training_data` .*D >= 2.*\(5, 0\)"),
    ("1_column", lambda: LimeTabularExplainer(np.zeros((5, 1))), ValueError, r"`training_data` .*D >= 2.*\(5, 1\)"),
    ("0_rows", lambda: LimeTabularExplainer(np.zeros((0, 3))), ValueError, r"`training_data` .*N >= 1.*\(0, 3\)"),
    ("1d", lambda: LimeTabularExplainer(np.zeros(3)), ValueError, r"`training_data` must have shape \(N, D\)"),
    ("nan", lambda: LimeTabularExplainer(np.full((5, 3), NAN)), ValueError, "`training_data` must be finite"),
    ("strings", lambda: LimeTabularExplainer(np.full((5, 3), "a")), TypeError, "`training_data` must hold numbers"),
    ("names", lambda: LimeTabularExplainer(TRAIN, feature_names=["a"]), ValueError, "`feature_names` must name the 3"),
    ("categorical", lambda: LimeTabularExplainer(TRAIN, categorical_features=[5]), ValueError,
     r"`categorical_features` must be in \[0, 3\)"),
    ("categorical_type", lambda: LimeTabularExplainer(TRAIN, categorical_features=["a"]), TypeError,
     "`categorical_features` must be column indices"),
    ("width", lambda: LimeTabularExplainer(TRAIN, kernel_width=0), ValueError, "`kernel_width` must be finite and > 0"),
    ("stats_keys", lambda: LimeTabularExplainer(TRAIN, training_data_stats={"means": {}}), ValueError,
     r"`training_data_stats` lacks the keys \['mins', 'maxs', 'stds', 'feature_values', 'feature_frequencies', 'bins"),
    ("row_nan", lambda: explain_row(Counting(), np.array([NAN, 0.0, 0.0])), ValueError, "`data_row` must be finite"),
    ("row_inf", lambda: explain_row(Counting(), np.array([np.inf, 0.0, 0.0])), ValueError, "`data_row` must be finite"),
    ("row_string", lambda: explain_row(Counting(), "abc"), TypeError, "`data_row` must hold numbers"),
    ("row_length", lambda: explain_row(Counting(), np.zeros(0)), ValueError, "`data_row` must have 3 values"),
    ("predict_fn", lambda: explain_row("model"), TypeError, "`predict_fn` must be a function"),
    ("text_type", lambda: explain_text(Counting(), ["good"]), TypeError, "`text_instance` must be a str"),
    ("text_width", lambda: LimeTextExplainer(kernel_width=-1), ValueError, "`kernel_width` must be finite and > 0"),
    ("image_width", lambda: LimeImageExplainer(kernel_width=NAN), ValueError, "`kernel_width` must be finite"),
]  # fmt: skip


@pytest.mark.parametrize("case", TABLE_REFUSED, ids=[c[0] for c in TABLE_REFUSED])
def test_tabular_and_constructor_refusals(case):
    _, call, error, match = case
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("text", ["", " ,. ", "good"], ids=["empty", "separators", "one_word"])
def test_a_text_of_fewer_than_two_words_names_text_instance(text):
    fn = Counting()
    with pytest.raises(ValueError, match="`text_instance` must have at least 2 words") as info:
        explain_text(fn, text)
    assert fn.calls == 0 and not any(word in str(info.value) for word in TORCHLIME_WORDS)


@pytest.mark.parametrize("kind", list(RUN))
@pytest.mark.parametrize(
    "transform, error, match",
    [
        (lambda out: out * NAN, ValueError, "returned NaN/inf scores for"),
        (lambda out: out[:1], ValueError, r"must return \(c, K\) class probabilities for a batch of c="),
        (lambda out: out[:, 1], ValueError, r"must return \(c, K\) class probabilities.*got shape \(\d+,\)"),
        (lambda out: np.full(out.shape, "x"), TypeError, "must return numbers"),
    ],
    ids=["nan", "rows", "flat", "strings"],
)
def test_a_bad_classifier_output_is_a_clear_error(kind, transform, error, match):
    name = "predict_fn" if kind == "tabular" else "classifier_fn"
    with pytest.raises(error, match=f"`{name}` {match}") as info:
        RUN[kind](Counting(transform))
    assert not any(word in str(info.value) for word in TORCHLIME_WORDS)


@pytest.mark.parametrize("kind", list(RUN))
def test_labels_beyond_the_classes_name_labels(kind):
    with pytest.raises(ValueError, match=r"`labels` must be in \[0, 2\) \(\w+ returns 2 class scores per row\)"):
        RUN[kind](Counting(), labels=(7,), top_labels=None)


@pytest.mark.parametrize("kind", list(RUN))
def test_labels_are_ignored_with_top_labels_as_in_lime(kind):
    exp = RUN[kind](Counting(), labels=None, top_labels=1)
    assert len(exp.top_labels) == 1 and list(exp.local_exp) == exp.top_labels


@pytest.mark.parametrize("kind", list(RUN))
def test_a_classifier_that_raises_propagates_its_error(kind):
    def broken(batch):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom") as info:
        RUN[kind](broken)
    assert type(info.value) is RuntimeError and str(info.value) == "boom"  # as lime passes it on: no torchlime words
    assert not any("torchlime" in note for note in getattr(info.value, "__notes__", []))


def test_regression_predictions_checked_too():
    explainer = LimeTabularExplainer(TRAIN, mode="regression", random_state=0)
    exp = explainer.explain_instance(TRAIN[0], lambda rows: rows[:, 0] * 2.0, num_samples=12)
    assert np.isfinite(exp.predicted_value)
    with pytest.raises(ValueError, match="`predict_fn` returned NaN/inf scores"):
        explainer.explain_instance(TRAIN[0], lambda rows: rows[:, 0] * NAN, num_samples=12)
    with pytest.raises(ValueError, match=r"`predict_fn` must return \(c,\) predictions"):
        explainer.explain_instance(TRAIN[0], lambda rows: rows[:1, 0], num_samples=12)


def test_saturated_probabilities_warn_in_limes_words():
    def certain(batch):
        return np.tile([[0.0, 1.0]], (len(batch), 1))

    for run in RUN.values():
        with pytest.warns(UnreliableExplanationWarning, match="returns saturated probabilities") as record:
            run(certain)
        said = " ".join(str(w.message) for w in record if w.category is UnreliableExplanationWarning)
        assert "softmax" not in said and "input(s)" not in said


def test_few_samples_advice_in_limes_words():
    text = (
        "unreliable explanation: outputs barely vary (a saturated probability? explain logits: softmax=False) for "
        "input(s) [0]; weighted R² below 0.1 for input(s) [0]; fewer effective samples (Kish) than features (more "
        "samples or a wider kernel) for input(s) [0] (see torchlime.engine.quality)"
    )
    said = reword_quality(text, lime_advice("classifier_fn"), per_input=False)
    assert said == (
        "unreliable explanation: classifier_fn returns saturated probabilities: they barely vary over the samples, "
        "so the weights are noise-sized; the linear surrogate explains under 10% of the output's variation (score, "
        "the weighted R², < 0.1); fewer effective samples than features: raise num_samples or kernel_width"
    )


def test_nothing_is_modified_in_place_and_numpy_comes_back():
    image, row, train = IMAGE.copy(), TRAIN[0].copy(), TRAIN.copy()
    exp = explain_image(Counting(), image, hide_color=0.0)
    shown, mask = exp.get_image_and_mask(exp.top_labels[0], positive_only=False, num_features=2)
    assert isinstance(shown, np.ndarray) and isinstance(mask, np.ndarray) and shown.shape == image.shape
    tab = LimeTabularExplainer(train, random_state=0).explain_instance(row, Counting(), num_samples=12)
    assert isinstance(tab.predict_proba, np.ndarray) and tab.predict_proba.shape == (2,)
    np.testing.assert_array_equal(image, IMAGE)
    np.testing.assert_array_equal(row, TRAIN[0])
    np.testing.assert_array_equal(train, TRAIN)


@pytest.mark.parametrize("settings", [dict(positive=True), dict(fit_intercept=False)], ids=["positive", "no-intercept"])
@pytest.mark.parametrize("kind", list(RUN))
def test_a_regressor_setting_that_changes_the_fit_is_refused_by_name(kind, settings):
    from torchlime.compat._vocabulary import check_regressor_settings

    for old in ("deprecated", False):  # scikit-learn before 1.2 reports its default normalize so
        check_regressor_settings({"alpha": 1.0, "normalize": old, "fit_intercept": True}, "Ridge", "model_regressor")
    with pytest.raises(ValueError, match=r"Ridge\(normalize=True\)"):
        check_regressor_settings({"alpha": 1.0, "normalize": True}, "Ridge", "model_regressor")
    linear_model = pytest.importorskip("sklearn.linear_model")
    shown = ", ".join(f"{k}={v}" for k, v in settings.items())
    for name in ("Ridge", "Lasso", "LinearRegression"):
        regressor = getattr(linear_model, name)(**settings)
        with pytest.raises(ValueError, match=rf"`model_regressor` {name}\({shown}\) fits another model"):
            RUN[kind](Counting(), model_regressor=regressor)
    solver_only = linear_model.Lasso(alpha=0.01, max_iter=50, tol=1e-2, selection="random", random_state=0)
    RUN[kind](Counting(), model_regressor=solver_only)  # solver settings reach the same optimum: taken
