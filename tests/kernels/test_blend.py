"""Triton kernels (``kernels/``, shipped as ``torchlime.kernels``) against their torch references.

Every kernel test is parametrised over two devices:

* ``interp``: CPU tensors through Triton's interpreter (``TRITON_INTERPRET=1``), which is how the
  kernels are checked on machines without a GPU.
* ``cuda``: the compiled kernel on a GPU; skipped when ``torch.cuda.is_available()`` is False.

The ``interp`` cases run in a child process with ``TRITON_INTERPRET=1`` unless this process
already interprets the kernels; ``triton_interp.py`` explains why and how.

Interpreter limitation: it converts float32 -> bfloat16 by truncation (round toward zero) where
compiled Triton and torch round to nearest even, so bf16 results under the interpreter are
compared within one bf16 ulp; everything else (and bf16 on CUDA) must match exactly.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from torchlime import _backend  # noqa: E402
from torchlime.kernels import blend as K  # noqa: E402
from torchlime.kernels.reference import blend_torch  # noqa: E402

from tests.helpers.triton_interp import KERNEL_DEVICES, kernel_device, run_interp_cases_in_child  # noqa: E402

INTERPRETED = K.interpreted()
HAS_CUDA = torch.cuda.is_available()


def blend_reference(x, base, labels, masks):
    """The blend's definition, obviously: ``where(masks[i, labels[i]], x[i], base[i])``."""
    c = masks.shape[0]
    lab = labels.long().reshape(labels.shape[0], -1).expand(c, -1)
    keep = masks.gather(1, lab).reshape(c, *labels.shape[1:])
    return torch.where(keep, x, base)


MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


@pytest.fixture(params=KERNEL_DEVICES)
def device(request) -> str:
    """Tensor device of a kernel case ("cpu" for the interpreter)."""
    return kernel_device(request, INTERPRETED)


def _inputs(
    device,
    *,
    c=7,
    shape=(3, 16, 16),
    fshape=(1, 16, 16),
    F=5,
    x_rows=1,
    base_rows=1,
    lab_rows=1,
    dtype=torch.float32,
    seed=0,
):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(x_rows, *shape, generator=g).to(dtype)
    base = torch.randn(base_rows, *shape, generator=g).to(dtype)
    labels = torch.randint(0, F, (lab_rows, *fshape), generator=g)
    masks = torch.rand(c, F, generator=g) > 0.5
    masks[0] = True  # one row all kept, one all hidden
    masks[-1] = False
    return tuple(t.to(device) for t in (x, base, labels, masks))


def _assert_same(out: torch.Tensor, ref: torch.Tensor) -> None:
    assert out.shape == ref.shape and out.dtype == ref.dtype and out.device == ref.device
    if out.dtype == torch.bfloat16 and INTERPRETED and out.device.type == "cpu":
        # interpreter rounds f32 -> bf16 toward zero: allow one bf16 ulp
        torch.testing.assert_close(out.float(), ref.float(), rtol=2.0**-7, atol=0.0)
    else:
        assert torch.equal(out, ref), (out.float() - ref.float()).abs().max()


def _check(x, base, labels, masks, **extras) -> torch.Tensor:
    assert K.supports(x, base, labels, masks)
    out = K.blend(x, base, labels, masks, **extras)
    _assert_same(out, blend_torch(x, base, labels, masks, **extras))
    if not extras:
        _assert_same(out, blend_reference(x, base, labels, masks))
    return out


# ---------------------------------------------------------------- kernel cases (interp + cuda)


@pytest.mark.parametrize("rows", ["broadcast", "per_row", "mixed"])
def test_images(device, rows):
    """c=7, C=3, 16x16, F=5, labels (.., 1, H, W): x shared by all rows, one x per row, or mixed."""
    x_rows, base_rows, lab_rows = {"broadcast": (1, 1, 1), "per_row": (7, 7, 7), "mixed": (7, 1, 1)}[rows]
    x, base, labels, masks = _inputs(device, x_rows=x_rows, base_rows=base_rows, lab_rows=lab_rows)
    out = _check(x, base, labels, masks)
    assert out.shape == (7, 3, 16, 16)
    torch.testing.assert_close(out[0], x[0].expand(3, 16, 16), rtol=0, atol=0)  # all kept
    torch.testing.assert_close(out[-1], base[-1].expand(3, 16, 16), rtol=0, atol=0)  # all hidden


@pytest.mark.parametrize("rows", ["all_per_input", "shared_fill_and_labels", "shared_input"])
@pytest.mark.parametrize("extras", ["none", "norm_bf16_channels_last"])
def test_sources_read_each_rows_input_in_place(device, rows, extras):
    """c=7 rows of 3 inputs: with ``sources`` the kernel reads row i's operands at ``sources[i]``."""
    x_rows, base_rows, lab_rows = {
        "all_per_input": (3, 3, 3),
        "shared_fill_and_labels": (3, 1, 1),
        "shared_input": (1, 3, 3),
    }[rows]
    x, base, labels, masks = _inputs(device, x_rows=x_rows, base_rows=base_rows, lab_rows=lab_rows)
    sources = torch.tensor([0, 2, 2, 1, 0, 1, 2], device=device)
    kw = dict(mean=MEAN, std=STD, out_dtype=torch.bfloat16, channels_last=True) if extras != "none" else {}
    assert K.supports(x, base, labels, masks, sources)
    out = K.blend(x, base, labels, masks, **kw, sources=sources)
    gathered = [t if t.shape[0] == 1 else t[sources] for t in (x, base, labels)]
    _assert_same(out, blend_torch(*gathered, masks, **kw))
    _assert_same(out, blend_torch(x, base, labels, masks, **kw, sources=sources))
    assert out.is_contiguous(memory_format=torch.channels_last) == (extras != "none")


@pytest.mark.parametrize("rows", ["broadcast", "per_row"])
def test_fshape_equal_to_shape(device, rows):
    """Labels with one feature id per element (fshape == shape)."""
    r = 1 if rows == "broadcast" else 7
    x, base, labels, masks = _inputs(device, fshape=(3, 16, 16), F=11, x_rows=r, base_rows=r, lab_rows=r)
    _check(x, base, labels, masks)


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize("norm", [False, True], ids=["raw", "norm"])
def test_out_dtype_and_norm(device, out_dtype, norm):
    x, base, labels, masks = _inputs(device)
    extras = dict(out_dtype=out_dtype)
    if norm:
        extras.update(mean=MEAN, std=STD)
    _check(x, base, labels, masks, **extras)


@pytest.mark.parametrize("in_dtype", [torch.float16, torch.bfloat16, torch.float64], ids=["f16", "bf16", "f64"])
def test_input_dtypes(device, in_dtype):
    x, base, labels, masks = _inputs(device, dtype=in_dtype, x_rows=7)
    _check(x, base, labels, masks)
    _check(x, base, labels, masks, out_dtype=torch.float32, mean=torch.tensor(MEAN), std=STD)


@pytest.mark.parametrize("norm", [False, True], ids=["raw", "norm"])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_channels_last(device, norm, out_dtype):
    x, base, labels, masks = _inputs(device, x_rows=7)
    extras = dict(out_dtype=out_dtype, channels_last=True)
    if norm:
        extras.update(mean=MEAN, std=STD)
    out = _check(x, base, labels, masks, **extras)
    assert out.is_contiguous(memory_format=torch.channels_last)
    assert not out.is_contiguous()


@pytest.mark.parametrize("case", ["image_17x23", "image_cl_norm", "signal_1d", "video_5d", "tiny"])
def test_odd_sizes(device, case):
    """Sizes that are not multiples of the block (several blocks + a tail, or less than one)."""
    if case == "image_17x23":  # 1173 elements per row: 2 blocks of 1024
        _check(*_inputs(device, c=5, shape=(3, 17, 23), fshape=(1, 17, 23), F=7, x_rows=5))
    elif case == "image_cl_norm":
        out = _check(
            *_inputs(device, c=5, shape=(3, 17, 23), fshape=(1, 17, 23), F=7),
            out_dtype=torch.float16,
            mean=MEAN,
            std=STD,
            channels_last=True,
        )
        assert out.is_contiguous(memory_format=torch.channels_last)
    elif case == "signal_1d":  # audio-like (c, 1, L) with per-sample features
        _check(*_inputs(device, c=3, shape=(1, 2049), fshape=(1, 2049), F=9, lab_rows=3), mean=0.1, std=2.0)
    elif case == "video_5d":  # (C, T, H, W) with labels over (T, H, W)
        _check(*_inputs(device, c=3, shape=(2, 3, 5, 7), fshape=(1, 3, 5, 7), F=4, x_rows=3))
    else:  # fewer elements than one block, c=1
        _check(*_inputs(device, c=1, shape=(3, 2, 3), fshape=(1, 2, 3), F=2))


def test_strided_operands(device):
    """Non-contiguous x (channels_last input), base broadcast over space, strided masks."""
    x, base, labels, masks = _inputs(device, x_rows=7)
    x = x.contiguous(memory_format=torch.channels_last)
    base = base.mean(dim=(2, 3), keepdim=True)  # (1, 3, 1, 1) per-channel baseline
    wide = torch.rand(7, 10, generator=torch.Generator().manual_seed(1)).to(device) > 0.5
    masks = wide[:, ::2]  # (7, 5), feature stride 2
    assert not x.is_contiguous() and not masks.is_contiguous()
    _check(x, base, labels, masks)
    _check(x, base, labels, masks, out_dtype=torch.float16, mean=MEAN, std=STD, channels_last=True)


def test_int32_labels_and_out_of_range(device):
    """int32 labels work; ids outside [0, F) give the baseline (no out-of-bounds read)."""
    x, base, labels, masks = _inputs(device)
    _assert_same(K.blend(x, base, labels.int(), masks), blend_reference(x, base, labels, masks))
    bad = labels.clone()
    bad[..., 0, :] = -1
    bad[..., 1, :] = masks.shape[1]
    out = K.blend(x, base, bad, masks)
    assert torch.equal(out[:, :, :2], base[:, :, :2].expand(7, -1, -1, -1))
    ref = blend_reference(x, base, labels, masks)
    assert torch.equal(out[:, :, 2:], ref[:, :, 2:])


def test_empty_rows(device):
    x, base, labels, _ = _inputs(device)
    masks = torch.zeros(0, 5, dtype=torch.bool, device=device)
    out = K.blend(x, base, labels, masks, channels_last=True)
    assert out.shape == (0, 3, 16, 16)


# ---------------------------------------------------------------- CUDA: the backend routes to the kernel


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_backend_uses_kernel_on_cuda(monkeypatch):
    if INTERPRETED:
        pytest.skip("the cuda cases check the compiled kernel; this process interprets it")
    monkeypatch.delenv("TORCHLIME_BACKEND", raising=False)
    x, base, labels, masks = _inputs("cuda")
    calls = []
    real = K.blend
    monkeypatch.setattr(K, "blend", lambda *a, **k: calls.append(1) or real(*a, **k))
    _assert_same(_backend.blend(x, base, labels, masks), blend_reference(x, base, labels, masks))
    extras = dict(out_dtype=torch.bfloat16, mean=MEAN, std=STD, channels_last=True)
    _assert_same(_backend.blend(x, base, labels, masks, **extras), blend_torch(x, base, labels, masks, **extras))
    assert len(calls) == 2


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA or torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_kernel_runs_on_the_tensors_device():
    """Triton launches on the current device: tensors on cuda:1 while cuda:0 is current must still
    be blended on cuda:1 (the launch makes their device current)."""
    if INTERPRETED:
        pytest.skip("the cuda cases check the compiled kernel; this process interprets it")
    x, base, labels, masks = _inputs("cuda:1")
    extras = dict(out_dtype=torch.bfloat16, mean=MEAN, std=STD, channels_last=True)
    with torch.cuda.device(0):
        out = K.blend(x, base, labels, masks, **extras)
        torch.cuda.synchronize(1)
    assert out.device == torch.device("cuda:1")
    _assert_same(out, blend_torch(x, base, labels, masks, **extras))


# ---------------------------------------------------------------- interpreter child process


def test_interpreter_cases_in_child_process(request):
    """Runs the selected ``[interp]`` cases in ``python -m pytest`` with TRITON_INTERPRET=1."""
    run_interp_cases_in_child(request, INTERPRETED)


# ---------------------------------------------------------------- no device needed


def test_blend_torch_matches_blend_reference():
    x, base, labels, masks = _inputs("cpu", x_rows=7, base_rows=1, lab_rows=7)
    assert torch.equal(blend_torch(x, base, labels, masks), blend_reference(x, base, labels, masks))
    out = blend_torch(x, base, labels, masks, out_dtype=torch.float16, mean=MEAN, std=STD, channels_last=True)
    keep = blend_reference(x, base, labels, masks)
    m = torch.tensor(MEAN).view(1, 3, 1, 1)
    s = torch.tensor(STD).view(1, 3, 1, 1)
    assert out.dtype == torch.float16 and out.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(out, ((keep - m) / s).half())
    assert torch.equal(blend_torch(x, base, labels, masks, std=2.0), keep / 2)
    with pytest.raises(ValueError):
        blend_torch(x, base, labels, masks, mean=(0.0, 1.0))
    with pytest.raises(ValueError):
        blend_torch(x[:, 0], base[:, 0], labels[:, 0], masks, channels_last=True)


def test_supports_rejects():
    x, base, labels, masks = _inputs("cpu")
    assert not K.supports(x, base, labels.float(), masks)  # labels not integer
    assert not K.supports(x, base, labels, masks.int())  # masks not bool
    assert not K.supports(x, base.double(), labels, masks)  # dtypes differ
    assert not K.supports(x.int(), base.int(), labels, masks)  # not float
    assert not K.supports(x, base, labels[:, 0], masks)  # dims differ
    assert not K.supports(x.expand(3, -1, -1, -1), base, labels, masks)  # 3 rows, c=7
    assert not K.supports(x, base, labels, masks, torch.zeros(6, dtype=torch.long))  # sources of 6 rows, c=7
    assert not K.supports(x, base, labels, masks, torch.zeros(7))  # float sources
    assert not K.supports(x, base, torch.zeros(1, 1, 8, 8, dtype=torch.long), masks)  # no broadcast
    assert K.supports(x, base, labels, masks) == INTERPRETED  # CPU only when interpreted
    with pytest.raises(ValueError):
        K.blend(x, base, labels.float(), masks)


def test_backend_blend_cast_falls_back_on_cpu():
    x, base, labels, masks = _inputs("cpu")
    extras = dict(out_dtype=torch.bfloat16, mean=MEAN, std=STD, channels_last=True)
    assert torch.equal(_backend.blend(x, base, labels, masks, **extras), blend_torch(x, base, labels, masks, **extras))
    assert torch.equal(_backend.blend(x, base, labels, masks), blend_reference(x, base, labels, masks))
