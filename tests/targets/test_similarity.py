"""``Similarity``: scores equal a slow per-sample cosine reference (shared and per-input references,
structured outputs); a planted colour patch in a CLIP-like two-tower model is the top segment of its
prompt; errors name their argument; the caller's tensors are never modified."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torchlime
from torchlime.targets import Similarity, SimilarityInfo

SIZE = 16
CELLS = (torch.arange(SIZE).view(-1, 1) // 4 * 4 + torch.arange(SIZE) // 4).view(1, 1, SIZE, SIZE)  # 16 cells


class Tower(torch.nn.Module):
    """A seeded image tower: (B, 3, 16, 16) -> (B, 8) embeddings, or a structured output (``kind``)."""

    def __init__(self, kind: str = "tensor") -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3, stride=2), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(196, 8)
        )
        self.kind = kind

    def forward(self, x):
        e = self.body(x)
        if self.kind == "dict":
            return {"logits_per_image": e[:, :2], "image_embeds": e}
        if self.kind == "tokens":  # (B, L, D): mean-pooled
            return torch.stack((e, 2 * e + 1, -e), 1)
        if self.kind == "hf":
            from transformers.modeling_outputs import BaseModelOutputWithPooling

            return BaseModelOutputWithPooling(last_hidden_state=torch.stack((e, -e), 1) * 7, pooler_output=e)
        return e


def embedding_of(out):
    if isinstance(out, torch.Tensor):
        return out if out.ndim == 2 else out.mean(1)
    return out["image_embeds"] if "image_embeds" in out else out.pooler_output


def slow_scores(model, x, exp, fill, reference):
    """(B, S, R): every sample rebuilt from its mask and the fill, embedded alone, compared one by one."""
    samples, feats = exp.samples, exp.features
    b_n, s_n = samples.shape[:2]
    out = torch.zeros(b_n, s_n, reference.shape[-2])
    for b in range(b_n):
        refs = reference if reference.ndim == 2 else reference[b]
        for s in range(s_n):
            with torch.no_grad():
                e = embedding_of(model(torch.where(samples[b, s][feats[b]], x[b], fill)[None]))[0]
            for r in range(refs.shape[0]):
                out[b, s, r] = F.cosine_similarity(e, refs[r].float(), dim=0)
    return out


@pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")
@pytest.mark.parametrize("kind", ["tensor", "dict", "tokens", "hf"])
@pytest.mark.parametrize("per_input", [False, True], ids=["shared", "per-input"])
def test_scores_equal_a_slow_reference(kind, per_input):
    if kind == "hf":
        pytest.importorskip("transformers")
    x = torch.rand(2, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(1))
    gen = torch.Generator().manual_seed(2)
    reference = torch.randn(2, 3, 8, generator=gen) if per_input else torch.randn(3, 8, generator=gen).double()
    model, fill = Tower(kind), 0.5
    exp = torchlime.explain(
        model, x, CELLS, target=Similarity(reference), n_samples=20, baseline=fill, return_samples=True
    )
    torch.testing.assert_close(exp.outputs, slow_scores(model, x, exp, fill, reference), atol=1e-5, rtol=1e-5)
    assert exp.target.tolist() == [[0, 1, 2]] * 2 and exp.target_valid.all()
    assert exp.run.targets == SimilarityInfo() and exp.meta["targets"] == {"kind": "similarity"}


def test_shared_and_repeated_references_agree_whatever_the_chunk():
    x, reference = torch.rand(2, 3, SIZE, SIZE), torch.randn(4, 8)
    outs = [
        torchlime.explain(Tower(), x, CELLS, target=Similarity(ref), n_samples=30, batch_size=c, return_samples=True)
        for ref, c in ((reference, 60), (reference.expand(2, 4, 8), 7), (reference, 1))
    ]
    for other in outs[1:]:
        torch.testing.assert_close(other.outputs, outs[0].outputs, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(other.coef, outs[0].coef, atol=1e-5, rtol=1e-5)


class ColourTower(torch.nn.Module):
    """The image tower of a CLIP-like pair: for each of red, green, blue, the evidence of a 4x4 patch of that
    colour (the best cell's excess of the colour over the others, above 0.5), plus a constant, through an
    orthonormal (5 -> 8) projection."""

    def __init__(self, proj: torch.Tensor) -> None:
        super().__init__()
        self.proj = proj

    def forward(self, x):
        excess = F.avg_pool2d(2 * x - x.sum(1, keepdim=True), 4)  # (B, 3, 4, 4)
        evidence = (excess - 0.5).relu().amax((2, 3))  # (B, 3)
        return torch.cat((evidence, torch.full_like(evidence[:, :2], 0.1)), 1) @ self.proj.T


class TextTower(torch.nn.Module):
    """The text tower: a fixed embedding per prompt ("red", "green", "blue"), through the same projection."""

    def __init__(self, proj: torch.Tensor) -> None:
        super().__init__()
        prompts = torch.cat((torch.eye(3), torch.full((3, 2), 0.1)), 1)
        self.table = torch.nn.Embedding.from_pretrained(prompts @ proj.T)

    def forward(self, ids):
        return self.table(ids)


@pytest.mark.parametrize("per_input", [False, True], ids=["shared", "per-input"])
def test_planted_patch_is_the_top_segment_of_its_prompt(per_input):
    proj = torch.linalg.qr(torch.randn(8, 5, generator=torch.Generator().manual_seed(0)))[0]  # (8, 5)
    image, text = ColourTower(proj), TextTower(proj)
    red_cells, green_cells = [0, 6, 13, 3], [15, 9, 2, 12]
    x = torch.rand(4, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(4))
    for b, (r, g) in enumerate(zip(red_cells, green_cells)):
        for cell, colour in ((r, (1.0, 0.0, 0.0)), (g, (0.0, 1.0, 0.0))):
            x[b, :, cell // 4 * 4 : cell // 4 * 4 + 4, cell % 4 * 4 : cell % 4 * 4 + 4] = torch.tensor(colour).view(
                3, 1, 1
            )
    ids = torch.tensor([[0, 1], [1, 0], [0, 1], [1, 0]]) if per_input else torch.tensor([0, 1])
    reference = text(ids)  # (R, D) or (B, R, D): the prompts' embeddings
    exp = torchlime.explain(image, x, CELLS, target=Similarity(reference), n_samples=300, generator=0)
    top, _ = exp.top_features(1, by="abs")
    first = ids if per_input else ids.expand(4, -1)  # which prompt each target is
    for b in range(4):
        for t in range(2):
            planted = red_cells[b] if int(first[b, t]) == 0 else green_cells[b]
            assert int(top[b, t, 0]) == planted and exp.coef[b, t, planted] > 0, (b, t)


@pytest.mark.parametrize(
    "reference,error,match",
    [
        (torch.randn(8), ValueError, r"`reference` must be embeddings \(R, D\) or \(B, R, D\)"),
        (torch.randn(0, 8), ValueError, r"with R >= 1 and D >= 1"),
        (torch.randn(3, 0), ValueError, r"with R >= 1 and D >= 1"),
        (torch.ones(3, 8, dtype=torch.long), TypeError, r"`reference` must be floating embeddings"),
        (torch.full((3, 8), float("nan")), ValueError, r"`reference` must be finite"),
        ([[1.0, 2.0]], TypeError, r"`reference` must be a torch.Tensor"),
    ],
)
def test_bad_references_are_named(reference, error, match):
    with pytest.raises(error, match=match):
        Similarity(reference)


class Pixels(torch.nn.Module):
    def forward(self, x):
        return x


@pytest.mark.parametrize(
    "model,reference,match",
    [
        (Tower(), torch.randn(3, 5), r"`reference` embeddings have 5 dims, the model's have 8"),
        (Tower(), torch.randn(3, 2, 8), r"`reference` of shape \(3, 2, 8\) must hold one set per input \(2\)"),
        (Pixels(), torch.randn(3, 8), r"Similarity needs \(rows, D\) embeddings from the model, got shape"),
    ],
)
def test_bad_calls_are_named_and_nothing_is_modified(model, reference, match):
    x, ref0 = torch.rand(2, 3, SIZE, SIZE), reference.clone()
    x0 = x.clone()
    with pytest.raises(ValueError, match=match):
        torchlime.explain(model, x, CELLS, target=Similarity(reference), n_samples=16)
    assert torch.equal(x, x0) and torch.equal(reference, ref0)


def test_no_tensor_in_the_output_is_named():
    x, reference = torch.rand(2, 3, SIZE, SIZE), torch.randn(2, 8)
    with pytest.raises(ValueError, match=r"Similarity needs a tensor from the model's output \(pass `output=`"):
        torchlime.explain(lambda x: {"text": "none"}, x, CELLS, target=Similarity(reference), n_samples=8)


def test_the_callers_reference_is_copied():
    reference, x = torch.randn(3, 8), torch.rand(2, 3, SIZE, SIZE)
    target = Similarity(reference)
    exp = torchlime.explain(Tower(), x, CELLS, target=target, n_samples=64, generator=0)
    reference.zero_()  # Similarity kept its own copy: the same explanation again
    again = torchlime.explain(Tower(), x, CELLS, target=target, n_samples=64, generator=0)
    assert torch.equal(exp.coef, again.coef) and exp.coef.abs().sum() > 0
