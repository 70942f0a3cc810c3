"""Named bundles of defaults that reproduce other LIME implementations.

A preset fills every keyword the caller did not pass; keywords passed
explicitly always win. ``ENGINE`` holds torchlime's own defaults.
"""
from __future__ import annotations

from typing import Any, Optional

from .sampling import BernoulliSampler, UniformCountSampler
from .surrogate import Lasso, Ridge
from .weighting import ExponentialKernel


class _Unset:
    """Marks a keyword the caller did not pass."""

    def __repr__(self) -> str:
        return "<default>"


UNSET: Any = _Unset()

ENGINE: dict[str, Any] = dict(
    target=None, n_samples=1000, baseline=0.0, sampler=BernoulliSampler(0.5),
    kernel=ExponentialKernel(width=0.25), surrogate=Ridge(alpha=1.0),
)

PRESETS: dict[str, dict[str, Any]] = {
    # lime.lime_image.LimeImageExplainer: Bernoulli(1/2) masks, hidden superpixels take
    # their mean colour, cosine distance on the masks, sqrt(exp(-d²/0.25²)), Ridge(alpha=1), top 5 labels
    "lime": dict(target="top5", n_samples=1000, baseline="mean", sampler=BernoulliSampler(0.5),
                 kernel=ExponentialKernel(width=0.25), surrogate=Ridge(alpha=1.0)),
    # lime.lime_text.LimeTextExplainer: remove k ~ U{1..D} words, cosine x100, width 25, 5000 samples
    "lime_text": dict(target=None, n_samples=5000, baseline=0.0, sampler=UniformCountSampler(),
                      kernel=ExponentialKernel(width=25.0, scale=100.0), surrogate=Ridge(alpha=1.0)),
    # captum.attr.Lime: 25 samples, baseline 0, exp(-d²/2) on input-space cosine, Lasso(alpha=0.01)
    "captum": dict(target=None, n_samples=25, baseline=0.0, sampler=BernoulliSampler(0.5),
                   kernel=ExponentialKernel(width=1.0, space="input"), surrogate=Lasso(alpha=0.01)),
}


def apply_preset(preset: Optional[str], given: dict[str, Any],
                 extra: Optional[dict[str, dict[str, Any]]] = None) -> dict[str, Any]:
    """Resolve keywords: explicit > preset (+ modality ``extra``) > engine defaults.

    Raises:
        ValueError: for an unknown preset name.
    """
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"`preset` must be None or one of {list(PRESETS)}, got {preset!r}")
    base = dict(ENGINE)
    if preset is not None:
        base.update(PRESETS[preset])
        if extra and preset in extra:
            base.update(extra[preset])
    return {k: (base.get(k) if v is UNSET else v) for k, v in given.items()}
