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
    from torchlime.demo.image_data import make_images
    from torchlime.demo.image_models import load_demo_model
    from torchlime.image import explain_image
    from torchlime.image.viz import plot_image_explanation

    images, labels, planted = make_images(4, seed=1)
    exp = explain_image(load_demo_model(), images, target=labels, n_samples=1000, generator=0)
    return _save(plot_image_explanation(exp, images, index=0, truth=planted[0]), out / "image.png")


def audio_figure(out: Path) -> Path:
    """The spectrogram of one synthetic clip with its segments' coefficients and the true region."""
    from torchlime.audio import explain_spectrogram
    from torchlime.audio.viz import plot_spectrogram_explanation
    from torchlime.demo import audio_data
    from torchlime.demo.audio_models import load_audio_model

    clips = audio_data.make_clips(2, seed=0)
    specs = audio_data.log_spectrogram(clips.waves)
    kw = {"sample_rate": 8000, "n_fft": 256, "hop_length": 128}
    exp = explain_spectrogram(load_audio_model(), specs, baseline="blur", n_samples=1024, generator=0, **kw)
    fig = plot_spectrogram_explanation(exp, specs, index=0)  # seconds and Hz: the explanation records kw
    return _save(fig, out / "audio.png")


def text_figure(out: Path) -> Path:
    """The top features of one sentence of the embedded token classifier."""
    from torchlime.demo.text_data import CLS, MASK, SEP, make_text_dataset
    from torchlime.demo.text_models import load_text_model
    from torchlime.text import explain_tokens
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
    fig = plot_top_features(exp, feature_strings(exp, tokens, index=0), index=0, k=8)
    return _save(fig, out / "text.png")


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


def _two_squares() -> torch.Tensor:
    """Two images (3, 64, 64) of noise with a bright square at (8..24, 8..24) and (36..56, 32..52)."""
    x = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(3)) * 0.3
    x[:, :, 8:24, 8:24] += 0.7
    x[:, :, 36:56, 32:52] += 0.7
    return x


def boxes_figure(out: Path) -> Path:
    """A toy detector's two boxes, each explained by its own heat map (``Boxes``)."""
    from torchlime.image import explain_image
    from torchlime.image.viz_boxes import plot_boxes
    from torchlime.targets import Boxes

    anchors = torch.tensor([[8.0, 8, 24, 24], [32.0, 36, 52, 56]])

    def detector(x: torch.Tensor) -> list:  # each anchor scored by the brightness inside it
        s = torch.stack([x[:, :, 8:24, 8:24].mean((1, 2, 3)), x[:, :, 36:56, 32:52].mean((1, 2, 3))], 1)
        return [{"boxes": anchors, "labels": torch.tensor([1, 2]), "scores": r} for r in s]

    exp = explain_image(
        detector,
        _two_squares(),
        target=Boxes(score_threshold=0.3),
        segments="grid",
        n_segments=64,
        baseline=0.0,  # the toy detector averages brightness: a cell's own mean colour would hide nothing
        n_samples=500,
        generator=0,
    )
    return _save(plot_boxes(exp, _two_squares(), index=0, class_names=["bg", "cat", "dog"]), out / "boxes.png")


def regions_figure(out: Path) -> Path:
    """A toy segmenter's classes, each region explained by its own heat map (``Region``)."""
    from torchlime.image import explain_image
    from torchlime.image.viz_regions import plot_regions
    from torchlime.targets import Region

    def segmenter(x: torch.Tensor) -> torch.Tensor:  # class 1 where the image is bright, 0 elsewhere
        bright = x.mean(1, keepdim=True)
        return torch.cat((0.5 - bright, bright - 0.5), 1) * 10

    x = _two_squares()
    exp = explain_image(segmenter, x, target=Region(), segments="grid", n_segments=64, n_samples=500, generator=0)
    fig = plot_regions(exp, x, index=0, class_names=["background", "object"])
    return _save(fig, out / "regions.png")


def transcript_figure(out: Path) -> Path:
    """A toy recogniser's transcript and its two words over the spectrogram (``Transcript``)."""
    from torchlime.audio import explain_spectrogram
    from torchlime.audio.viz_transcript import plot_transcript
    from torchlime.targets import Transcript

    def recogniser(s: torch.Tensor) -> torch.Tensor:  # (c, Fr, Tm) -> (c, Tm, 3): low band says 1, high band 2
        low, high = s[:, :8].mean(1), s[:, 8:].mean(1)
        return torch.stack((0.3 - torch.maximum(low, high), low - high, high - low), -1) * 20

    specs = torch.rand(1, 16, 24, generator=torch.Generator().manual_seed(0)) * 0.1
    specs[0, :8, 3:9] += 0.8  # a low sound, then a high one
    specs[0, 8:, 15:21] += 0.8
    exp = explain_spectrogram(
        recogniser, specs, target=Transcript(), time_segments=8, freq_segments=2, n_samples=500, generator=0
    )
    return _save(plot_transcript(exp, specs, words=["low", "high"], k=0), out / "transcript.png")


def _save(fig: plt.Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=72, bbox_inches="tight")
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder of the PNGs")
    args = parser.parse_args()
    for draw in (
        image_figure,
        audio_figure,
        text_figure,
        tabular_figure,
        boxes_figure,
        regions_figure,
        transcript_figure,
    ):
        path = draw(args.out)
        print(f"{path.name}: {path.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()
