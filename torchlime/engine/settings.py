"""What step 1 (``resolve``) makes of a call: its records, filled and checked, and the objects they name.

``Settings`` is what the later steps read (``plan``, ``rows.Run``, ``run``, ``assemble``): the keywords
of ``torchlime.explain`` from its two records, ``config`` and ``call``, and beside them only what was
resolved from them (the model to run, the targets checked, S, the sampler, kernel and surrogate objects).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, cast

import torch

from torchlime.engine.config import Call, Config, given
from torchlime.methods.adaptive import Adaptive
from torchlime.stages.sampling import Sampler
from torchlime.stages.surrogate import Surrogate
from torchlime.stages.weighting import Kernel
from torchlime.typing import BaselineSpec, Model, PresetScope, TargetSpec


@dataclass(frozen=True)
class Settings:
    """A call's records, resolved (``resolve``), and the objects they resolve to.

    The keywords of ``torchlime.explain`` are read from ``config`` and ``call`` (their fields, filled
    and checked); the other attributes are what the engine made of them.

    Attributes:
        config: the configuration, the preset's settings filled in and the sizes checked.
        call: the call, the same way (numpy seeds and indices as torch values).
        model: the model the engine runs (the front door's adapter and ``accelerate`` applied).
        inputs: (B, ...) the inputs to explain.
        features: integer (B or 1, ...) their feature map.
        modality: which presets' settings applied.
        input_name: the name of ``inputs`` in error messages.
        adapter: the front door's model wrapper, or None.
        target: the call's target, checked for type and shape (a numpy or 0-d class an int).
        n_samples: S, an int (the cap with ``n_samples="auto"``).
        adaptive: the settings of ``n_samples="auto"``, or None.
        sampler: the sampler (names and presets resolved), not yet bound to the call.
        kernel: the kernel, the same way.
        surrogate: the surrogate, the same way.
    """

    config: Config
    call: Call
    model: Model
    inputs: torch.Tensor
    features: torch.Tensor
    modality: PresetScope
    input_name: str
    adapter: Optional[Callable[[Model], Model]]
    target: TargetSpec
    n_samples: int
    adaptive: Optional[Adaptive]
    sampler: Sampler
    kernel: Kernel
    surrogate: Surrogate

    @property
    def baseline(self) -> BaselineSpec:
        """The fill of hidden features: ``config.baseline``, filled (a list / tuple is refused by the fill)."""
        return cast(BaselineSpec, given(self.config.baseline, "baseline"))
