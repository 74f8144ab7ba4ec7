"""Which energy source a process meters with: the device's own counter (NVML for NVIDIA,
amdsmi for ROCm, HLML for Gaudi), the host's RAPL counters for a CPU device, otherwise
'unavailable' with the reason. A program embedding accelbench, or a test on a machine without
counters, may put its own source in place with `set_source_factory`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from accelbench.hardware.energy.amd import open_amdsmi
from accelbench.hardware.energy.gaudi import open_hlml
from accelbench.hardware.energy.meter import EnergyMeter
from accelbench.hardware.energy.nvml import open_nvml
from accelbench.hardware.energy.rapl import open_rapl
from accelbench.hardware.energy.source import EnergySource, Unavailable

SourceFactory = Callable[[torch.device], EnergySource | Unavailable]
_factory: list[SourceFactory] = []


def set_source_factory(factory: SourceFactory | None) -> None:
    """Meter with `factory`'s sources from now on (None: the machine's own, the default)."""
    _factory[:] = [factory] if factory is not None else []


def open_source(device: torch.device) -> EnergySource | Unavailable:
    """The best energy source this process has for `device`."""
    if _factory:
        return _factory[0](device)
    if device.type == "cuda":
        return open_amdsmi(device) if torch.version.hip else open_nvml(device)
    if device.type == "hpu":
        return open_hlml(device)
    if device.type == "cpu":
        return open_rapl()
    return Unavailable(f"no energy source for {device.type} devices")


def open_meter(device: torch.device) -> EnergyMeter:
    """A meter over the best source for `device` (use it as a context manager)."""
    return EnergyMeter(open_source(device))
