"""What else touched an NVIDIA GPU during a timed window: its SM clock, the reasons NVML gives
for holding clocks down, and compute processes outside our tree, read at the window's edges.

Ran on one NVIDIA H200 (docs/gpu.md, second run): SM clocks of 1,470-1,980 MHz and
`sw_power_cap` read beside every window, no window flagged; tested otherwise with a fake module
(tests/unit/test_disturbance.py). nvidia-ml-py (module pynvml, the 'energy' extra) is imported
lazily; without it, or without an NVIDIA driver, the state says why it is missing.

Readings are instants at the edges, not the whole window: a slowdown that came and went in
between is not seen. NVML reports host pids; in a container with its own pid namespace they
cannot be matched to ours, so other processes are then recorded but not judged.
"""

from __future__ import annotations

from typing import Any

# NVML's clock event (throttle) reason bits: these mean the GPU ran slower than it could for
# a cause outside the workload's own demand, and flag a window ...
SLOWDOWN_REASONS = {0x8: "hw_slowdown", 0x20: "sw_thermal_slowdown",
                    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown"}
# ... these are recorded only (a busy GPU at its power cap is normal).
NOTED_REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
                 0x10: "sync_boost", 0x100: "display_clock_setting"}


def reason_names(mask: int) -> list[str]:
    """The names of the reason bits set in an NVML mask (unknown bits as hex)."""
    known = {**NOTED_REASONS, **SLOWDOWN_REASONS}
    names = [name for bit, name in sorted(known.items()) if mask & bit]
    rest = mask & ~sum(known)
    return names + ([hex(rest)] if rest else [])


def open_nvidia(uuid: str) -> tuple[Any, Any] | str:
    """(pynvml, handle) of the GPU with this UUID after nvmlInit, or why not."""
    try:
        import pynvml
    except ImportError:
        return "nvidia-ml-py is not installed (pip install 'accelbench[energy]')"
    from accelbench.hardware.energy.nvml import nvml_handle  # imports torch: a GPU run has it

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        return f"nvmlInit failed: {err}"
    try:
        return pynvml, nvml_handle(pynvml, uuid)
    except pynvml.NVMLError as err:
        pynvml.nvmlShutdown()
        return f"no NVML GPU has the UUID {uuid}: {err}"


def _reasons_mask(nvml: Any, handle: Any) -> int:
    """The current reason mask under its new name (ClocksEvent) or its old (ClocksThrottle)."""
    getter = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    getter = getter or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    return int(getter(handle))


def nvidia_state(nvml: Any, handle: Any, own_pids: frozenset[int]) -> dict[str, object]:
    """The SM clock (MHz), the clock reasons and the compute processes on the GPU now."""
    state: dict[str, object] = {}
    try:
        state["sm_clock_mhz"] = int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
        mask = _reasons_mask(nvml, handle)
        state["clock_reasons"] = reason_names(mask)
        state["slowdown"] = [SLOWDOWN_REASONS[b] for b in sorted(SLOWDOWN_REASONS) if mask & b]
        pids = sorted(int(p.pid) for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle))
    except nvml.NVMLError as err:
        state["unavailable"] = f"NVML: {err}"
        return state
    state["pids_comparable"] = any(pid in own_pids for pid in pids)
    state["other_pids"] = [pid for pid in pids if pid not in own_pids]
    return state


def gpu_reasons(start: dict[str, object], end: dict[str, object]) -> tuple[str, ...]:
    """Why the GPU side of a window counts as disturbed (empty when it does not)."""
    reasons = []
    slowdown = sorted({*start.get("slowdown", []), *end.get("slowdown", [])})
    if slowdown:
        reasons.append(f"GPU clocks held down: {', '.join(slowdown)}")
    others = sorted({pid for s in (start, end) if s.get("pids_comparable")
                     for pid in s.get("other_pids", [])})
    if others:
        reasons.append(f"other processes on the GPU: pids {', '.join(map(str, others))}")
    return tuple(reasons)
