"""Explanations show themselves in notebooks: a summary table and a picture per input."""

from __future__ import annotations

import base64
import dataclasses
import io
import re
import zlib

import pytest
import torch

import torchlime
from torchlime._util.colours import BLUE, RED, WHITE, diverging
from torchlime.engine.notebook import png_bytes


def decode_png(data: bytes) -> torch.Tensor:
    """A minimal decoder for the encoder's own output (8-bit RGB, filter 0): (H, W, 3) uint8."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    idat = data.index(b"IDAT")
    length = int.from_bytes(data[idat - 4 : idat], "big")
    raw = torch.frombuffer(bytearray(zlib.decompress(data[idat + 4 : idat + 4 + length])), dtype=torch.uint8)
    rows = raw.view(h, 1 + 3 * w)
    assert (rows[:, 0] == 0).all()
    return rows[:, 1:].reshape(h, w, 3)


def test_png_round_trip_and_colours():
    rgb = torch.randint(0, 256, (5, 7, 3), dtype=torch.uint8)
    assert torch.equal(decode_png(png_bytes(rgb)), rgb)
    c = diverging(torch.tensor([-2.0, 0.0, 2.0]))
    assert c.tolist() == [list(BLUE), list(WHITE), list(RED)]  # red supports, blue opposes
    pil = pytest.importorskip("PIL.Image")
    assert pil.open(io.BytesIO(png_bytes(rgb))).size == (7, 5)


def test_image_explanation_shows_a_heat_map_with_its_strongest_feature_red():
    x = torch.rand(1, 3, 4, 4)
    weights = torch.zeros(16)
    weights[5] = 3.0  # feature 5: pixel (1, 1) drives the score

    def model(batch: torch.Tensor) -> torch.Tensor:
        return (batch[:, 0].flatten(1) * weights).sum(1)

    exp = torchlime.explain(model, x, torch.arange(16).view(1, 1, 4, 4), n_samples=200, kernel="uniform")
    page = exp._repr_html_()
    assert "weighted R²" in page and "1 input(s) of shape (3, 4, 4)" in page
    img = decode_png(base64.b64decode(re.search(r"base64,([^\"]+)", page).group(1)))
    k = img.shape[0] // 4
    assert img[k + k // 2, k + k // 2].tolist() == list(RED)


def test_words_tabular_and_other_inputs_get_highlights_or_bars():
    exp = torchlime.explain(lambda t: t.sum(1), torch.rand(2, 5), torch.arange(5).view(1, 5), n_samples=32)
    bars = exp._repr_html_()
    assert "feature 0" in bars and "<img" not in bars
    text = torchlime.explain_text(lambda texts: torch.ones(len(texts), 2), "good <movie> a", n_samples=16)
    words = text._repr_html_()
    assert "&lt;" in words and ">movie</span>" in words  # separators escaped, words highlighted
    exp = dataclasses.replace(exp, run=dataclasses.replace(exp.run, unreliable="low R²"))  # records are replaced
    assert "unreliable: low R²" in exp._repr_html_()
