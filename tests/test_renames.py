"""Renamed parameters and flags keep working for one release: every old spelling (a keyword, a positional
order, a command-line flag) warns with a ``DeprecationWarning`` that names the new one and gives the same
result as the new spelling; the old and the new keyword together are refused."""

from __future__ import annotations

import inspect
import json
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, NamedTuple

import numpy as np
import pytest
import torch

import torchlime
from torchlime._deprecate import legacy_positions, renamed
from torchlime.audio.viz import plot_spectrogram_explanation
from torchlime.audio.viz_transcript import plot_transcript
from torchlime.cli.main import build_parser
from torchlime.dataset import explain_dataset, load_results
from torchlime.image import explain_image
from torchlime.image.viz import (
    image_and_mask,
    plot_coefficients_with_uncertainty,
    plot_image_explanation,
    save_image_explanation,
)
from torchlime.metrics import max_sensitivity
from torchlime.stages import features as features_stage
from torchlime.targets import Transcript
from torchlime.text.viz import explanation_html, feature_strings, plot_top_features, text_html

from tests.helpers import cli_fixtures as fx
from tests.helpers.cli_fixtures import run as cli
from tests.helpers.text import CLS, MASK, SEP, PositionBag

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def asr(s: torch.Tensor) -> torch.Tensor:
    """(c, Fr, Tm) spectrograms -> (c, Tm, 3) frame logits of a recogniser."""
    loud = s.mean(1)
    return torch.stack((1 - loud, loud, torch.zeros_like(loud)), -1) * 5


def positive(texts: list[str]) -> np.ndarray:
    p = np.clip([0.5 + 0.2 * t.split().count("good") - 0.2 * t.split().count("bad") for t in texts], 0.0, 1.0)
    return np.stack((1 - p, p), 1)


@pytest.fixture(scope="module")
def e(tmp_path_factory) -> SimpleNamespace:
    """One explanation of each kind the renamed functions take, and a folder for their files."""
    images = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 64, 3))
    specs = torch.rand(2, 16, 20, generator=torch.Generator().manual_seed(1))
    ids, words = torch.tensor([[CLS, 10, 11, 12, SEP]]), torch.tensor([[-1, 0, 0, 1, -1]])
    tokens = ["[CLS]", "un", "##tag", "say", "[SEP]"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SimpleNamespace(
            images=images,
            image=explain_image(net, images, segments="grid", n_segments=16, n_samples=64, generator=0),
            bayes=torchlime.explain(
                net, images, torch.arange(64).view(1, 1, 8, 8) // 8, surrogate="bayes", n_samples=64
            ),
            specs=specs,
            spec=torchlime.audio.explain_spectrogram(asr, specs, target=Transcript(token_ids=[1]), n_samples=32),
            plain_spec=torchlime.audio.explain_spectrogram(lambda s: s.flatten(1)[:, :2], specs, n_samples=32),
            tokens=tokens,
            token=torchlime.text.explain_tokens(
                PositionBag(),
                ids,
                word_ids=words,
                special_ids=[CLS, SEP],
                mask_id=MASK,
                n_samples=40,
                model_inputs="positional",
            ),
            text=torchlime.text.explain_text(positive, "good bad good", target=1, n_samples=64, generator=0),
            folder=tmp_path_factory.mktemp("renames"),
        )


def pixels(fig: Any) -> np.ndarray:
    """The figure drawn (RGBA), then closed."""
    fig.canvas.draw()
    out = np.asarray(fig.canvas.buffer_rgba()).copy()
    plt.close(fig)
    return out


def saved(path: Any) -> bytes:
    return Path(path).read_bytes()


class Case(NamedTuple):
    """An old spelling and the new one of the same call; ``norm`` makes their results comparable."""

    old: Callable[[SimpleNamespace], Any]
    new: Callable[[SimpleNamespace], Any]
    match: str
    norm: Callable[[Any], Any] = lambda r: r


def sizes_of_calls(spelling: dict[str, int]) -> tuple[list[int], torch.Tensor]:
    """``max_sensitivity`` with ``spelling`` ({"batch_size": 3} or {"inputs_per_step": 3}): its calls' sizes, values."""
    sizes: list[int] = []

    def explain_fn(x: torch.Tensor) -> torch.Tensor:
        sizes.append(x.shape[0])
        return 2 * x

    value = max_sensitivity(explain_fn, torch.ones(2, 4), n_perturb=4, generator=0, **spelling)
    return sizes[1:], value  # the first call explains the unperturbed inputs


CASES = {
    # exp= -> explanation=
    "image_and_mask exp": Case(
        lambda e: image_and_mask(e.images, exp=e.image),
        lambda e: image_and_mask(e.images, explanation=e.image),
        "`explanation=`",
    ),
    "plot_image_explanation exp": Case(
        lambda e: plot_image_explanation(images=e.images, exp=e.image),
        lambda e: plot_image_explanation(images=e.images, explanation=e.image),
        "`explanation=`",
        pixels,
    ),
    "save_image_explanation exp": Case(
        lambda e: saved(save_image_explanation(images=e.images, path=e.folder / "a.png", exp=e.image)),
        lambda e: saved(save_image_explanation(images=e.images, path=e.folder / "b.png", explanation=e.image)),
        "`explanation=`",
    ),
    "plot_coefficients_with_uncertainty exp": Case(
        lambda e: plot_coefficients_with_uncertainty(exp=e.bayes),
        lambda e: plot_coefficients_with_uncertainty(explanation=e.bayes),
        "`explanation=`",
        pixels,
    ),
    "feature_strings exp": Case(
        lambda e: feature_strings(exp=e.token, tokens=e.tokens),
        lambda e: feature_strings(explanation=e.token, tokens=e.tokens),
        "`explanation=`",
    ),
    "explanation_html exp": Case(
        lambda e: explanation_html(exp=e.token, tokens=e.tokens),
        lambda e: explanation_html(explanation=e.token, tokens=e.tokens),
        "`explanation=`",
    ),
    "text_html exp": Case(lambda e: text_html(exp=e.text), lambda e: text_html(explanation=e.text), "`explanation=`"),
    "plot_top_features exp": Case(
        lambda e: plot_top_features(exp=e.token, names=["a", "b"]),
        lambda e: plot_top_features(explanation=e.token, names=["a", "b"]),
        "`explanation=`",
        pixels,
    ),
    # num_features= / top_k= -> k=
    "image_and_mask num_features": Case(
        lambda e: image_and_mask(e.images, e.image, num_features=2),
        lambda e: image_and_mask(e.images, e.image, k=2),
        "`k=`",
    ),
    "plot_image_explanation num_features": Case(
        lambda e: plot_image_explanation(e.image, e.images, num_features=2),
        lambda e: plot_image_explanation(e.image, e.images, k=2),
        "`k=`",
        pixels,
    ),
    "save_image_explanation num_features": Case(
        lambda e: saved(save_image_explanation(e.image, e.images, e.folder / "c.png", num_features=2)),
        lambda e: saved(save_image_explanation(e.image, e.images, e.folder / "d.png", k=2)),
        "`k=`",
    ),
    "plot_spectrogram_explanation top_k": Case(
        lambda e: plot_spectrogram_explanation(e.plain_spec, e.specs, top_k=2),
        lambda e: plot_spectrogram_explanation(e.plain_spec, e.specs, k=2),
        "`k=`",
        pixels,
    ),
    "plot_transcript top_k": Case(
        lambda e: plot_transcript(e.spec, e.specs, top_k=1),
        lambda e: plot_transcript(e.spec, e.specs, k=1),
        "`k=`",
        pixels,
    ),
    # batch_size= (inputs per call) -> inputs_per_step=
    "max_sensitivity batch_size": Case(
        lambda e: sizes_of_calls({"batch_size": 3}),
        lambda e: sizes_of_calls({"inputs_per_step": 3}),
        "`inputs_per_step=`",
    ),
    # retired knobs: one public grid()
    "stages.features.grid": Case(
        lambda e: features_stage.grid((4, 6), (2, 3)),
        lambda e: features_stage.cell_ids((4, 6), (2, 3)),
        r"use cell_ids\(\)",
    ),
    # positional orders: the explanation first, the path last, options by keyword
    "plot_image_explanation (images, exp, index)": Case(
        lambda e: plot_image_explanation(e.images, e.image, 1),
        lambda e: plot_image_explanation(e.image, e.images, index=1),
        r"plot_image_explanation\(explanation, images\) with index= by keyword",
        pixels,
    ),
    "save_image_explanation (path, images, exp, index)": Case(
        lambda e: saved(save_image_explanation(str(e.folder / "e.png"), e.images, e.image, 1)),
        lambda e: saved(save_image_explanation(e.image, e.images, e.folder / "f.png", index=1)),
        r"call save_image_explanation\(explanation, images, path\) with index= by keyword",
    ),
    "plot_coefficients_with_uncertainty (exp, index, target_index)": Case(
        lambda e: plot_coefficients_with_uncertainty(e.bayes, 1, 0),
        lambda e: plot_coefficients_with_uncertainty(e.bayes, index=1, target_index=0),
        "index=, target_index= by keyword",
        pixels,
    ),
    "plot_top_features (exp, names, index, target_index, k)": Case(
        lambda e: plot_top_features(e.token, ["a", "b"], 0, 0, 1),
        lambda e: plot_top_features(e.token, ["a", "b"], index=0, target_index=0, k=1),
        "index=, target_index=, k= by keyword",
        pixels,
    ),
}


def same(a: Any, b: Any) -> bool:
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and bool((a == b).all())
    return a == b


@pytest.mark.parametrize("name", list(CASES))
def test_old_spelling_warns_and_gives_the_same_result(e, name):
    case = CASES[name]
    with pytest.warns(DeprecationWarning, match=case.match) as caught:
        old = case.norm(case.old(e))
    assert all(w.filename == __file__ for w in caught if w.category is DeprecationWarning)  # the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the new spelling is quiet
        new = case.norm(case.new(e))
    assert same(old, new)


@pytest.mark.parametrize(
    "call",
    [
        lambda e: image_and_mask(e.images, e.image, num_features=2, k=2),
        lambda e: image_and_mask(e.images, exp=e.image, explanation=e.image),
        lambda e: plot_spectrogram_explanation(e.plain_spec, e.specs, top_k=1, k=1),
        lambda e: text_html(exp=e.text, explanation=e.text),
        lambda e: max_sensitivity(lambda x: x, torch.ones(2, 4), batch_size=2, inputs_per_step=2),
    ],
    ids=["num_features+k", "exp+explanation", "top_k+k", "text_html", "max_sensitivity"],
)
def test_old_and_new_keyword_together_are_refused(e, call):
    with pytest.raises(TypeError, match=r"got both `\w+=` \(deprecated\) and `\w+=`"):
        call(e)


def test_the_new_names_are_the_signatures():
    assert list(inspect.signature(plot_image_explanation).parameters)[:3] == ["explanation", "images", "index"]
    assert list(inspect.signature(save_image_explanation).parameters)[:3] == ["explanation", "images", "path"]
    assert "k" in inspect.signature(image_and_mask).parameters
    assert "inputs_per_step" in inspect.signature(explain_dataset).parameters


def test_the_helpers_refuse_names_that_do_not_fit():
    def f(explanation: int, k: int = 0) -> int:
        return explanation

    with pytest.raises(ValueError, match="`k` is still a parameter"):
        renamed(k="explanation")(f)
    with pytest.raises(ValueError, match="`top` is not a parameter"):
        renamed(top_k="top")(f)
    with pytest.raises(ValueError, match=r"\['index'\] are not parameters"):
        legacy_positions(["explanation", "index"])(f)
    wrapped = legacy_positions(["explanation", "k"])(lambda explanation, *, k=0: (explanation, k))
    with pytest.raises(TypeError, match="at most 2 positional arguments, got 3"):
        wrapped(1, 2, 3)
    with pytest.raises(TypeError, match="several values for `k`"):
        wrapped(1, 2, k=3)


# ----------------------------------------------------------------------------- the command line


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cli")
    fx.image_model(d / "img.ts")
    fx.image_folder(d / "data", per_class=2)
    return d


@pytest.mark.parametrize(
    "old, new, note",
    [
        (("--model-batch-size", 8), ("--batch-size", 8), "warning: --model-batch-size is deprecated, use --batch-size"),
        (("--batch-size", 8), ("--batch-size", 8), "--batch-size is rows per model call"),
    ],
    ids=["--model-batch-size", "--batch-size"],
)
def test_explain_dataset_flags(files, tmp_path, capsys, monkeypatch, old, new, note):
    seen: list[dict[str, Any]] = []
    real = torchlime.dataset.explain_dataset

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(torchlime.dataset, "explain_dataset", spy)
    common = (files / "img.ts", files / "data", "--n-samples", 16, "--segments", "grid", "--n-segments", 4)
    coefs = []
    for i, flags in enumerate((old, new, ("--inputs-per-step", 3, "--batch-size", 8))):
        out = tmp_path / str(i)
        code, _, err = cli(capsys, "explain-dataset", *common, "--out", out, "--no-progress", *flags)
        assert code == 0, err
        if i == 0:
            assert note in err
        coefs.append(load_results(out).load().coef)
    assert [(k["model_batch_size"], k["inputs_per_step"]) for k in seen] == [(8, 32), (8, 32), (8, 3)]
    assert torch.equal(coefs[0], coefs[1]) and torch.equal(coefs[0], coefs[2])


def test_bench_batch_is_inputs_per_step(files, tmp_path, capsys):
    common = ("bench", files / "img.ts", "--input-shape", 3, 16, 16, "--n-samples", 8, "--reps", 1)
    code, _, err = cli(capsys, *common, "--batch", 2, "--json", tmp_path / "old.json")
    assert code == 0 and "warning: --batch is deprecated, use --inputs-per-step" in err
    code, _, err = cli(capsys, *common, "--inputs-per-step", 2, "--json", tmp_path / "new.json")
    assert code == 0 and "deprecated" not in err
    old, new = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("old", "new"))
    assert old["batch"] == new["batch"] == 2 and old["rows"] == new["rows"] == 16


def test_n_segments_default_is_explain_images_and_old_flags_are_hidden():
    default = inspect.signature(explain_image).parameters["n_segments"].default
    parser = build_parser()
    for argv in (["explain", "m.ts", "a.png", "--out", "o"], ["explain-dataset", "m.ts", "d", "--out", "o"]):
        assert parser.parse_args(argv).n_segments == default
    helps = {
        cmd: parser.parse_args(
            [cmd, "m", "--input-shape", "1", "1", "1"] if cmd == "bench" else [cmd, "m", "d", "--out", "o"]
        ).parser.format_help()
        for cmd in ("explain-dataset", "bench")
    }
    assert "--inputs-per-step" in helps["explain-dataset"] and "--model-batch-size" not in helps["explain-dataset"]
    assert "--inputs-per-step" in helps["bench"] and "--batch " not in helps["bench"]


def test_explanation_and_k_renames_of_the_modality_helpers(tmp_path):
    """``conditions(exp=)``: the old keyword warns, same result."""
    import torchlime
    from torchlime.tabular import conditions

    rows = torch.rand(30, 3)
    tab = torchlime.explain_tabular(lambda x: x.sum(1, keepdim=True), rows[:2], training_data=rows, n_samples=50)
    with pytest.warns(DeprecationWarning, match="`exp=` is deprecated, use `explanation=`"):
        assert conditions(exp=tab) == conditions(explanation=tab)


def test_the_top_k_fields_are_k():
    """``Select(num_features=)``, ``Adaptive(top_k=)`` and ``Infiller(top_k=)`` warn and build the same object."""
    from torchlime import Select
    from torchlime.methods.adaptive import Adaptive
    from torchlime.text import Infiller

    mlm = torch.nn.Linear(2, 2)
    for cls, old, args in ((Select, "num_features", ()), (Adaptive, "top_k", ()), (Infiller, "top_k", (mlm,))):
        extra = {"synonym_threshold": None} if cls is Infiller else {}
        with pytest.warns(DeprecationWarning, match=f"{cls.__name__}\\(\\): `{old}=` is deprecated, use `k=`"):
            made = cls(*args, **{old: 3}, **extra)
        assert made.k == 3 and repr(made) == repr(cls(*args, k=3, **extra))
