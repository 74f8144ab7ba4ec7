"""What a parallel step spends on communication: measured time in collectives (profiler),
pipeline bubble against the (p-1)/m theory, and bytes per step from accelbench.analytics.comm.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch.profiler import ProfilerActivity, profile

from accelbench.analytics.comm import (
    dp_bytes_per_rank,
    pp_message_bytes,
    pp_sends_per_microbatch,
    tp_bytes_per_layer,
)
from accelbench.config.model import ModelConfig
from accelbench.parallel.layout import Layout

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


def bubble_fraction_theory(pp: int, n_micro: int, vp: int = 1) -> float:
    """Idle over busy time of a pipeline: (p-1)/m for GPipe and 1F1B, (p-1)/(v m) interleaved
    (Narayanan et al. 2021, sec. 2.2)."""
    return (pp - 1) / (vp * n_micro)


def bubble_fraction_measured(step_time_pp_s: float, step_time_single_s: float, pp: int) -> float:
    """Measured bubble against the ideal: the same step (same micro-batches) on one process
    takes step_time_single_s, so p perfectly busy stages would take step_time_single_s / p; the
    excess over that, relative to it. It also holds stage sends and stage imbalance (the end
    stages carry the embeddings and the head), so it bounds the pure bubble from above."""
    ideal_s = step_time_single_s / pp
    return (step_time_pp_s - ideal_s) / ideal_s


def comm_bytes_per_step(cfg: ModelConfig, layout: Layout, seq_len: int, micro_batch: int,
                        n_micro: int, dtype: str, grad_bytes_per_replica: float,
                        recompute: str = "none") -> dict[str, float]:
    """Bytes one rank sends per optimizer step, by kind, from the analytics formulas.

    grad_bytes_per_replica: gradient bytes of this rank's model shard before any ZeRO split
    (what DDP all-reduces or FSDP reduce-scatters). Pipeline sends are those of a middle stage:
    whole b*s*h activations between stages, or 1/tp of them under sequence parallelism (each
    tp rank sends its sequence shard).
    """
    layers_per_rank = cfg.n_layer // layout.pp
    tp_bytes = (tp_bytes_per_layer(cfg, seq_len, micro_batch, dtype, layout.tp, recompute)
                * layers_per_rank * n_micro if layout.tp > 1 else 0.0)
    message_split = layout.tp if layout.sp else 1
    pp_bytes = (pp_message_bytes(cfg, seq_len, micro_batch, dtype, message_split)
                * pp_sends_per_microbatch(layout.vp) * n_micro if layout.pp > 1 else 0.0)
    dp_bytes = (dp_bytes_per_rank(grad_bytes_per_replica, layout.dp, layout.zero, n_micro)
                if layout.dp > 1 else 0.0)
    return {"tp_bytes_per_step": tp_bytes, "pp_bytes_per_step": pp_bytes,
            "dp_bytes_per_step": dp_bytes, "comm_bytes_per_step": tp_bytes + pp_bytes + dp_bytes}
