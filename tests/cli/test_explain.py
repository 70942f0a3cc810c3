"""``torchlime explain``, ``explain-dataset`` and ``bench`` on your own model: what they write, and
every usage error as one line with exit code 2 and no folder left behind. The fixture files are
made in tmp_path (``cli_fixtures``); most runs call ``torchlime.cli.main`` in-process, two go
through ``python -m torchlime.cli`` end to end."""

from __future__ import annotations

import json
import subprocess
import sys
import wave

import pytest
import torch

from torchlime import Explanation

from tests.helpers import cli_fixtures as fx
from tests.helpers.cli_fixtures import run as cli


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    fx.image_model(d / "img.ts")
    fx.exported_model(d / "img.pt2", batch=1)
    fx.audio_model(d / "aud.ts")
    fx.text_model(d / "txt.ts")
    fx.factory(d)
    fx.png(d / "a.png")
    fx.png(d / "b.png", 20, 24, seed=1)
    fx.wav(d / "a.wav")
    fx.wav(d / "b16k.wav", rate=16000)
    fx.text(d / "a.txt")
    fx.text(d / "b.txt", "bad plot")
    fx.vocab(d / "vocab.txt")
    torch.manual_seed(0)
    torch.save(
        torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
            torch.nn.Linear(4, 3),
        ).state_dict(),
        d / "sd.pt",
    )
    torch.save({"weight": torch.zeros(2)}, d / "wrong_sd.pt")
    (d / "bad.png").write_text("not an image")
    (d / "bad.wav").write_bytes(b"RIFF0000WAVEjunk")
    (d / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    return d


def test_explain_into_the_inputs_folder_overwrites_no_input(files, tmp_path, capsys):
    d = tmp_path / "here"
    d.mkdir()
    for name in ("img.ts", "a.png", "b.png"):
        (d / name).write_bytes((files / name).read_bytes())
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    code, _, err = cli(
        capsys,
        "explain",
        d / "img.ts",
        d / "a.png",
        files / "a.png",
        d / "b.png",
        "--out",
        d,
        "--n-samples",
        16,
        "--segments",
        "grid",
        "--n-segments",
        4,
        "--top-k",
        2,
    )
    assert code == 0, err
    assert {p.name: p.read_bytes() for p in d.iterdir() if p.name in before} == before
    summary = json.loads((d / "summary.json").read_text())
    assert [r["pictures"] for r in summary["inputs"]] == [["a-2.png"], ["a-3.png"], ["b-2.png"]]


def test_dotted_names_and_links_in_the_output_folder_are_not_overwritten(files, tmp_path, capsys):
    d, data = tmp_path / "here", tmp_path / "data"
    d.mkdir()
    data.mkdir()
    (d / "a.b.png").write_bytes((files / "a.png").read_bytes())
    (data / "real.png").write_bytes((files / "b.png").read_bytes())
    (d / "c.png").symlink_to(data / "real.png")
    before = {p: p.read_bytes() for p in (d / "a.b.png", data / "real.png")}
    code, _, err = cli(
        capsys,
        "explain",
        files / "img.ts",
        d / "a.b.png",
        d / "c.png",
        "--out",
        d,
        "--n-samples",
        16,
        "--segments",
        "grid",
        "--n-segments",
        4,
        "--top-k",
        2,
    )
    assert code == 0, err
    assert {p: p.read_bytes() for p in before} == before and (d / "c.png").is_symlink()
    summary = json.loads((d / "summary.json").read_text())
    assert [r["pictures"] for r in summary["inputs"]] == [["a.b-2.png"], ["c-2.png"]]


def test_explain_images_writes_pictures_explanations_and_summary(files, tmp_path, capsys):
    out = tmp_path / "out"
    code, stdout, err = cli(
        capsys,
        "explain",
        files / "img.ts",
        files / "a.png",
        files / "b.png",
        "--out",
        out,
        "--n-samples",
        64,
        "--segments",
        "grid",
        "--n-segments",
        16,
        "--target",
        0,
        "--top-k",
        4,
        "--baseline",
        0,
    )
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == [
        "a.explanation.pt",
        "a.png",
        "b.explanation.pt",
        "b.png",
        "summary.json",
    ]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["modality"] == "image" and summary["model_kind"] == "torchscript"
    assert [r["file"] for r in summary["inputs"]] == [str(files / "a.png"), str(files / "b.png")]
    a = Explanation.load(out / "a.explanation.pt")
    assert a.coef.shape == (1, 1, 16) and a.input_shape == (3, 16, 16) and a.target.tolist() == [[0]]
    # class 0 reads the top-left quadrant: the 4 x 4 grid's cells 0, 1, 4, 5 and only those
    assert sorted(summary["inputs"][0]["top_features"][0]) == [0, 1, 4, 5]
    assert Explanation.load(out / "b.explanation.pt").input_shape == (3, 20, 24)
    assert "explained 2 image input(s)" in stdout and "a.png: target [0]" in stdout


def test_exported_program_with_a_static_batch_matches_torchscript(files, tmp_path, capsys):
    common = ("--n-samples", 48, "--segments", "grid", "--n-segments", 9, "--size", 16, 16, "--top-k", 2)
    runs = {}
    for name in ("img.ts", "img.pt2"):
        out = tmp_path / name
        code, _, err = cli(capsys, "explain", files / name, files / "a.png", files / "b.png", "--out", out, *common)
        assert code == 0, err
        runs[name] = Explanation.load(out / "b.explanation.pt")
    assert json.loads((tmp_path / "img.pt2" / "summary.json").read_text())["model_kind"] == "exported"
    torch.testing.assert_close(runs["img.pt2"].coef, runs["img.ts"].coef, rtol=1e-4, atol=1e-5)


def test_factory_with_weights(files, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(files)  # module:factory imports from the current folder
    code, _, err = cli(
        capsys,
        "explain",
        "tiny_factory:build",
        "a.png",
        "--weights",
        "sd.pt",
        "--out",
        tmp_path / "o",
        "--n-samples",
        32,
        "--n-segments",
        8,
    )
    assert code == 0, err
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["model_kind"] == "factory"


def test_explain_audio_writes_spectrogram_and_wavs(files, tmp_path, capsys):
    out = tmp_path / "audio"
    code, _, err = cli(
        capsys,
        "explain",
        files / "aud.ts",
        files / "a.wav",
        "--out",
        out,
        "--n-samples",
        64,
        "--sample-rate",
        8000,
        "--top-k",
        2,
    )
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == [
        "a.complement.wav",
        "a.explanation.pt",
        "a.original.wav",
        "a.png",
        "a.top2.wav",
        "summary.json",
    ]
    with wave.open(str(out / "a.top2.wav")) as f:
        assert f.getframerate() == 8000 and f.getnframes() == 4000
    exp = Explanation.load(out / "a.explanation.pt")
    assert exp.coef.shape == (1, 1, 20) and exp.meta["audio"]["sample_rate"] == 8000


def test_explain_audio_time_segments(files, tmp_path, capsys):
    out = tmp_path / "time"
    code, _, err = cli(
        capsys,
        "explain",
        files / "aud.ts",
        files / "a.wav",
        "--out",
        out,
        "--n-samples",
        32,
        "--audio-features",
        "time",
        "--time-segments",
        8,
    )
    assert code == 0, err
    assert Explanation.load(out / "a.explanation.pt").coef.shape == (1, 1, 8)
    assert not (out / "a.png").exists() and (out / "a.top3.wav").exists()


def test_explain_text_with_a_vocabulary(files, tmp_path, capsys):
    out = tmp_path / "text"
    code, stdout, err = cli(
        capsys,
        "explain",
        files / "txt.ts",
        files / "a.txt",
        files / "b.txt",
        "--vocab",
        files / "vocab.txt",
        "--out",
        out,
        "--n-samples",
        64,
        "--top-k",
        1,
    )
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert [r["top_names"][0] for r in summary["inputs"]] == [["good"], ["bad"]]
    assert "<!doctype html>" in (out / "a.html").read_text() and ">good</span>" in (out / "a.html").read_text()
    assert "2 HTML page(s)" in stdout


def test_explain_text_with_a_local_tokenizer_folder(files, tmp_path, capsys):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(fx.WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", mask_token="[MASK]"
    ).save_pretrained(tmp_path / "tok")
    code, _, err = cli(
        capsys,
        "explain",
        files / "txt.ts",
        files / "a.txt",
        "--tokenizer",
        tmp_path / "tok",
        "--out",
        tmp_path / "o",
        "--n-samples",
        64,
        "--top-k",
        1,
    )
    assert code == 0, err
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["inputs"][0]["top_names"] == [["good"]]


def test_explain_dataset_resumes_and_maps_files(files, tmp_path, capsys):
    root = fx.image_folder(tmp_path / "data", per_class=3)
    out = tmp_path / "shards"
    args = (
        "explain-dataset",
        files / "img.ts",
        root,
        "--out",
        out,
        "--n-samples",
        32,
        "--inputs-per-step",
        2,
        "--shard-size",
        4,
        "--segments",
        "grid",
        "--n-segments",
        9,
        "--no-progress",
    )
    code, stdout, err = cli(capsys, *args)
    assert code == 0, err
    assert "explained 6 image(s) of 2 class(es)" in stdout
    from torchlime.dataset import load_results

    res = load_results(out).load()
    assert res.label.tolist() == [0, 0, 0, 1, 1, 1] and res.target[:, 0].tolist() == res.label.tolist()
    assert json.loads((out / "dataset.json").read_text())["files"][3] == "dog/0.png"
    (out / "shard-000001.safetensors").unlink()  # as if interrupted: run again, only shard 1 is computed
    code, _, err = cli(capsys, *args)
    assert code == 0, err
    torch.testing.assert_close(load_results(out).load().coef, res.coef)


def test_explain_dataset_error_before_any_shard_leaves_no_folder(files, tmp_path, capsys):
    root = fx.image_folder(tmp_path / "data", per_class=2)
    fx.png(root / "cat" / "1.png", 12, 12)
    out = tmp_path / "shards"
    code, _, err = cli(
        capsys, "explain-dataset", files / "img.ts", root, "--out", out, "--n-samples", 16, "--no-progress"
    )
    assert code == 2 and err.count("\n") == 1 and "pass --size H W" in err and not out.exists()


def test_bench_prints_the_ratio_and_writes_json(files, tmp_path, capsys):
    code, stdout, err = cli(
        capsys,
        "bench",
        files / "img.ts",
        "--input-shape",
        3,
        16,
        16,
        "--n-samples",
        32,
        "--reps",
        1,
        "--n-segments",
        16,
        "--json",
        tmp_path / "b.json",
    )
    assert code == 0, err
    res = json.loads((tmp_path / "b.json").read_text())
    assert res["rows"] == 32 and res["n_features"] == 16 and res["ratio"] > 0 and "ratio" in stdout
    assert res["floor_seconds"] == min(res["floor_seconds_by_chunk"].values())


ERRORS = [
    (("explain", "{d}/img.ts", "{d}/missing.png"), "cannot read {d}/missing.png: no such file"),
    (("explain", "{d}/img.ts", "{d}/bad.png"), "cannot read image {d}/bad.png: "),
    (("explain", "{d}/img.ts", "{d}/a.png", "{d}/a.wav"), "the inputs mix modalities"),
    (("explain", "{d}/img.ts", "{d}/sd.pt"), "cannot tell the modality of {d}/sd.pt"),
    (("explain", "{d}/aud.ts", "{d}/bad.wav"), "cannot read WAV {d}/bad.wav"),
    (("explain", "{d}/aud.ts", "{d}/a.wav", "--sample-rate", "16000"), "resample it first"),
    (("explain", "{d}/aud.ts", "{d}/a.wav", "{d}/b16k.wav"), "the WAV files have different sample rates"),
    (("explain", "{d}/txt.ts", "{d}/a.txt"), "text inputs need --tokenizer"),
    (("explain", "{d}/txt.ts", "{d}/latin1.txt", "--vocab", "{d}/vocab.txt"), "not UTF-8"),
    (("explain", "{d}/txt.ts", "{d}/a.txt", "--tokenizer", "no-such/tokenizer-xyz"), "cannot be loaded offline"),
    (
        ("explain", "{d}/txt.ts", "{d}/a.txt", "--vocab", "{d}/vocab.txt", "--top-k", "9"),
        "--top-k must be at most the number of words of every input (5",
    ),
    (("explain", "{d}/img.ts", "{d}/a.png", "--top-k", "500"), "--top-k must be at most the number of segments"),
    (("explain", "{d}/sd.pt", "{d}/a.png"), "is a torch.save file (a state dict?), not a model"),
    (("explain", "{d}/a.png", "{d}/a.png"), "is neither a TorchScript file"),
    (("explain", "{d}/nothing.ts", "{d}/a.png"), "no such file, and not of the form module:factory"),
    (("explain", "{d}/tiny_factory.py:not_a_module", "{d}/a.png"), "must return a torch.nn.Module, got int 3"),
    (("explain", "{d}/tiny_factory.py:broken", "{d}/a.png"), "calling broken() failed: RuntimeError: no weights"),
    (("explain", "{d}/tiny_factory.py:absent", "{d}/a.png"), "has no attribute 'absent'"),
    (("explain", "no_such_module_xyz:build", "{d}/a.png"), "cannot import no_such_module_xyz"),
    (
        ("explain", "{d}/tiny_factory.py:build", "{d}/a.png", "--weights", "{d}/wrong_sd.pt"),
        "does not fit {d}/tiny_factory.py:build: 4 missing key(s)",
    ),
    (("explain", "{d}/tiny_factory.py:build", "{d}/a.png", "--weights", "{d}/img.ts"), "is a whole model"),
    (("explain", "{d}/img.ts", "{d}/a.png", "--weights", "{d}/sd.pt"), "--weights goes with MODEL given as"),
    (("explain", "{d}/aud.ts", "{d}/a.png"), "the model failed on images of shape (3, 16, 16)"),
    (("explain", "{d}/img.pt2", "{d}/b.png"), "the model failed on images of shape (3, 20, 24): "),
    (("explain", "{d}/img.pt2", "{d}/b.png"), "an exported program accepts only the input shape it was exported"),
    (("explain", "{d}/img.ts", "{d}/a.png", "--target", "7"), "`target` must be in [0, 3)"),
    (("explain", "{d}/img.ts", "{d}/a.png", "--target", "best"), "--target must be top, topK, all or a class"),
    (("explain", "{d}/img.ts", "{d}/a.png", "--device", "tpu"), "--device must be auto, cpu, cuda or cuda:N"),
    (("explain", "{d}/img.ts", "{d}/a.png", "--mean", "0.5"), "--mean and --std go together"),
    (("explain-dataset", "{d}/img.ts", "{d}/a.png"), "FOLDER {d}/a.png is not a folder"),
    (("explain-dataset", "{d}/img.ts", "{d}", "--shard-size", "0"), "argument --shard-size: expected an integer"),
    (("bench", "{d}/img.ts", "--input-shape", "3", "32"), "argument --input-shape: expected 3 arguments"),
    (
        (
            "bench",
            "{d}/txt.ts",
            "--input-shape",
            "3",
            "8",
            "8",
            "--n-segments",
            "16",
            "--n-samples",
            "8",
            "--reps",
            "1",
        ),
        "the model failed on inputs of shape (3, 8, 8)",
    ),
]


@pytest.mark.parametrize("args, message", ERRORS, ids=[m.replace("{d}/", "")[:40] for _, m in ERRORS])
def test_usage_errors_are_one_line_and_leave_no_folder(files, tmp_path, capsys, args, message):
    out = tmp_path / "out"
    extra = ("--out", out, "--n-samples", "16") if args[0] != "bench" else ()
    code, stdout, err = cli(capsys, *[a.format(d=files) for a in args], *extra)
    assert code == 2 and stdout == "" and err.count("\n") == 1, err
    assert err.startswith(f"torchlime {args[0]}: error: ") and message.format(d=files) in err, err
    assert not out.exists()


def run(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchlime.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def test_subprocess_end_to_end(files, tmp_path):
    proc = run(
        "explain",
        "tiny_factory:build",
        "a.png",
        "--weights",
        "sd.pt",
        "--out",
        tmp_path / "o",
        "--n-samples",
        32,
        "--segments",
        "grid",
        "--n-segments",
        4,
        "--top-k",
        2,
        cwd=files,
    )
    assert proc.returncode == 0, proc.stderr
    assert "wrote 1 explanation file(s), 1 picture(s) and summary.json" in proc.stdout
    proc = run("explain", "tiny_factory:build", "a.png", "--weights", "wrong_sd.pt", "--out", tmp_path / "e", cwd=files)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "--weights wrong_sd.pt does not fit tiny_factory:build" in proc.stderr and not (tmp_path / "e").exists()


def test_unknown_words_are_features_of_the_text(tmp_path):
    """A word outside the vocabulary (the unknown token) is still a word to explain, with a weight of its own."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from torchlime.cli._inputs import feature_counts, tokenize_with_hf, tokenize_with_vocab

    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[MASK]\ngood\nbad\n")
    t = tokenize_with_vocab(["good zzz bad qqq"], ["a"], tmp_path / "vocab.txt", False)
    assert 1 not in t.special_ids and feature_counts(t) == [4]
    tok = Tokenizer(models.WordLevel(vocab={"[PAD]": 0, "[UNK]": 1, "[MASK]": 2, "good": 3}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", mask_token="[MASK]"
    ).save_pretrained(tmp_path / "tok")
    t = tokenize_with_hf(["good zzz , bad"], str(tmp_path / "tok"))
    assert 1 not in t.special_ids and feature_counts(t) == [4]
