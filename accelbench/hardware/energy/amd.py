"""AMD GPUs: amdsmi's energy accumulator (amdsmi_get_energy_count: a count and its
resolution in microjoules). amdsmi ships with ROCm and is imported here only.

The GPU is found by its PCI address (torch's device properties against amdsmi's BDF), so the
HIP index maps to the right amdsmi device whatever HIP_VISIBLE_DEVICES does. amdsmi does not
state how often the accumulator moves: 100 ms is assumed, so a window it calls too short errs
on the safe side. Not supported in a virtual machine guest (amdsmi's own documentation).
"""

from __future__ import annotations

from typing import Any

import torch

from accelbench.hardware.energy.source import Unavailable

INTERVAL_S = 0.1  # assumed (not stated by amdsmi)


def torch_bdf(device: torch.device) -> str | None:
    """'0000:c1:00' (domain:bus:device) of a ROCm device, None when this torch has no PCI info."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    parts = [getattr(props, f"pci_{n}_id", None) for n in ("domain", "bus", "device")]
    if any(p is None for p in parts):
        return None
    return f"{parts[0]:04x}:{parts[1]:02x}:{parts[2]:02x}"


def accumulated_j(info: dict) -> float:
    """Joules of an amdsmi_get_energy_count answer (the count was named 'power' before
    ROCm 6.2 and 'energy_accumulator' since)."""
    count = info.get("energy_accumulator", info.get("power"))
    return float(count) * float(info["counter_resolution"]) / 1e6


class AmdSource:
    """One AMD GPU's energy accumulator; power from its differences."""

    name = "amdsmi"
    interval_s = INTERVAL_S
    host_wide = False

    def __init__(self, amdsmi: Any, handle: Any, bdf: str) -> None:
        self._amdsmi, self._handle = amdsmi, handle
        self.devices = (f"GPU {bdf}",)
        self._zero_j = accumulated_j(amdsmi.amdsmi_get_energy_count(handle))

    def read_j(self) -> tuple[float, ...]:
        """Joules since the source was opened."""
        return (accumulated_j(self._amdsmi.amdsmi_get_energy_count(self._handle))
                - self._zero_j,)

    def power_w(self) -> None:
        """Power from the counter's differences (one source of truth for both)."""
        return None

    def close(self) -> None:
        """Release amdsmi."""
        self._amdsmi.amdsmi_shut_down()


def open_amdsmi(device: torch.device) -> AmdSource | Unavailable:
    """The energy accumulator of this ROCm device, or why it cannot be read."""
    try:
        import amdsmi
    except ImportError:
        return Unavailable("amdsmi is not installed (it ships with ROCm)")
    bdf = torch_bdf(device)
    if bdf is None:
        return Unavailable("this torch gives no PCI address to find the GPU in amdsmi")
    try:
        amdsmi.amdsmi_init()
    except Exception as err:  # amdsmi raises its own AmdSmiException tree
        return Unavailable(f"amdsmi_init failed: {err}")
    try:
        for handle in amdsmi.amdsmi_get_processor_handles():
            if str(amdsmi.amdsmi_get_gpu_device_bdf(handle)).lower().startswith(bdf):
                return AmdSource(amdsmi, handle, bdf)
        reason = f"no amdsmi GPU at PCI address {bdf}"
    except Exception as err:
        reason = f"amdsmi energy counter: {err}"
    amdsmi.amdsmi_shut_down()
    return Unavailable(reason)
