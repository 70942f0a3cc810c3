"""``torchlime.compat.shap.KernelExplainer`` on scikit-learn models, shap's usual ones: the numpy path.

A model called with numpy rows gets its coalitions built, run and averaged with numpy in chunks whose size is
timed during the call (``_shap_host``). These tests hold it to shap's numbers (every coalition evaluated: the
exact values, equal to rounding), to the efficiency property where coalitions are drawn, to whole coalitions
per call (a multiple of the background's rows, few and large calls), and to the tuner's rule.
"""

from __future__ import annotations

import numpy as np
import pytest

from torchlime.compat import _shap_host
from torchlime.compat._shap_host import FILL_FROM, GAIN, START_ROWS, TIMINGS, ChunkTuner, coalition_rows
from torchlime.compat.shap import KernelExplainer

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore:X does not have valid feature names")
sklearn = pytest.importorskip("sklearn", reason="scikit-learn is a test extra")


@pytest.fixture(scope="module")
def cancer():
    """A LogisticRegression on scikit-learn's breast-cancer set (30 features, scaled): model, background, rows.

    The rows explained have probabilities in [0.01, 0.99]: the logit of a probability within 1e-11 of 1 turns
    the rounding of a background mean (the order of a sum) into 1e-8.
    """
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = load_breast_cancer(return_X_y=True)
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(x, y)
    p = model.predict_proba(x)[:, 1]
    moderate = x[(p > 0.01) & (p < 0.99)]
    return model, x[:40], moderate[:5]


class Counted:
    """``predict_proba`` that records the rows (and the type) of every call."""

    def __init__(self, fn):
        self.fn, self.rows, self.types = fn, [], set()

    def __call__(self, rows):
        self.rows.append(rows.shape[0])
        self.types.add((type(rows), rows.dtype, rows.flags.c_contiguous))
        return self.fn(rows)


@pytest.mark.parametrize("link", ["identity", "logit"])
def test_logistic_regression_exact_enumeration_equals_shap(cancer, link):
    """8 of the 30 features vary (the others equal the background): every coalition is evaluated by both."""
    shap = pytest.importorskip("shap", reason="shap is a test extra: pip install shap")
    model, rows, x = cancer
    bg = np.repeat(x[:1], 4, 0)
    bg[:, :8] = rows[:4, :8]  # 4 background rows differing in the first 8 features only
    x = np.concatenate((x[:, :8], np.repeat(bg[:1, 8:], len(x), 0)), 1)  # M = 8: 254 coalitions, all evaluated
    ours = KernelExplainer(model.predict_proba, bg, link=link, seed=0).shap_values(x, nsamples=300, silent=True)
    theirs = shap.KernelExplainer(model.predict_proba, bg, link=link).shap_values(x, nsamples=300, silent=True)
    assert ours.shape == np.asarray(theirs).shape == (5, 30, 2)
    np.testing.assert_allclose(ours, theirs, atol=1e-10)
    assert not ours[:, 8:].any()


def test_logistic_regression_drawn_coalitions_efficiency(cancer):
    """30 varying features, coalitions drawn: sum(phi) = f(x) - E[f(background)], every row and class."""
    model, bg, x = cancer
    explainer = KernelExplainer(model.predict_proba, bg, seed=1)
    phi = explainer.shap_values(x, nsamples=500, l1_reg=False, silent=True)
    np.testing.assert_allclose(phi.sum(1) + explainer.expected_value, model.predict_proba(x), atol=1e-10)
    np.testing.assert_allclose(explainer.expected_value, model.predict_proba(bg).mean(0), atol=1e-12)


def test_whole_coalitions_in_few_large_numpy_calls(cancer):
    """Every call is numpy float64 rows, whole coalitions of the 40 background rows; a fixed size is kept."""
    model, bg, x = cancer
    timed = Counted(model.predict_proba)
    first = KernelExplainer(timed, bg, seed=2).shap_values(x, nsamples=1000, l1_reg=False, silent=True)
    coalition_rows = timed.rows[2:]  # after the background's and the rows' own calls
    assert timed.rows[:2] == [40, 5] and sum(coalition_rows) == 5 * 1000 * 40
    assert all(r % 40 == 0 for r in coalition_rows)
    assert len(coalition_rows) <= 5 * 1000 * 40 // (START_ROWS // 40 * 40) + 1  # never under START_ROWS a call
    assert timed.types == {(np.ndarray, np.dtype(np.float64), True)}
    fixed = Counted(model.predict_proba)
    again = KernelExplainer(fixed, bg, seed=2, batch_size=300).shap_values(x, nsamples=1000, l1_reg=False, silent=True)
    assert fixed.rows[2:] == [300 * 40] * 16 + [200 * 40]  # 5000 coalitions, 300 a call
    np.testing.assert_allclose(first, again, atol=1e-12)


def test_later_calls_go_on_timing_then_keep_the_size(cancer):
    _, bg, x = cancer
    coef = np.linspace(-1, 1, 30) / bg.std(0)
    timed = Counted(lambda v: v @ coef)
    explainer = KernelExplainer(timed, bg, seed=3, batch_size="measure")
    for _ in range(4):  # about 9500 coalitions time every size up to the cap
        explainer.shap_values(x, nsamples=1000, l1_reg=False, silent=True)
        if explainer._tuner is not None and explainer._tuner.best is not None:
            break
    assert explainer._tuner is not None
    chosen, calls = explainer._tuner.best, len(timed.rows)
    assert chosen is not None and START_ROWS // 40 <= chosen <= 1024  # 1024: the CPU rule's 16 MiB of rows
    explainer.shap_values(x[:2], nsamples=1000, l1_reg=False, silent=True)
    later = timed.rows[calls + 1 :]  # after the rows' own call
    assert later[:-1] == [chosen * 40] * (len(later) - 1) and sum(later) == 2 * 1000 * 40


def test_non_finite_outputs_are_named(cancer):
    _, bg, x = cancer

    def nan_off_the_data(rows):
        out = np.ones((rows.shape[0], 2))
        out[(rows != bg[0]).any(1) & (rows != x[0]).any(1)] = np.nan  # finite on the background and the rows only
        return out

    with pytest.raises(ValueError, match="finite"):
        KernelExplainer(nan_off_the_data, bg[:1]).shap_values(x[:1], nsamples=100, silent=True)


def test_a_model_error_names_the_rows_it_was_sent(cancer):
    from torchlime import ModelCallError

    _, bg, x = cancer

    def fails_on_coalitions(rows):
        if rows.shape[0] > len(bg):
            raise RuntimeError("boom")
        return rows[:, 0]

    explainer = KernelExplainer(fails_on_coalitions, bg, batch_size=10)
    with pytest.raises(ModelCallError, match=r"boom.*float64 tensor of shape \(400, 30\)"):
        explainer.shap_values(x[:1], nsamples=100, silent=True)


def test_the_tuner_stops_where_a_size_is_slower_and_keeps_the_fastest():
    tuner = ChunkTuner(100, cap=10_000)
    per_coalition = {40: 1.0, 60: 0.9, 90: 0.8, 135: 0.85, 202: 3.0, 303: 3.0}  # a library going multi-threaded
    sizes = []
    while tuner.best is None:
        size = tuner.next(10**6)
        sizes.append(size)
        tuner.record(size, per_coalition[size] * size)
    grown = [s for s in (60, 90, 135, 202, 303) for _ in range(TIMINGS)]
    assert tuner.best == 90 and sizes == [40] * (TIMINGS + 1) + grown  # the first chunk untimed
    assert tuner.next(10**6) == 90 and tuner.next(7) == 7
    noisy = ChunkTuner(100, cap=90)  # within GAIN of the fastest: growth goes on to the cap
    while noisy.best is None:
        size = noisy.next(10**6)
        noisy.record(size, size * (1 + GAIN / 2 if size == 60 else 1.0))
    assert noisy.best == 40
    assert ChunkTuner(100, cap=512, best=7).next(100) == 7 and ChunkTuner(10**6, cap=512).next(100) == 1


@pytest.mark.parametrize("block", [2**16, 3 * 30 * 5])  # one block; blocks of 3 coalitions and a short last one
@pytest.mark.parametrize("n", [3, FILL_FROM + 5])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.bool_])
def test_coalition_rows_are_np_where_s(n, dtype, block, monkeypatch):
    """Both builds (np.where below FILL_FROM background rows, the filled tile from it, in cache-sized blocks of
    coalitions) copy the same values."""
    monkeypatch.setattr(_shap_host, "BLOCK_VALUES", block)
    rs = np.random.RandomState(0)
    masks = rs.rand(7, 5) < 0.5
    x, bg = rs.normal(size=(7, 5)).astype(dtype), rs.normal(size=(n, 5)).astype(dtype)
    if dtype != np.bool_:
        x[0, 1], x[1, 2], bg[0, 3] = np.nan, -0.0, -0.0
    out, ref = coalition_rows(masks, x, bg), np.where(masks[:, None, :], x[:, None, :], bg)
    assert out.flags.c_contiguous and out.shape == (7, n, 5) and out.dtype == ref.dtype
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(ref))


def test_default_chunks_are_fixed_so_calls_repeat_to_the_bit(cancer):
    """Without ``batch_size`` every call of a numpy model is cut the same way (the CPU chunk rule's 16 MiB of
    rows), so the same call gives the same bits, first and later, whatever the machine's timings."""
    from torchlime.stages.forward.chunking import cpu_rule

    _, bg, x = cancer
    coef = np.linspace(-1, 1, 30) / bg.std(0)
    model = Counted(lambda v: v @ coef)
    explainer = KernelExplainer(model, bg, seed=3)
    first = explainer.shap_values(x[:3], nsamples=500, l1_reg=False, silent=True)
    calls = len(model.rows)
    again = KernelExplainer(model, bg, seed=3).shap_values(x[:3], nsamples=500, l1_reg=False, silent=True)
    assert np.array_equal(np.asarray(first), np.asarray(again)) and explainer._tuner is None
    per_call = cpu_rule(((40, 30), "torch.float64", "shap")) * 40  # whole coalitions of the 40 background rows
    assert model.rows[:calls] == model.rows[calls:] and max(model.rows) == per_call


def test_rows_built_ahead_are_the_chunks_in_order(cancer):
    """With fixed sizes the next chunk is built on a worker thread while the model runs the current one: the
    model still gets every coalition's rows once, in order, and the same means as one chunk at a time."""
    _, bg, x = cancer
    coef = np.linspace(-1, 1, 30) / bg.std(0)
    seen: list[np.ndarray] = []

    def model(rows):
        seen.append(rows.copy())
        return rows @ coef

    call = dict(nsamples=300, l1_reg=False, silent=True)
    ahead = KernelExplainer(model, bg, seed=5, batch_size=7).shap_values(x[:2], **call)
    chunks, seen[:] = list(seen), []
    one_call = KernelExplainer(model, bg, seed=5, batch_size=10**6).shap_values(x[:2], **call)
    coalitions = seen[-1]  # one call for them all, after the background's and the rows' own calls
    assert len(seen) == 3 and len(chunks) > 4 and np.array_equal(np.concatenate(chunks)[-len(coalitions) :], coalitions)
    np.testing.assert_array_equal(np.asarray(ahead), np.asarray(one_call))


def test_a_model_error_with_a_chunk_built_ahead_is_raised(cancer):
    """The model fails on its third chunk while the fourth is being built: its error comes out, once."""
    from torchlime import ModelCallError

    _, bg, x = cancer
    calls = [0]

    def fails_later(rows):
        calls[0] += 1
        if calls[0] == 5:  # after the background's and the rows' own calls and two chunks
            raise RuntimeError("third chunk")
        return rows[:, 0]

    with pytest.raises(ModelCallError, match="third chunk"):
        KernelExplainer(fails_later, bg, batch_size=5).shap_values(x[:1], nsamples=200, silent=True)
    assert calls[0] == 5


def test_the_models_blas_leaves_the_row_builder_a_core(cancer, monkeypatch):
    """While the rows of the next chunk are built beside it, the model's BLAS uses at most the other cores, and
    its setting is restored after; the values are those of an unlimited call."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import contextlib
    import os

    model, bg, x = cancer

    def blas_threads():
        return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]

    seen = []

    def recording(rows):
        if rows.shape[0] == 5 * len(bg):  # a chunk of 5 coalitions (the background's own calls come first)
            seen.append(max(blas_threads(), default=1))
        return model.predict_proba(rows)

    before = blas_threads()
    call = dict(nsamples=200, l1_reg=False, silent=True)
    limited = KernelExplainer(recording, bg, seed=2, batch_size=5).shap_values(x[:2], **call)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert len(seen) > 3 and max(seen) <= max(1, cores - 1) and blas_threads() == before
    monkeypatch.setattr(_shap_host, "blas_beside_builder", contextlib.nullcontext)
    free = KernelExplainer(model.predict_proba, bg, seed=2, batch_size=5).shap_values(x[:2], **call)
    np.testing.assert_array_equal(np.asarray(limited), np.asarray(free))
