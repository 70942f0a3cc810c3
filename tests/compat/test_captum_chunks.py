"""``torchlime.compat.captum``: rows per ``forward_func`` call.

``perturbations_per_eval`` left out means torchlime's chunk rule (larger chunks than captum's default
of 1); a value given is a cap on the rows per call, 1 included; a model that returns one value per batch
gets one perturbed batch per call either way. The chunks never change the numbers: the attributions
are bit-identical (``torch.equal``) whatever the chunks, for a model whose rows do not depend on each
other.
"""

from __future__ import annotations

import inspect

import pytest
import torch

from torchlime.compat.captum import KernelShap, Lime
from torchlime.typing import UNSET

CLASSES = [Lime, KernelShap]
IDS = ["lime", "kernel_shap"]


class Recording(torch.nn.Module):
    """A small MLP (3 -> 2, or three 3-wide inputs plus a scale -> 2) that records the rows of every call.

    Its layers are products and sums per row, so a row's output does not depend on the rows beside it
    (a BLAS matrix product may take another path for a single row and differ in the last bit).
    """

    def __init__(self, inputs: int = 1, scalar: bool = False) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w1 = torch.nn.Parameter(torch.randn(3 * inputs, 8, generator=g))
        self.w2 = torch.nn.Parameter(torch.randn(8, 2, generator=g))
        self.scalar = scalar
        self.rows: list[int] = []

    def forward(self, *args: object) -> torch.Tensor:
        xs = [a for a in args if isinstance(a, torch.Tensor)]
        scale = next((float(a) for a in args if isinstance(a, (int, float))), 1.0)
        self.rows.append(xs[0].shape[0])
        hidden = torch.relu((torch.cat(xs, 1).unsqueeze(-1) * self.w1).sum(1))
        out = (hidden.unsqueeze(-1) * self.w2).sum(1) * scale
        return out.sum() if self.scalar else out


X = torch.tensor([[1.0, 2.0, 3.0], [4.0, -5.0, 6.0], [0.5, 0.0, -2.0]])
SCENARIOS = {
    "single": dict(inputs=X[:1], target=0),
    "batch_mask": dict(inputs=X, target=[1, 0, 1], feature_mask=torch.tensor([[0, 0, 1], [0, 1, 2], [2, 1, 1]])),
    "tuple_args": dict(
        inputs=(X, X.flip(0), X * 2),
        target=1,
        feature_mask=(torch.tensor([[0, 1, 0]]), torch.tensor([[1, 2, 3]]), torch.tensor([[3, 3, 4]])),
        additional_forward_args=(2,),
        baselines=(0.5, 0.0, torch.tensor([[1.0, -1.0, 0.0]])),
    ),
}


def attribute(cls: type, model: Recording, seed: int = 1234, **kw: object) -> torch.Tensor:
    """One attribution after ``torch.manual_seed(seed)``, with the model's record cleared first."""
    model.rows.clear()
    torch.manual_seed(seed)
    kw.setdefault("n_samples", 60)
    inputs = kw.pop("inputs")
    return cls(model).attribute(inputs, **kw)


def sample_calls(model: Recording, kw: dict) -> list[int]:
    """The rows of each call after captum's probe of the unperturbed batch (made for bsz > 1 or no target)."""
    inputs = kw["inputs"]
    bsz = (inputs[0] if isinstance(inputs, tuple) else inputs).shape[0]
    return model.rows[1:] if bsz > 1 or kw.get("target") is None else list(model.rows)


def test_the_signature_is_captums_with_the_chunk_rule_as_default() -> None:
    for cls in CLASSES:
        params = inspect.signature(cls.attribute).parameters
        assert params["perturbations_per_eval"].default is UNSET
        captum = pytest.importorskip("captum.attr")
        theirs = inspect.signature(getattr(captum, cls.__name__).attribute).parameters
        assert list(params) == list(theirs)
        for name, p in params.items():
            if name != "perturbations_per_eval":
                assert p.default == theirs[name].default, name


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_explicit_one_is_one_row_per_call(cls: type, scenario: str) -> None:
    kw = dict(SCENARIOS[scenario])
    model = Recording(inputs=3 if scenario == "tuple_args" else 1)
    attribute(cls, model, perturbations_per_eval=1, **kw)
    calls = sample_calls(model, kw)
    assert calls and set(calls) == {1}


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_unset_gives_larger_chunks_and_the_same_bits(cls: type, scenario: str) -> None:
    kw = dict(SCENARIOS[scenario])
    model = Recording(inputs=3 if scenario == "tuple_args" else 1)
    one = attribute(cls, model, perturbations_per_eval=1, **kw)
    rows_one = sum(sample_calls(model, kw))
    default = attribute(cls, model, **kw)
    calls = sample_calls(model, kw)
    assert max(calls) > 1 and len(calls) < rows_one and sum(calls) == rows_one
    capped = attribute(cls, model, perturbations_per_eval=7, **kw)
    assert max(sample_calls(model, kw)) == 7
    one, default, capped = (t if isinstance(t, tuple) else (t,) for t in (one, default, capped))
    for a, b, c in zip(one, default, capped):
        assert torch.equal(a, b) and torch.equal(a, c)
    coefs = [attribute(cls, model, perturbations_per_eval=p, return_input_shape=False, **kw) for p in (1, UNSET)]
    assert torch.equal(coefs[0], coefs[1])


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_a_value_per_batch_is_one_perturbed_batch_per_call(cls: type) -> None:
    """captum's "scalar per batch" forward: the batch is one example, each call one perturbed batch."""
    model = Recording(scalar=True)
    kw = dict(inputs=X, target=None, feature_mask=torch.tensor([[0, 0, 1]]))
    default = attribute(cls, model, **kw)
    calls = list(model.rows)
    one = attribute(cls, model, perturbations_per_eval=1, **kw)
    assert model.rows == calls and set(calls) == {X.shape[0]}  # the probe, then one perturbed batch per call
    assert default.shape == (1, 3) and torch.equal(default, one)
    with pytest.raises(ValueError, match=r"`perturbations_per_eval` must be 1 \(or left out\).*got 2"):
        attribute(cls, model, perturbations_per_eval=2, **kw)


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
@pytest.mark.parametrize("value, error", [(None, TypeError), (0, ValueError), (2.0, TypeError)])
def test_an_explicit_value_is_still_checked(cls: type, value: object, error: type) -> None:
    model = Recording()
    with pytest.raises(error, match="`perturbations_per_eval` must be an int"):
        attribute(cls, model, inputs=X[:1], target=0, perturbations_per_eval=value)
    assert model.rows == []
