"""The fused hash-word kernel (``kernels/torchlime_kernels/hash_words.py``) against its torch reference, bit for bit.

Cases run through Triton's interpreter on the CPU (in a child process, ``tests/helpers/triton_interp.py``)
and compiled on a GPU where there is one. The words feed every mask and random fill, so any difference
would change explanations: the checks are exact.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from torchlime import _backend  # noqa: E402
from torchlime.kernels import hash_words as K  # noqa: E402
from torchlime.kernels.reference_hash import hash_words_torch, row_hash_torch  # noqa: E402
from torchlime.stages.sampling import BernoulliSampler, Rows, make_key  # noqa: E402

from tests.helpers.triton_interp import KERNEL_DEVICES, kernel_device, run_interp_cases_in_child  # noqa: E402

INTERPRETED = K.interpreted()
HAS_CUDA = torch.cuda.is_available()


@pytest.fixture(params=KERNEL_DEVICES)
def device(request) -> str:
    """Tensor device of a kernel case ("cpu" for the interpreter)."""
    return kernel_device(request, INTERPRETED)


def _rows(device: str, c: int, seed: int, big: bool = False):
    g = torch.Generator().manual_seed(seed)
    key = torch.randint(0, 2**32, (2,), generator=g)
    top = 2**40 if big else 64  # big: inputs and samples past 2**32 reach the high words
    inputs, samples = torch.randint(0, top, (c,), generator=g), torch.randint(0, top, (c,), generator=g)
    return key.to(device), inputs.to(device), samples.to(device)


@pytest.mark.parametrize(
    ("c", "width", "stream", "big"),
    [(7, 1, 0, False), (33, 5, 3, True), (300, 90, 2, False), (1, 200, 7, True), (2500, 3, 1, False)],
)
def test_words_equal_the_reference(device, c, width, stream, big):
    key, inputs, samples = _rows(device, c, seed=c + width)
    if big:
        key, inputs, samples = _rows(device, c, seed=c, big=True)
    assert K.supports(key, inputs, samples, width)
    out = K.hash_words(key, inputs, samples, stream, width)
    want = hash_words_torch(key, inputs, samples, stream, width)
    assert out.dtype == torch.long and out.shape == (c, width) and out.device == want.device
    assert torch.equal(out, want)
    assert int(out.min()) >= 0 and int(out.max()) < 2**32
    assert torch.equal(want[:, 0], hash_words_torch(key, inputs, samples, stream, 1)[:, 0])  # columns independent


def test_no_rows(device):
    key, inputs, samples = _rows(device, 0, seed=1)
    assert K.hash_words(key, inputs, samples, 0, 4).shape == (0, 4)


def test_backend_masks_match_the_torch_path(device, monkeypatch):
    """Masks and uniforms drawn through the kernel (TORCHLIME_BACKEND=triton) equal the torch path's."""
    n_features = torch.tensor([5, 40, 90], device=device)
    b = torch.arange(3, device=device).repeat_interleave(50)
    s = torch.arange(50, device=device).repeat(3)
    rows = Rows(make_key(123, torch.device(device)), b, s, n_features[b], 90)
    drawn = {}
    for mode in ("triton", "torch"):
        monkeypatch.setenv("TORCHLIME_BACKEND", mode)
        drawn[mode] = (BernoulliSampler(0.5).masks(rows), BernoulliSampler(0.3).masks(rows), rows.uniform(4, 17))
    for a, w in zip(drawn["triton"], drawn["torch"]):
        assert torch.equal(a, w)


def test_supports_rejects_what_it_cannot_take(device):
    key, inputs = torch.zeros(2, dtype=torch.long, device=device), torch.arange(6, device=device)
    samples = inputs.clone()
    assert K.supports(key, inputs, samples, 4)
    assert not K.supports(key, inputs.int(), samples, 4)  # int32 rows
    assert not K.supports(key, inputs, samples[:5], 4)  # rows of another length
    assert not K.supports(torch.zeros(3, dtype=torch.long, device=device), inputs, samples, 4)  # not a 2-word key
    assert not K.supports(key, torch.arange(12, device=device)[::2], samples, 4)  # not contiguous
    assert not K.supports(key, inputs, samples, 0)


def test_cpu_tensors_need_the_interpreter():
    if INTERPRETED:
        pytest.skip("this process interprets the kernel: CPU tensors are its tensors")
    rows = torch.arange(6)
    assert not K.supports(torch.zeros(2, dtype=torch.long), rows, rows, 4)


def test_words_differ_across_rows_and_columns():
    """Distinct rows hash apart and ``hash_words`` mixes each row's hash with every column."""
    key, rows = torch.tensor([3, 4]), torch.arange(64)
    words = hash_words_torch(key, rows, rows.flip(0), 1, 8)
    assert words.unique().numel() == words.numel()
    assert row_hash_torch(key, rows, rows.flip(0), 1).unique().numel() == 64


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_backend_uses_the_kernel_on_cuda(monkeypatch):
    if INTERPRETED:
        pytest.skip("the cuda cases check the compiled kernel; this process interprets it")
    monkeypatch.delenv("TORCHLIME_BACKEND", raising=False)
    key, inputs, samples = _rows("cuda", 1000, seed=3)
    calls = []
    real = K.hash_words
    monkeypatch.setattr(K, "hash_words", lambda *a, **k: calls.append(1) or real(*a, **k))
    out = _backend.hash_words(key, inputs, samples, 3, 12)
    assert calls == [1] and torch.equal(out, hash_words_torch(key, inputs, samples, 3, 12))


def test_interpreter_cases_in_child_process(request):
    """Runs the selected ``[interp]`` cases in ``python -m pytest`` with TRITON_INTERPRET=1."""
    run_interp_cases_in_child(request, INTERPRETED)
