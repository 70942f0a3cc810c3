"""MODEL of the command line: a TorchScript file, an ExportedProgram file, or ``module:factory``.

* a TorchScript file (``torch.jit.save``): ``torch.jit.load``;
* an ExportedProgram file (``torch.export.save``, usually ``.pt2``): checked first (``_pt2.check_exported``:
  its pickles must load with ``weights_only=True``, its shape expressions, guards and names be plain), then
  ``torch.export.load(...).module()``, wrapped so that the engine can switch it to eval mode (a no-op: the
  graph was exported in one mode) and, when it was exported with a static batch size, fed in pieces of that
  size;
* ``module:factory`` (``package.module:name`` importable from the current folder, or
  ``path/to/file.py:name``): ``factory()`` must return an ``nn.Module``; ``--weights FILE``
  then loads a state dict with ``torch.load(FILE, weights_only=True)`` (no arbitrary pickles).

TorchScript files and ``module:factory`` run code when loaded, by design: the help and the docs say to use
only trusted ones. The kind of a file is read from its zip archive's entries before anything is unpickled,
so a state dict or a stray file given as MODEL gets a one-line explanation, not a loader's traceback.
Every failure is a ``CliError``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import sys
import warnings
import zipfile
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Optional

import torch
from torch import nn

from torchlime._util.checks import describe
from torchlime.cli._common import CliError, short_error
from torchlime.cli._pt2 import check_exported

if TYPE_CHECKING:
    from torch.export import ExportedProgram


class ExportedModel(nn.Module):
    """The module of a ``torch.export`` program, callable on batches of any size.

    Args:
        program: the ``ExportedProgram``.
    """

    def __init__(self, program: ExportedProgram) -> None:
        super().__init__()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.graph = program.module()
        self.static_batch = static_batch_size(program)

    def train(self, mode: bool = True) -> ExportedModel:
        """Record the mode only: an exported graph was traced in one mode and cannot switch."""
        self.training = mode
        return self

    def forward(self, *args: torch.Tensor) -> object:
        """Scores of a batch; with a static batch size b, in pieces of b rows (the last padded)."""
        b = self.static_batch
        if b is None or args[0].shape[0] == b:
            return self.graph(*args)
        n, outs = args[0].shape[0], []
        for i in range(0, n, b):
            piece = [a[i : i + b] for a in args]
            rows = piece[0].shape[0]
            if rows < b:
                piece = [torch.cat([p, p[-1:].expand(b - rows, *p.shape[1:])]) for p in piece]
            out = self.graph(*piece)
            if not isinstance(out, torch.Tensor):
                raise TypeError(
                    f"an exported model with a static batch size ({b}) must return a tensor, "
                    f"got {describe(out)}; export it with a dynamic batch dimension"
                )
            outs.append(out[:rows])
        return torch.cat(outs)


def static_batch_size(program: ExportedProgram) -> Optional[int]:
    """The batch size an ExportedProgram was specialised to (None when its batch dim is dynamic)."""
    user = set(program.graph_signature.user_inputs)
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in user:
            val = node.meta.get("val")
            shape = getattr(val, "shape", None)
            if shape is not None and len(shape) and isinstance(shape[0], int):
                return int(shape[0])
            return None
    return None


def archive_kind(path: Path) -> str:
    """``torchscript``, ``exported``, ``torch.save`` (a pickled object, e.g. a state dict) or ``unknown``."""
    try:
        if not zipfile.is_zipfile(path):
            with open(path, "rb") as f:
                head = f.read(2)
            return "torch.save" if head[:1] == b"\x80" else "unknown"  # a legacy (non-zip) pickle
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (OSError, zipfile.BadZipFile) as err:
        raise CliError(f"cannot read MODEL {path}: {short_error(err)}") from None
    tails = {n.split("/", 1)[-1] for n in names}
    if "archive_format" in tails or any(n.endswith("/archive_format") for n in names):
        return "exported"
    if "constants.pkl" in tails and any("/code/" in n for n in names):
        return "torchscript"
    if "data.pkl" in tails:
        return "torch.save"
    return "unknown"


def load_model(spec: str, weights: Optional[Path], device: torch.device) -> tuple[nn.Module, str]:
    """The model named by MODEL (and ``--weights``) on ``device`` in eval mode, and its kind.

    Raises:
        CliError: a file that is no model, a module or factory that cannot be found or fails,
            a factory that returns no ``nn.Module``, a state dict that does not fit.
    """
    path = Path(spec)
    if path.is_file():
        if weights is not None:
            raise CliError(
                f"--weights goes with MODEL given as module:factory; {spec} is a model file that holds its own weights"
            )
        kind = archive_kind(path)
        model = _load_file(path, kind, device)
    elif path.is_dir():
        raise CliError(f"MODEL {spec} is a folder; give a TorchScript or ExportedProgram file, or module:factory")
    elif ":" in spec:
        model, kind = _from_factory(spec), "factory"
        if weights is not None:
            load_weights(model, weights, spec)
    else:
        raise CliError(f"MODEL {spec}: no such file, and not of the form module:factory")
    try:
        model = model.to(device)
    except (RuntimeError, TypeError, NotImplementedError) as err:
        raise CliError(f"MODEL {spec} cannot be moved to {device}: {short_error(err, 300)}") from None
    return model.eval(), kind


def _load_file(path: Path, kind: str, device: torch.device) -> nn.Module:
    if kind == "exported":
        check_exported(path)  # before torch.export.load, which unpickles and evaluates what the file holds
    try:
        with warnings.catch_warnings():  # torch.jit.load's FutureWarning, export's notes: not the user's business
            warnings.simplefilter("ignore")
            if kind == "torchscript":
                jit_load: Callable[..., torch.jit.ScriptModule] = torch.jit.load  # torch leaves it unannotated
                return jit_load(str(path), map_location=device)
            if kind == "exported":
                return ExportedModel(torch.export.load(str(path)))
    except Exception as err:  # noqa: BLE001 - any loader failure is reported in one line
        raise CliError(f"MODEL {path} ({kind}) does not load: {type(err).__name__}: {short_error(err, 300)}") from None
    if kind == "torch.save":
        raise CliError(
            f"MODEL {path} is a torch.save file (a state dict?), not a model: save the model with "
            f"torch.jit.save or torch.export.save, or pass MODEL as module:factory with --weights {path}"
        )
    raise CliError(
        f"MODEL {path} is neither a TorchScript file (torch.jit.save) nor an ExportedProgram (torch.export.save)"
    )


def _import(module_name: str, spec: str) -> ModuleType:
    if module_name.endswith(".py"):
        file = Path(module_name)
        if not file.is_file():
            raise CliError(f"MODEL {spec}: no such file {module_name}")
        name = "_torchlime_factory_" + hashlib.sha1(str(file.resolve()).encode()).hexdigest()[:12]
        loader_spec = importlib.util.spec_from_file_location(name, file)
        module = importlib.util.module_from_spec(loader_spec)  # type: ignore[arg-type]
        sys.modules[name] = module
        loader_spec.loader.exec_module(module)  # type: ignore[union-attr]
        return module
    if os.getcwd() not in sys.path and "" not in sys.path:  # the console script does not add it
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(module_name)


def _from_factory(spec: str) -> nn.Module:
    module_name, _, attr = spec.rpartition(":")
    if not module_name or not attr or not all(part.isidentifier() for part in attr.split(".")):
        raise CliError(f"MODEL {spec} must be a file or module:factory (e.g. mypackage.models:build)")
    try:
        module = _import(module_name, spec)
    except CliError:
        raise
    except ModuleNotFoundError as err:
        raise CliError(
            f"MODEL {spec}: cannot import {module_name} ({short_error(err)}); run from the folder that "
            f"holds it or install it"
        ) from None
    except Exception as err:  # noqa: BLE001 - the user's module failed while importing
        raise CliError(
            f"MODEL {spec}: importing {module_name} failed: {type(err).__name__}: {short_error(err, 300)}"
        ) from None
    try:
        factory = functools.reduce(getattr, attr.split("."), module)
    except AttributeError:
        raise CliError(f"MODEL {spec}: {module_name} has no attribute {attr!r}") from None
    if not callable(factory):
        raise CliError(f"MODEL {spec}: {attr} must be a callable that returns an nn.Module, got {describe(factory)}")
    try:
        model = factory()
    except Exception as err:  # noqa: BLE001 - the user's factory failed
        raise CliError(f"MODEL {spec}: calling {attr}() failed: {type(err).__name__}: {short_error(err)}") from None
    if not isinstance(model, nn.Module):
        raise CliError(f"MODEL {spec}: the factory {attr}() must return a torch.nn.Module, got {describe(model)}")
    return model


def load_weights(model: nn.Module, weights: Path, spec: str) -> None:
    """Load a state dict file (``torch.load(..., weights_only=True)``) into ``model``, strictly.

    A Lightning checkpoint's ``state_dict`` entry is taken when the file holds one.
    """
    if not weights.is_file():
        raise CliError(f"--weights {weights}: no such file")
    kind = archive_kind(weights)
    if kind in ("torchscript", "exported"):
        raise CliError(f"--weights {weights} is a whole model ({kind}), not a state dict; give it as MODEL instead")
    if kind == "unknown":
        raise CliError(
            f"--weights {weights} is not a torch.save file (a state dict saved with "
            f"torch.save(model.state_dict(), FILE) expected)"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            state = torch.load(weights, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - unpickling errors come in many types
        why = (
            (
                "it holds objects other than tensors and plain containers, which weights_only=True refuses; save "
                "model.state_dict()"
            )
            if "Weights only load failed" in str(err)
            else short_error(err, 240)
        )
        raise CliError(f"--weights {weights} cannot be read with torch.load(weights_only=True): {why}") from None
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CliError(
            f"--weights {weights} must hold a state dict (parameter names -> tensors), got {describe(state)[:120]}"
        )
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    shapes = [
        f"{k} {tuple(state[k].shape)} vs {tuple(v.shape)}"
        for k, v in own.items()
        if k in state and tuple(state[k].shape) != tuple(v.shape)
    ]
    if missing or unexpected or shapes:
        parts = [
            f"{len(missing)} missing key(s) {missing[:4]}" if missing else "",
            f"{len(unexpected)} unexpected key(s) {unexpected[:4]}" if unexpected else "",
            f"{len(shapes)} shape mismatch(es) (file vs model): {'; '.join(shapes[:3])}" if shapes else "",
        ]
        raise CliError(f"--weights {weights} does not fit {spec}: {', '.join(p for p in parts if p)}")
    model.load_state_dict(state)
