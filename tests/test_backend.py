"""The backend door: ``TORCHLIME_BACKEND`` and the product path through the Triton kernels.

With ``TORCHLIME_BACKEND=triton`` and ``TRITON_INTERPRET=1`` the whole product path runs on CPU
tensors through the kernels in ``kernels/`` (what a GPU runs by default). The ``interp`` cases
below explain images and spectrograms end to end that way (in a child process, see
``triton_interp.py``), count the calls that reach ``torchlime.kernels.blend`` and ``.slic``,
and compare with the torch path: identical segments, coefficients to 1e-5, the same host
synchronisation budget. On a GPU the compiled SLIC kernels may contract multiply-adds (FMA) where
the torch path rounds twice, which can flip a near-tie between two centres: there the segments
must agree to an adjusted Rand index of 0.99 per image, and the coefficients are compared on the
torch path's segments.
"""

from __future__ import annotations

import pytest
import torch

from torchlime import _backend

pytest.importorskip("triton")

from torchlime.audio import explain_spectrogram  # noqa: E402
from torchlime.image import explain_image  # noqa: E402
from torchlime.kernels import blend as KB  # noqa: E402
from torchlime.kernels import slic as KS  # noqa: E402

from tests.helpers import adjusted_rand_index  # noqa: E402
from tests.helpers.triton_interp import KERNEL_DEVICES, kernel_device, run_interp_cases_in_child  # noqa: E402

INTERPRETED = KB.interpreted()


@pytest.fixture(params=KERNEL_DEVICES)
def device(request) -> str:
    return kernel_device(request, INTERPRETED)


@pytest.fixture
def kernel_calls(monkeypatch):
    """Counts the calls that reach the kernels' entry points."""
    calls = {"blend": 0, "assign": 0, "update": 0}
    for module, name in ((KB, "blend"), (KS, "assign"), (KS, "update")):
        real = getattr(module, name)

        def counted(*a, _name=name, _real=real, **k):
            calls[_name] += 1
            return _real(*a, **k)

        monkeypatch.setattr(module, name, counted)
    return calls


def net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(4, 3),
    )


def both_paths(monkeypatch, run):
    """``run()`` under TORCHLIME_BACKEND=torch, then =triton."""
    monkeypatch.setenv("TORCHLIME_BACKEND", "torch")
    ref = run()
    monkeypatch.setenv("TORCHLIME_BACKEND", "triton")
    return ref, run()


def assert_same_explanation(ref, out, device, again):
    """The Triton path's explanation ``out`` against the torch path's ``ref``: identical segments
    under the interpreter (CPU); on a GPU an adjusted Rand index >= 0.99 per input (FMA in the
    compiled kernels may flip near-ties), and where the segments differ the coefficients are those
    of ``again(ref.features)``, the Triton path run on the torch path's segments."""
    if device == "cpu":
        assert torch.equal(out.features, ref.features)  # identical segments (adjusted Rand index 1)
    else:
        assert out.features.shape == ref.features.shape
        ari = [adjusted_rand_index(a, b) for a, b in zip(out.features, ref.features)]
        assert min(ari) >= 0.99, ari
        if not torch.equal(out.features, ref.features):
            out = again(ref.features)
            assert torch.equal(out.features, ref.features)
    torch.testing.assert_close(out.coef, ref.coef, atol=1e-5, rtol=1e-5)


def test_explain_image_through_the_kernels(device, monkeypatch, kernel_calls):
    model = net().to(device)
    images = torch.rand(2, 3, 24, 24, generator=torch.Generator().manual_seed(0)).to(device)
    norm = ((0.5, 0.45, 0.4), (0.25, 0.2, 0.2))

    def run(segments=None):
        return explain_image(
            model, images, segments=segments, n_segments=16, n_samples=64, normalize=norm, target="top2"
        )

    ref, out = both_paths(monkeypatch, run)
    assert kernel_calls["blend"] >= 1 and kernel_calls["assign"] == 10 and kernel_calls["update"] == 10
    assert_same_explanation(ref, out, device, run)


def test_explain_spectrogram_through_the_kernels(device, monkeypatch, kernel_calls):
    specs = torch.rand(2, 32, 24, generator=torch.Generator().manual_seed(1)).to(device)
    model = lambda s: torch.stack([s[:, 8:16, 4:12].mean((1, 2)), s[:, :8].mean((1, 2))], 1)  # noqa: E731
    for segments in ("grid", "slic"):

        def run(seg=segments):
            return explain_spectrogram(model, specs, segments=seg, n_segments=12, n_samples=64)

        ref, out = both_paths(monkeypatch, run)
        assert_same_explanation(ref, out, device, run)
    assert kernel_calls["blend"] >= 2 and kernel_calls["assign"] == 10 and kernel_calls["update"] == 10


def test_host_syncs_on_the_kernel_path(device, monkeypatch):
    from tests.helpers.syncs import count_syncs

    monkeypatch.setenv("TORCHLIME_BACKEND", "triton")
    model = net().to(device)
    images = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(2)).to(device)
    explain_image(model, images, n_segments=8, n_samples=32)  # measures the chunk size
    with count_syncs() as ops:
        explain_image(model, images, n_segments=8, n_samples=32)
    assert len(ops) <= 6, ops


def test_interpreter_cases_in_child_process(request):
    """Runs the selected ``[interp]`` cases in ``python -m pytest`` with TRITON_INTERPRET=1."""
    run_interp_cases_in_child(request, INTERPRETED)


@pytest.mark.parametrize(
    "value, expected", [(None, "auto"), ("", "auto"), ("torch", "torch"), ("Triton", "triton"), (" auto ", "auto")]
)
def test_mode(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("TORCHLIME_BACKEND", raising=False)
    else:
        monkeypatch.setenv("TORCHLIME_BACKEND", value)
    assert _backend.mode() == expected


def test_bad_mode_and_cpu_without_interpreter(monkeypatch):
    monkeypatch.setenv("TORCHLIME_BACKEND", "cuda")
    with pytest.raises(
        ValueError,
        match=r"TORCHLIME_BACKEND must be one of \['auto', 'torch', 'triton'\], "
        r"got 'cuda'",
    ):
        _backend.mode()
    monkeypatch.setenv("TORCHLIME_BACKEND", "auto")
    assert not _backend.use_triton(torch.zeros(2))  # auto: CUDA tensors only
    if not INTERPRETED:
        monkeypatch.setenv("TORCHLIME_BACKEND", "triton")
        with pytest.raises(RuntimeError, match="TORCHLIME_BACKEND=triton needs CUDA tensors, or TRITON_INTERPRET=1"):
            _backend.use_triton(torch.zeros(2))


@pytest.mark.cuda
def test_auto_uses_the_kernels_on_cuda_unless_deterministic(cuda, monkeypatch):
    monkeypatch.delenv("TORCHLIME_BACKEND", raising=False)
    x = torch.zeros(2, device=cuda)
    assert _backend.use_triton(x)
    torch.use_deterministic_algorithms(True)
    try:
        assert not _backend.use_triton(x)
    finally:
        torch.use_deterministic_algorithms(False)
    monkeypatch.setenv("TORCHLIME_BACKEND", "torch")
    assert not _backend.use_triton(x)


def test_adjusted_rand_index_helper():
    a = torch.randint(0, 6, (2, 24, 24), generator=torch.Generator().manual_seed(0))
    assert adjusted_rand_index(a, (a * 7 + 3) % 13) == 1.0  # the same partition, numbered otherwise
    near = a.clone()
    near[0, 0, :2] = 99  # two pixels of 1152 moved
    assert 0.99 <= adjusted_rand_index(near, a) < 1.0
    assert abs(adjusted_rand_index(a, torch.randint(0, 6, (2, 24, 24)))) < 0.05
