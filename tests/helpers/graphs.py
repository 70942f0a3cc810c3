"""A CPU stand-in for CUDA graphs (``accel.GraphBackend``), so the engine's capture and replay run in tests.

``capture`` runs the function once (as a CUDA capture runs its Python once) and keeps it; ``replay`` runs
it again on the same objects: the static buffers the engine refreshed before the replay. It counts both.
"""

from __future__ import annotations

from typing import Callable

import torch


class Recorded:
    """A captured function: ``replay`` runs it again."""

    def __init__(self, fn: Callable[[], None], backend: RecordingBackend) -> None:
        self.fn, self.backend = fn, backend

    def replay(self) -> None:
        """Run the function again (counted)."""
        self.backend.replays += 1
        self.fn()


class RecordingBackend:
    """Captures on any device (or only on ``devices``), counting captures and replays."""

    def __init__(self, devices: tuple[str, ...] = ("cpu",)) -> None:
        self.devices = devices
        self.captures = 0
        self.replays = 0

    def supports(self, device: torch.device) -> bool:
        """Whether ``device``'s type is one of ``devices``."""
        return device.type in self.devices

    def capture(self, fn: Callable[[], None], device: torch.device) -> Recorded:
        """Run ``fn`` once and keep it (counted)."""
        self.captures += 1
        fn()
        return Recorded(fn, self)
