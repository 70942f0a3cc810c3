"""Shared benchmark helpers: the test image, models, timing and the result header."""
from __future__ import annotations

import datetime
import json
import platform
import statistics
import subprocess
import time
from pathlib import Path
from typing import Callable

import torch

RESULTS = Path(__file__).resolve().parent / "results"
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def device_name(device: torch.device) -> str:
    """GPU name, or the CPU model and core count."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    model = platform.processor() or "cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model} ({torch.get_num_threads()} torch threads)"


def header(device: torch.device) -> dict:
    """Machine, versions, commit and date for every result file."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip() or "unknown"
    except OSError:
        commit = "unknown"
    return dict(device=device_name(device), device_type=device.type, torch=torch.__version__,
                python=platform.python_version(), commit=commit,
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device) -> float:
    """Wall seconds of one call, synchronised on CUDA."""
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def summary(times: list[float]) -> dict:
    """Median, min, max and all runs."""
    return dict(median=statistics.median(times), min=min(times), max=max(times), runs=times)


def test_image(size: int = 224) -> torch.Tensor:
    """scikit-image's astronaut, resized with antialiasing: float (1, 3, size, size) in [0, 1]."""
    from skimage import data

    img = torch.from_numpy(data.astronaut()).permute(2, 0, 1).float().div(255).unsqueeze(0)
    return torch.nn.functional.interpolate(img, size=(size, size), mode="bilinear", antialias=True,
                                           align_corners=False).clamp(0, 1)


def vision_model(name: str, device: torch.device) -> torch.nn.Module:
    """A torchvision classifier with random weights (speed does not depend on them), eval mode."""
    import torchvision

    torch.manual_seed(0)
    kwargs = dict(weights=None)
    if name == "inception_v3":
        kwargs.update(aux_logits=False, init_weights=False)
    return getattr(torchvision.models, name)(**kwargs).eval().to(device)


class Normalize(torch.nn.Module):
    """``model((x - mean) / std)``: what a model trained on normalised images sees. The anchors
    (lime, captum) and the forward floors run this wrapper; torchlime gets ``normalize=`` instead,
    which it fuses into the perturbation pass (the user's way)."""

    def __init__(self, model: torch.nn.Module, mean=IMAGENET_MEAN, std=IMAGENET_STD) -> None:
        super().__init__()
        self.model = model
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model((x - self.mean.to(x)) / self.std.to(x))


def perturbed_images(image: torch.Tensor, segments: torch.Tensor, n: int, seed: int = 0,
                     fill: str = "mean") -> torch.Tensor:
    """The N perturbed images of one (1, C, H, W) image, built beforehand for a forward floor:
    Bernoulli(1/2) masks over the segments (row 0 all kept), hidden segments filled with their
    mean colour (lime's ``hide_color=None``) or zero. Plain torch, independent of torchlime."""
    seg = segments.reshape(-1).long()
    ids, inverse = seg.unique(return_inverse=True)
    f = ids.numel()
    g = torch.Generator().manual_seed(seed)
    masks = torch.rand(n, f, generator=g) < 0.5
    masks[0] = True
    flat = image.reshape(image.shape[1], -1)
    if fill == "mean":
        sums = torch.zeros(image.shape[1], f).index_add_(1, inverse, flat)
        base = (sums / torch.bincount(inverse, minlength=f).clamp_min(1))[:, inverse]
    else:
        base = torch.zeros_like(flat)
    keep = masks[:, inverse].unsqueeze(1)  # (N, 1, H*W)
    return torch.where(keep, flat, base).view(n, *image.shape[1:])


def common_args(parser, default_device: str = "cpu"):
    """``--device``, ``--out FOLDER`` (default ``results/``) and ``--quick`` for every benchmark."""
    parser.add_argument("--device", default=default_device)
    parser.add_argument("--out", type=Path, default=RESULTS,
                        help="folder the JSON result is written into (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="smoke test: a tiny run, not a result")
    return parser


def write(name: str, payload: dict, out: Path = RESULTS) -> Path:
    """Writes ``payload`` as indented JSON to ``out / name`` (default: ``results/``); returns the path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path
