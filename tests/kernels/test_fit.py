"""The fit's epilogue kernels (``kernels/torchlime_kernels/fit.py``) against their torch references.

Cases run through Triton's interpreter on the CPU (in a child process, ``tests/helpers/triton_interp.py``)
and compiled on a GPU where there is one. The centring and the flags are the references' elementwise
arithmetic in the same order (their values agree to the last bits); the summary's sums over features
run in another order, so they agree to rounding. The references are what the CPU runs: the engine's
CPU bits (the fingerprints) are theirs.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from torchlime import _backend  # noqa: E402
from torchlime.engine import quality  # noqa: E402
from torchlime.kernels import fit as K  # noqa: E402
from torchlime.kernels.reference_fit import cast_at_once, centre_torch, flags_torch, mask_weights_torch, summary_torch  # noqa: E402
from torchlime.stages.normal import NormalAccumulator  # noqa: E402
from torchlime.stages.surrogate import Ridge  # noqa: E402
from torchlime.stages.weighting import ExponentialKernel, mask_distance  # noqa: E402

from tests.helpers.triton_interp import KERNEL_DEVICES, kernel_device, run_interp_cases_in_child  # noqa: E402

INTERPRETED = K.interpreted()
HAS_CUDA = torch.cuda.is_available()
TIGHT = dict(rtol=1e-12, atol=1e-12)


@pytest.fixture(params=KERNEL_DEVICES)
def device(request) -> str:
    """Tensor device of a kernel case ("cpu" for the interpreter)."""
    return kernel_device(request, INTERPRETED)


def _sums(device: str, b: int, f: int, t: int, n: int = 64, seed: int = 0):
    """An accumulator's running sums of random masks, outputs and weights, and its (non-contiguous) shift."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(b, n, f, generator=g) < 0.5
    y = torch.randn(b, n, t, generator=g, dtype=torch.float64).float() * 3 + 1
    w = torch.rand(b, n, generator=g)
    x, y, w = x.to(device), y.to(device), w.to(device)
    acc = NormalAccumulator(b, f, t, y[:, 0])
    acc.add(x, y, w)
    return acc, x, y, w


@pytest.mark.parametrize(
    ("metric", "scale", "g", "r", "f"),
    [("cosine", 1.0, 2, 70, 5), ("hamming", 1.0, 1, 3, 130), ("euclidean", 2.5, 3, 65, 64), ("cosine", 100.0, 1, 9, 1)],
)
def test_weights_equal_the_reference(device, metric, scale, g, r, f):
    gen = torch.Generator().manual_seed(r + f)
    wide = torch.rand(g, r, 2 * f, generator=gen) < 0.6
    masks = wide[:, :, ::2].to(device)  # a strided view, as the engine's blocks may be
    valid = (torch.arange(f).expand(g, f) < torch.tensor([f, max(1, f - 2), f])[:g].unsqueeze(1)).to(device)
    assert K.supports("mask_weights", masks, valid)
    got = K.mask_weights(masks, valid, metric, scale, 0.25 if scale == 1.0 else 25.0)
    want = mask_weights_torch(masks, valid, metric, scale, 0.25 if scale == 1.0 else 25.0)
    assert got.shape == want.shape == (g, r) and got.dtype == want.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
    # the reference is the kernel's weighing as the stages write it
    kernel = ExponentialKernel(width=0.25 if scale == 1.0 else 25.0, distance=metric, scale=scale)
    assert torch.equal(want, kernel.weigh(mask_distance(masks, valid.unsqueeze(1), metric)))


@pytest.mark.parametrize(("b", "f", "t"), [(1, 5, 1), (3, 37, 2), (2, 40, 40), (1, 1, 3)])
def test_centre_equals_the_reference(device, b, f, t):
    acc, *_ = _sums(device, b, f, t, seed=f + t)
    assert not acc.y_shift.is_contiguous() or t == 1 or b == 1  # the shift is a slice of the outputs
    assert K.supports("centre", acc.sums, acc.y_shift)
    got = K.centre(acc.sums, acc.y_shift, f, t)
    want = centre_torch(acc.sums, acc.y_shift, f, t)
    for a, w in zip(got, want):
        assert a.shape == w.shape and a.dtype == w.dtype == torch.float64
        torch.testing.assert_close(a, w, **TIGHT)
    assert torch.equal(got[0], got[0].transpose(1, 2))  # exactly symmetric, as the reference


@pytest.mark.parametrize(("b", "f", "t", "dtype", "masked"), [
    (1, 5, 1, torch.float32, True), (3, 37, 2, None, True), (2, 20, 19, torch.float32, False), (2, 3, 1, None, False),
])  # fmt: skip
def test_summary_equals_the_reference(device, b, f, t, dtype, masked):
    acc, *_ = _sums(device, b, f, t, seed=b * f)
    ne = acc.normal()
    beta = torch.linalg.solve(ne.gram + torch.eye(f, dtype=torch.float64, device=device), ne.rhs).contiguous()
    valid = torch.arange(f, device=device).expand(b, f) < torch.arange(f - b, f, device=device).unsqueeze(1)
    valid = valid.contiguous() if masked else None
    moments = (ne.gram, ne.rhs.contiguous(), ne.x_mean, ne.y_mean, ne.ss_tot)
    assert K.supports("summary", beta, valid, *moments)
    got, want = K.summary(beta, valid, moments, dtype), summary_torch(beta, valid, moments, dtype)
    for a, w in zip(got, want):
        assert a.shape == w.shape and a.dtype == w.dtype
        assert a.dim() == 2 or a.transpose(1, 2).is_contiguous() == w.transpose(1, 2).is_contiguous()  # the layout
        torch.testing.assert_close(a, w, **(TIGHT if dtype is None else {}))
    if masked:
        assert bool((got[0] == 0)[~valid.unsqueeze(1).expand_as(got[0])].all())


def test_summary_scores_constant_outputs_like_sklearn(device):
    """A constant output scores 1 when predicted exactly, else 0 (scikit-learn's r2_score)."""
    f, t = 4, 2
    gram = torch.eye(f, dtype=torch.float64, device=device).expand(1, f, f).contiguous()
    zeros = torch.zeros(1, f, t, dtype=torch.float64, device=device)
    beta = zeros.clone()
    beta[0, 0, 1] = 1.0  # the second target's fit is not exact: ss_res = 1 > 0 = ss_tot
    ss_tot = torch.zeros(1, t, dtype=torch.float64, device=device)
    x_mean, y_mean = torch.zeros(1, f, dtype=torch.float64, device=device), ss_tot.clone()
    coef, icpt, score, local = K.summary(beta, None, (gram, zeros, x_mean, y_mean, ss_tot))
    assert score.tolist() == [[1.0, 0.0]] and local.tolist() == [[0.0, 1.0]]


@pytest.mark.filterwarnings("ignore:overflow encountered")  # an input of no weight: the interpreter's numpy says so
def test_flags_equal_the_reference(device):
    """Saturated, poor and few-sample fits flagged exactly as the reference flags them (NaN scores too)."""
    b = 5
    # input 4 (Σw = 3): a spread of 9.9999999e-5, between float32(1e-4) and 1e-4: a float32 threshold misses it
    ss_tot = torch.tensor(
        [[0.0, 1.0, 4.0]] * (b - 1) + [[3 * 9.9999999e-5**2, 1.0, 4.0]], dtype=torch.float64, device=device
    )
    score = torch.tensor([[0.5, 0.05, float("nan")], [0.9, 0.2, 0.01]] * 2 + [[0.0, 1.0, 0.09]], device=device)
    weight_sum = torch.tensor([1.0, 2.0, 0.0, 5.0, 3.0], dtype=torch.float64, device=device)
    weight_sq_sum = torch.tensor([1.0, 0.1, 0.0, 20.0, 0.5], dtype=torch.float64, device=device)
    n_features = torch.tensor([1, 30, 3, 2, 17], device=device)
    args = (ss_tot, weight_sum, weight_sq_sum, score, n_features)
    assert K.supports("flags", *args)
    got = K.flags(*args, quality.THRESHOLDS)
    want = flags_torch(*args, quality.THRESHOLDS)
    for a, w in zip(got, want):
        assert a.dtype == torch.bool and torch.equal(a, w)
    assert got[0].any() and got[1].any() and got[2].any() and not got[2].all() and bool(got[0][4, 0])


def test_no_inputs(device):
    acc, *_ = _sums(device, 2, 3, 1)
    empty = acc.sums[:0]
    out = K.centre(empty, acc.y_shift[:0], 3, 1)
    assert [tuple(o.shape) for o in out] == [(0, 3, 3), (0, 3, 1), (0, 3), (0, 1), (0, 1), (0, 1)]


def test_the_engine_through_the_kernels_matches_the_torch_path(device, monkeypatch):
    """A ridge fit through the three doors with the kernels (TORCHLIME_BACKEND=triton) equals the torch path's."""
    acc, x, y, w = _sums(device, 3, 12, 2, n=200, seed=7)
    valid = torch.ones(3, 12, dtype=torch.bool, device=device)
    fits = {}
    for mode in ("triton", "torch"):
        monkeypatch.setenv("TORCHLIME_BACKEND", mode)
        ne = acc.normal()
        fit = Ridge(alpha=0.01).fit_normal(ne, valid)
        flags = quality.assess(ne, fit.score, torch.full((3,), 12).to(device))
        fits[mode] = (*fit[:4], *flags)
    for a, b in zip(fits["triton"], fits["torch"]):
        if a.dtype == torch.bool:
            assert torch.equal(a, b)
        else:
            torch.testing.assert_close(a, b)


def test_a_failing_kernel_warns_once_and_its_reference_serves(device, monkeypatch):
    """A kernel that raises (say, it does not compile on a device) is named in one warning; the call still
    gets the reference's result, and that kernel is not tried again."""
    monkeypatch.setenv("TORCHLIME_BACKEND", "triton")
    monkeypatch.setattr(_backend, "_FAILED", set())
    calls = []

    def broken(*args):
        calls.append(1)
        raise RuntimeError("no such instruction")

    monkeypatch.setattr(K, "centre", broken)
    acc, *_ = _sums(device, 2, 4, 1)
    with pytest.warns(RuntimeWarning, match="'centre' failed"):
        got = _backend.normal_centre(acc.sums, acc.y_shift, 4, 1)
    again = _backend.normal_centre(acc.sums, acc.y_shift, 4, 1)
    for a, b, w in zip(got, again, centre_torch(acc.sums, acc.y_shift, 4, 1)):
        assert torch.equal(a, w) and torch.equal(b, w)
    assert calls == [1]


def test_supports_rejects_what_it_cannot_take(device):
    acc, *_ = _sums(device, 2, 3, 1)
    assert not K.supports("centre", acc.sums.float(), acc.y_shift)  # not float64
    assert not K.supports("centre", acc.sums[:, ::2], acc.y_shift)  # not contiguous
    beta = torch.zeros(2, 3, 3, dtype=torch.float64, device=device)
    assert not K.supports("summary", beta.transpose(1, 2), None)  # not contiguous
    assert not K.supports("summary", None)


def test_cast_at_once_gives_the_bits_and_strides_of_to():
    g = torch.Generator().manual_seed(0)
    parts = (
        torch.randn(2, 5, 3, dtype=torch.float64, generator=g).transpose(1, 2),
        torch.randn(2, 3).double(),
        torch.randn(4),
    )
    cast = cast_at_once(parts, torch.float32)
    for a, b in zip(cast, parts):
        assert (
            torch.equal(a, b.to(torch.float32))
            and a.stride() == b.to(torch.float32).stride()
            and a.dtype == torch.float32
        )
    assert cast_at_once(parts[2:], torch.float32)[0] is parts[2]  # nothing to cast: the tensor itself, as ``to`` gives


def test_cpu_tensors_need_the_interpreter():
    if INTERPRETED:
        pytest.skip("this process interprets the kernels: CPU tensors are their tensors")
    acc, *_ = _sums("cpu", 2, 3, 1)
    assert not K.supports("centre", acc.sums, acc.y_shift)


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_backend_uses_the_kernels_on_cuda(monkeypatch):
    if INTERPRETED:
        pytest.skip("the cuda cases check the compiled kernels; this process interprets them")
    monkeypatch.delenv("TORCHLIME_BACKEND", raising=False)
    calls = []
    for name in ("centre", "summary", "flags"):
        real = getattr(K, name)
        monkeypatch.setattr(K, name, lambda *a, _r=real, _n=name, **k: calls.append(_n) or _r(*a, **k))
    acc, *_ = _sums("cuda", 2, 9, 2)
    valid = torch.ones(2, 9, dtype=torch.bool, device="cuda")
    ne = acc.normal()
    fit = Ridge().fit_normal(ne, valid)
    quality.assess(ne, fit.score, torch.full((2,), 9, device="cuda"))
    assert calls == ["centre", "summary", "flags"]
    assert _backend.use_triton(acc.sums)


def test_interpreter_cases_in_child_process(request):
    """Runs the selected ``[interp]`` cases in ``python -m pytest`` with TRITON_INTERPRET=1."""
    run_interp_cases_in_child(request, INTERPRETED)
