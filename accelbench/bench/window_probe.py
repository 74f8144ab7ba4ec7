"""A disturbance probe around a timed window that never fails the measurement it brackets."""

from __future__ import annotations

from typing import Any

import torch

from accelbench.hardware.disturbance import OTHER_CPU_THRESHOLD, DisturbanceProbe


class WindowProbe:
    """A DisturbanceProbe that never fails a measurement: start() and stop() go around a timed
    window (after its last synchronise), `result` is the window's dict (or why none); `threshold`
    is the share of the CPU capacity other processes may use before the window is disturbed
    (--disturbance-threshold)."""

    def __init__(self, device: torch.device, threshold: float = OTHER_CPU_THRESHOLD) -> None:
        self.result: dict[str, Any] | None = None
        self._started = False
        try:
            self._probe = DisturbanceProbe(threshold, gpu_uuid=_nvidia_uuid(device))
        except Exception as err:  # noqa: BLE001 - a probe must never end a cell
            self._probe, self.result = None, {"unavailable": f"probe not made: {err}"}

    def start(self) -> None:
        """Snapshot the window's start."""
        if self._probe is None:
            return
        try:
            self._probe.start()
            self._started = True
        except Exception as err:  # noqa: BLE001
            self.result = {"unavailable": f"probe start failed: {err}"}

    def stop(self) -> dict[str, Any] | None:
        """Snapshot the window's end; the window's disturbance as a dict."""
        if self._probe is None or not self._started:
            return self.result
        try:
            self.result = self._probe.stop().to_dict()
        except Exception as err:  # noqa: BLE001
            self.result = {"unavailable": f"probe stop failed: {err}"}
        return self.result


def _nvidia_uuid(device: torch.device) -> str | None:
    """The UUID of an NVIDIA GPU (its clocks and other processes are probed too), else None."""
    if device.type != "cuda" or getattr(torch.version, "hip", None):
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    return str(torch.cuda.get_device_properties(index).uuid)
