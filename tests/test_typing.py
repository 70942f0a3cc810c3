"""``torchlime.typing``: the Literal names equal what the API accepts, and the aliases resolve.

Each ``Literal`` is compared with the table the engine reads (the registry, the presets, the fills,
...), so a name added to one and not the other fails here; the names are also run through the
resolvers, and a name outside them is refused.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import typing
from pathlib import Path

import pytest
import torch

import torchlime
import torchlime.typing as tt
from torchlime import _backend
from torchlime.accel import ACCELERATE
from torchlime.engine.presets import PRESETS, SCOPES, check_preset
from torchlime.engine.registry import KERNELS, SAMPLERS, SURROGATES, resolve_kernel, resolve_sampler, resolve_surrogate
from torchlime.methods.feature_selection import METHODS
from torchlime.methods.smile import STATISTICS
from torchlime.stages.perturb.fills import NAMES, FillContext, resolve_baseline
from torchlime.stages.sampling import Sampler
from torchlime.stages.surrogate import Surrogate
from torchlime.stages.weighting import DISTANCES, SPACES, Kernel

ROOT = Path(__file__).resolve().parents[1]


def values(literal: object) -> tuple[object, ...]:
    return typing.get_args(literal)


@pytest.mark.parametrize(
    "literal, accepted",
    [
        (tt.SamplerName, tuple(SAMPLERS)),
        (tt.KernelName, tuple(KERNELS)),
        (tt.SurrogateName, tuple(SURROGATES)),
        (tt.PresetName, tuple(PRESETS)),
        (tt.FillName, NAMES),
        (tt.SmileStatistic, STATISTICS),
        (tt.AccelerateMode, tuple(m for m in ACCELERATE if m is not None)),
        (tt.PresetScope, SCOPES),
        (tt.DistanceName, DISTANCES),
        (tt.KernelSpace, SPACES),
        (tt.SelectionMethod, METHODS),
        (tt.BackendMode, _backend.MODES),
    ],
    ids=lambda v: getattr(v, "__name__", None) if not isinstance(v, tuple) else "accepted",
)
def test_literals_equal_what_the_engine_accepts(literal, accepted):
    assert values(literal) == tuple(accepted)


def test_names_resolve_and_others_are_refused():
    assert all(isinstance(resolve_sampler(n), Sampler) for n in values(tt.SamplerName))
    assert all(isinstance(resolve_kernel(n), Kernel) for n in values(tt.KernelName))
    assert all(isinstance(resolve_surrogate(n), Surrogate) for n in values(tt.SurrogateName))
    assert all(check_preset(n) == n for n in values(tt.PresetName))
    for resolver in (resolve_sampler, resolve_kernel, resolve_surrogate, check_preset):
        with pytest.raises(ValueError):
            resolver("no_such_name")


def test_fill_names_are_accepted_by_the_fills_and_the_explainer():
    x = torch.rand(2, 3, 4, 4)
    labels = (torch.arange(16).view(1, 1, 4, 4) // 4).expand(2, 1, 4, 4)
    ctx = FillContext(labels, 5, (2, 3), torch.zeros(2, dtype=torch.long), torch.arange(2))
    for name in values(tt.FillName):
        assert resolve_baseline(name, x, ctx).shape == x.shape
        torchlime.Explainer(baseline=name)
    with pytest.raises(ValueError):
        torchlime.Explainer(baseline="no_such_fill")
    with pytest.raises(ValueError):
        resolve_baseline("no_such_fill", x, ctx)


def test_accelerate_modes_and_rank_orders_are_accepted():
    for mode in values(tt.AccelerateMode):
        torchlime.Explainer(accelerate=mode)
    with pytest.raises(ValueError):
        torchlime.Explainer(accelerate="slow")
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 2))
    exp = torchlime.explain(model, torch.rand(1, 8), torch.arange(8).view(1, 8) // 2, n_samples=16)
    for by in values(tt.RankBy):
        assert exp.top_features(2, by=by)[0].shape == (1, 1, 2)
    with pytest.raises(ValueError):
        exp.top_features(2, by="rank")


def test_typing_is_a_leaf_at_run_time():
    """Only the standard library's typing and enum, and torch, run on import: nothing of torchlime."""
    tree = ast.parse((ROOT / "torchlime" / "typing.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Import):
                assert [a.name for a in sub.names] in (["torch"], ["enum"])
            elif isinstance(sub, ast.ImportFrom):
                assert sub.module in ("__future__", "typing"), sub.module


def test_aliases_are_public_and_old_names_still_import():
    assert set(tt.__all__) <= set(vars(tt))
    from torchlime.accel import CompileArg
    from torchlime.methods.adaptive import NSamples
    from torchlime.stages.features import Device
    from torchlime.stages.forward.chunking import MemorySpec
    from torchlime.stages.forward.model import Model, OutputSelector
    from torchlime.stages.forward.targets import TargetSpec
    from torchlime.stages.perturb.fills import BaselineSpec

    old = (NSamples, Device, MemorySpec, Model, OutputSelector, TargetSpec, BaselineSpec, CompileArg)
    new = (tt.NSamples, tt.Device, tt.MemorySpec, tt.Model, tt.OutputSelector, tt.TargetSpec, tt.BaselineSpec)
    assert old[:-1] == new and CompileArg == tt.CompileArg


#: the modules whose annotations are checked: the stages, the engine, the methods and the top-level ones
TOP_LEVEL = (
    "torchlime.accel",
    "torchlime.integrations.probe",
    "torchlime._backend",
    "torchlime._util.checks",
    "torchlime.typing",
)
LAYERS = ("torchlime.stages", "torchlime.engine", "torchlime.methods")
#: the notebook view names ``Explanation`` for type checkers only (``Explanation`` imports it)
SKIPPED = ("torchlime.engine.notebook",)
MODULES = sorted(
    name
    for name in (
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in (ROOT / "torchlime").rglob("*.py")
    )
    if (name.startswith(LAYERS) or name in TOP_LEVEL) and name not in SKIPPED
)


@pytest.mark.parametrize("name", MODULES)
def test_annotations_resolve_at_run_time(name):
    """``typing.get_type_hints`` works on every function, class and method (documentation tools use it)."""
    module = importlib.import_module(name)
    for obj in vars(module).values():
        if getattr(obj, "__module__", None) != name:
            continue
        members = [obj] if inspect.isfunction(obj) else []
        if inspect.isclass(obj):
            members = [obj, *(f for f in vars(obj).values() if inspect.isfunction(f))]
        for member in members:
            typing.get_type_hints(member)


#: calls of the doors with their options: the lines marked ``# error`` must be mypy's errors, and only they
OPTIONS_SNIPPET = """\
import torch

import torchlime
from torchlime.image import explain_image

model = torch.nn.Linear(4, 2)
x = torch.rand(1, 3, 8, 8)
torchlime.explain(model, x, kernel="lime", return_samples=True, n_samples=8)
explain_image(model, x, n_segments=4, surrogate="ridge", normalize=((0.5,), (0.2,)), baseline="drop")
torchlime.Explainer().explain(model, x, masks=None, softmax=True)
explain_image(model, x, kernal="lime")  # error: a misspelt option
torchlime.explain(model, x, batch_size="fast")  # error: an option of the wrong type
torchlime.Explainer().explain(model, x, kernel="lime")  # error: a setting of the explainer, not of the call
"""


@pytest.mark.slow  # a few seconds after the package's own mypy run (its cache), a minute without
def test_type_checkers_see_every_option(tmp_path, monkeypatch):
    """``**options: Unpack[ExplainOptions]``: a misspelt or mistyped option is a type error, as a keyword was."""
    from tests.helpers.typing_check import marked_lines, mypy_errors

    errors, out = mypy_errors(OPTIONS_SNIPPET, tmp_path, monkeypatch)
    assert errors == marked_lines(OPTIONS_SNIPPET), out
    assert 'Unexpected keyword argument "kernal" for "explain_image"; did you mean "kernel"?' in out
