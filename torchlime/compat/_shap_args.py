"""``KernelExplainer``'s arguments checked as shap takes them: ``l1_reg``, ``nsamples``, ``seed``."""

from __future__ import annotations

import numbers
from typing import Optional, Union, cast

import numpy as np

from torchlime._util.checks import describe
from torchlime.compat._shap_fit import Rule

Seed = Union[int, np.random.RandomState, np.random.Generator, None]


def rule(l1_reg: object) -> Union[Rule, str]:
    """``l1_reg`` checked: False, ("num_features", k), "aic", "bic", "auto" or a Lasso alpha > 0."""
    number = isinstance(l1_reg, numbers.Real) and not isinstance(l1_reg, (bool, np.bool_))
    alpha = float(cast(float, l1_reg)) if number else float("nan")
    if l1_reg is False or alpha == 0:
        return False
    if isinstance(l1_reg, str):
        if l1_reg in ("aic", "bic", "auto"):
            return l1_reg
        inner = l1_reg[len("num_features(") : -1] if l1_reg.startswith("num_features(") and l1_reg[-1:] == ")" else ""
        if inner.strip().isdigit() and int(inner) >= 1:
            return ("num_features", int(inner))
    elif np.isfinite(alpha) and alpha > 0:
        return alpha
    raise ValueError(
        f"`l1_reg` must be 'num_features(k)' (k >= 1), 'aic', 'bic', 'auto', False or a Lasso alpha > 0 "
        f"(as shap takes it), got {l1_reg!r}"
    )


def count(nsamples: object) -> Optional[int]:
    """``nsamples`` checked: None for "auto", else an int >= 1."""
    if isinstance(nsamples, str) and nsamples == "auto":
        return None
    if isinstance(nsamples, (float, np.floating)) and float(nsamples).is_integer():
        nsamples = int(nsamples)  # 100.0, as shap takes it
    if isinstance(nsamples, (int, np.integer)) and not isinstance(nsamples, bool) and nsamples >= 1:
        return int(nsamples)
    raise ValueError(f"`nsamples` must be 'auto' or an int >= 1 (model evaluations per row), got {nsamples!r}")


def check_seed(seed: object) -> None:
    """``seed`` checked: None, an int >= 0, or a numpy RandomState / Generator."""
    if seed is None or isinstance(seed, (np.random.RandomState, np.random.Generator)):
        return
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        return
    raise TypeError(f"`seed` must be None, an int >= 0 or a numpy RandomState / Generator, got {describe(seed)}")


def seed_value(seed: object) -> int:
    """An int seed from ``seed``: itself, a draw of a numpy generator, or (None) of numpy's global one."""
    check_seed(seed)
    if isinstance(seed, (int, np.integer)):
        return int(seed)
    if isinstance(seed, np.random.RandomState):
        return int(seed.randint(0, 2**62, dtype=np.int64))
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(0, 2**62))
    return int(np.random.randint(0, 2**62, dtype=np.int64))
