"""``ProbeExplainer``: explain a fixed probe batch every k steps of a training loop.

Watching how explanations of a few fixed inputs evolve during training is cheap with a batched
LIME, as long as the probe leaves training exactly as it was: no autograd, eval mode restored, the
global RNG states restored (``preserved_rng``), nothing kept on the device. Training with a probe
gives bit-identical weights to training without it (with the same seeds), which
``tests/integrations/test_probe.py`` checks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
from types import ModuleType
from typing import Callable, Iterator, Optional

import torch

from torchlime._util.checks import check_integer, check_positive_int, check_tensor, describe
from torchlime.engine.config import Call
from torchlime.engine.explainer import Explainer, ModalitySpec
from torchlime.engine.explanation import Explanation
from torchlime.engine.modality import Modality
from torchlime.stages.forward.model import eval_mode
from torchlime.typing import Model

#: torch functions and classes that torch leaves unannotated, typed
_cuda_initialized: Callable[[], bool] = torch.cuda.is_initialized
_stream: Callable[[torch.device], torch.cuda.Stream] = torch.cuda.Stream


@contextlib.contextmanager
def preserved_rng() -> Iterator[None]:
    """Save the global RNG states (torch CPU, initialised CUDA devices, NumPy, ``random``); restore on exit.

    Yields:
        Nothing: the states are restored when the context ends.
    """
    cpu = torch.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and _cuda_initialized() else None
    py = random.getstate()
    np_random: Optional[ModuleType] = None
    np_state: object = None
    try:
        import numpy as np

        np_random = np.random
        np_state = np.random.get_state()
    except ImportError:  # numpy is a dependency, but the guard costs nothing
        pass
    try:
        yield
    finally:
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)
        random.setstate(py)
        if np_random is not None:
            np_random.set_state(np_state)


class ProbeExplainer:
    """Explain ``probe_inputs`` every ``every`` training steps, leaving training untouched.

    * no autograd: the call runs under ``torch.no_grad()`` (the engine's forward passes under
      ``torch.inference_mode()``), so no parameter's ``.grad`` changes, and the optimizer, which the
      probe never sees, keeps its state;
    * modes: the model runs in eval mode (no dropout, no BatchNorm statistics updates) and every
      submodule's train/eval mode is restored afterwards;
    * randomness: masks come from an explicit seed (so every probe uses the same masks and
      explanations are comparable across steps), and the global RNG states of torch (CPU and every
      initialised CUDA device), NumPy and ``random`` are saved before and restored after the call;
    * memory: the explanation is moved to the CPU before the call returns, and nothing else is kept,
      so on CUDA ``torch.cuda.memory_allocated()`` is the same after the call as before it (the first
      call may create cuBLAS/cuDNN workspaces once).

    Args:
        model: the model being trained (``nn.Module`` or callable), on any device.
        probe_inputs: (B, ...) fixed inputs to explain (copied once; later changes to the
            caller's tensor do not affect the probe).
        modality: the input kind (``torchlime.Images(...)``, ``Series(...)``, any ``Modality``) or
            an integer feature map (B or 1, ...), as ``Explainer.explain`` takes it.
        explainer: how to explain (``torchlime.Explainer(kernel=..., surrogate=..., baseline=...)``);
            None: the engine's defaults.
        call: what to explain (``torchlime.Call(target=..., n_samples=..., generator=...)``), the same on
            every call; None: the defaults. Without a ``generator`` every call uses seed 0, so every
            probe uses the same masks.
        every: explain at steps 0, every, 2*every, ...
        stream: run the explanation on a dedicated CUDA stream (CUDA probe inputs only).
            The side stream first waits for the current stream's queued work (the
            weights as of this step) and the current stream waits for the side stream
            before the call returns (so the optimizer cannot update weights the probe
            is still reading). The call stays synchronous for the host (the result is
            copied to the CPU); what the separate stream buys is to be measured on a GPU.
        max_history: the most explanations ``history`` keeps (the oldest go first), so a long
            training run does not grow without bound; None keeps every one.
        sink: optional ``sink(step, explanation)`` called with every explanation (e.g. to save
            it to disk or log it), whatever ``max_history`` keeps.

    Attributes:
        history: list of ``(step, explanation)``, explanations on the CPU, in call order (the
            last ``max_history``).

    Example:
        >>> net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
        >>> feats = torch.arange(16).view(1, 1, 4, 4) // 4
        >>> probe = ProbeExplainer(net, torch.rand(2, 1, 4, 4), feats, call=Call(n_samples=64), every=10)
        >>> [probe.maybe_explain(step) is not None for step in range(12)].count(True)
        2
        >>> len(probe.history), probe.history[1][0]
        (2, 10)
    """

    def __init__(  # noqa: PLR0913
        self,
        model: Model,
        probe_inputs: torch.Tensor,
        modality: ModalitySpec,
        *,
        explainer: Optional[Explainer] = None,
        call: Optional[Call] = None,
        every: int = 100,
        stream: bool = False,
        max_history: Optional[int] = 256,
        sink: Optional[Callable[[int, Explanation], object]] = None,
    ) -> None:
        if not callable(model):
            raise TypeError(f"`model` must be an nn.Module or a callable, got {describe(model)}")
        check_tensor(probe_inputs, "probe_inputs")
        if probe_inputs.ndim < 2:
            raise ValueError(
                f"`probe_inputs` must be batched with shape (B, ...), got shape {tuple(probe_inputs.shape)}"
            )
        check_positive_int(every, "every")
        if max_history is not None:
            check_positive_int(max_history, "max_history")
        if sink is not None and not callable(sink):
            raise TypeError(f"`sink` must be None or a callable (step, explanation), got {describe(sink)}")
        if not isinstance(stream, bool):
            raise TypeError(f"`stream` must be a bool, got {describe(stream)}")
        if stream and not probe_inputs.is_cuda:
            raise ValueError(f"`stream=True` needs CUDA `probe_inputs`, got inputs on {probe_inputs.device}")
        if explainer is not None and not isinstance(explainer, Explainer):
            raise TypeError(f"`explainer` must be None or a torchlime.Explainer, got {describe(explainer)}")
        if call is not None and not isinstance(call, Call):
            raise TypeError(
                f"`call` must be None or a torchlime.Call (target, n_samples, generator, ...), got {describe(call)}"
            )
        if isinstance(modality, torch.Tensor):
            check_integer(modality, "modality")
        elif not isinstance(modality, Modality):
            raise TypeError(f"`modality` must be a Modality or an integer feature map, got {describe(modality)}")
        self.model = model
        self.probe_inputs = probe_inputs.detach().clone()
        self.modality = modality.detach().clone() if isinstance(modality, torch.Tensor) else modality
        self.every = every
        self.stream = stream
        self.explainer = Explainer() if explainer is None else explainer
        call = Call() if call is None else call
        # every probe of a run uses the same masks: seed 0 unless the call has its own generator
        self.call = dataclasses.replace(call, generator=0) if call.generator is None else call
        self.history: list[tuple[int, Explanation]] = []
        self.max_history, self.sink = max_history, sink
        self._side: Optional[torch.cuda.Stream] = None

    def maybe_explain(self, step: int) -> Optional[Explanation]:
        """Explain the probe when ``step`` is a multiple of ``every``.

        Args:
            step: the training step (int >= 0).

        Returns:
            The CPU ``Explanation`` (also appended to ``history``), or None on other steps.
        """
        if isinstance(step, bool) or not isinstance(step, int):
            raise TypeError(f"`step` must be an int >= 0, got {describe(step)}")
        if step < 0:
            raise ValueError(f"`step` must be >= 0, got {step}")
        if step % self.every:
            return None
        return self.explain(step)

    def explain(self, step: int) -> Explanation:
        """Explain the probe now (whatever the step) and record it under ``step``.

        Args:
            step: the training step it is recorded under.

        Returns:
            The explanation with every tensor on the CPU: coef (B, T, F), ...
        """
        with preserved_rng(), torch.no_grad(), eval_mode(self.model), self._on_stream():
            exp = self.explainer.run(self.model, self.probe_inputs, self.modality, self.call)
            cpu = exp.to("cpu")
            del exp
        self.history.append((step, cpu))
        if self.max_history is not None and len(self.history) > self.max_history:
            del self.history[: len(self.history) - self.max_history]
        if self.sink is not None:
            self.sink(step, cpu)
        return cpu

    @contextlib.contextmanager
    def _on_stream(self) -> Iterator[None]:
        if not self.stream:
            yield
            return
        device = self.probe_inputs.device
        if self._side is None:
            self._side = _stream(device)
        main = torch.cuda.current_stream(device)
        self._side.wait_stream(main)
        try:
            with torch.cuda.stream(self._side):
                yield
        finally:
            main.wait_stream(self._side)
