"""lime's ``lime.wrappers.scikit_image``: ``SegmentationAlgorithm`` on torchlime's scikit-image adapter.

``SegmentationAlgorithm('quickshift', kernel_size=4, max_dist=200, ratio=0.2)`` is a function of one
(H, W, C) image returning its (H, W) integer superpixels, for ``LimeImageExplainer``'s
``segmentation_fn``; it runs ``torchlime.image.segments.skimage_segments``. Parameters that the
scikit-image function does not take are dropped, as lime drops them; lime's ``random_seed`` and
scikit-image's newer ``rng`` are passed under the name the installed scikit-image takes.
"""

from __future__ import annotations

import inspect
import types
from typing import Any, Callable, Mapping, Optional

import numpy as np
import torch
from numpy.typing import NDArray

from torchlime._util.checks import describe, require
from torchlime.image.segments import skimage_segments

__all__ = ["BaseWrapper", "SegmentationAlgorithm"]

_ALGORITHMS = ("quickshift", "felzenszwalb", "slic")
_SEED_NAMES = ("random_seed", "rng")
_CALL = "__call__"


def _takes(fn: Callable[..., object], name: str) -> bool:
    """Whether ``fn`` has a parameter called ``name``."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


class BaseWrapper:
    """lime's ``BaseWrapper``: a function and the parameters it is called with.

    Attributes:
        target_fn: the wrapped function or callable object (None: the wrapper's own ``__call__``).
        target_params: the parameters.

    Args:
        target_fn: the function.
        **target_params: its parameters.
    """

    def __init__(self, target_fn: Optional[Callable[..., Any]] = None, **target_params: Any) -> None:
        self.target_fn = target_fn
        self.target_params: dict[str, Any] = dict(target_params)

    def _check_params(self, parameters: object) -> None:
        """Raise unless every name in ``parameters`` is a parameter of the target function.

        Args:
            parameters: a dict or a list of parameter names.

        Raises:
            TypeError: ``parameters`` that is a str or not iterable, or no target and a wrapper that
                cannot be called.
            AttributeError: a target that is not callable.
            ValueError: a name the target does not take.
        """
        fn: Callable[..., Any]
        if self.target_fn is None:
            if not callable(self):
                raise TypeError("`target_fn` must be a function when the wrapper is not callable, got None")
            fn = self.__call__
        elif isinstance(self.target_fn, (types.FunctionType, types.MethodType)):
            fn = self.target_fn
        else:
            fn = getattr(self.target_fn, _CALL)  # AttributeError for a target that cannot be called, as in lime
        if isinstance(parameters, str) or not hasattr(parameters, "__iter__"):
            raise TypeError(f"`parameters` must be a dict or a list of parameter names, got {describe(parameters)}")
        for name in parameters:
            if not _takes(fn, str(name)):
                raise ValueError(f"`{name}` is not a parameter of the target function {getattr(fn, '__name__', fn)}")

    def set_params(self, **params: Any) -> None:
        """Replace the parameters (each checked against the target function).

        Args:
            **params: the new parameters.
        """
        self._check_params(params)
        self.target_params = params

    def filter_params(self, fn: Callable[..., Any], override: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
        """The parameters that ``fn`` takes, updated with ``override``.

        Args:
            fn: a function.
            override: values added or replacing those kept.

        Returns:
            The kept parameters.
        """
        kept = {k: v for k, v in self.target_params.items() if _takes(fn, k)}
        kept.update(override or {})
        return kept


class SegmentationAlgorithm(BaseWrapper):
    """lime's ``SegmentationAlgorithm``: a scikit-image segmentation with fixed parameters.

    Args:
        algo_type: "quickshift", "felzenszwalb" or "slic".
        **target_params: the scikit-image function's parameters (others are dropped).

    Raises:
        ValueError: another ``algo_type``.
    """

    def __init__(self, algo_type: str, **target_params: Any) -> None:
        if algo_type not in _ALGORITHMS:
            raise ValueError(f"`algo_type` must be one of {list(_ALGORITHMS)}, got {algo_type!r}")
        self.algo_type = algo_type
        target = getattr(require("skimage.segmentation", "image", "SegmentationAlgorithm"), algo_type)
        given = dict(target_params)
        seed = next((given.pop(k) for k in _SEED_NAMES if k in given), None)
        if seed is not None:
            given[next((k for k in _SEED_NAMES if _takes(target, k)), "random_seed")] = seed
        super().__init__(target, **given)
        self.set_params(**self.filter_params(target))

    def __call__(self, *args: Any) -> NDArray[np.int64]:
        """The superpixels of the image ``args[0]``.

        Args:
            *args: the (H, W, C) (or (H, W)) image.

        Returns:
            (H, W) integer segment ids, numbered from 0 (scikit-image's slic numbers from 1).

        Raises:
            TypeError / ValueError: an image that is not an (H, W[, C]) array of finite numbers.
        """
        image = np.asarray(args[0]) if args else None
        if image is None or image.ndim not in (2, 3) or image.dtype.kind not in "biuf":
            raise TypeError(f"`image` must be a numpy array (H, W, C) or (H, W) of numbers, got {describe(image)}")
        x = torch.from_numpy(np.ascontiguousarray(image, dtype=np.float64))
        x = x.unsqueeze(0) if x.ndim == 2 else x.permute(2, 0, 1)
        params = self.target_params
        if self.algo_type == "quickshift":
            params = {"kernel_size": 5, "max_dist": 10, "ratio": 1.0, **params}  # scikit-image's defaults
        return skimage_segments(x.unsqueeze(0), self.algo_type, **params)[0].numpy()
