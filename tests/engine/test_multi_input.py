"""Models of several inputs: tuples of tensors, unperturbed extra arguments, per-tensor fills, scalar outputs."""

from __future__ import annotations

import pytest
import torch

import torchlime
from torchlime.stages.perturb.packing import carrier_dtype

pytestmark = pytest.mark.filterwarnings("ignore::torchlime.UnreliableExplanationWarning")

OLS = torchlime.Ridge(alpha=0.0, dtype=torch.float64)


class ImageAndMeta(torch.nn.Module):
    """A linear model of an image (B, 1, 4, 4) and a metadata vector (B, 3), times an optional scale."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.image = torch.nn.Linear(16, 2, bias=False)
        self.meta = torch.nn.Linear(3, 2, bias=False)
        self.seen: list[tuple] = []

    def forward(self, image: torch.Tensor, meta: torch.Tensor, scale: object = 1.0) -> torch.Tensor:
        self.seen.append((image.clone(), meta.clone(), scale))
        out = self.image(image.flatten(1).float()) + self.meta(meta.float())
        return out * scale if not isinstance(scale, torch.Tensor) else out * scale.view(-1, 1)


def contributions(model: ImageAndMeta, image: torch.Tensor, meta: torch.Tensor, t: int) -> torch.Tensor:
    """Exact per-element contributions w·x of class t with a fill of 0: (B, 16 + 3)."""
    return torch.cat([model.image.weight[t] * image.flatten(1), model.meta.weight[t] * meta], 1).detach()


@pytest.fixture
def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.rand(2, 1, 4, 4, generator=g), torch.rand(2, 3, generator=g)


def test_one_feature_per_element_recovers_a_linear_model_exactly(data):
    image, meta = data
    model = ImageAndMeta()
    exp = torchlime.explain(model, (image, meta), None, target=1, n_samples=400, surrogate=OLS, kernel="uniform")
    assert exp.coef.shape == (2, 1, 19)
    assert exp.run.input_shapes == [[1, 4, 4], [3]]
    torch.testing.assert_close(
        exp.coef[:, 0].double(), contributions(model, image, meta, 1).double(), atol=1e-4, rtol=0
    )
    maps = exp.heatmaps(0)
    assert [tuple(m.shape) for m in maps] == [(2, 1, 4, 4), (2, 3)]
    torch.testing.assert_close(maps[1], exp.coef[:, 0, 16:])


def test_feature_maps_per_tensor_and_ids_shared_across_tensors(data):
    image, meta = data
    model = ImageAndMeta()
    quad = (torch.arange(16).view(1, 1, 4, 4) % 4 >= 2).long()  # ids 0 (left half) and 1 (right half)
    meta_ids = torch.tensor([[1, 2, 2]])  # meta[0] shares feature 1 with the right half of the image
    exp = torchlime.explain(
        model, (image, meta), (quad, meta_ids), target=0, n_samples=64, surrogate=OLS, kernel="uniform"
    )
    c = contributions(model, image, meta, 0)
    img = c[:, :16].view(2, 4, 4)
    expected = torch.stack([img[:, :, :2].sum((1, 2)), img[:, :, 2:].sum((1, 2)) + c[:, 16], c[:, 17] + c[:, 18]], 1)
    torch.testing.assert_close(exp.coef[:, 0].double(), expected.double(), atol=1e-4, rtol=0)


def test_additional_forward_args_reach_the_model_unperturbed_and_follow_their_rows(data):
    image, meta = data
    model = ImageAndMeta()
    scale = torch.tensor([1.0, 3.0])  # per input: first dim is B, gathered per row
    exp = torchlime.explain(
        model, (image, meta), None, target=0, n_samples=200, surrogate=OLS, kernel="uniform",
        additional_forward_args=(scale,),
    )  # fmt: skip
    expected = contributions(model, image, meta, 0) * scale.view(2, 1)
    torch.testing.assert_close(exp.coef[:, 0].double(), expected.double(), atol=1e-4, rtol=0)
    model.seen.clear()
    torchlime.explain(model, (image, meta), None, n_samples=8, additional_forward_args=2.0, batch_size=4)
    assert all(s == 2.0 for _, _, s in model.seen)


def test_single_tensor_with_additional_args_and_text_with_attention_mask():
    class Tokens(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.emb = torch.nn.Embedding(10, 1)

        def forward(self, ids: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
            return (self.emb(ids).squeeze(-1) * attention).sum(1, keepdim=True)

    ids = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0]])
    attention = (ids != 0).float()
    features = torch.where(ids == 0, -1, torch.arange(4))  # padding never perturbed
    exp = torchlime.explain(
        Tokens(), ids, features, n_samples=64, baseline=0, additional_forward_args=(attention,),
        surrogate=OLS, kernel="uniform",
    )  # fmt: skip
    emb = Tokens().emb.weight.detach().squeeze(-1)
    expected = torch.where(ids == 0, 0.0, (emb[ids] - emb[0]) * attention)
    for b, n in enumerate((3, 2)):
        torch.testing.assert_close(exp.coef[b, 0, :n].double(), expected[b, :n].double(), atol=1e-4, rtol=0)


def test_fills_per_tensor_and_bool_inputs(data):
    image, meta = data
    model = ImageAndMeta()
    torchlime.explain(model, (image, meta), None, n_samples=16, baseline=(0.5, -2.0), batch_size=16)
    hidden_image = torch.cat([s[0] for s in model.seen])
    hidden_meta = torch.cat([s[1] for s in model.seen])
    assert set(hidden_image.unique().tolist()) - set(image.unique().tolist()) == {0.5}
    assert set(hidden_meta.unique().tolist()) - set(meta.unique().tolist()) == {-2.0}
    assert hidden_image.dtype == image.dtype
    seen = []

    def on_bools(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        seen.append((a.dtype, b.dtype))
        return a.float().sum(1, keepdim=True) - b.float().sum(1, keepdim=True)

    flags = torch.tensor([[True, False, True]])
    counts = torch.tensor([[2, 5]])
    exp = torchlime.explain(on_bools, (flags, counts), None, n_samples=64, baseline=(True, 0), surrogate=OLS)
    assert set(seen) == {(torch.bool, torch.long)}
    torch.testing.assert_close(exp.coef[0, 0].double(), torch.tensor([0.0, -1.0, 0.0, -2.0, -5.0]).double())


def test_scalar_outputs_one_row_per_call_or_a_clear_refusal(data):
    image, meta = data

    def total(a: torch.Tensor, b: torch.Tensor) -> float:
        return float(a.sum() + 2 * b.sum())

    exp = torchlime.explain(total, (image[:1], meta[:1]), None, n_samples=64, batch_size=1, surrogate=OLS)
    expected = torch.cat([image[0].flatten(), 2 * meta[0]])
    torch.testing.assert_close(exp.coef[0, 0].double(), expected.double(), atol=1e-4, rtol=0)
    zero_d = torchlime.explain(lambda x: x.sum(), image[:1], torch.arange(16).view(1, 1, 4, 4) // 4, batch_size=1)
    assert zero_d.coef.shape == (1, 1, 4)
    with pytest.raises(ValueError, match=r"one number for a batch of \d+ rows.*batch_size=1"):
        torchlime.explain(total, (image[:1], meta[:1]), None, n_samples=64, batch_size=8)


def test_same_seed_same_bits_and_inputs_untouched(data):
    image, meta = data
    before = (image.clone(), meta.clone())
    a = torchlime.explain(ImageAndMeta(), (image, meta), None, n_samples=100, generator=3)
    b = torchlime.explain(ImageAndMeta(), [image, meta], None, n_samples=100, generator=3)
    assert torch.equal(a.coef, b.coef) and torch.equal(a.intercept, b.intercept)
    assert torch.equal(image, before[0]) and torch.equal(meta, before[1])


def test_carrier_dtype_holds_every_value_exactly():
    assert carrier_dtype([torch.zeros(1, dtype=torch.float32)] * 2) == torch.float32
    assert carrier_dtype([torch.zeros(1, dtype=torch.float16), torch.zeros(1)]) == torch.float32
    assert carrier_dtype([torch.zeros(1), torch.zeros(1, dtype=torch.long)]) == torch.float64


@pytest.mark.parametrize(
    "inputs, features, kwargs, match",
    [
        ((torch.rand(2, 3), torch.rand(3, 3)), None, {}, r"same batch size.*inputs\[1\]"),
        ((torch.rand(2, 3), torch.rand(2, 3)), (torch.zeros(1, 3, dtype=torch.long),), {}, r"tuple of 2 feature"),
        ((torch.rand(2, 3), torch.rand(2, 3)), (torch.zeros(1, 4, dtype=torch.long),) * 2, {}, r"features\[0\]"),
        ((torch.rand(2, 3), torch.rand(2, 3)), None, {"baseline": (0, 0, 0)}, r"tuple of 2 fills"),
        ((torch.rand(2, 3), torch.rand(2, 3)), None, {"normalize": ([0.5], [0.5])}, r"`normalize`"),
        ((), None, {}, r"at least one tensor"),
    ],
)
def test_bad_tuples_are_refused_by_name(inputs, features, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        torchlime.explain(lambda *a: a[0].sum(1), inputs, features, n_samples=8, **kwargs)


def test_no_feature_map_means_one_feature_per_element_for_one_tensor_too():
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(6, 2))
    x = torch.rand(3, 2, 3)
    implicit = torchlime.explain(model, x, target=1, n_samples=64, generator=4)
    explicit = torchlime.explain(model, x, torch.arange(6).view(1, 2, 3), target=1, n_samples=64, generator=4)
    assert implicit.coef.shape == (3, 1, 6)
    assert torch.equal(implicit.coef, explicit.coef) and torch.equal(implicit.intercept, explicit.intercept)
