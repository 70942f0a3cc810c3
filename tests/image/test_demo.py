"""`torchlime demo`: runs end to end, writes PNGs and a JSON summary, finds the planted objects."""

from __future__ import annotations

import json

import pytest
import torch

from torchlime.cli import main
from torchlime.demo.run import coverage, hits, run_demo


def test_coverage():
    feats = torch.tensor([[[[0, 0, 1], [2, 2, 1]]]])
    evidence = torch.tensor([[[True, False, True], [False, False, True]]])
    assert coverage(feats, torch.tensor([[1]]), evidence).tolist() == [pytest.approx(2 / 3)]
    assert coverage(feats, torch.tensor([[0, 1]]), evidence).tolist() == [1.0]
    assert coverage(feats, torch.tensor([[0]]), evidence).tolist() == [pytest.approx(1 / 3)]
    assert hits(feats, torch.tensor([[2, 1]]), evidence).tolist() == [False]


def test_demo_writes_summary_and_pictures(tmp_path):
    pytest.importorskip("matplotlib")
    s = run_demo(tmp_path, n_images=3, n_samples=300)
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["n_images"] == 3 and len(data["images"]) == 3
    assert len(s["pictures"]) == 3 and all((tmp_path / p.split("/")[-1]).exists() for p in s["pictures"])
    assert data["accuracy"] == 1.0
    # the planted object decides the class: the top segment must sit on it
    assert data["top1_hit_rate"] == 1.0
    assert data["mean_top_k_coverage"] > 0.3
    assert (tmp_path / "explanation.pt").exists()


def test_cli_demo(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--n-images", "2", "--n-samples", "100"]) == 0
    out = capsys.readouterr().out
    assert "summary.json" in out and "explained 2 images" in out


def test_cli_rejects_missing_cuda(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(SystemExit) as info:
        main(["demo", "--out", str(tmp_path / "out"), "--device", "cuda"])
    assert info.value.code == 2 and not (tmp_path / "out").exists()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--device cuda: torch.cuda.is_available() is False" in err
