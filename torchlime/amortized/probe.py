"""``AmortizedProbe``: explanations of a fixed probe batch at every training step, one head forward each.

Every ``refresh`` steps the probe labels a fixed set of training inputs with the engine at the small
label N and trains the head further (from the last head, so each refresh is a few epochs); at every
step it explains the probe inputs with one forward of the head (and of the model, for their top class).
Training is left as ``ProbeExplainer`` leaves it: the model's gradients untouched (the engine runs under
``inference_mode``; the head's own gradients never reach the model), every submodule's train/eval mode
restored, and the global RNG states of torch, NumPy and ``random`` restored after each call.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from typing_extensions import Unpack

from torchlime._util.checks import check_positive_int, check_tensor
from torchlime.amortized._explainer import AmortizedExplainer
from torchlime.amortized._options import FitOptions
from torchlime.engine.config import Call
from torchlime.engine.explainer import Explainer, ModalitySpec
from torchlime.engine.explanation import Explanation
from torchlime.integrations.probe import preserved_rng
from torchlime.typing import Model, TargetSpec, Unset

__all__ = ["AmortizedProbe"]


class AmortizedProbe:
    """Refresh an amortized explainer every ``refresh`` steps; explain ``probe_inputs`` at every step.

    Args:
        model: the model being trained.
        probe_inputs: (B, ...) the inputs explained at every step (copied once).
        train_inputs: (n, ...) the inputs the head is trained on at each refresh (copied once).
        modality: the input kind or feature map (features fixed across inputs).
        explainer: the label settings; None: the engine's defaults.
        call: the labels' ``target``, ``n_samples`` (N; unset: ``fit``'s default for the inputs, kept for
            every refresh) and ``generator`` (the int seed of the labels, the split and the head's training;
            None: 0), as ``ProbeExplainer`` takes them.
        refresh: refit the head at steps 0, refresh, 2 * refresh, ...
        max_history: the most explanations ``history`` keeps (the oldest go first); None keeps all.
        **options: ``AmortizedExplainer.fit``'s training options (``FitOptions``); by default 5 epochs per
            refresh and no report (``report_samples=None``).

    Attributes:
        amortized: the current ``AmortizedExplainer`` (None before step 0).
        history: ``(step, explanation)`` pairs, explanations on the CPU.
        refits: the steps at which the head was refreshed.

    Example:
        >>> import torchlime
        >>> net = torch.nn.Sequential(torch.nn.Linear(4, 2))
        >>> probe = AmortizedProbe(net, torch.rand(2, 4), torch.rand(32, 4), torch.arange(4).view(1, 4),
        ...                        call=torchlime.Call(n_samples=16), refresh=3, epochs=1)
        >>> [probe.explain(step).coef.shape[0] for step in range(4)], probe.refits
        ([2, 2, 2, 2], [0, 3])
    """

    def __init__(
        self,
        model: Model,
        probe_inputs: torch.Tensor,
        train_inputs: torch.Tensor,
        modality: ModalitySpec,
        *,
        explainer: Optional[Explainer] = None,
        call: Optional[Call] = None,
        refresh: int = 100,
        max_history: Optional[int] = None,
        **options: Unpack[FitOptions],
    ) -> None:
        self.model = model
        self.probe_inputs = check_tensor(probe_inputs, "probe_inputs").detach().clone()
        self.train_inputs = check_tensor(train_inputs, "train_inputs").detach().clone()
        self.modality, self.explainer = modality, explainer
        self.refresh = check_positive_int(refresh, "refresh")
        call = Call() if call is None else call
        self.target: TargetSpec = None if isinstance(call.target, Unset) else call.target
        self.n_samples = None if isinstance(call.n_samples, Unset) else call.n_samples
        self.generator = call.generator
        self.max_history = None if max_history is None else check_positive_int(max_history, "max_history")
        self.options: dict[str, Any] = {"epochs": 5, "report_samples": None, **options}
        self.amortized: Optional[AmortizedExplainer] = None
        self.history: list[tuple[int, Explanation]] = []
        self.refits: list[int] = []

    def explain(self, step: int) -> Explanation:
        """Refresh the head if ``step`` is a multiple of ``refresh`` (or none is trained yet), then explain.

        Args:
            step: the training step.

        Returns:
            The explanation of the probe inputs (B, T, F), on the CPU.
        """
        with preserved_rng():
            if self.amortized is None or step % self.refresh == 0:
                options = dict(self.options)
                if self.amortized is not None and "head" not in options:
                    options["head"] = self.amortized.head  # a warm start: a few epochs on from the last head
                self.amortized = AmortizedExplainer.fit(
                    self.model,
                    self.train_inputs,
                    modality=self.modality,
                    explainer=self.explainer,
                    target=self.target,
                    n_samples=self.n_samples,  # type: ignore[arg-type]
                    generator=self.generator,
                    **options,
                )
                self.n_samples = self.amortized.label_samples  # the first fit's N for every refresh
                self.refits.append(step)
            exp = self.amortized.explain(self.probe_inputs).to("cpu")
        self.history.append((step, exp))
        if self.max_history is not None and len(self.history) > self.max_history:
            del self.history[: len(self.history) - self.max_history]
        return exp
