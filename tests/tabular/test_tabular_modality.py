"""``Tabular``, the modality behind ``explain_tabular``: the same numbers through ``Explainer``, the typed
record on ``Explanation.info`` (sliced by ``exp[i]``, kept as plain data by files), its refusals."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from torchlime.engine import Explainer, Modality
from torchlime.engine.explanation import Explanation
from torchlime.stages.weighting import ExponentialKernel
from torchlime.tabular import Tabular, TabularInfo, conditions, default_width, explain_tabular, fit_stats

_G = torch.Generator().manual_seed(0)
TRAIN = torch.randn(120, 5, generator=_G, dtype=torch.float64)
TRAIN[:, 4] = (TRAIN[:, 4] > 0).double() + (TRAIN[:, 4] > 1).double()  # categories 0, 1, 2
X = TRAIN[:4].float()
NAMES = list("abcde")


def model(x: torch.Tensor) -> torch.Tensor:
    logit = 2.0 * x[:, 1] - x[:, 4]
    return torch.stack((-logit, logit), 1).softmax(1)


def numpy_model(rows: np.ndarray) -> np.ndarray:
    assert isinstance(rows, np.ndarray)
    return model(torch.from_numpy(rows)).numpy()


def same(a: Explanation, b: Explanation) -> None:
    for name in ("coef", "intercept", "score", "local_pred", "target"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert a.meta["tabular"] == b.meta["tabular"]


SETTINGS = {
    "discretized": dict(categorical_features=[4], feature_names=NAMES),
    "decile_stats": dict(training_data=fit_stats(TRAIN, [4], "decile"), discretizer="decile"),
    "gaussian": dict(discretize_continuous=False, categorical_features=[4]),
    "gaussian_instance": dict(
        discretize_continuous=False, sample_around_instance=True, kernel=ExponentialKernel(1.5, distance="euclidean")
    ),
    "entropy": dict(discretizer="entropy", training_labels=(TRAIN[:, 1] > 0).long()),
    "perturbed": dict(perturbed=TRAIN[torch.arange(4 * 30).remainder(120).view(4, 30)].float()),
}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_explainer_with_tabular_equals_explain_tabular(name):
    settings = dict(SETTINGS[name])
    settings.setdefault("training_data", TRAIN)
    how = {"kernel": settings.pop("kernel")} if "kernel" in settings else {}
    call = dict(generator=7, target="all")
    if "perturbed" not in settings:  # else S, the given rows per input
        call["n_samples"] = 200
    door = explain_tabular(model, X, **settings, **how, **call)
    modality = Tabular(**settings)
    assert isinstance(modality, Modality)
    same(Explainer(**how).explain(model, X, modality, **call), door)


def test_the_kernel_width_is_lime_s_kernel_spelled_as_an_exponential_kernel():
    run = dict(training_data=TRAIN, n_samples=100, generator=4)
    default = explain_tabular(model, X, **run)
    lime = explain_tabular(model, X, **run, kernel=ExponentialKernel(default_width(5), distance="euclidean"))
    same(lime, default)  # the default kernel, spelled out: the same bits
    wide = explain_tabular(model, X, **run, kernel=ExponentialKernel(9.0, distance="euclidean"))
    assert wide.info.kernel_width == 9.0 and not torch.equal(wide.coef, default.coef)
    gaussian = dict(run, discretize_continuous=False, return_samples=True)
    sq = {}  # Gaussian sampling: lime's distance on the scaled rows (not a count of levels), with this width
    for width in (1.5, 3.0):
        scaled = explain_tabular(model, X, **gaussian, kernel=ExponentialKernel(width, distance="euclidean"))
        assert scaled.info.kernel_width == width
        sq[width] = -2 * width**2 * scaled.weights.double().log()  # d², the same samples for both widths
    torch.testing.assert_close(sq[1.5], sq[3.0], rtol=1e-4, atol=1e-4)
    assert not torch.allclose(sq[1.5], sq[1.5].round(), atol=1e-3)
    assert explain_tabular(model, X, **run, kernel=ExponentialKernel(1.5)).info.kernel_width is None  # cosine


def test_a_torch_generator_gives_the_same_numbers_at_both_doors():
    door = explain_tabular(model, X, training_data=TRAIN, n_samples=150, generator=torch.Generator().manual_seed(3))
    via = Explainer().explain(model, X, Tabular(TRAIN), n_samples=150, generator=torch.Generator().manual_seed(3))
    same(via, door)


def test_preset_kernel_and_sampler_reach_the_modality():
    door = explain_tabular(model, X, training_data=TRAIN, preset="lime", kernel="lime", n_samples=100, generator=1)
    via = Explainer(preset="lime", kernel="lime").explain(model, X, Tabular(TRAIN), n_samples=100, generator=1)
    same(via, door)
    assert via.info.kernel_width is None  # the caller's kernel replaced lime's


def test_numpy_model_takes_numpy_rows_at_both_doors():
    x = X.numpy()
    door = explain_tabular(numpy_model, x, training_data=TRAIN.numpy(), n_samples=100, generator=2)
    via = Explainer().explain(
        numpy_model, torch.from_numpy(x), Tabular(TRAIN.numpy(), numpy_model=True), n_samples=100, generator=2
    )
    same(via, door)


def test_the_typed_record():
    exp = explain_tabular(model, X, training_data=TRAIN, categorical_features=[4], feature_names=NAMES, n_samples=80)
    info = exp.info
    assert isinstance(info, TabularInfo) and info.key == "tabular"
    assert info.per_input == ("levels", "instances")
    assert info.sampling == "discretized" and info.discretizer == "quartile"
    assert info.kernel_width == default_width(5) and info.feature_names == NAMES
    assert torch.equal(info.levels, fit_stats(TRAIN, [4]).levels(X))
    assert info.levels.dtype == torch.long and info.levels.shape == (4, 5)
    assert info.categorical == [4] and torch.equal(info.instances, X[:, [4]])
    assert len(info.boundaries) == 5 and info.boundaries[4] == [] and len(info.boundaries[0]) == 3
    assert info.values[4] == [0.0, 1.0, 2.0] and info.values[0] == []
    assert exp.meta["tabular"] == info.as_plain()  # existing readers of meta["tabular"] keep working
    assert exp.meta["tabular"]["levels"] == info.levels.tolist()
    assert info == info and info != TabularInfo.from_plain(info.as_plain())  # identity, never a tensor's truth


def test_sampling_names():
    g = dict(training_data=TRAIN, n_samples=40)
    assert explain_tabular(model, X, discretize_continuous=False, **g).info.sampling == "gaussian"
    exp = explain_tabular(model, X, discretize_continuous=False, sample_around_instance=True, **g)
    assert exp.info.sampling == "gaussian_instance"


@pytest.mark.parametrize("key", [1, -1, slice(1, 3)])
def test_indexing_keeps_each_inputs_record(key):
    exp = explain_tabular(model, X, training_data=TRAIN, categorical_features=[4], n_samples=80)
    part = exp[key]
    rows = range(4)[key] if isinstance(key, slice) else [range(4)[key]]
    rows = list(rows)
    assert isinstance(part.info, TabularInfo)
    assert torch.equal(part.info.levels, exp.info.levels[rows])
    assert torch.equal(part.info.instances, exp.info.instances[rows])
    assert part.info.boundaries == exp.info.boundaries and part.info.categorical == [4]
    assert part.meta["tabular"] == part.info.as_plain()
    assert conditions(part) == [conditions(exp)[r] for r in rows]


def test_conditions_fresh_and_after_save_and_load(tmp_path):
    exp = Explainer().explain(
        model, X, Tabular(TRAIN, categorical_features=[4], feature_names=NAMES), n_samples=120, generator=4
    )
    fresh = conditions(exp, categorical_names={4: ["low", "mid", "high"]})
    assert len(fresh) == 4 and {c for c, _ in fresh[0]} >= {f"e={['low', 'mid', 'high'][int(X[0, 4])]}"}
    exp.save(tmp_path / "exp.pt")
    loaded = Explanation.load(tmp_path / "exp.pt")
    # the typed record is rebuilt from the file's plain data
    assert isinstance(loaded.info, TabularInfo) and torch.equal(loaded.info.levels, exp.info.levels.cpu())
    assert conditions(loaded, categorical_names={4: ["low", "mid", "high"]}) == fresh
    assert conditions(loaded[2], k=3) == [conditions(exp, k=3)[2]]
    record = TabularInfo.from_plain(loaded.meta["tabular"])
    assert torch.equal(record.levels, exp.info.levels.cpu()) and record.feature_names == NAMES


def test_conditions_refuse_a_record_of_other_rows():
    exp = explain_tabular(model, X, training_data=TRAIN, n_samples=40)
    plain = dataclasses.replace(exp[1:], info=None, stored={"tabular": exp.meta["tabular"]})  # a file's whole record
    with pytest.raises(ValueError, match=r"`exp.stored\['tabular'\]` must describe the explanation's 3 input\(s\)"):
        conditions(plain)
    with pytest.raises(ValueError, match=r"`meta\['tabular'\]` must hold the fields of TabularInfo"):
        TabularInfo.from_plain({"levels": [[0]]})


def test_an_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError, match=r"explain_tabular\(\) got an unexpected keyword argument 'segments'"):
        explain_tabular(model, X, training_data=TRAIN, segments=None)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'n_segments'"):
        Tabular(TRAIN, n_segments=3)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'perturb_fn'"):
        explain_tabular(model, X, training_data=TRAIN, perturb_fn=None)


def test_the_modality_is_frozen_and_owns_the_values():
    modality = Tabular(TRAIN)
    with pytest.raises(dataclasses.FrozenInstanceError):
        modality.discretizer = "decile"
    assert {"perturb_fn", "normalize", "chunk_format", "additional_forward_args"} <= Tabular.owns


@pytest.mark.parametrize(
    "how,call,match",
    [
        (dict(baseline=0.5), {}, r"`baseline` must be unset for tabular data .*got float 0.5"),
        ({}, dict(normalize=([0.0], [1.0])), r"`normalize` must be None for tabular data"),
        ({}, dict(additional_forward_args=1), r"`additional_forward_args` must be None for tabular data"),
        (dict(preset="captum"), {}, r"`preset` must be None or 'lime' for tabular data"),
        ({}, dict(numpy_model="yes"), r"`numpy_model` must be True or False, got str"),
    ],
)
def test_explainer_refusals(how, call, match):
    settings = {k: call.pop(k) for k in ("numpy_model",) if k in call}
    with pytest.raises(ValueError if "numpy" not in match else TypeError, match=match):
        Explainer(**how).explain(model, X, Tabular(TRAIN, **settings), n_samples=40, **call)
