"""Time a profiled step spends in collectives (device kernels or host c10d calls), all-to-alls."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch.profiler import ProfilerActivity, profile

# Profiler event names of collectives: the c10d op (any backend), and backend-level records.
_CPU_PREFIXES = ("c10d::", "gloo:", "nccl:", "record_param_comms")
_DEVICE_MARKERS = ("nccl", "rccl")


@dataclass
class CollectiveTime:
    """Seconds in collectives seen by the profiler, in all and by op name; the source says
    whether device kernel time (CUDA/ROCm) or host time of the c10d calls (CPU/gloo) was summed."""

    time_s: float = 0.0
    by_name_s: dict[str, float] = field(default_factory=dict)
    source: str = ""


def _is_collective_cpu(name: str) -> bool:
    return name.startswith(_CPU_PREFIXES)


def _cpu_collective_time(events) -> dict[str, float]:
    """Host time of outermost collective ops (nested records counted once), by name."""
    out: dict[str, float] = {}
    for event in events:
        if not _is_collective_cpu(event.name):
            continue
        parent = event.cpu_parent
        while parent is not None and not _is_collective_cpu(parent.name):
            parent = parent.cpu_parent
        if parent is None:
            out[event.name] = out.get(event.name, 0.0) + event.cpu_time_total * 1e-6
    return out


def _device_collective_time(events) -> dict[str, float]:
    """Device time of communication kernels (ncclDevKernel_*, ncclKernel_*), by name."""
    out: dict[str, float] = {}
    for event in events:
        if any(m in event.name.lower() for m in _DEVICE_MARKERS):
            time_us = getattr(event, "device_time_total", 0.0) or 0.0
            if time_us:
                out[event.name] = out.get(event.name, 0.0) + time_us * 1e-6
    return out


@contextmanager
def profile_collectives(device: torch.device) -> Iterator[CollectiveTime]:
    """Profile the enclosed steps; on exit the yielded CollectiveTime holds the summed time.

    On GPUs the communication kernels' device time is summed (it overlaps compute, so it is
    time in collectives, not exposed time). On CPU the c10d calls' host time is summed, which
    includes waiting for the slowest peer.
    """
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    result = CollectiveTime()
    with profile(activities=activities) as prof:
        yield result
    events = prof.events()
    by_name = _device_collective_time(events) if device.type == "cuda" else {}
    result.source = "device kernels" if by_name else "host c10d calls"
    if not by_name:
        by_name = _cpu_collective_time(events)
    result.by_name_s = by_name
    result.time_s = sum(by_name.values())


# all-to-all under c10d and gloo; NCCL runs all_to_all_single as grouped send/recv kernels
# (SendRecv), as it runs a pipeline's stage sends
_ALL_TO_ALL_MARKERS = ("all_to_all", "alltoall", "sendrecv")


def all_to_all_time_s(comm: CollectiveTime, pipeline: bool) -> float | None:
    """Seconds of a profiled step's collectives that were all-to-alls (expert parallelism's
    token dispatch), measured as collective_time is; None where a pipeline's sends cannot be
    told apart from them (device kernels under pp > 1)."""
    if pipeline and comm.source == "device kernels":
        return None
    return sum(s for name, s in comm.by_name_s.items()
               if any(m in name.lower() for m in _ALL_TO_ALL_MARKERS))
