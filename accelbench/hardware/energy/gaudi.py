"""Intel Gaudi: the HLML management library's energy counter (pyhlml, shipped with Gaudi's
software stack; imported here only), millijoules since the driver loaded, as NVML's.

torch does not index HPU devices (a process acquires one), so which HLML device this process
holds is known only when the host has one; otherwise the source says so rather than guess.
"""

from __future__ import annotations

from typing import Any

import torch

from accelbench.hardware.energy.source import Unavailable

INTERVAL_S = 0.1  # assumed as NVML's (not stated by HLML)


class HlmlSource:
    """The host's one Gaudi device: its energy counter and power reading."""

    name = "hlml"
    interval_s = INTERVAL_S
    host_wide = False

    def __init__(self, pyhlml: Any) -> None:
        self._hlml = pyhlml
        self._handle = pyhlml.hlmlDeviceGetHandleByIndex(0)
        self.devices = ("HPU 0",)
        self._zero_mj = pyhlml.hlmlDeviceGetTotalEnergyConsumption(self._handle)

    def read_j(self) -> tuple[float, ...]:
        """Joules since the source was opened."""
        mj = self._hlml.hlmlDeviceGetTotalEnergyConsumption(self._handle)
        return ((mj - self._zero_mj) / 1e3,)

    def power_w(self) -> tuple[float, ...]:
        """The device's power as HLML reports it (milliwatts)."""
        return (self._hlml.hlmlDeviceGetPowerUsage(self._handle) / 1e3,)

    def close(self) -> None:
        """Release HLML."""
        self._hlml.hlmlShutdown()


def open_hlml(device: torch.device) -> HlmlSource | Unavailable:
    """The energy counter of this process's Gaudi, or why it cannot be read."""
    try:
        import pyhlml
    except ImportError:
        return Unavailable("pyhlml (Intel Gaudi's management library) is not importable")
    if not hasattr(pyhlml, "hlmlDeviceGetTotalEnergyConsumption"):
        return Unavailable("this pyhlml has no hlmlDeviceGetTotalEnergyConsumption")
    try:
        pyhlml.hlmlInit()
    except Exception as err:  # pyhlml raises its own HLMLError
        return Unavailable(f"hlmlInit failed: {err}")
    try:
        count = pyhlml.hlmlDeviceGetCount()
        if count == 1:
            return HlmlSource(pyhlml)
        reason = (f"{count} Gaudi devices on this host and torch does not say which one "
                  f"{device} is")
    except Exception as err:
        reason = f"HLML energy counter: {err}"
    pyhlml.hlmlShutdown()
    return Unavailable(reason)
