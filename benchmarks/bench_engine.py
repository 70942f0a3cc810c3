"""torchlime vs lime vs captum vs the bare forward-pass floor, one image, N=1000.

The same model (random weights, ImageNet normalisation), image, segmentation (lime's
quickshift) and N for every system; each repetition runs all systems back to back
(interleaved), and the median of the repetitions is reported. The floor is the bare
batched forward pass of the same N perturbed images under inference_mode, at the best of
several batch sizes and both memory layouts (NCHW and channels-last). With
``--previous-tree DIR`` (a checkout of an earlier commit, e.g. from ``git archive``) that
version of torchlime runs in a worker process, interleaved with the others, so the two
versions are compared within one run. torchlime_with_torch_slic (its own segmentation)
is timed once, after the rest.

    python benchmarks/bench_engine.py --device cpu            # full run (about 25 min on 2 cores)
    python benchmarks/bench_engine.py --previous-tree /tmp/old --previous-commit 68ecdbf
    python benchmarks/bench_engine.py --quick --out /tmp/quick  # smoke test
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import torch

from torchlime.image import explain_image
from torchlime.image.segments import skimage_segments, slic

from benchmarks.common import (
    Normalize,
    common_args,
    header,
    perturbed_images,
    summary,
    test_image,
    timed,
    vision_model,
    write,
)

MEAN_STD = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
LIME_QUICKSHIFT = dict(kernel_size=4, max_dist=200, ratio=0.2)

# The worker that runs another version of torchlime: reads "run N" lines, answers seconds.
WORKER = r"""
import sys, time, torch
sys.path.insert(0, sys.argv[1])
import torchvision
from torchlime.image import explain_image
torch.manual_seed(0)
name, image, seg = sys.argv[2], torch.load(sys.argv[3]), torch.load(sys.argv[4])
kw = dict(aux_logits=False, init_weights=False) if name == "inception_v3" else {}
model = getattr(torchvision.models, name)(weights=None, **kw).eval()
norm = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
for line in sys.stdin:
    n = int(line.split()[1])
    t0 = time.perf_counter()
    exp = explain_image(model, image, segments=seg, preset="lime", softmax=True, n_samples=n, normalize=norm)
    exp.coef.sum().item()
    print(time.perf_counter() - t0, flush=True)
"""


def floor_fn(model, images, batch, device, channels_last=False):
    """Forward the pre-built perturbed images in chunks of ``batch`` (NCHW or channels-last)."""
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)

    def run():
        with torch.inference_mode():
            for i in range(0, images.shape[0], batch):
                model(images[i : i + batch].to(device)).softmax(1)

    return run


def lime_fn(model, image, segments, n, batch, device):
    from lime import lime_image

    img = image[0].permute(1, 2, 0).double().cpu().numpy()
    seg = segments[0].cpu().numpy()

    def classifier_fn(batch_np):
        x = torch.from_numpy(batch_np).permute(0, 3, 1, 2).float().to(device)
        with torch.inference_mode():
            return model(x).softmax(1).double().cpu().numpy()

    def run():
        explainer = lime_image.LimeImageExplainer(random_state=0)
        explainer.explain_instance(
            img,
            classifier_fn,
            segmentation_fn=lambda _: seg,
            num_samples=n,
            batch_size=batch,
            hide_color=None,
            top_labels=5,
        )

    return run


def captum_fn(model, image, segments, n, ppe, device):
    from captum.attr import Lime

    mask = segments.view(1, 1, *segments.shape[-2:]).to(device)
    x = image.to(device).contiguous(memory_format=torch.channels_last)  # its fastest layout on CPU
    with torch.no_grad():
        target = int(model(x).argmax())

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Lime(lambda v: model(v).softmax(1)).attribute(
                x, target=target, feature_mask=mask, n_samples=n, perturbations_per_eval=ppe
            )

    return run


def torchlime_fn(model, image, segments, n, device):
    """The user's call: lime's settings, the model normalised by ``normalize=`` (fused)."""
    x, seg = image.to(device), None if segments is None else segments.to(device)

    def run():
        exp = explain_image(
            model,
            x,
            segments=seg if seg is not None else "slic",
            preset="lime",
            softmax=True,
            n_samples=n,
            normalize=MEAN_STD,
        )
        exp.coef.sum().item()  # wait for the result

    return run


class Previous:
    """Another torchlime version (a source tree) in a worker process, timed inside the worker."""

    def __init__(self, tree: Path, name: str, image: torch.Tensor, segments: torch.Tensor) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        paths = [Path(self.tmp.name) / f for f in ("worker.py", "image.pt", "seg.pt")]
        paths[0].write_text(WORKER)
        torch.save(image, paths[1])
        torch.save(segments, paths[2])
        env = dict(os.environ, PYTHONPATH="")
        self.proc = subprocess.Popen(
            [sys.executable, str(paths[0]), str(tree), name, str(paths[1]), str(paths[2])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=self.tmp.name,
        )

    def fn(self, n: int):
        def run():
            self.proc.stdin.write(f"run {n}\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the previous-version worker stopped")
            return float(line)

        return run

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self.tmp.cleanup()


def bench_model(name, device, n, reps, floor_batches, lime_batches, captum_ppes, previous_tree, size):
    net = vision_model(name, device)
    model = Normalize(net).to(device).eval()  # what the floor and the anchors run
    image = test_image(size)
    segments = skimage_segments(image, "quickshift", **LIME_QUICKSHIFT)
    images = perturbed_images(image, segments, n)
    systems = {
        f"floor_{fmt}_batch{b}": floor_fn(model, images, b, device, fmt == "channels_last")
        for fmt, batches in floor_batches.items()
        for b in batches
    }
    systems["torchlime"] = torchlime_fn(net, image, segments, n, device)
    previous = Previous(previous_tree, name, image, segments) if previous_tree else None
    if previous:
        systems["torchlime_previous"] = previous.fn(n)
    for b in lime_batches:
        systems[f"lime_batch{b}"] = lime_fn(model, image, segments, n, b, device)
    for p in captum_ppes:
        systems[f"captum_ppe{p}"] = captum_fn(model, image, segments, n, p, device)
    # warm-up: the forward at every batch size, every system once (torchlime: its chunk measurement)
    for key, fn in systems.items():
        if key.startswith(("floor", "torchlime")):
            fn()
    for warm in (
        lime_fn(model, image, segments, 20, 10, device),
        captum_fn(model, image, segments, 20, 1, device),
        torchlime_fn(net, image, None, 20, device),
    ):
        warm()
    times = {k: [] for k in systems}
    for rep in range(reps):
        for key, fn in systems.items():  # the previous version is timed inside its worker
            times[key].append(fn() if key == "torchlime_previous" else timed(fn, device))
            print(f"{name} rep {rep} {key}: {times[key][-1]:.2f} s", flush=True)
    if previous:
        previous.close()
    times["torchlime_with_torch_slic"] = [timed(torchlime_fn(net, image, None, n, device), device)]
    res = {k: summary(v) for k, v in times.items()}
    floor_key = min((k for k in res if k.startswith("floor")), key=lambda k: res[k]["median"])
    floor = res[floor_key]["median"]
    tl = res["torchlime"]["median"]
    ratios = dict(
        floor_system=floor_key,
        torchlime_over_floor=tl / floor,
        torchlime_slic_over_floor=res["torchlime_with_torch_slic"]["median"] / floor,
    )
    if previous:
        ratios["torchlime_previous_over_floor"] = res["torchlime_previous"]["median"] / floor
        ratios["torchlime_over_previous"] = tl / res["torchlime_previous"]["median"]
    for k in res:
        if k.startswith(("lime", "captum")):
            ratios[f"{k}_over_torchlime"] = res[k]["median"] / tl
    seg_times = [timed(lambda: skimage_segments(image, "quickshift", **LIME_QUICKSHIFT), device) for _ in range(3)]
    slic_times = [timed(lambda: slic(image.to(device)), device) for _ in range(3)]
    return dict(
        model=name,
        n_samples=n,
        repetitions=reps,
        n_segments=int(segments.unique().numel()),
        seconds=res,
        ratios=ratios,
        segmentation_seconds=dict(
            quickshift_lime_params=statistics.median(seg_times), torch_slic=statistics.median(slic_times)
        ),
    )


def main() -> None:
    ap = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--models", nargs="+", default=["resnet18", "mobilenet_v3_small"])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--previous-tree", type=Path, help="a source tree of an earlier torchlime to compare with")
    ap.add_argument("--previous-commit", default=None, help="the commit that tree comes from (recorded)")
    args = ap.parse_args()
    device = torch.device(args.device)
    n, reps, size = (24, 1, 64) if args.quick else (args.n, args.reps, 224)
    models = ["mobilenet_v3_small"] if args.quick else args.models
    cpu = device.type == "cpu"
    floor_batches = (
        {"nchw": (10, 16), "channels_last": (10, 16, 32)}
        if cpu
        else {"nchw": (64, 128, 256, 512), "channels_last": (128, 256, 512)}
    )
    lime_batches, captum_ppes = ((10,), (1,)) if args.quick else ((10, 100), (1, 64))
    out = header(device)
    out["previous_commit"] = args.previous_commit if args.previous_tree else None
    out["results"] = [
        bench_model(m, device, n, reps, floor_batches, lime_batches, captum_ppes, args.previous_tree, size)
        for m in models
    ]
    targets = {"resnet18": 1.15, "mobilenet_v3_small": 1.3}
    for r in out["results"]:
        r["target_torchlime_over_floor"] = targets.get(r["model"])
        r["faster_than_every_lime_and_captum"] = all(
            v > 1 for k, v in r["ratios"].items() if k.endswith("_over_torchlime")
        )
    path = write(f"engine_{device.type}.json", out, args.out)
    print(f"wrote {path}")
    for r in out["results"]:
        print(r["model"], json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r["ratios"].items()}))


if __name__ == "__main__":
    main()
