"""Fuzz over every front door: bad inputs, bad sample counts, bad targets and broken models.

Every case must end in a correct finite explanation or a clear error (a ``TypeError`` / ``ValueError``
that names an argument or the model, or a ``ModelCallError``), never a hang, an ``IndexError`` from deep
inside, or a change to the caller's data.
"""

from __future__ import annotations

import copy
import signal
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest
import torch

import torchlime
from torchlime.stages.forward.errors import ModelCallError

TIMEOUT = 60  # seconds a case may take before it counts as a hang


def snapshot(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    return copy.deepcopy(value)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    return a == b


# ------------------------------------------------------------------- models of each door


def image_model(x: torch.Tensor) -> torch.Tensor:
    return torch.stack((x.mean((1, 2, 3)), x[:, :, :8].mean((1, 2, 3))), 1)


def series_model(x: torch.Tensor) -> torch.Tensor:
    flat = x.flatten(1)
    return torch.stack((flat.mean(1), flat[:, : flat.shape[1] // 2].mean(1)), 1)


def token_model(ids: torch.Tensor) -> torch.Tensor:
    return torch.stack(((ids == 3).float().sum(1), (ids == 5).float().sum(1)), 1)


def text_model(texts: list) -> np.ndarray:
    good = np.array([t.count("good") for t in texts], dtype=np.float64)
    return np.stack((good, 1.0 - good), 1)


def proba(rows: Any) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float64)
    p = 1 / (1 + np.exp(-rows[:, 0]))
    return np.stack((1 - p, p), 1)


@dataclass
class Door:
    """How to call one front door: its valid inputs, its model, and the call."""

    inputs: Callable[[], Any]
    model: Callable[..., Any]
    call: Callable[[Any, Any, int, Any], Any]
    mutations: tuple[str, ...]
    samples: str = "n_samples"


def _dataset(model: Any, x: Any, n: int, target: Any) -> Any:
    import tempfile

    from torchlime.dataset import explain_dataset, load_results

    with tempfile.TemporaryDirectory() as out:
        feats = torch.arange(16).view(1, 1, 4, 4) // 2
        explain_dataset(model, x, out, modality=feats, call=torchlime.Call(n_samples=n, target=target), progress=False)
        return load_results(out).load()


def _captum(model: Any, x: Any, n: int, target: Any) -> Any:
    from torchlime.compat.captum import Lime

    return Lime(model).attribute(x, target=target, n_samples=n, perturbations_per_eval=16)


def _lime(model: Any, x: Any, n: int, target: Any) -> Any:
    from torchlime.compat.lime import LimeTabularExplainer

    train = np.random.default_rng(0).normal(size=(50, 4))
    return LimeTabularExplainer(train, random_state=0).explain_instance(
        x, model, labels=(target,), num_samples=n, num_features=4
    )


TENSOR = ("nan", "inf", "empty", "numpy", "one_dim", "integer", "layout")
MODEL = ("model_nan", "model_shape", "model_raises")
COMMON = ("n0", "n1", "n_negative", "target_out_of_range", *MODEL)
FEATS16 = torch.arange(16).view(1, 1, 4, 4) // 2

DOORS: dict[str, Door] = {
    "image": Door(
        lambda: torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(0)),
        lambda: image_model,
        lambda m, x, n, t: torchlime.image.explain_image(
            m, x, segments="grid", n_segments=4, n_samples=n, target=t, generator=0
        ),
        (*TENSOR, *COMMON, "one_feature", "zero_features"),
    ),
    "spectrogram": Door(
        lambda: torch.rand(2, 16, 20, generator=torch.Generator().manual_seed(0)),
        lambda: series_model,
        lambda m, x, n, t: torchlime.audio.explain_spectrogram(m, x, n_samples=n, target=t, generator=0),
        (*TENSOR, *COMMON),
    ),
    "waveform": Door(
        lambda: torch.rand(2, 800, generator=torch.Generator().manual_seed(0)) - 0.5,
        lambda: series_model,
        lambda m, x, n, t: torchlime.audio.explain_waveform(
            m, x, sample_rate=8000, time_segments=5, n_samples=n, target=t, generator=0
        ),
        (*TENSOR, *COMMON),
    ),
    "tokens": Door(
        lambda: torch.tensor([[1, 3, 4, 5, 6, 2], [1, 5, 5, 3, 7, 2]]),
        lambda: token_model,
        lambda m, x, n, t: torchlime.text.explain_tokens(
            m, x, mask_id=0, special_ids=[1, 2], n_samples=n, target=t, generator=0
        ),
        ("empty", "numpy", "one_dim", "layout", "float_ids", *COMMON),
    ),
    "text": Door(
        lambda: ["a good film indeed", "not good at all"],
        lambda: text_model,
        lambda m, x, n, t: torchlime.text.explain_text(m, x, n_samples=n, target=t, generator=0),
        ("empty", "numpy", "one_word", "not_strings", *COMMON),
    ),
    "tabular": Door(
        lambda: torch.randn(3, 4, generator=torch.Generator().manual_seed(0)),
        lambda: proba,  # numpy rows in, numpy scores out (scikit-learn's predict_proba), or tensors
        lambda m, x, n, t: torchlime.tabular.explain_tabular(
            m,
            x,
            training_data=torch.randn(50, 4, generator=torch.Generator().manual_seed(1)),
            n_samples=n,
            target=t,
            generator=0,
        ),
        ("nan", "inf", "empty", "numpy", "one_dim", "integer", "layout", *COMMON),
    ),
    "explainer": Door(
        lambda: torch.rand(2, 1, 4, 4, generator=torch.Generator().manual_seed(0)),
        lambda: series_model,
        lambda m, x, n, t: torchlime.Explainer().explain(m, x, FEATS16, n_samples=n, target=t, generator=0),
        (*TENSOR, *COMMON, "one_feature", "zero_features"),
    ),
    "dataset": Door(
        lambda: torch.rand(3, 1, 4, 4, generator=torch.Generator().manual_seed(0)),
        lambda: series_model,
        _dataset,
        ("nan", "empty", "n0", "n_negative", "target_out_of_range", *MODEL),
    ),
    "captum": Door(
        lambda: torch.rand(2, 8, generator=torch.Generator().manual_seed(0)),
        lambda: series_model,
        _captum,
        ("nan", "inf", "empty", "numpy", "integer", *COMMON),
    ),
    "lime": Door(
        lambda: np.random.default_rng(1).normal(size=4),
        lambda: proba,
        _lime,
        ("nan", "inf", "empty", "layout", "not_numbers", *COMMON),
        samples="num_samples",
    ),
}


def mutate(name: str, door: str, x: Any) -> Any:
    """The door's valid inputs ``x`` made bad in the way ``name`` says."""
    if name in ("nan", "inf"):
        bad = float("nan") if name == "nan" else float("inf")
        if isinstance(x, np.ndarray):
            x = x.copy()
            x.flat[1] = bad
            return x
        x = x.clone()
        x.view(-1)[1] = bad
        return x
    if name == "empty":
        return x[:0]
    if name == "numpy":
        return np.array(x) if door == "text" else x.numpy()
    if name == "one_dim":
        return x[0].flatten()
    if name == "integer":
        return (x * 10).long()
    if name == "float_ids":
        return x.float()
    if name == "layout":
        if isinstance(x, np.ndarray):
            return x.reshape(2, 2)
        return x.unsqueeze(-1) if door == "tokens" else x.movedim(1, -1).unsqueeze(1)
    if name == "one_word":
        return ["good"]
    if name == "not_strings":
        return [1, 2]
    if name == "not_numbers":
        return np.array(["a", "b", "c", "d"])
    return x


def broken(name: str, model: Callable[..., Any]) -> Callable[..., Any]:
    if name == "model_nan":
        return lambda x: model(x) * float("nan")
    if name == "model_shape":
        return lambda x: model(x)[:1]
    if name == "model_raises":

        def fails(x: Any) -> Any:
            raise RuntimeError("the model is broken")

        return fails
    return model


CASES = [(d, m) for d, door in DOORS.items() for m in door.mutations]


class Hang(Exception):
    pass


@pytest.mark.parametrize(("door", "mutation"), CASES, ids=[f"{d}-{m}" for d, m in CASES])
def test_every_door_gives_a_result_or_a_clear_error(door, mutation):
    spec = DOORS[door]
    x = mutate(mutation, door, spec.inputs())
    kept = snapshot(x)
    model = broken(mutation, spec.model())
    n = {"n0": 0, "n1": 1, "n_negative": -3}.get(mutation, 64)
    target = 99 if mutation == "target_out_of_range" else (0 if door in ("captum", "lime") else None)
    call = spec.call
    if mutation in ("one_feature", "zero_features"):  # every element one feature, or none (ids < 0)
        fill = 0 if mutation == "one_feature" else -1
        if door == "image":
            call = lambda m, x, n, t: torchlime.image.explain_image(  # noqa: E731
                m, x, segments=torch.full((1, 1, 16, 16), fill), n_samples=n, target=t
            )
        else:
            call = lambda m, x, n, t: torchlime.explain(  # noqa: E731
                m, x, torch.full((1, 1, 4, 4), fill), n_samples=n, target=t
            )

    def alarm(*_: Any) -> None:
        raise Hang(f"{door}/{mutation} ran past {TIMEOUT} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(TIMEOUT)
    try:
        result = call(model, x, n, target)
    except Hang:
        raise
    except ModelCallError:
        result = None
    except RuntimeError as err:  # lime passes its classifier_fn's own error on as it was raised, and so does its layer
        if not (door == "lime" and mutation == "model_raises" and str(err) == "the model is broken"):
            raise
        result = None
    except (TypeError, ValueError) as err:
        text = str(err)
        assert "`" in text or "model" in text or "output" in text, f"{type(err).__name__} names nothing: {text}"
        result = None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert same(x, kept), "the caller's data changed"
    if mutation == "numpy" and door != "captum":  # one numpy rule at every door (captum refuses arrays, as captum)
        assert result is not None, f"{door} refused numpy inputs"
    if result is None:
        return
    coef = getattr(result, "coef", result)
    if door == "lime":
        coef = torch.tensor([w for _, w in result.as_list(label=0)])
    assert isinstance(coef, torch.Tensor) and torch.isfinite(coef).all(), f"{door}/{mutation}: not finite"
    assert mutation not in (
        "model_nan",
        "model_shape",
        "model_raises",
        "n0",
        "n_negative",
        "target_out_of_range",
        "one_feature",
        "zero_features",
    ), f"{door}/{mutation} gave a result where an error was due"
