"""Plain-data descriptions of ``explain_dataset``'s arguments, for ``index.json``.

A run's arguments are written as JSON so that a resumed run can tell whether it is asked
for the same explanations: numbers, strings and bools stay as they are; tensors become
their shape, dtype and the SHA-256 of their bytes; models (``nn.Module``, TorchScript)
become their class and the SHA-256 of their ``state_dict``; functions their qualified
name; dataclasses (samplers, kernels, surrogates) their class and fields; anything else
its ``repr`` with memory addresses removed (they change between processes).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import re
from typing import Mapping, Optional, Protocol, Sequence, Union

import torch

from torchlime.targets.base import Target

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
#: a description: JSON-ready plain data
Plain = Union[None, bool, int, float, str, Sequence["Plain"], Mapping[str, "Plain"]]


class Digest(Protocol):
    """A running hash (``hashlib.sha256()``)."""

    def update(self, data: bytes, /) -> None:
        """Feed ``data``."""

    def hexdigest(self) -> str:
        """The digest so far, in hex."""


def qualified_name(obj: object) -> str:
    """``module.qualname`` of a function or class (of the object's class otherwise)."""
    target = obj if hasattr(obj, "__qualname__") else type(obj)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', type(obj).__name__)}"


def tensor_sha256(tensor: torch.Tensor, digest: Optional[Digest] = None) -> str:
    """SHA-256 of a tensor's dtype, shape and bytes (copied to the CPU); feeds ``digest`` if given."""
    digest = hashlib.sha256() if digest is None else digest
    flat = tensor.detach().cpu().contiguous().reshape(-1)
    digest.update(f"{flat.dtype}{tuple(tensor.shape)}".encode())
    if flat.numel():
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def describe_model(model: object) -> dict[str, str]:
    """The class name of ``model`` and, for modules, the SHA-256 of its ``state_dict``.

    The name is the ``__qualname__``, without the module, which is ``__main__`` in a script and the
    module's name when imported; the digest covers names, dtypes, shapes and bytes: the weights are
    what identify a model.

    Example:
        >>> d = describe_model(torch.nn.Linear(2, 1))
        >>> d["type"], len(d["state_sha256"])
        ('Linear', 64)
    """
    if isinstance(model, torch.nn.Module):
        digest = hashlib.sha256()
        for name, value in model.state_dict().items():
            digest.update(name.encode())
            if isinstance(value, torch.Tensor):
                tensor_sha256(value, digest)
            else:
                digest.update(repr(value).encode())
        return {"type": type(model).__qualname__, "state_sha256": digest.hexdigest()}
    return {"type": getattr(model, "__qualname__", type(model).__qualname__)}


def describe_value(value: object) -> Plain:  # noqa: C901
    """A JSON-ready description of one argument (see the module docstring).

    Example:
        >>> describe_value({"n_samples": 64, "baseline": torch.zeros(2)})["baseline"]["tensor"]
        [2]
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, torch.Tensor):
        return {"tensor": list(value.shape), "dtype": str(value.dtype), "sha256": tensor_sha256(value)}
    if isinstance(value, (list, tuple)):
        return [describe_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): describe_value(v) for k, v in value.items()}
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    if isinstance(value, torch.nn.Module):
        return describe_model(value)
    if isinstance(value, functools.partial):
        return {
            "partial": describe_value(value.func),
            "args": describe_value(list(value.args)),
            "keywords": describe_value(dict(value.keywords)),
        }
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            "type": qualified_name(value),
            "fields": {f.name: describe_value(getattr(value, f.name)) for f in dataclasses.fields(value)},
        }
    if isinstance(value, Target):  # a structured target: its arguments, so that another one is another run
        return {"type": qualified_name(value), "fields": {k: describe_value(v) for k, v in vars(value).items()}}
    if isinstance(value, type) or (callable(value) and hasattr(value, "__qualname__")):
        return qualified_name(value)
    if hasattr(value, "__array__") and hasattr(value, "shape"):  # NumPy arrays and the like
        return describe_value(torch.as_tensor(value))
    text = repr(value)
    return qualified_name(value) if _ADDRESS.search(text) else text


def fingerprint(arguments: Mapping[str, object]) -> str:
    """SHA-256 of the canonical JSON of ``arguments`` (ties every shard to its run)."""
    return hashlib.sha256(json.dumps(arguments, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def input_fingerprint(x: torch.Tensor) -> str:
    """SHA-256 of one input's shape, dtype and bytes.

    Ties a result folder to its data set (the first input is compared when a run resumes).
    """
    flat = x.detach().to("cpu").contiguous().reshape(-1)
    h = hashlib.sha256(f"{tuple(x.shape)} {x.dtype}".encode())
    h.update(flat.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def differences(stored: Mapping[str, object], given: Mapping[str, object]) -> list[str]:
    """``"name: stored X, given Y"`` for every argument that differs (nested settings one by one).

    Example:
        >>> differences({"generator": 0, "call": {"n_samples": 64}}, {"generator": 0, "call": {"n_samples": 32}})
        ['n_samples: stored 64, given 32']
    """

    def short(v: object) -> str:
        return "(not given)" if v is _MISSING else json.dumps(v, sort_keys=True)[:120]

    def fields(v: object) -> object:
        same_kind = isinstance(v, dict) and isinstance(v.get("fields"), dict)
        return v["fields"] if same_kind else v  # type: ignore[index]

    out = []
    for key in sorted(set(stored) | set(given)):
        a, b = stored.get(key, _MISSING), given.get(key, _MISSING)
        if key == "modality" and isinstance(a, dict) and isinstance(b, dict) and a.get("type") == b.get("type"):
            a, b = fields(a), fields(b)
        if key in _NESTED and isinstance(a, dict) and isinstance(b, dict):
            for sub in sorted(set(a) | set(b)):
                x, y = a.get(sub, _MISSING), b.get(sub, _MISSING)
                if x != y:
                    out.append(f"{sub}: stored {short(x)}, given {short(y)}")
        elif a != b:
            out.append(f"{key}: stored {short(a)}, given {short(b)}")
    return out


_MISSING = object()
#: arguments whose entries are compared one by one
_NESTED = ("explainer", "modality", "call", "explain_kwargs")
