"""The detector target's kernels (``kernels/torchlime_kernels/boxes.py``) against their torch references.

Cases run through Triton's interpreter on the CPU (in a child process, ``tests/helpers/triton_interp.py``)
and compiled on a GPU where there is one. ``rank`` (the targets: counts, order, labels, which exist) must
match exactly; ``match`` (the D-RISE similarities) to float32 rounding, NaN where the reference has NaN.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

import torchlime  # noqa: E402
from torchlime import _backend  # noqa: E402
from torchlime.kernels import boxes as K  # noqa: E402
from torchlime.kernels.reference_boxes import match_torch, rank_torch  # noqa: E402
from torchlime.targets import Boxes  # noqa: E402

from tests.helpers.triton_interp import KERNEL_DEVICES, kernel_device, run_interp_cases_in_child  # noqa: E402

INTERPRETED = K.interpreted()
HAS_CUDA = torch.cuda.is_available()


@pytest.fixture(params=KERNEL_DEVICES)
def device(request) -> str:
    """Tensor device of a kernel case ("cpu" for the interpreter)."""
    return kernel_device(request, INTERPRETED)


def _detections(c: int, k: int, seed: int, odd: bool = False):
    """(c, K) random detections: boxes of any size (some empty), labels -1..2 (-1: padding), scores in [0, 1);
    ``odd``: a NaN corner, a NaN score, an infinite corner and a negative score too."""
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(c, k, 2, generator=g) * 50
    boxes = torch.cat([xy, xy + torch.rand(c, k, 2, generator=g) * 30 - 3], -1)
    labels, scores = torch.randint(-1, 3, (c, k), generator=g), torch.rand(c, k, generator=g)
    if odd and k > 2:
        boxes[0, 0, 1], scores[-1, -1], boxes[-1, 1, 2], scores[0, 2] = float("nan"), float("nan"), float("inf"), -0.5
    return boxes, labels, scores


ODD = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the interpreter's NaN


@ODD
@pytest.mark.parametrize(
    ("b", "k", "threshold"), [(1, 5, 0.5), (3, 70, 0.3), (2, 0, 0.5), (4, 9, float("-inf")), (2, 300, 0.9), (2, 6, 2.0)]
)
def test_rank_equals_the_reference(device, b, k, threshold):
    boxes, labels, scores = (t.to(device) for t in _detections(b, k, seed=b + k, odd=True))
    assert K.supports_rank(boxes, labels, scores)
    got, want = K.rank(boxes, labels, scores, threshold), rank_torch(boxes, labels, scores, threshold)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape and g.device == w.device
        assert torch.equal(g.nan_to_num(), w.nan_to_num()) and torch.equal(g.isnan(), w.isnan())


def test_rank_rounds_the_threshold_as_torch_does(device):
    """A float32 score equal to the threshold rounded to float32 is kept, as torch's comparison keeps it."""
    scores = torch.tensor([[0.1, 0.3]], device=device)
    threshold = float(scores[0, 0].double()) + 1e-12  # above the score in float64, the same in float32
    boxes, labels = torch.zeros(1, 2, 4, device=device), torch.zeros(1, 2, dtype=torch.long, device=device)
    got, want = K.rank(boxes, labels, scores, threshold), rank_torch(boxes, labels, scores, threshold)
    assert want[2].tolist() == [[True, True]] and torch.equal(got[2], want[2])


@ODD
@pytest.mark.parametrize(
    ("b", "c", "t", "k", "rows", "odd"),
    [(1, 5, 2, 4, False, False), (3, 7, 20, 70, True, True), (2, 2, 3, 0, False, False), (1, 3, 1, 130, False, True),
     (3, 3, 5, 8, False, True), (2, 4, 40, 3, True, False)],
)  # fmt: skip
def test_match_equals_the_reference(device, b, c, t, k, rows, odd):
    boxes, labels, _ = _detections(b, t + 2, seed=t)
    valid = torch.rand(b, t + 2, generator=torch.Generator().manual_seed(c)) > 0.2
    # the targets are the first T of longer rows (views, as bind leaves them)
    targets = tuple(x.to(device)[:, :t] for x in (boxes, torch.where(valid, labels, -1), valid))
    which = torch.randint(0, b, (c,), generator=torch.Generator().manual_seed(k)).to(device) if rows else None
    found = tuple(x.to(device) for x in _detections(c if rows or b == 1 else b, k, seed=k + 1, odd=odd))
    assert K.supports_match(*targets, which, *found)
    got, want = K.match(*targets, which, *found), match_torch(*targets, which, *found)
    assert got.dtype == want.dtype and got.shape == want.shape and got.device == want.device
    torch.testing.assert_close(got, want, equal_nan=True)
    assert bool(want.isnan().any()) == odd or not k  # the odd cases reach the NaN branch


def test_supports_refuses_what_the_kernels_cannot_take(device):
    boxes, labels, scores = (t.to(device) for t in _detections(2, 6, seed=0))
    assert not K.supports_rank(boxes.double(), labels, scores)
    assert not K.supports_rank(boxes, labels.int(), scores)
    assert not K.supports_rank(boxes[:, ::2], labels[:, ::2], scores[:, ::2])  # not contiguous
    assert not K.supports_rank(torch.zeros(2, K.MAX_DETECTIONS + 1, 4, device=device), labels, scores)
    valid = torch.ones(2, 6, dtype=torch.bool, device=device)
    targets = (boxes, labels, valid)
    assert K.supports_match(*targets, None, boxes, labels, scores)
    assert not K.supports_match(*targets, None, boxes[:1], labels[:1], scores[:1])  # 2 rows of targets, 1 row
    assert not K.supports_match(boxes, labels, valid.long(), None, boxes, labels, scores)
    assert not K.supports_match(*targets, torch.zeros(3, dtype=torch.long, device=device), boxes, labels, scores)
    assert not K.supports_match(boxes.transpose(0, 1), labels.t(), valid.t(), None, boxes, labels, scores)


def test_cpu_tensors_need_the_interpreter():
    if INTERPRETED:
        pytest.skip("this process interprets the kernels: CPU tensors are their tensors")
    boxes, labels, scores = _detections(2, 6, seed=0)
    assert not K.supports_rank(boxes, labels, scores)
    assert not K.supports_match(boxes, labels, labels >= 0, None, boxes, labels, scores)


class _Detector(torch.nn.Module):
    """Three fixed boxes whose scores follow the brightness of their windows."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("boxes", torch.tensor([[2.0, 2, 12, 12], [16, 16, 30, 30], [0, 16, 14, 30]]))

    def forward(self, x: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        windows = (x[:, :, 2:12, 2:12], x[:, :, 16:30, 16:30], x[:, :, 16:, :14])
        w = torch.stack([v.mean((1, 2, 3)) for v in windows], 1) + torch.tensor([0.0, 0.0, 0.1], device=x.device)
        labels = torch.tensor([1, 2, 1], device=x.device)
        return [dict(boxes=self.boxes, labels=labels, scores=s) for s in w]


def test_an_explanation_through_the_kernels_equals_the_torch_paths(device, monkeypatch):
    """``explain_image`` with ``Boxes`` (two images, one with fewer boxes: padded targets) through the kernel
    doors (TORCHLIME_BACKEND=triton) agrees with the torch references' explanation."""
    images = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(5)).to(device) * 0.8 + 0.2
    images[1, :, 16:, :14] = 0.1  # the third box of the second image scores below the threshold
    model = _Detector().to(device)
    got, calls = {}, []
    real_rank, real_match = K.rank, K.match
    monkeypatch.setattr(K, "rank", lambda *a: calls.append("rank") or real_rank(*a))
    monkeypatch.setattr(K, "match", lambda *a: calls.append("match") or real_match(*a))
    for mode in ("triton", "torch"):
        monkeypatch.setenv("TORCHLIME_BACKEND", mode)
        got[mode] = torchlime.explain_image(
            model, images, segments="grid", target=Boxes(), n_samples=32, generator=0, return_samples=True
        )
        if mode == "triton":  # one rank at the binding, one match of the whole pass
            assert calls == ["rank", "match"]
    a, w = got["triton"], got["torch"]
    assert torch.equal(a.target, w.target) and torch.equal(a.target_valid, w.target_valid)
    assert w.target_valid.tolist() == [[True, True, True], [True, True, False]]
    assert a.run.targets == w.run.targets  # the boxes as the host read them
    for name in ("outputs", "coef", "intercept", "score", "local_pred"):
        torch.testing.assert_close(getattr(a, name), getattr(w, name), equal_nan=True, atol=1e-5, rtol=1e-4)


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_backend_uses_the_kernels_on_cuda(monkeypatch):
    if INTERPRETED:
        pytest.skip("the cuda cases check the compiled kernels; this process interprets them")
    monkeypatch.delenv("TORCHLIME_BACKEND", raising=False)
    boxes, labels, scores = (t.cuda() for t in _detections(2, 9, seed=4))
    calls = []
    real_rank, real_match = K.rank, K.match
    monkeypatch.setattr(K, "rank", lambda *a: calls.append("rank") or real_rank(*a))
    monkeypatch.setattr(K, "match", lambda *a: calls.append("match") or real_match(*a))
    packed, ranked, valid = _backend.rank_boxes(boxes, labels, scores, 0.5)
    _backend.match_boxes((packed[: 2 * 9 * 4].view(2, 9, 4), ranked, valid), None, (boxes, labels, scores))
    assert calls == ["rank", "match"]


def test_interpreter_cases_in_child_process(request):
    """Runs the selected ``[interp]`` cases in ``python -m pytest`` with TRITON_INTERPRET=1."""
    run_interp_cases_in_child(request, INTERPRETED)
