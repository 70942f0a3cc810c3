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


def write(name: str, payload: dict, out: Path = RESULTS) -> Path:
    """Writes ``payload`` as indented JSON to ``out / name`` (default: ``results/``); returns the path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path
