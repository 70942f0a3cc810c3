"""Explanations in training loops: ``TensorBoardProbe`` in a plain PyTorch loop and Lightning's
``ExplainCallback`` in a real (tiny, CPU) Trainer run, read back from the event files. Lightning
and TensorBoard are test extras: the tests that need one skip where it is missing (imported in the
tests, so a machine without them, a lean GPU box, still collects this module)."""

from __future__ import annotations

import sys
import time

import pytest
import torch

from torchlime import Call
from torchlime.image import Images
from torchlime.integrations.probe import ProbeExplainer
from torchlime.integrations.tensorboard_probe import TensorBoardProbe, heatmap_rgb, log_explanation, quality_scalars

GRID = torch.arange(16).view(4, 4).repeat_interleave(4, 0).repeat_interleave(4, 1)  # 4 x 4 cells of 4 x 4 pixels


def small_net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(16, 3),
    )


def summary_writer(folder):
    """A ``torch.utils.tensorboard.SummaryWriter`` (skips the test without tensorboard)."""
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(folder))


def events(folder):
    """The event files in ``folder``, read back (an ``EventAccumulator``)."""
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    acc = accumulator.EventAccumulator(str(folder), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    acc.Reload()
    return acc


def train(net, steps, hook=None, seed=1):
    torch.manual_seed(seed)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for step in range(steps):
        x, y = torch.rand(8, 3, 16, 16), torch.randint(0, 3, (8,))
        loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if hook is not None:
            hook(step)
    return net


def test_grid_has_sixteen_cells():
    assert GRID.unique().tolist() == list(range(16)) and (GRID[:4, :4] == 0).all() and (GRID[12:, 12:] == 15).all()


def test_tensorboard_probe_logs_every_k_steps_and_leaves_training_unchanged(tmp_path):
    probe_images = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(5))
    writer = summary_writer(tmp_path)
    net = small_net()
    probe = ProbeExplainer(net, probe_images, Images(segments=GRID), every=5, call=Call(n_samples=64))
    tb = TensorBoardProbe(probe, writer)
    train(net, 12, tb)
    writer.close()
    assert [s for s, _ in tb.history] == [0, 5, 10] and tb.calls == 3
    assert tb.last["step"] == 10 and tb.last["samples_per_second"] > 0 and tb.seconds_logging > 0
    acc = events(tmp_path)
    scalars = set(acc.Tags()["scalars"])
    assert {
        "torchlime/weighted_r2/mean",
        "torchlime/weighted_r2/input_1",
        "torchlime/quality/poor_fit",
        "torchlime/quality/unreliable_inputs",
        "torchlime/samples_per_second",
    } <= scalars
    assert [e.step for e in acc.Scalars("torchlime/weighted_r2/mean")] == [0, 5, 10]
    r2 = [e.value for e in acc.Scalars("torchlime/weighted_r2/min")]
    assert r2 == pytest.approx([float(exp.score.min()) for _, exp in tb.history], abs=1e-6)
    images = acc.Images("torchlime/heatmap")
    assert [e.step for e in images] == [0, 5, 10]
    assert (images[0].width, images[0].height) == (128, 64)  # the 2 probe heatmaps side by side
    plain = train(small_net(), 12)  # the same training without the probe: identical weights
    for a, b in zip(net.parameters(), plain.parameters()):
        assert torch.equal(a, b)


class FakeWriter:
    def __init__(self):
        self.calls = []

    def add_scalar(self, tag, value, step):
        self.calls.append(("scalar", tag, value, step))

    def add_images(self, tag, images, step, dataformats="NCHW"):
        self.calls.append(("images", tag, tuple(images.shape), step))

    def add_image(self, tag, image, step, dataformats="CHW"):
        self.calls.append(("image", tag, tuple(image.shape), step))

    def add_text(self, tag, text, step):
        self.calls.append(("text", tag, text, step))


def test_quality_flags_and_text_are_logged_for_unreliable_explanations():
    import warnings

    import torchlime

    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
    feats = torch.arange(16).view(1, 1, 4, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp = torchlime.explain(lambda x: net(x) * 0, torch.rand(3, 1, 4, 4), feats, n_samples=8)  # constant outputs
    writer = FakeWriter()
    scalars = log_explanation(writer, exp, 7, tag="probe", max_images=2)
    assert scalars["quality/saturated"] == 3 and scalars["quality/unreliable_inputs"] == 3
    assert ("text", "probe/unreliable", exp.run.unreliable, 7) in writer.calls
    assert ("images", "probe/heatmap", (2, 3, 64, 64), 7) in writer.calls
    logged = {k for kind, k, *_ in writer.calls if kind == "scalar"}
    assert logged == {f"probe/{k}" for k in quality_scalars(exp, None, 2)}


def test_heatmaps_of_tokens_are_bands():
    from torchlime import Explanation

    exp = Explanation(
        torch.tensor([[[1.0, -1.0]]]),
        torch.zeros(1, 1),
        torch.ones(1, 1),
        torch.zeros(1, 1),
        torch.zeros(1, 1, dtype=torch.long),
        torch.tensor([[0, 0, 1, -1]]),
        torch.tensor([2]),
        (4,),
    )
    pic = heatmap_rgb(exp, alpha=1.0)
    assert pic.shape[0] == 3 and pic.shape[1] >= 64
    assert pic[:, 0, 0].tolist() == [1.0, 0.0, 0.0] and pic[:, 0, -1].tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(probe="not a probe"), "`probe` must be a torchlime.integrations.probe.ProbeExplainer"),
        (dict(writer=object()), "`writer` must have an `add_scalar` method"),
        (dict(tag=""), "`tag` must be a non-empty str"),
    ],
)
def test_tensorboard_probe_argument_errors(kwargs, error):
    probe = ProbeExplainer(small_net(), torch.rand(1, 3, 16, 16), Images(segments=GRID))
    args = {"probe": probe, "writer": FakeWriter(), **kwargs}
    with pytest.raises(TypeError, match=error.replace("`", ".")):
        TensorBoardProbe(args.pop("probe"), args.pop("writer"), **args)


def test_lightning_trainer_logs_explanations(tmp_path):
    lightning = pytest.importorskip("lightning")
    pytest.importorskip("tensorboard")  # the TensorBoardLogger
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    from torchlime.integrations.lightning_callback import ExplainCallback

    class Module(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = small_net()

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self(x), y)
            self.log("loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(
        torch.rand(16, 3, 16, 16, generator=g), torch.randint(0, 3, (16,), generator=g)
    )
    callback = ExplainCallback(
        torch.rand(2, 3, 16, 16, generator=g), Images(segments=GRID), every=3, call=Call(n_samples=64)
    )
    assert isinstance(callback, lightning.pytorch.Callback)
    tb, csv = TensorBoardLogger(str(tmp_path), name="tb"), CSVLogger(str(tmp_path), name="csv")
    trainer = lightning.Trainer(
        max_epochs=2,
        accelerator="cpu",
        devices=1,
        enable_checkpointing=False,
        logger=[tb, csv],
        callbacks=[callback],
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=1,
    )
    trainer.fit(Module(), torch.utils.data.DataLoader(data, batch_size=4))  # 2 epochs x 4 steps
    assert [s for s, _ in callback.history] == [0, 3, 6] and trainer.global_step == 8
    acc = events(tb.log_dir)
    assert [e.step for e in acc.Scalars("torchlime/weighted_r2/mean")] == [0, 3, 6]
    assert [e.step for e in acc.Images("torchlime/heatmap")] == [0, 3, 6] and "loss" in acc.Tags()["scalars"]
    csv.save()
    header = (tmp_path / "csv" / "version_0" / "metrics.csv").read_text().splitlines()[0]
    assert "torchlime/weighted_r2/mean" in header and "torchlime/samples_per_second" in header


def test_explain_callback_without_lightning_names_the_extra(monkeypatch):
    import torchlime.integrations.lightning_callback as module

    monkeypatch.setattr(module, "_CLASS", None)
    for name in ("lightning", "lightning.pytorch", "pytorch_lightning"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError, match=r"pip install 'torchlime\[lightning\]'"):
        module.ExplainCallback  # noqa: B018 - the attribute access builds the class


def test_overhead_per_call_is_measured(tmp_path, capsys):
    """What the probe costs a loop, printed with ``-s`` (no timed assertion): a training step, a call on a
    step that explains nothing, and on an explaining step the explanation and the logging."""
    writer = summary_writer(tmp_path)
    net = small_net()
    tb = TensorBoardProbe(
        ProbeExplainer(net, torch.rand(4, 3, 16, 16), Images(segments=GRID), every=10, call=Call(n_samples=64)), writer
    )
    tb.probe.explain(0)  # warm-up: the first call on a model measures its chunk size
    t0 = time.perf_counter()
    train(net, 4)
    step = (time.perf_counter() - t0) / 4
    t0 = time.perf_counter()
    for s in range(1, 1001):
        tb(s * 10 + 1)
    idle = (time.perf_counter() - t0) / 1000
    for s in range(3):
        tb(10 * s)
    writer.close()
    with capsys.disabled():
        print(
            f"\nprobe of 4 images x 64 samples: training step {1000 * step:.1f} ms; probe call on other steps "
            f"{1e6 * idle:.1f} us; on explaining steps: explain {1000 * tb.seconds_explaining / tb.calls:.1f} ms "
            f"+ log {1000 * tb.seconds_logging / tb.calls:.1f} ms"
        )
    assert tb.calls == 3
