"""NVIDIA GPUs: NVML's cumulative energy counter (nvmlDeviceGetTotalEnergyConsumption,
millijoules since the driver loaded, Volta and newer) and its power reading
(nvmlDeviceGetPowerUsage, milliwatts; averaged over 1 s on Ampere and newer except GA100).

nvidia-ml-py (module pynvml, the optional 'energy' extra) is imported here only. The GPU is
found by its UUID, so the torch index maps to the right NVML device whatever
CUDA_VISIBLE_DEVICES reorders or hides (NVML enumerates every GPU of the host). NVML counts the
whole board (GPU and its memory), every process on it included.
"""

from __future__ import annotations

from typing import Any

import torch

from accelbench.hardware.energy.source import Unavailable

INTERVAL_S = 0.1  # the counter moves about every 100 ms
INSTALL = "pip install 'accelbench[energy]'"


def normal_uuid(text: Any) -> str:
    """A GPU UUID as torch prints it ('8-4-4-4-12' hex), from NVML's 'GPU-...' (str or bytes)."""
    text = text.decode() if isinstance(text, bytes) else str(text)
    text = text.strip().lower()
    return text[4:] if text.startswith("gpu-") else text


def nvml_handle(pynvml: Any, uuid: str) -> Any:
    """The NVML handle of the GPU with this UUID, looked up by the UUID itself
    (nvmlDeviceGetHandleByUUID): no other GPU of the host is opened, so one that this process
    may not query does not disable the meter. Raises pynvml.NVMLError when none has it."""
    return pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{normal_uuid(uuid)}")


class NvmlSource:
    """One GPU's energy counter and power reading; holds one nvmlInit until closed."""

    name = "nvml"
    interval_s = INTERVAL_S
    host_wide = False

    def __init__(self, pynvml: Any, handle: Any, uuid: str) -> None:
        self._nvml = pynvml
        self._handle = handle
        self.devices = (f"GPU-{normal_uuid(uuid)}",)
        self._zero_mj = pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)

    def read_j(self) -> tuple[float, ...]:
        """Joules since the source was opened (the counter is 64-bit: it does not wrap)."""
        mj = self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
        return ((mj - self._zero_mj) / 1e3,)

    def power_w(self) -> tuple[float, ...]:
        """The board's power as NVML reports it now."""
        return (self._nvml.nvmlDeviceGetPowerUsage(self._handle) / 1e3,)

    def sm_clock_mhz(self) -> tuple[float, ...]:
        """The SM clock now (MHz), sampled beside power: the timed window's mean clock."""
        return (float(self._nvml.nvmlDeviceGetClockInfo(self._handle,
                                                        self._nvml.NVML_CLOCK_SM)),)

    def close(self) -> None:
        """Release this source's nvmlInit (NVML counts them)."""
        self._nvml.nvmlShutdown()


def open_nvml(device: torch.device) -> NvmlSource | Unavailable:
    """The energy counter of this CUDA device, or why it cannot be read."""
    try:
        import pynvml
    except ImportError:
        return Unavailable(f"nvidia-ml-py is not installed ({INSTALL})")
    index = device.index if device.index is not None else torch.cuda.current_device()
    uuid = str(torch.cuda.get_device_properties(index).uuid)
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        return Unavailable(f"nvmlInit failed: {err}")
    try:
        handle = nvml_handle(pynvml, uuid)
    except pynvml.NVMLError as err:  # NotFound: a MIG instance, a UUID NVML does not know
        reason = (f"no NVML GPU has the UUID of {device} ({uuid}; a MIG instance has no "
                  f"counter): {err}")
    else:
        try:
            return NvmlSource(pynvml, handle, uuid)
        except pynvml.NVMLError as err:  # NotSupported before Volta, NoPermission, ...
            reason = f"NVML energy counter: {err}"
    pynvml.nvmlShutdown()
    return Unavailable(reason)
