"""Accelerated: each option's effect, fixed-shape chunking, errors; CUDA variants skip without a GPU."""

from __future__ import annotations

import pytest
import torch

from torchlime import explain
from torchlime.accel import Accelerated, bucket

from tests.helpers import grid_labels


class Recorder(torch.nn.Module):
    """A small conv net that records the batch sizes, dtypes and layouts it receives."""

    def __init__(self, n_out: int = 3) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4, n_out)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
        self.sizes: list[int] = []
        self.layouts: list[bool] = []
        self.inner_dtypes: list[torch.dtype] = []
        self.input_dtypes: list[torch.dtype] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.sizes.append(x.shape[0])
        self.input_dtypes.append(x.dtype)
        self.layouts.append(x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous())
        h = self.conv(x)
        self.inner_dtypes.append(h.dtype)
        return self.fc(h.relu().mean((2, 3)))


def test_bucket_sizes():
    assert [bucket(n, 48) for n in (1, 2, 3, 5, 17, 33, 48)] == [1, 2, 4, 8, 32, 48, 48]
    assert [bucket(n, None) for n in (1, 3, 100)] == [1, 4, 128]


def test_defaults_only_cast_to_float32():
    net = Recorder().double()
    x = torch.rand(5, 3, 8, 8, dtype=torch.float64)
    fast = Accelerated(net)
    out = fast(x)
    assert out.dtype == torch.float32
    with torch.no_grad():
        assert torch.equal(out, net(x).float())
    assert net.sizes == [5, 5] and not any(net.layouts)


def test_autocast_bf16_on_cpu():
    net = Recorder()
    x = torch.rand(6, 3, 8, 8)
    out = Accelerated(net, autocast=torch.bfloat16)(x)
    assert net.inner_dtypes == [torch.bfloat16]
    assert out.dtype == torch.float32
    with torch.no_grad():
        ref = net(x)
    torch.testing.assert_close(out, ref, atol=5e-2, rtol=5e-2)
    assert not torch.equal(out, ref)  # it really ran in reduced precision


def test_channels_last_converts_weights_and_inputs():
    net = Recorder()
    x = torch.rand(4, 3, 8, 8)
    with torch.no_grad():
        ref = net(x)
    fast = Accelerated(net, channels_last=True)
    assert net.conv.weight.is_contiguous(memory_format=torch.channels_last)
    out = fast(x)
    assert net.layouts[-1]
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_chunk_size_splits_and_pads_to_bounded_shapes():
    net = Recorder()
    x = torch.rand(21, 3, 8, 8)
    with torch.no_grad():
        ref = net(x)
    net.sizes.clear()
    out = Accelerated(net, chunk_size=8)(x)
    assert net.sizes == [8, 8, 8]  # 8 + 8 + 5 padded to 8
    assert out.shape == (21, 3)
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-6)
    net.sizes.clear()
    Accelerated(net, chunk_size=8)(x[:3])
    assert net.sizes == [4]  # next power of two


def test_chunking_structured_outputs_and_several_arguments():
    def model(x: torch.Tensor, scale: torch.Tensor, *, mask: torch.Tensor) -> dict:
        s = x.sum(1, keepdim=True) * scale
        return {"logits": (s * mask).double(), "ids": torch.arange(x.shape[0]), "extra": (s, s + 1)}

    x, mask = torch.rand(10, 4), torch.rand(10, 1)
    scale = torch.tensor([2.0])  # not batched: passed whole to every chunk
    out = Accelerated(model, chunk_size=4)(x, scale, mask=mask)
    ref = model(x, scale, mask=mask)
    assert out["logits"].dtype == torch.float32 and out["logits"].shape == (10, 1)
    torch.testing.assert_close(out["logits"], ref["logits"].float())
    torch.testing.assert_close(out["extra"][1], ref["extra"][1])
    assert out["ids"].tolist() == [0, 1, 2, 3] * 2 + [0, 1]  # the model saw chunks of 4


def test_unsplittable_output_raises():
    class Out:
        pass

    with pytest.raises(TypeError, match="tensors, tuples, lists or dicts.*got Out"):
        Accelerated(lambda x: Out(), chunk_size=2)(torch.rand(5, 2))


def test_explain_with_accelerated_model_matches_plain():
    net = Recorder()
    x = torch.rand(2, 3, 8, 8)
    feats = grid_labels(8, 8, 2, 3).view(1, 1, 8, 8)
    plain = explain(net, x, feats, n_samples=50, target="all")
    fast = explain(Accelerated(net, chunk_size=16), x, feats, n_samples=50, target="all", batch_size=40)
    torch.testing.assert_close(fast.coef, plain.coef, atol=1e-5, rtol=1e-4)
    net.sizes.clear()
    explain(Accelerated(net, chunk_size=16), x, feats, n_samples=50, batch_size=40)
    # every chunk of 40 split into 16 + 16 + 8, the last 20 into 16 + 4: powers of two <= 16 only
    assert net.sizes == [16, 16, 8, 16, 16, 8, 16, 4]


def test_compile_on_cpu_with_inductor():
    """A real ``torch.compile`` (default inductor backend) of a tiny model, fixed shapes."""
    torch._dynamo.reset()
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    fast = Accelerated(net, compile=True, chunk_size=8)
    x = torch.rand(13, 8)
    with torch.no_grad():
        ref = net(x)
    torch.testing.assert_close(fast(x), ref, atol=1e-5, rtol=1e-5)
    assert fast.extra_repr().startswith("autocast=None, channels_last=False, compile=True")


def test_compile_options_dict_is_passed_to_torch_compile(monkeypatch):
    seen = {}

    def fake_compile(model, **kwargs):
        seen.update(kwargs)
        return model

    monkeypatch.setattr(torch, "compile", fake_compile)
    net = torch.nn.Linear(4, 2)
    Accelerated(net, compile={"backend": "aot_eager"}, chunk_size=4)(torch.rand(3, 4))
    assert seen == {"backend": "aot_eager", "dynamic": False}
    seen.clear()
    Accelerated(net, compile=True)
    assert seen == {}


def test_engine_gives_an_autocast_model_the_chunks_in_its_dtype():
    """The chunks an ``Accelerated(autocast=bf16)`` model asks for (``input_format``) are written in
    bf16 and reach it in bf16: not cast back to the fp32 weights' dtype (a second cast of every chunk,
    and not what a bare forward pass of bf16 rows runs)."""
    from torchlime.metrics import deletion

    net = Recorder()
    fast = Accelerated(net, autocast=torch.bfloat16)
    x = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    feats = grid_labels(8, 8, 2, 2).view(1, 1, 8, 8)
    exp = explain(fast, x, feats, n_samples=40, batch_size=16)
    assert net.input_dtypes and set(net.input_dtypes) == {torch.bfloat16}
    assert exp.coef.dtype == torch.float32
    net.input_dtypes.clear()
    deletion(fast, x, exp, steps=2)  # the metrics rebuild the same chunks
    assert net.input_dtypes and set(net.input_dtypes) == {torch.bfloat16}


def test_compiled_model_compiles_one_graph_per_chunk_shape():
    """Every chunk reaches the model as an inference tensor (built under inference mode, like the
    padded last chunk ``Accelerated`` makes), so chunks of one shape share one compiled graph;
    normal and inference tensors of the same shape used to compile two."""
    graphs: list[list[bool]] = []

    def counting_backend(gm, example_inputs):
        graphs.append([t.is_inference() for t in example_inputs if isinstance(t, torch.Tensor)])
        return gm.forward

    torch._dynamo.reset()
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 3))
    fast = Accelerated(net, compile={"backend": counting_backend}, chunk_size=16)
    x = torch.rand(1, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    # 44 rows: chunks of 16, 16 and 12 (padded to 16 by the wrapper): one shape, one graph
    explain(fast, x, grid_labels(8, 8, 2, 2).view(1, 1, 8, 8), n_samples=44)
    torch._dynamo.reset()
    assert len(graphs) == 1, graphs


def test_wrapper_is_a_module_that_follows_the_model():
    net = Recorder()
    fast = Accelerated(net, autocast=torch.bfloat16)
    assert list(fast.parameters()) == list(net.parameters())
    fast.eval()
    assert not net.training
    assert hasattr(fast, "compile") and callable(fast.compile)  # nn.Module.compile not shadowed


def test_inference_only():
    net = Recorder()
    out = Accelerated(net)(torch.rand(2, 3, 8, 8))
    assert not out.requires_grad


def test_errors():
    net = Recorder()
    with pytest.raises(TypeError, match="`model` must be an nn.Module or a callable, got int 3"):
        Accelerated(3)
    with pytest.raises(TypeError, match="`autocast` must be None, torch.bfloat16 or torch.float16, got str"):
        Accelerated(net, autocast="bf16")
    with pytest.raises(ValueError, match="`autocast` must be .*got torch.float32"):
        Accelerated(net, autocast=torch.float32)
    with pytest.raises(TypeError, match="`channels_last` must be a bool, got int 1"):
        Accelerated(net, channels_last=1)
    with pytest.raises(TypeError, match="`compile` must be a bool or a dict.*got str"):
        Accelerated(net, compile="max-autotune")
    with pytest.raises(ValueError, match="`chunk_size` must be >= 1, got 0"):
        Accelerated(net, chunk_size=0)
    with pytest.raises(TypeError, match="`chunk_size` must be an int >= 1, got float"):
        Accelerated(net, chunk_size=2.5)
    with pytest.raises(TypeError, match="at least one tensor argument"):
        Accelerated(net)([1, 2])


def test_cuda_graphs_without_cuda_is_a_clear_error(monkeypatch):
    """Needs no GPU: a machine without CUDA is simulated, so the test runs everywhere (it was skipped
    wherever CUDA exists, and so always skipped in the ``-m cuda`` selection it was put in)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"`cuda_graphs=True` needs a CUDA device.*is_available\(\) is False"):
        Accelerated(Recorder(), cuda_graphs=True)


def test_cuda_selection_holds_the_tests_that_need_cuda(request):
    """``pytest -m cuda`` (the GPU run) selects the tests that need a GPU and only those: a test that
    checks the behaviour without CUDA is in the ordinary selection, where it runs."""
    import subprocess
    import sys

    def selected(marker: str) -> str:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--collect-only",
                "-q",
                "-p",
                "no:cacheprovider",
                "-m",
                marker,
                "tests/test_accel.py",
            ],
            cwd=request.config.rootpath,
            capture_output=True,
            text=True,
            timeout=300,
        )
        return proc.stdout

    cuda, other = selected("cuda"), selected("not cuda")
    assert "test_cuda_graphs_without_cuda_is_a_clear_error" not in cuda, cuda
    assert "test_cuda_graphs_without_cuda_is_a_clear_error" in other, other
    assert "test_cuda_graphs_needs_cuda_weights" in cuda and "test_cuda_autocast_channels_last" in cuda, cuda


# ---- CUDA variants (skipped without a GPU) -------------------------------------------------


def test_cuda_graphs_needs_cuda_weights(cuda):
    with pytest.raises(ValueError, match=r"weights on a CUDA device, got weights on \['cpu'\]"):
        Accelerated(Recorder(), cuda_graphs=True)


@pytest.mark.parametrize("compile_", [False, True])
def test_cuda_graphs_match_eager(cuda, compile_):
    torch._dynamo.reset()
    net = Recorder().to(cuda)
    x = torch.rand(37, 3, 8, 8, device=cuda)
    with torch.no_grad():
        ref = net(x)
    fast = Accelerated(net, cuda_graphs=True, compile=compile_, chunk_size=16)
    first = fast(x)
    second = fast(x * 1)  # replay with new inputs copied into the static buffers
    torch.testing.assert_close(first, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(second, ref, atol=1e-5, rtol=1e-5)
    y = torch.rand(37, 3, 8, 8, device=cuda)
    with torch.no_grad():
        torch.testing.assert_close(fast(y), net(y), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="needs CUDA inputs, got inputs on cpu"):
        fast(x.cpu())


def test_cuda_autocast_channels_last(cuda):
    net = Recorder().to(cuda)
    x = torch.rand(9, 3, 8, 8, device=cuda)
    with torch.no_grad():
        ref = net(x)
    out = Accelerated(net, autocast=torch.float16, channels_last=True)(x)
    assert out.dtype == torch.float32 and net.inner_dtypes[-1] == torch.float16
    torch.testing.assert_close(out, ref, atol=2e-2, rtol=2e-2)


def test_accelerate_fast_on_cpu_runs_the_model_as_given():
    from torchlime.accel import accelerate_model

    net = torch.nn.Linear(4, 2)
    assert accelerate_model(net, "fast", torch.rand(2, 4)) is net
    assert accelerate_model(net, None, torch.rand(2, 4)) is net
    with pytest.raises(ValueError, match=r"`accelerate` must be None, 'fast' or 'cuda_graphs', got str 'turbo'"):
        explain(net, torch.rand(2, 4), torch.arange(4).view(1, 4), accelerate="turbo")


@pytest.mark.cuda
def test_accelerate_fast_on_cuda(cuda):
    from torchlime.image import explain_image

    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, 3),
    ).to(cuda)
    images = torch.rand(2, 3, 32, 32, device=cuda)
    plain = explain_image(net, images, segments="grid", n_samples=256, target=0)
    fast = explain_image(net, images, segments="grid", n_samples=256, target=0, accelerate="fast")
    torch.testing.assert_close(fast.coef, plain.coef, atol=2e-2, rtol=5e-2)  # bf16 scores
