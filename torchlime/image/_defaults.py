"""The default segment count of an image explanation, from the sample budget and the image size.

A LIME surrogate fits F coefficients from N samples; with too few samples per feature the fit is weak
(lime's users quote "at least ~10 samples per superpixel", lime issue #524). On the embedded demo model
(64 x 64 images, ``benchmarks/bench_default_segments.py``, results in
``benchmarks/results/default_segments_cpu.json``) 40 samples per segment (25 segments for N = 1000) give a
median weighted R² of 0.98 and a median top-3 coverage of the planted object of 0.98, while 20 per
segment (50 segments) drop the coverage to 0.75 and 10 per segment (100) to 0.46, so the default is

    n_segments = clamp(N // SAMPLES_PER_SEGMENT, MIN_SEGMENTS, MAX_SEGMENTS), at most H * W // MIN_PIXELS

(N = 1000 gives 25 segments, N = 5000 gives 100; a 16 x 16 image gets at most 4). Pass ``n_segments=``
to choose another count.
"""

from __future__ import annotations

from typing import Literal, Union

from torchlime._util.checks import check_positive_int

#: samples per segment the default aims for (four times lime #524's rule of thumb, from the measurement above)
SAMPLES_PER_SEGMENT = 40
#: the fewest segments the default gives (fewer would only say "left or right")
MIN_SEGMENTS = 8
#: the most segments the default gives
MAX_SEGMENTS = 100
#: the fewest pixels an average segment covers (8 x 8)
MIN_PIXELS = 64
#: the sample count the rule assumes when ``n_samples="auto"`` grows it as needed
AUTO_SAMPLES = 1000

SegmentCount = Union[int, Literal["auto"]]


def default_segments(n_samples: object, height: int, width: int) -> int:
    """The segment count for ``n_samples`` samples per image of ``height`` x ``width`` pixels.

    Args:
        n_samples: samples per image (an int), or "auto" (taken as ``AUTO_SAMPLES``).
        height: image height H.
        width: image width W.

    Returns:
        ``clamp(n // SAMPLES_PER_SEGMENT, MIN_SEGMENTS, MAX_SEGMENTS)``, at most ``H * W // MIN_PIXELS``
        and at least 1.

    Example:
        >>> default_segments(1000, 64, 64), default_segments(500, 64, 64), default_segments(5000, 32, 32)
        (25, 12, 16)
    """
    n = AUTO_SAMPLES if n_samples == "auto" else int(n_samples)  # type: ignore[call-overload]
    count = min(max(n // SAMPLES_PER_SEGMENT, MIN_SEGMENTS), MAX_SEGMENTS)
    return max(1, min(count, height * width // MIN_PIXELS))


def check_segment_count(n_segments: object) -> SegmentCount:
    """``n_segments`` checked: a positive int or "auto".

    Args:
        n_segments: the value given.

    Returns:
        The value.

    Raises:
        TypeError / ValueError: naming ``n_segments``, what was expected and what came.
    """
    if isinstance(n_segments, str):
        if n_segments != "auto":
            raise ValueError(f"`n_segments` must be a positive int or 'auto', got {n_segments!r}")
        return "auto"
    return check_positive_int(n_segments, "n_segments")
