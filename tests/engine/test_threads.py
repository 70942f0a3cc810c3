"""Concurrent calls on one model: its train/eval flags are restored only when the last call leaves.

The calls overlap by construction, not by timing: call A's model waits inside its first forward until
call B is inside its own, and B's later forwards wait until A has returned. Before the flags were counted
per module, A restored training mode when it left, so B's remaining forwards ran with Dropout on (its
coefficients moved by ~0.01) and B then left the model in eval mode.
"""

from __future__ import annotations

import threading
from typing import Callable

import pytest
import torch
from torch import nn

import torchlime
from torchlime.stages.forward import model as forward_model
from torchlime.stages.forward.model import eval_mode

WAIT_S = 60.0  # a guard against a hang if the calls did not overlap; nothing is timed


class Gated(nn.Module):
    """A dropout model whose forward runs a per-thread hook first (the test's rendezvous)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.ReLU(), nn.Linear(16, 3))
        self.hooks: dict[str, Callable[[], None]] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hook = self.hooks.get(threading.current_thread().name)
        if hook is not None:
            hook()
        return self.body(x)


def _explain(model: nn.Module) -> torch.Tensor:
    x = torch.linspace(-1, 1, 16).view(2, 8)
    exp = torchlime.explain(model, x, torch.arange(8).view(1, 8), n_samples=64, generator=0, batch_size=8)
    return exp.coef


def _wait(event: threading.Event) -> None:
    assert event.wait(WAIT_S), "the other call never reached the model"


def test_overlapping_calls_keep_eval_mode_until_the_last_leaves():
    model = Gated()
    reference = _explain(model.eval())
    model.train()
    a_inside, b_inside, a_done = threading.Event(), threading.Event(), threading.Event()
    a_calls, b_calls = [], []

    def hook_a() -> None:
        a_calls.append(1)
        if len(a_calls) == 1:  # A's first forward: wait until B is inside the model too
            a_inside.set()
            _wait(b_inside)

    def hook_b() -> None:
        b_calls.append(1)
        if len(b_calls) == 1:
            b_inside.set()
        else:  # B's later forwards run after A has returned
            _wait(a_done)

    model.hooks = {"call-a": hook_a, "call-b": hook_b}
    results: dict[str, torch.Tensor] = {}
    errors: list[BaseException] = []

    def run(name: str) -> None:
        try:
            results[name] = _explain(model)
        except BaseException as err:  # noqa: BLE001 - raised again in the test's thread
            errors.append(err)
            a_inside.set(), b_inside.set(), a_done.set()

    a = threading.Thread(target=run, args=("call-a",), name="call-a")
    b = threading.Thread(target=run, args=("call-b",), name="call-b")
    a.start()
    _wait(a_inside)  # A holds the model in eval mode before B enters
    b.start()
    a.join(WAIT_S)
    a_done.set()
    b.join(WAIT_S)
    assert not a.is_alive() and not b.is_alive()
    if errors:
        raise errors[0]
    assert len(b_calls) > 1  # B ran forwards after A had left
    torch.testing.assert_close(results["call-a"], reference)
    torch.testing.assert_close(results["call-b"], reference)
    assert model.training and all(m.training for m in model.modules())


def test_nested_and_shared_submodules_restore_their_own_flags():
    outer = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.1))
    outer[0].eval()  # a submodule kept in eval mode by its owner
    with eval_mode(outer):
        with eval_mode(outer[1]):  # a call on a submodule inside a call on the whole model
            assert not outer[1].training
        assert not outer.training and not outer[1].training  # the inner call left it to the outer
    assert outer.training and not outer[0].training and outer[1].training


def test_a_failing_call_restores_the_flags():
    model = nn.Sequential(nn.Dropout(0.5))
    model.train()
    with pytest.raises(RuntimeError, match="boom"):
        with eval_mode(model):
            raise RuntimeError("boom")
    assert model.training and model[0].training


def test_a_model_whose_eval_fails_is_released():
    class Stubborn(nn.Module):
        def train(self, mode: bool = True) -> Stubborn:
            if not mode:
                raise RuntimeError("no eval here")
            return super().train(mode)

    model = Stubborn()
    with pytest.raises(RuntimeError, match="no eval here"):
        with eval_mode(model):
            pass
    assert model not in forward_model._MODES and model.training
