"""``explain_series``: LIME for multivariate time series (B, C, T) in one call (the ``Series`` modality)."""

from __future__ import annotations

from typing import Union

import torch
from typing_extensions import Unpack

from torchlime.engine import Call, Explanation, documented, explain_with
from torchlime.engine.config import ExplainOptions
from torchlime.series._series import Series, SeriesSegments
from torchlime.typing import UNSET, Model, NSamples, Seed, TargetSpec, Unset


@documented
def explain_series(  # noqa: D417 (target, n_samples, generator: described on ``Call``, added by ``documented``)
    model: Model,
    series: torch.Tensor,
    *,
    segments: SeriesSegments = "window",
    n_windows: int = 10,
    target: Union[TargetSpec, Unset] = UNSET,
    n_samples: Union[NSamples, Unset] = UNSET,
    generator: Seed = None,
    **options: Unpack[ExplainOptions],
) -> Explanation:
    """Explain a model of multivariate time series with LIME over windows, channels or both.

    Args:
        model: callable on (c, C, T) batches returning scores (c, K) or (c,).
        series: float (B, C, T) series (C channels of T steps), given to the model as they are.
        segments: "window", "channel" or "window_channel" (``Series``).
        n_windows: time windows, 1..T (``Series``).
        **options: the engine's options (``ExplainOptions``) but ``perturb_fn`` and
            ``additional_forward_args``. For series, ``baseline`` is what hidden steps become:
            ``SeriesFill("mean")`` (the default), ``"interpolate"``, ``"noise"`` or ``"shuffle"``
            (``SeriesFill``), or an engine fill (a number, a (B, C, T) tensor, ...).

    Returns:
        ``Explanation`` with coef (B, T, F); ``info`` (``meta["series"]``) records the windows.

    Raises:
        TypeError / ValueError: series that are not float (B, C, T), a bad ``segments`` or ``n_windows``
            (named, before any model call), and what ``torchlime.explain`` raises.

    Example:
        >>> model = lambda x: x[:, 1, 8:12].mean(1)  # looks at channel 1, steps 8..11 only
        >>> x = torch.randn(2, 3, 20)
        >>> x[:, 1, 8:12] += 3.0
        >>> exp = explain_series(model, x, segments="window_channel", n_windows=5, n_samples=200)
        >>> int(exp.top_features(1)[0][0, 0, 0])  # channel 1, window 2: 1 * 5 + 2
        7
    """
    modality = Series(segments, n_windows)
    return explain_with(model, series, modality, Call(target, n_samples, generator), options, "explain_series")
