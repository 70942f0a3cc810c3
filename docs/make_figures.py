"""Draw the pictures of the docs' modality pages from seeded explanations of the embedded models.

    python docs/make_figures.py            # writes docs/_static/figures/*.png

Every picture comes from a run of this script (CPU, a few seconds each); rerunning it on the same
machine redraws the same explanations (fixed seeds).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

OUT = Path(__file__).resolve().parent / "_static" / "figures"


def image_figure(out: Path) -> Path:
    """Four panels of one held-out image of the embedded classifier."""
    from torchlime.image import explain_image
    from torchlime.image.data import make_images
    from torchlime.image.models import load_demo_model
    from torchlime.image.viz import plot_image_explanation

    images, labels, _ = make_images(4, seed=1)
    exp = explain_image(load_demo_model(), images, target=labels, n_samples=1000, generator=0)
    return _save(plot_image_explanation(images, exp, 0), out / "image.png")


def audio_figure(out: Path) -> Path:
    """The spectrogram of one synthetic clip with its segments' coefficients and the true region."""
    from torchlime.audio import data as audio_data
    from torchlime.audio import explain_spectrogram
    from torchlime.audio.models import load_audio_model
    from torchlime.audio.viz import plot_spectrogram_explanation

    clips = audio_data.make_clips(2, seed=0)
    specs = audio_data.log_spectrogram(clips.waves)
    kw = {"sample_rate": 8000, "n_fft": 256, "hop_length": 128}
    exp = explain_spectrogram(load_audio_model(), specs, baseline="blur", n_samples=1024, generator=0, **kw)
    ax = plot_spectrogram_explanation(exp, specs, index=0, **kw)
    return _save(ax.figure, out / "audio.png")


def text_figure(out: Path) -> Path:
    """The top features of one sentence of the embedded token classifier."""
    from torchlime.text import explain_tokens
    from torchlime.text.data import CLS, MASK, SEP, make_text_dataset
    from torchlime.text.models import load_text_model
    from torchlime.text.viz import feature_strings, plot_top_features

    model, vocab = load_text_model()
    data = make_text_dataset(2, seed=1)
    exp = explain_tokens(
        model,
        data.input_ids,
        attention_mask=data.attention_mask,
        special_ids=[CLS, SEP],
        mode="replace",
        mask_id=MASK,
        n_samples=500,
        generator=0,
    )
    tokens = [vocab[int(i)] for i in data.input_ids[0]]
    ax = plot_top_features(exp, feature_strings(exp, tokens, index=0), index=0, k=8)
    return _save(ax.figure, out / "text.png")


def tabular_figure(out: Path) -> Path:
    """The lime-style conditions of one iris row under a logistic regression, as bars."""
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    from torchlime.tabular import conditions, explain_tabular

    iris = load_iris()
    clf = LogisticRegression(max_iter=1000).fit(iris.data, iris.target)

    def model(x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(clf.predict_proba(x.cpu().numpy()))

    X = torch.tensor(iris.data[[60]])
    exp = explain_tabular(model, X, training_data=iris.data, feature_names=iris.feature_names, preset="lime")
    rows = conditions(exp, k=4)[0][::-1]
    fig, ax = plt.subplots(figsize=(6, 2.4))
    ax.barh(range(len(rows)), [w for _, w in rows], color=["#16a34a" if w >= 0 else "#dc2626" for _, w in rows])
    ax.set_yticks(range(len(rows)), [c for c, _ in rows])
    ax.axvline(0, color="#444", lw=0.8)
    ax.set_xlabel(f"weight for class {iris.target_names[int(exp.target[0, 0])]}")
    return _save(fig, out / "tabular.png")


def _save(fig: plt.Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=72, bbox_inches="tight")
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder of the PNGs")
    args = parser.parse_args()
    for draw in (image_figure, audio_figure, text_figure, tabular_figure):
        path = draw(args.out)
        print(f"{path.name}: {path.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()
