"""Multivariate time series (B, C, T): LIME over time windows, channels or (channel, window) cells.

``Series`` is the modality (``Explainer().explain(model, x, Series(...))``): its features; the fill
is the call's ``baseline=``, by default each channel's mean, or ``SeriesFill("interpolate" | "noise" |
"shuffle")``; ``explain_series`` is the same in one call; ``plot_series`` draws the result. The metrics
(``torchlime.metrics``) take its explanations.
"""

from torchlime.series._explain import explain_series
from torchlime.series._series import Series, SeriesFill, SeriesInfo
from torchlime.series.viz import plot_series

__all__ = ["Series", "SeriesFill", "SeriesInfo", "explain_series", "plot_series"]
