"""torchlime vs lime vs captum vs the bare forward-pass floor, one image, N=1000.

The same model (random weights), image, segmentation (lime's quickshift) and N
for every system; each repetition runs all systems back to back (interleaved),
and the median of the repetitions is reported. The floor is the bare batched
forward pass of the same N perturbed images under inference_mode, at the best
of several batch sizes and both memory layouts (NCHW and channels-last).
torchlime_with_torch_slic (its own segmentation) is timed once, after the rest.

    python benchmarks/bench_engine.py --device cpu            # full run (about 25 min on 2 cores)
    python benchmarks/bench_engine.py --device cuda           # on a GPU, lime/captum models on the GPU too
    python benchmarks/bench_engine.py --quick                 # smoke test
"""
from __future__ import annotations

import argparse
import statistics
import warnings

import torch
from common import IMAGENET_MEAN, IMAGENET_STD, header, summary, test_image, timed, vision_model, write

import torchlime
from torchlime.image._explain import LIME_QUICKSHIFT, Normalized, explain_image
from torchlime.image.segments import skimage_segments, slic
from torchlime.perturb import perturb_chunk


def floor_fn(model, images, batch, device, channels_last=False):
    """Forward the pre-built perturbed images in chunks of ``batch`` (NCHW or channels-last)."""
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)

    def run():
        with torch.inference_mode():
            for i in range(0, images.shape[0], batch):
                model(images[i:i + batch].to(device)).softmax(1)
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
        explainer.explain_instance(img, classifier_fn, segmentation_fn=lambda _: seg, num_samples=n,
                                   batch_size=batch, hide_color=None, top_labels=5)
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
            Lime(lambda v: model(v).softmax(1)).attribute(x, target=target, feature_mask=mask, n_samples=n,
                                                          perturbations_per_eval=ppe)
    return run


def torchlime_fn(model, image, segments, n, device, batch_size=None):
    x = image.to(device)
    seg = segments.to(device)

    def run():
        exp = explain_image(model, x, segments=seg, preset="lime", softmax=True, n_samples=n,
                            batch_size=batch_size)
        exp.coef.sum().item()  # wait for the result
    return run


def torchlime_slic_fn(model, image, n, device):
    x = image.to(device)

    def run():
        exp = explain_image(model, x, preset="lime", segments="slic", softmax=True, n_samples=n)
        exp.coef.sum().item()
    return run


def perturbed_batch(image, segments, n):
    """The N perturbed images torchlime builds (lime's masks and mean-colour baseline)."""
    from torchlime.baselines import feature_mean
    from torchlime.features import relabel

    labels, nf = relabel(segments.view(1, 1, *segments.shape[-2:]))
    f = int(nf.max())
    masks = torchlime.BernoulliSampler()(nf, n, f, torch.Generator().manual_seed(0))
    base = feature_mean(image, labels, f)
    return perturb_chunk(image, base, labels, masks, 0, n)


def bench_model(name, device, n, reps, floor_batches, lime_batches, captum_ppes):
    model = Normalized(vision_model(name, device), IMAGENET_MEAN, IMAGENET_STD).to(device).eval()
    image = test_image(224)
    segments = skimage_segments(image, "quickshift", **LIME_QUICKSHIFT)
    images = perturbed_batch(image, segments, n)
    systems = {f"floor_{fmt}_batch{b}": floor_fn(model, images, b, device, fmt == "channels_last")
               for fmt, batches in floor_batches.items() for b in batches}
    systems["torchlime"] = torchlime_fn(model, image, segments, n, device)
    for b in lime_batches:
        systems[f"lime_batch{b}"] = lime_fn(model, image, segments, n, b, device)
    for p in captum_ppes:
        systems[f"captum_ppe{p}"] = captum_fn(model, image, segments, n, p, device)
    # warm-up: every system once on few samples, and the forward at every batch size
    for key, fn in systems.items():
        if key.startswith("floor"):
            fn()
    for warm in (torchlime_fn(model, image, segments, 20, device), lime_fn(model, image, segments, 20, 10, device),
                 captum_fn(model, image, segments, 20, 1, device), torchlime_slic_fn(model, image, 20, device)):
        warm()
    times = {k: [] for k in systems}
    for rep in range(reps):
        for key, fn in systems.items():
            times[key].append(timed(fn, device))
            print(f"{name} rep {rep} {key}: {times[key][-1]:.2f} s", flush=True)
    times["torchlime_with_torch_slic"] = [timed(torchlime_slic_fn(model, image, n, device), device)]
    res = {k: summary(v) for k, v in times.items()}
    floor_key = min((k for k in res if k.startswith("floor")), key=lambda k: res[k]["median"])
    floor = res[floor_key]["median"]
    tl = res["torchlime"]["median"]
    ratios = dict(floor_system=floor_key, torchlime_over_floor=tl / floor,
                  torchlime_slic_over_floor=res["torchlime_with_torch_slic"]["median"] / floor)
    for k in res:
        if k.startswith(("lime", "captum")):
            ratios[f"{k}_over_torchlime"] = res[k]["median"] / tl
    seg_times = [timed(lambda: skimage_segments(image, "quickshift", **LIME_QUICKSHIFT), device) for _ in range(3)]
    slic_times = [timed(lambda: slic(image.to(device)), device) for _ in range(3)]
    return dict(model=name, n_samples=n, repetitions=reps, n_segments=int(segments.max()) + 1,
                seconds=res, ratios=ratios, segmentation_seconds=dict(
                    quickshift_lime_params=statistics.median(seg_times), torch_slic=statistics.median(slic_times)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--models", nargs="+", default=["resnet18", "mobilenet_v3_small"])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smoke test: N=40, 1 repetition")
    args = ap.parse_args()
    device = torch.device(args.device)
    n, reps = (40, 1) if args.quick else (args.n, args.reps)
    cpu = device.type == "cpu"
    floor_batches = ({"nchw": (10, 16), "channels_last": (10, 16, 32)} if cpu
                     else {"nchw": (64, 128, 256, 512), "channels_last": (128, 256, 512)})
    out = header(device)
    out["results"] = [bench_model(m, device, n, reps, floor_batches, (10, 100), (1, 64)) for m in args.models]
    targets = {"resnet18": 1.15, "mobilenet_v3_small": 1.3}
    for r in out["results"]:
        r["target_torchlime_over_floor"] = targets.get(r["model"])
        r["faster_than_every_lime_and_captum"] = all(v > 1 for k, v in r["ratios"].items() if k.endswith("_over_torchlime"))
    path = write(f"engine_{device.type}{'_quick' if args.quick else ''}.json", out)
    print(f"wrote {path}")
    for r in out["results"]:
        print(r["model"], {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r["ratios"].items()})


if __name__ == "__main__":
    main()
