"""One calibration run: the micro-benchmarks a spec asks for, in order, into one 'profile'
outcome (config.schema ProfileMetrics) whose points rebuild the curves of analytics/profile.py."""

from __future__ import annotations

from collections.abc import Callable

import torch

from accelbench.analytics.profile import Point, latencies_s, point_dict, reference_peaks
from accelbench.bench.calibrate.collective import measure_collectives
from accelbench.bench.calibrate.compute import measure_attention, measure_gemms, measure_memory
from accelbench.bench.calibrate.overheads import (
    measure_embedding,
    measure_loss,
    measure_optimizer,
)
from accelbench.bench.calibrate.spec import KIND, CalibrateSpec
from accelbench.bench.dtypes import dtype_support
from accelbench.bench.guard import is_oom
from accelbench.bench.outcome import Outcome, Progress
from accelbench.bench.peak import resolve_peak
from accelbench.config.schema import ProfileMetrics, metrics_dict
from accelbench.hardware import device as devices
from accelbench.hardware.detect import detect_spec
from accelbench.parallel.procs import Interrupted, signal_name

Step = tuple[str, Callable[[], list[Point]]]


class CalibrationInterrupted(Interrupted):  # noqa: N818 - an Interrupted, as CellInterrupted is
    """SIGINT or SIGTERM stopped the collectives' ranks; `outcome` keeps the points measured
    before them (status 'interrupted'), for the caller to record."""

    def __init__(self, signum: int, outcome: Outcome) -> None:
        super().__init__(signum)
        self.outcome = outcome


def _compute_steps(spec: CalibrateSpec, device: torch.device, notes: list[str]) -> list[Step]:
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


def _run_steps(steps: list[Step], device: torch.device, notes: list[str],
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


def _best(points: list[Point], op: str, by: str) -> dict[str, float]:
    """The highest rate among the points of one op, by dtype or by collective."""
    out: dict[str, float] = {}
    for p in points:
        if p.op == op:
            key = p.dtype if by == "dtype" else p.shape["collective"]
            out[key] = max(out.get(key, 0.0), p.rate_per_s)
    return out


def dtype_peaks(points: list[Point], device: torch.device) -> dict[str, tuple[float | None,
                                                                             str]]:
    """Each compute precision's peak as every MFU of this machine takes it (bench/peak.py):
    the datasheet's dense peak, else a measured GEMM peak with its label."""
    sheet = detect_spec(device)
    peaks = {}
    for dtype in sorted({p.dtype for p in points if p.op in ("gemm", "attention")}):
        peak = resolve_peak(sheet, device, dtype, False)
        peaks[dtype] = (peak.flops_per_s, peak.label)
    return peaks


def profile_metrics(points: list[Point], peaks_given: dict[str, tuple[float | None, str]],
                    collective_reason: str, threads: int) -> ProfileMetrics:
    """The record's metrics: points, the peaks efficiencies divide by, and the summaries."""
    peaks, labels = reference_peaks(points, peaks_given)
    collectives = [p for p in points if p.op == "collective"]
    first = collectives[0].shape if collectives else {}
    memory = _best(points, "memory", "dtype")
    return ProfileMetrics(
        points=[point_dict(p) for p in points], peak_flops_per_s_by_dtype=peaks,
        peak_label_by_dtype=labels, gemm_flops_per_s_max_by_dtype=_best(points, "gemm", "dtype"),
        attention_flops_per_s_max_by_dtype=_best(points, "attention", "dtype"),
        memory_bytes_per_s_max=max(memory.values()) if memory else None,
        collective_ranks=first.get("ranks"), collective_backend=first.get("backend"),
        collective_latency_s_by_op=latencies_s(points) or None,
        collective_bus_bytes_per_s_max_by_op=_best(points, "collective", "op") or None,
        collective_reason=collective_reason or None, threads=threads)


def run_calibration(spec: CalibrateSpec, device: torch.device,
                    progress: Progress | None = None) -> Outcome:
    """Every asked micro-benchmark on `device` (collectives on spec.nproc launched ranks);
    status 'ok' with the points, or 'error' when nothing could be measured."""
    notes: list[str] = []
    threads_before = torch.get_num_threads()
    torch.set_num_threads(spec.threads or threads_before)
    try:
        points = _run_steps(_compute_steps(spec, device, notes), device, notes, progress)
        if progress:
            progress(1, 1, "peaks")
        peaks = dtype_peaks(points, device)
        threads = torch.get_num_threads()
    finally:
        torch.set_num_threads(threads_before)
    collective_reason = ""
    if "collective" in spec.ops:
        if progress:
            progress(1, 1, f"collectives on {spec.nproc} processes")
        devices.empty_cache(device)  # the launched ranks may share this process's device
        try:
            more, collective_reason = measure_collectives(spec, device.type)
        except Interrupted as stop:
            why = f"interrupted by {signal_name(stop.signum)} during the collectives"
            raise CalibrationInterrupted(stop.signum, _outcome(
                spec, device, "interrupted", profile_metrics(points, peaks, why, threads),
                [*notes, why])) from None
        points += more
        if collective_reason:
            notes.append(collective_reason)
    metrics = profile_metrics(points, peaks, collective_reason, threads)
    return _outcome(spec, device, "ok" if points else "error", metrics, notes)


def _outcome(spec: CalibrateSpec, device: torch.device, status: str, metrics: ProfileMetrics,
             notes: list[str]) -> Outcome:
    """The profile outcome; no metrics when no point was measured."""
    record_spec = {**spec.to_dict(), "device": str(device)}
    return Outcome(KIND, status, record_spec, metrics_dict(metrics) if metrics.points else {},
                   reason="; ".join(notes))
