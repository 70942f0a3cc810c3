"""Small files for the command-line tests, written into a test's tmp_path (nothing binary is committed):
tiny TorchScript / ExportedProgram / factory models, PNGs, WAVs, texts and a vocabulary."""

from __future__ import annotations

import warnings
import wave
from pathlib import Path

import torch
from torch import nn


def run(capsys: object, *args: object) -> tuple[int, str, str]:
    """Run the command line in-process on ``args`` (each turned into a string): (exit code, stdout, stderr)."""
    from torchlime.cli import main

    try:
        code = main([str(a) for a in args])
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    out, err = capsys.readouterr()  # type: ignore[attr-defined]
    return code, out, err


WORDS = ["[PAD]", "[UNK]", "[MASK]", "[CLS]", "[SEP]", "good", "bad", "movie", "the", "plot", "was", "very"]

FACTORY = """
import torch
from torch import nn


def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 3))


def not_a_module():
    return 3


def broken():
    raise RuntimeError("no weights here")
"""


class QuadrantNet(nn.Module):
    """Class scores from the mean of each image quadrant: the top-left quadrant decides class 0."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2] // 2, x.shape[-1] // 2
        q = torch.stack(
            [x[..., :h, :w].mean((1, 2, 3)), x[..., :h, w:].mean((1, 2, 3)), x[..., h:, :].mean((1, 2, 3))], 1
        )
        return 4 * q


class AudioNet(nn.Module):
    """Two scores from the energy of 16 time slots of (c, S) audio."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.pool = nn.AdaptiveAvgPool1d(16)
        self.head = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(x.abs().unsqueeze(1)).flatten(1))


class TextNet(nn.Module):
    """Two scores from the masked mean of token embeddings; word 'good' (id 5) raises class 1."""

    def __init__(self, vocab: int = len(WORDS)) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, 2)
        with torch.no_grad():
            self.emb.weight.zero_()
            self.emb.weight[5] = torch.tensor([0.0, 3.0])
            self.emb.weight[6] = torch.tensor([3.0, 0.0])

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        keep = attention_mask.unsqueeze(-1).float()
        return (self.emb(input_ids) * keep).sum(1) / keep.sum(1).clamp_min(1.0)


def script(module: nn.Module, path: Path) -> Path:
    with warnings.catch_warnings():  # torch >= 2.10 calls TorchScript deprecated; the CLI still loads it
        warnings.simplefilter("ignore", FutureWarning)
        torch.jit.save(torch.jit.script(module), str(path))
    return path


def image_model(path: Path) -> Path:
    return script(QuadrantNet(), path)


def exported_model(path: Path, batch: int = 1) -> Path:
    """An ExportedProgram with a static batch size (the command line feeds it in pieces)."""
    torch.export.save(torch.export.export(QuadrantNet(), (torch.rand(batch, 3, 16, 16),)), str(path))
    return path


def audio_model(path: Path) -> Path:
    return script(AudioNet(), path)


def text_model(path: Path) -> Path:
    return script(TextNet(), path)


def factory(folder: Path, name: str = "tiny_factory") -> Path:
    path = folder / f"{name}.py"
    path.write_text(FACTORY)
    return path


def png(path: Path, h: int = 16, w: int = 16, seed: int = 0) -> Path:
    from torchvision.io import write_png

    g = torch.Generator().manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        write_png((torch.rand(3, h, w, generator=g) * 255).to(torch.uint8), str(path))
    return path


def wav(path: Path, rate: int = 8000, seconds: float = 0.5, channels: int = 1, seed: int = 0) -> Path:
    n = int(rate * seconds)
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(n) / rate
    x = 0.5 * torch.sin(2 * torch.pi * 440 * t) * (t < seconds / 2) + 0.05 * torch.randn(n, generator=g)
    pcm = (x.clamp(-1, 1) * 32767).to(torch.int16).repeat(channels, 1).T.contiguous()
    with wave.open(str(path), "wb") as f:
        f.setnchannels(channels)
        f.setsampwidth(2)
        f.setframerate(rate)
        f.writeframes(pcm.numpy().astype("<i2").tobytes())
    return path


def text(path: Path, content: str = "the movie was very good") -> Path:
    path.write_text(content + "\n", encoding="utf-8")
    return path


def vocab(path: Path) -> Path:
    path.write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    return path


def image_folder(root: Path, per_class: int = 3, classes: tuple[str, ...] = ("cat", "dog")) -> Path:
    for c, name in enumerate(classes):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            png(root / name / f"{i}.png", seed=10 * c + i)
    return root
