"""sRGB in [0, 1] to CIELAB (D65), the colour space SLIC clusters in.

The same arithmetic as kornia's ``rgb_to_lab``, operation for operation (an einsum over the channels on
the CPU, a 1x1 convolution elsewhere), so its results are bit-identical to kornia's. The difference: the
colour matrix and the white point are made once per device and dtype, not on every call; on CUDA a
tensor made from Python numbers is a copy the host waits for, and SLIC runs inside every explanation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from torchlime._util.upload import upload

__all__ = ["rgb_to_lab"]

#: linear RGB to XYZ (D65 white point), rows X, Y, Z
_RGB_TO_XYZ = [
    [0.412453, 0.357580, 0.180423],
    [0.212671, 0.715160, 0.072169],
    [0.019334, 0.119193, 0.950227],
]
_WHITE = [0.95047, 1.0, 1.08883]  # XYZ of the D65 white
_CONSTANTS: dict[tuple[torch.device, torch.dtype], tuple[torch.Tensor, torch.Tensor]] = {}


def _constants(device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """The (3, 3) matrix and the (3, 1, 1) white point on ``device`` in ``dtype`` (made once)."""
    key = (device, dtype)
    if key not in _CONSTANTS:
        with torch.inference_mode(False):  # plain tensors, usable in and out of inference mode
            _CONSTANTS[key] = (upload(_RGB_TO_XYZ, dtype, device), upload(_WHITE, dtype, device).view(3, 1, 1))
    return _CONSTANTS[key]


def rgb_to_lab(image: torch.Tensor) -> torch.Tensor:
    """CIELAB of sRGB images: L in [0, 100], a and b roughly in [-128, 127].

    Args:
        image: floating (*, 3, H, W) sRGB in [0, 1] (float32 or float64).

    Returns:
        (*, 3, H, W) the same dtype: L, a, b.

    Example:
        >>> rgb_to_lab(torch.ones(1, 3, 1, 1)).flatten().round().tolist()
        [100.0, -0.0, 0.0]
    """
    matrix, white = _constants(image.device, image.dtype)
    linear = torch.where(image > 0.04045, torch.pow((image + 0.055).clamp(min=0.0) / 1.055, 2.4), image / 12.92)
    if image.device.type == "cpu" or image.numel() == 0:
        xyz = torch.einsum("oi, ...ihw -> ...ohw", matrix, linear).contiguous()
    else:
        flat = linear.reshape(-1, 3, *image.shape[-2:])
        xyz = F.conv2d(flat, matrix.view(3, 3, 1, 1)).reshape(image.shape)
    xyz = torch.div(xyz, white)
    threshold = 0.008856
    cube_root = torch.pow(xyz.clamp(min=threshold), 1 / 3.0)
    xyz = torch.where(xyz > threshold, cube_root, 7.787 * xyz + 4.0 / 29.0)
    x, y, z = xyz[..., 0, :, :], xyz[..., 1, :, :], xyz[..., 2, :, :]
    return torch.stack([116.0 * y - 16.0, 500.0 * (x - y), 200.0 * (y - z)], dim=-3)
