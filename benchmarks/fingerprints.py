"""Bit-level fingerprints of explanations: does a change of the code change any number?

Runs a fixed set of seeded explanations through the public API (every front door, every
method of the zoo, the metrics) and records a SHA-256 of the bytes of every result tensor.
Two trees that give the same fingerprints on one machine give bit-identical explanations
there. A restructure that must change no number is checked by running this script on the
commit before and after it and comparing:

    python benchmarks/fingerprints.py --out /tmp/before.json          # on the earlier commit
    python benchmarks/fingerprints.py --compare /tmp/before.json \\
        --out benchmarks/results/fingerprints_cpu.json                # on the later one

Only public names are used, so the same script runs on both sides of a move.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import warnings
from pathlib import Path
from typing import Callable

import torch

import torchlime
from torchlime.methods.feature_selection import Select


def digest(t: torch.Tensor) -> str:
    """SHA-256 of a tensor's dtype, shape and bytes (on the CPU, contiguous)."""
    t = t.detach().cpu().contiguous()
    h = hashlib.sha256(f"{t.dtype}{tuple(t.shape)}".encode())
    h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:16]


def fingerprint(exp: torchlime.Explanation) -> dict[str, str]:
    out = {name: digest(getattr(exp, name)) for name in ("coef", "intercept", "score", "local_pred", "target")}
    if exp.coef_std is not None:
        out["coef_std"] = digest(exp.coef_std)
    return out


def _mlp(d_in: int, d_out: int = 3, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(d_in, 16), torch.nn.Tanh(), torch.nn.Linear(16, d_out)
    ).eval()


def cases() -> dict[str, Callable[[], dict[str, str]]]:
    """Name -> a function returning the fingerprints of one seeded explanation."""
    from torchlime.audio import explain_spectrogram, explain_waveform
    from torchlime.demo import audio_data
    from torchlime.demo.audio_models import load_audio_model
    from torchlime.demo.image_data import make_images
    from torchlime.demo.image_models import load_demo_model
    from torchlime.demo.text_data import CLS, MASK, SEP, make_text_dataset
    from torchlime.demo.text_models import load_text_model
    from torchlime.image import explain_image
    from torchlime.text import explain_tokens

    x = torch.rand(4, 1, 6, 6, generator=torch.Generator().manual_seed(0))
    feats = torch.arange(36).view(1, 1, 6, 6) // 3
    net = _mlp(36)

    def engine(**kw: object) -> Callable[[], dict[str, str]]:
        return lambda: fingerprint(torchlime.explain(net, x, feats, generator=5, **kw))

    out: dict[str, Callable[[], dict[str, str]]] = {
        "engine_default": engine(n_samples=500),
        "engine_all_targets_mean_fill": engine(n_samples=300, target="all", baseline="mean"),
        "engine_lasso_softmax": engine(n_samples=300, surrogate="lasso", softmax=True, target="top2"),
        "engine_klasso": engine(n_samples=300, surrogate="klasso"),
        "engine_bayes": engine(n_samples=300, surrogate="bayes", target="top2"),
        "engine_kernel_shap": engine(n_samples=256, preset="kernel_shap", target="all"),
        "engine_kernel_shap_sampled": engine(n_samples=100, preset="kernel_shap"),
        "engine_captum_preset": engine(preset="captum"),
        "engine_lime_text_preset": engine(preset="lime_text", n_samples=400),
        "engine_smile_wasserstein": engine(n_samples=200, kernel="wasserstein"),
        "engine_sobol": engine(n_samples=256, sampler="sobol"),
        "engine_stratified": engine(n_samples=256, sampler="stratified"),
        "engine_antithetic": engine(n_samples=256, sampler="antithetic"),
        "engine_shapley_sampler": engine(n_samples=256, sampler="shapley"),
        "engine_auto": engine(n_samples="auto"),
        "engine_select_forward": engine(n_samples=300, surrogate=Select(k=3)),
        "engine_select_lasso_path": engine(n_samples=300, surrogate=Select(k=4, method="lasso_path")),
        "engine_noise_fill_index": engine(n_samples=300, baseline="noise", index=torch.tensor([7, 3, 11, 0])),
    }

    def image(**kw: object) -> dict[str, str]:
        imgs, _, _ = make_images(3, seed=11)
        return fingerprint(explain_image(load_demo_model(), imgs, n_samples=300, generator=1, **kw))

    out["image_slic"] = lambda: image()
    out["image_grid_normalize"] = lambda: image(segments="grid", n_segments=25, normalize=((0.5,) * 3, (0.25,) * 3))
    out["image_lime_preset"] = lambda: image(preset="lime")

    def spectrogram() -> dict[str, str]:
        clips = audio_data.make_clips(2, seed=0)
        specs = audio_data.log_spectrogram(clips.waves)
        return fingerprint(
            explain_spectrogram(
                load_audio_model(),
                specs,
                baseline="blur",
                n_samples=256,
                sample_rate=8000,
                n_fft=256,
                hop_length=128,
                generator=2,
            )
        )

    def waveform(features: str) -> dict[str, str]:
        clips = audio_data.make_clips(2, seed=0)
        return fingerprint(
            explain_waveform(
                load_audio_model(waveform=True),
                clips.waves,
                sample_rate=8000,
                segments=features,
                n_fft=256,
                n_samples=128,
                generator=3,
            )
        )

    out["audio_spectrogram_blur"] = spectrogram
    out["audio_waveform_time"] = lambda: waveform("time")
    out["audio_waveform_tf"] = lambda: waveform("time_frequency")

    def tokens(mode: str) -> dict[str, str]:
        model, _ = load_text_model()
        data = make_text_dataset(3, seed=1)
        return fingerprint(
            explain_tokens(
                model,
                data.input_ids,
                attention_mask=data.attention_mask,
                special_ids=[CLS, SEP],
                mode=mode,
                mask_id=MASK,
                n_samples=200,
                generator=4,
            )
        )

    out["text_replace"] = lambda: tokens("replace")
    out["text_delete"] = lambda: tokens("delete")

    def tabular() -> dict[str, str]:
        from torchlime.tabular import explain_tabular

        g = torch.Generator().manual_seed(3)
        train = torch.randn(200, 5, generator=g, dtype=torch.float64)
        lin = torch.nn.Linear(5, 2).double()
        torch.manual_seed(1)
        return fingerprint(
            explain_tabular(
                lambda r: lin(r).softmax(1),
                train[:3],
                training_data=train,
                categorical_features=None,
                preset="lime",
                generator=6,
            )
        )

    out["tabular_lime"] = tabular

    def lime_tabular(discretize: bool) -> dict[str, str]:
        import numpy as np

        from torchlime.compat.lime import LimeTabularExplainer

        rng = np.random.default_rng(3)
        train = rng.normal(size=(300, 24))
        w = rng.normal(size=(24, 2))

        def predict(rows: np.ndarray) -> np.ndarray:
            e = np.exp(np.tanh(rows @ w))
            return e / e.sum(1, keepdims=True)

        got = {}
        for selection in ("auto", "lasso_path"):
            ex = LimeTabularExplainer(
                train, discretize_continuous=discretize, feature_selection=selection, random_state=2
            )
            exp = ex.explain_instance(train[0], predict, labels=(1,), num_features=6, num_samples=1500)
            numbers = [v for pair in exp.local_exp[1] for v in pair] + [exp.score, exp.intercept[1]]
            got[selection] = digest(torch.tensor(numbers, dtype=torch.float64))
        return got

    out["compat_lime_tabular_discretized"] = lambda: lime_tabular(True)
    out["compat_lime_tabular_gaussian"] = lambda: lime_tabular(False)

    def metrics() -> dict[str, str]:
        from torchlime import metrics as m

        exp = torchlime.explain(net, x, feats, n_samples=300, target="top2", generator=5)
        return {
            "deletion": digest(m.deletion(net, x, exp)),
            "insertion": digest(m.insertion(net, x, exp)),
            "label_flip": digest(m.label_flip(net, x, exp, k=2)),
        }

    out["metrics_curves"] = metrics
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--compare", type=Path, help="fingerprints of another tree to compare with")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # reductions in one thread: the same order on every run
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fn in cases().items():
            results[name] = fn()
    record: dict[str, object] = dict(torch=torch.__version__, torchlime=torchlime.__version__, cases=results)
    if args.compare is not None:
        before = json.loads(args.compare.read_text())
        differ = sorted(k for k in results if before["cases"].get(k) != results[k])
        record["compared_with"] = dict(before, file=args.compare.name)
        record["identical"] = not differ
        record["different_cases"] = differ
        print(f"{len(results) - len(differ)} of {len(results)} cases bit-identical; differ: {differ}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    return 0 if args.compare is None or not record["different_cases"] else 1


if __name__ == "__main__":
    sys.exit(main())
