"""The single-device micro-benchmarks a spec asks for, as named steps, run in order (in this
process, or on every launched rank at once: concurrent.py), and the precision peaks their
efficiencies divide by."""

from __future__ import annotations

from collections.abc import Callable

import torch

from accelbench.analytics.machine_profile import Point
from accelbench.bench.dtypes import dtype_support
from accelbench.bench.gemm_peak import resolve_peak
from accelbench.bench.guard import is_oom
from accelbench.bench.outcome import Progress
from accelbench.hardware import device as devices
from accelbench.hardware.detect import detect_spec
from accelbench.workloads.calibrate.compute import measure_attention, measure_gemms, measure_memory
from accelbench.workloads.calibrate.options import CalibrateSpec
from accelbench.workloads.calibrate.overheads import (
    measure_embedding,
    measure_loss,
    measure_optimizer,
)

Step = tuple[str, Callable[[], list[Point]]]


def compute_steps(spec: CalibrateSpec, device: torch.device, notes: list[str]) -> list[Step]:
    """The single-device steps, a precision the device cannot run noted and left out."""
    steps: list[Step] = []
    for dtype in spec.dtypes:
        why = dtype_support(device, dtype)
        if why:
            notes.append(f"{dtype} left out: {why}")
            continue
        if "gemm" in spec.ops:
            steps.append((f"GEMM {dtype}", lambda d=dtype: measure_gemms(spec, device, d)))
        if "attention" in spec.ops:
            steps.append((f"attention {dtype}",
                          lambda d=dtype: measure_attention(spec, device, d)))
        if "loss" in spec.ops:
            steps.append((f"loss {dtype}", lambda d=dtype: measure_loss(spec, device, d)))
    if "memory" in spec.ops:
        steps.append(("memory", lambda: measure_memory(spec, device)))
    if "embedding" in spec.ops:
        steps.append(("embedding", lambda: measure_embedding(spec, device)))
    if "optimizer" in spec.ops:
        steps.append(("optimizer", lambda: measure_optimizer(spec, device)))
    return steps


def run_steps(steps: list[Step], device: torch.device, notes: list[str],
               progress: Progress | None) -> list[Point]:
    """Each step in turn; one that runs out of device memory is noted and the rest go on."""
    points: list[Point] = []
    for i, (label, step) in enumerate(steps):
        if progress:
            progress(i, len(steps), label)
        try:
            points += step()
        except (RuntimeError, MemoryError) as err:
            if not is_oom(err):
                raise
            notes.append(f"{label}: out of memory ({str(err).splitlines()[0][:200]})")
            devices.empty_cache(device)
    return points


def dtype_peaks(points: list[Point], device: torch.device) -> dict[str, tuple[float | None,
                                                                             str]]:
    """Each compute precision's peak as every MFU of this machine takes it (bench/gemm_peak.py):
    the datasheet's dense peak, else a measured GEMM peak with its label."""
    sheet = detect_spec(device)
    peaks = {}
    for dtype in sorted({p.dtype for p in points if p.op in ("gemm", "attention")}):
        peak = resolve_peak(sheet, device, dtype, False)
        peaks[dtype] = (peak.flops_per_s, peak.label)
    return peaks
