"""Stage 4 (``torchlime.stages.forward.model``): model calls, output selection, the chunk format a model wants,
modes restored, a progress bar, and the output-width check."""

from __future__ import annotations

import pytest
import torch

from torchlime import Accelerated, explain
from torchlime.stages.forward import chunking
from torchlime.stages.forward.model import InputFormat, call_model, eval_mode, input_format, select_output
from torchlime.stages.forward.passes import run_rows, score

from tests.helpers import grid_labels


def test_select_output_forms():
    t = torch.rand(4, 3)
    assert select_output(t, None, 4) is t
    assert select_output((t, "aux"), None, 4) is t
    assert select_output({"logits": t}, None, 4) is t
    assert select_output({"p": t}, "p", 4) is t and select_output([t, t * 2], 1, 4).equal(t * 2)
    assert select_output(t, lambda o: o[:, :1], 4).shape == (4, 1)
    assert select_output(torch.rand(4), None, 4).shape == (4, 1)  # a regressor
    with pytest.raises(ValueError, match=r"`output` selector 'q' does not apply"):
        select_output({"p": t}, "q", 4)
    with pytest.raises(ValueError, match=r"model output must have shape \(5,\) or \(5, K\)"):
        select_output(t, None, 5)


def test_call_model_places_chunks_and_passes_tuples_and_dicts():
    seen = []

    def model(*args, **kwargs):
        seen.append((args, kwargs))
        return torch.zeros(2, 1)

    call_model(model, torch.ones(2, 3, dtype=torch.float64), torch.device("cpu"), torch.float32)
    assert seen[-1][0][0].dtype == torch.float32
    call_model(model, (torch.ones(2, 3), torch.ones(2, 3, dtype=torch.long)), torch.device("cpu"), torch.float64)
    assert seen[-1][0][0].dtype == torch.float64 and seen[-1][0][1].dtype == torch.long  # ints stay ints
    call_model(model, {"ids": torch.ones(2, dtype=torch.long)}, torch.device("cpu"), torch.float32)
    assert set(seen[-1][1]) == {"ids"}


def test_input_format():
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten())
    images = torch.rand(2, 3, 8, 8)
    assert input_format(conv, images) == InputFormat(torch.float32, True)  # CPU conv: channels-last
    assert input_format(torch.nn.Linear(4, 2).double(), images) == InputFormat(torch.float64, False)
    assert input_format(lambda x: x, images) == InputFormat(None, False)
    nhwc = images.contiguous(memory_format=torch.channels_last)
    assert input_format(lambda x: x, nhwc) == InputFormat(None, True)
    assert input_format(Accelerated(conv, autocast=torch.bfloat16), images) == InputFormat(torch.bfloat16, False)
    assert input_format(conv, torch.ones(2, 3, 8, 8, dtype=torch.long)) == InputFormat(None, False)


def test_eval_mode_restores_every_submodule():
    net = torch.nn.Sequential(torch.nn.Dropout(), torch.nn.BatchNorm1d(3))
    net.train()
    net[1].eval()
    with eval_mode(net):
        assert not any(m.training for m in net.modules())
    assert net.training and net[0].training and not net[1].training


def test_run_rows_progress_bar(capsys):
    chunking.clear_cache()
    done = []
    plan = chunking.ChunkPlan(torch.nn.Identity(), ("t",), torch.device("cpu"), 10)
    run_rows(
        torch.nn.Identity(),
        lambda a, b: torch.zeros(b - a, 1),
        lambda o, x, a, b: done.append((a, b)),
        25,
        plan,
        torch.device("cpu"),
        torch.float32,
        progress=True,
    )
    assert done == [(0, 10), (10, 20), (20, 25)]
    assert "torchlime:" in capsys.readouterr().err  # a tqdm bar on stderr


def test_score_helper_chunks_rows():
    lin = torch.nn.Linear(3, 2)
    rows = torch.rand(50, 3)
    out = score(lin, lambda a, b: rows[a:b], 50, reference=rows, batch_size=7)
    torch.testing.assert_close(out, lin(rows).detach())


def test_output_width_must_not_change():
    x, f = torch.rand(2, 1, 4, 4), grid_labels(4, 4, 2, 2).view(1, 1, 4, 4)
    calls = []

    def flaky(v):
        calls.append(v.shape[0])
        return torch.zeros(v.shape[0], 3 if len(calls) == 1 else 4)

    with pytest.raises(
        ValueError,
        match=r"the model's output width changed: expected 3 columns \(from its first "
        r"call\), got 4 at rows 10\.\.19",
    ):
        explain(flaky, x, f, n_samples=20, batch_size=10)
