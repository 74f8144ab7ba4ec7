"""One calibration run: the micro-benchmarks a spec asks for, in order, into one 'profile'
outcome (ProfileMetrics, config/records/) whose points rebuild analytics/machine_profile.py's
curves."""

from __future__ import annotations

import torch

from accelbench.analytics.machine_profile import Point, latencies_s, point_dict, reference_peaks
from accelbench.bench.outcome import Outcome, Progress
from accelbench.config.record_kinds import metrics_dict
from accelbench.config.records.profile import ProfileMetrics
from accelbench.hardware import device as devices
from accelbench.parallel.procs import Interrupted, signal_name
from accelbench.workloads.calibrate.collective import measure_collectives
from accelbench.workloads.calibrate.concurrent import Peaks, measure_concurrent
from accelbench.workloads.calibrate.micro_steps import compute_steps, dtype_peaks, run_steps
from accelbench.workloads.calibrate.options import KIND, CalibrateSpec


class CalibrationInterrupted(Interrupted):  # noqa: N818 - an Interrupted, as CellInterrupted is
    """SIGINT or SIGTERM stopped the collectives' ranks; `outcome` keeps the points measured
    before them (status 'interrupted'), for the caller to record."""

    def __init__(self, signum: int, outcome: Outcome) -> None:
        super().__init__(signum)
        self.outcome = outcome


def _best(points: list[Point], op: str, by: str) -> dict[str, float]:
    """The highest rate among the points of one op, by dtype or by collective."""
    out: dict[str, float] = {}
    for p in points:
        if p.op == op:
            key = p.dtype if by == "dtype" else p.shape["collective"]
            out[key] = max(out.get(key, 0.0), p.rate_per_s)
    return out


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
    """Every asked micro-benchmark on `device` (collectives on spec.nproc launched ranks; the
    compute benchmarks too, all at once, with spec.concurrent); status 'ok' with the points,
    or 'error' when nothing could be measured."""
    notes: list[str] = []
    if spec.concurrent:
        if progress:
            progress(0, 1, f"compute on {spec.nproc} processes at once")
        try:
            points, peaks, more = measure_concurrent(spec, device.type)
        except Interrupted as stop:
            why = f"interrupted by {signal_name(stop.signum)} during the compute ranks"
            raise CalibrationInterrupted(stop.signum, _outcome(
                spec, device, "interrupted", profile_metrics([], {}, why, 1), [why])) from None
        notes += more
        threads = spec.threads
    else:
        points, peaks, threads = _local_compute(spec, device, notes, progress)
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


def _local_compute(spec: CalibrateSpec, device: torch.device, notes: list[str],
                   progress: Progress | None) -> tuple[list[Point], Peaks, int]:
    """(points, peaks, torch threads) of the compute benchmarks in this process, at
    spec.threads (0: torch's default)."""
    threads_before = torch.get_num_threads()
    torch.set_num_threads(spec.threads or threads_before)
    try:
        points = run_steps(compute_steps(spec, device, notes), device, notes, progress)
        if progress:
            progress(1, 1, "peaks")
        return points, dtype_peaks(points, device), torch.get_num_threads()
    finally:
        torch.set_num_threads(threads_before)


def _outcome(spec: CalibrateSpec, device: torch.device, status: str, metrics: ProfileMetrics,
             notes: list[str]) -> Outcome:
    """The profile outcome; no metrics when no point was measured."""
    record_spec = {**spec.to_dict(), "device": str(device)}
    return Outcome(KIND, status, record_spec, metrics_dict(metrics) if metrics.points else {},
                   reason="; ".join(notes))
