"""``LimeImageExplainer``: lime's image explainer on the engine, for numpy HWC images and ``classifier_fn``."""

from __future__ import annotations

import inspect
from typing import Callable, Optional, Sequence

import numpy as np
import torch
from numpy.typing import NDArray

from torchlime._util.checks import check_positive_float, describe, require
from torchlime.compat._vocabulary import speaking
from torchlime.compat.lime._checks import check_finite_array, check_function, check_sizes, lime_advice, lime_words
from torchlime.compat.lime._common import (
    Recording,
    check_common,
    check_distance,
    one_row,
    random_state_from,
    seed_from,
    surrogate_for,
    target_for,
)
from torchlime.compat.lime._explanation import ImageExplanation
from torchlime.engine.explainer import explain
from torchlime.stages.perturb.fills import feature_mean
from torchlime.stages.sampling import BernoulliSampler
from torchlime.stages.weighting import ExponentialKernel


def quickshift(image: NDArray[np.number], seed: int) -> NDArray[np.integer]:
    """Lime's default segmentation: scikit-image's quickshift (kernel_size=4, max_dist=200, ratio=0.2).

    Args:
        image: (H, W, 3) image.
        seed: quickshift's random seed.

    Returns:
        (H, W) integer segment ids.
    """
    seg = require("skimage.segmentation", "image", "LimeImageExplainer")
    params = inspect.signature(seg.quickshift).parameters
    key = "rng" if "rng" in params else "random_seed"
    return np.asarray(seg.quickshift(image, kernel_size=4, max_dist=200, ratio=0.2, **{key: seed}))


def _check_image(image: object) -> NDArray[np.number]:
    """The image as an (H, W, C) array (a 2-D one becomes 3 grey channels, as lime's ``gray2rgb``).

    A channels-first (C, H, W) image (C of 1, 3 or 4 and a last axis that is not) is refused with the
    transpose that makes it lime's (H, W, C), before ``classifier_fn`` would get it.
    """
    tensor = isinstance(image, torch.Tensor)
    if isinstance(image, torch.Tensor):
        image = image.detach().cpu().numpy()
    if not isinstance(image, np.ndarray) or image.ndim not in (2, 3) or image.dtype.kind not in "biuf":
        raise TypeError(f"`image` must be a numpy array (H, W, C) or (H, W) of numbers, got {describe(image)}")
    if image.size == 0:
        raise ValueError(f"`image` must have at least one pixel and one channel, got shape {image.shape}")
    if image.ndim == 3 and image.shape[0] in (1, 3, 4) and image.shape[-1] not in (1, 3, 4):
        how = "image.permute(1, 2, 0).numpy()" if tensor else "image.transpose(1, 2, 0)"
        raise ValueError(
            f"`image` must be (H, W, C), channels last, as lime takes images, got shape {image.shape}, which is "
            f"channels first (C, H, W): pass {how}"
        )
    check_finite_array(image, "image")
    return np.stack([image] * 3, -1) if image.ndim == 2 else image


def _check_hide_color(hide_color: object, channels: int) -> None:
    """``hide_color``: None, or one finite number or ``channels`` of them."""
    if hide_color is None:
        return
    try:
        value = np.asarray(hide_color, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"`hide_color` must be None or a number per channel, got {describe(hide_color)}") from None
    if value.ndim > 1 or value.size not in (1, channels) or not np.isfinite(value).all():
        raise ValueError(
            f"`hide_color` must be None, or 1 or {channels} finite numbers (one per channel), got {hide_color!r}"
        )


def _fill(image: NDArray[np.number], segments: NDArray[np.integer], hide_color: object) -> torch.Tensor:
    """Lime's ``fudged_image`` (1, H, W, C) in float64: each segment's mean colour, or ``hide_color``."""
    x = torch.from_numpy(image).double().unsqueeze(0)
    if hide_color is not None:
        return torch.full_like(x, 0.0) + torch.as_tensor(hide_color, dtype=torch.float64)
    labels = torch.from_numpy(np.unique(segments, return_inverse=True)[1].reshape(segments.shape)).long()
    mean = feature_mean(x, labels.view(1, *segments.shape, 1), int(labels.max()) + 1)
    # lime writes the means into a copy of the image: an integer image truncates them
    return mean.trunc() if image.dtype.kind in "biu" else mean


class LimeImageExplainer:
    """lime's ``LimeImageExplainer``: the same constructor and ``explain_instance``, batched underneath.

    Args:
        kernel_width: width of lime's kernel on the cosine distance of the masks (lime: 0.25).
        kernel: must be None (lime's exponential kernel).
        verbose: accepted for lime's signature (nothing is printed).
        feature_selection: "auto", "forward_selection", "highest_weights", "lasso_path" or "none".
        random_state: None (numpy's global generator), an int or a ``numpy.random.RandomState``.
    """

    def __init__(
        self,
        kernel_width: float = 0.25,
        kernel: object = None,
        verbose: bool = False,
        feature_selection: str = "auto",
        random_state: object = None,
    ) -> None:
        check_common(kernel, feature_selection, verbose)
        self.kernel_width = check_positive_float(kernel_width, "kernel_width")
        self.feature_selection = feature_selection
        self.random_state = random_state_from(random_state)

    def _draw(self, high: int) -> int:
        rs = self.random_state
        if isinstance(rs, np.random.Generator):  # numpy's new generators draw with ``integers``
            return int(rs.integers(0, high))
        return int(np.random.randint(0, high) if rs is None else rs.randint(0, high))

    def explain_instance(  # noqa: PLR0913
        self,
        image: NDArray[np.number],
        classifier_fn: Callable[[NDArray[np.number]], object],
        labels: Sequence[int] = (1,),
        hide_color: object = None,
        top_labels: Optional[int] = 5,
        num_features: int = 100000,
        num_samples: int = 1000,
        batch_size: int = 10,
        segmentation_fn: Optional[Callable[[NDArray[np.number]], NDArray[np.integer]]] = None,
        distance_metric: str = "cosine",
        model_regressor: object = None,
        random_seed: Optional[int] = None,
        progress_bar: bool = True,
    ) -> ImageExplanation:
        """Explain one image as lime does, returning lime's ``ImageExplanation``.

        Args:
            image: (H, W, C) or (H, W) numpy image (any dtype; the classifier gets batches of it).
            classifier_fn: a function over (c, H, W, C) numpy batches returning (c, K) probabilities.
            labels: the classes to explain when ``top_labels`` is None.
            hide_color: the colour of hidden superpixels (None: each superpixel's mean colour).
            top_labels: explain the K most probable classes (lime: 5).
            num_features: superpixels per label (lime: all of them).
            num_samples: N, the instance included.
            batch_size: images per ``classifier_fn`` call.
            segmentation_fn: image -> (H, W) integer segments (default: lime's quickshift).
            distance_metric: "cosine" (lime's) or "euclidean", on the masks.
            model_regressor: None (``Ridge(alpha=1)``), or scikit-learn's Ridge / LinearRegression / Lasso.
            random_seed: the segmentation's seed (default: drawn from ``random_state``, as lime).
            progress_bar: show a progress bar.

        Returns:
            lime's ``ImageExplanation`` (``local_exp``, ``intercept``, ``score``, ``top_labels``,
            ``get_image_and_mask``); ``.result`` is torchlime's ``Explanation``.

        Raises:
            TypeError / ValueError: naming lime's argument, before ``classifier_fn`` runs (an empty or
                non-finite ``image``, ``num_samples`` < 2, negative ``labels``, fewer than 2
                superpixels, ...), or once its output shows it (``labels`` beyond its classes, NaN/inf
                or misshapen scores).
        """
        img = _check_image(image)
        check_function(classifier_fn, "classifier_fn")
        num_samples, num_features, batch_size = check_sizes(num_samples, num_features, batch_size)
        target = target_for(labels, top_labels)
        _check_hide_color(hide_color, img.shape[-1])
        distance = check_distance(distance_metric)
        if random_seed is None:
            random_seed = self._draw(1000)
        segments = np.asarray(segmentation_fn(img) if segmentation_fn is not None else quickshift(img, random_seed))
        if segments.shape != img.shape[:2] or segments.dtype.kind not in "iu":
            raise ValueError(
                f"`segmentation_fn` must return integer segments of shape {img.shape[:2]}, "
                f"got {segments.dtype} {segments.shape}"
            )
        ids = np.unique(segments)
        if len(ids) < 2:
            made = "`segmentation_fn`" if segmentation_fn is not None else "the default quickshift segmentation"
            raise ValueError(
                f"{made} must split the image into at least 2 superpixels to explain, got {len(ids)}"
                + ("" if segmentation_fn is not None else ": pass a `segmentation_fn` that splits it finer")
            )
        dtype = img.dtype
        convert = lambda chunk: chunk.cpu().numpy().astype(dtype, copy=False)
        rec = Recording(classifier_fn, convert, labels=[] if isinstance(target, str) else target)
        x = torch.from_numpy(img).double().unsqueeze(0)
        with speaking(lime_words("image", "classifier_fn", "superpixels"), lime_advice("classifier_fn")):
            result = explain(
                rec,
                x,
                torch.from_numpy(segments.astype(np.int64)).view(1, *segments.shape, 1),
                baseline=_fill(img, segments, hide_color),
                target=one_row(target),
                n_samples=num_samples,
                sampler=BernoulliSampler(0.5),
                kernel=ExponentialKernel(width=self.kernel_width, distance=distance),
                surrogate=surrogate_for(model_regressor, self.feature_selection, num_features, num_samples),
                generator=seed_from(self.random_state),
                batch_size=batch_size,
                progress=bool(progress_bar),
            )
        keep = len(ids) if self.feature_selection == "none" else num_features
        sparse = self.feature_selection == "lasso_path"
        exp = ImageExplanation(img, segments, result, ids.tolist(), keep, 0 if top_labels else -1, sparse)
        if top_labels:
            exp.top_labels = [int(t) for t in result.target[0].tolist()]
        return exp
