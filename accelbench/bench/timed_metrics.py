"""Metrics from timing stats, FLOPs and a peak, as the schema's dataclasses (config/records/)."""

from __future__ import annotations

from accelbench.analytics.throughput import per_second, tflops, utilisation
from accelbench.bench.gemm_peak import Peak
from accelbench.bench.timing import TimingStats
from accelbench.config.records.block import BLOCK_PHASES, BlockReading, PhaseFields
from accelbench.config.records.fields import MemoryFields
from accelbench.config.records.train import TrainMetrics


def phase_metrics(stats: TimingStats, flops: float, tokens: int, peak: Peak) -> PhaseFields:
    """Time spread, TFLOPS, tokens/s and MFU of one timed phase (median time)."""
    t = stats.median_s
    return PhaseFields(
        time_s_median=t, time_s_min=stats.min_s, time_s_max=stats.max_s, time_s_iqr=stats.iqr_s,
        samples=stats.count, few_samples=stats.few_samples, flops=flops,
        tflops_per_device=tflops(flops, t), tokens_per_s_per_device=per_second(tokens, t),
        mfu=utilisation(flops, t, peak.flops_per_s))


def one_rank_memory(estimate_bytes: float, peak_bytes: int | None, base_bytes: int | None,
                    method: str) -> MemoryFields:
    """A single device's memory as rank 0 of the per-rank fields: what the window added is
    peak - base, None where the device could not report its peak."""
    added = peak_bytes - base_bytes if peak_bytes is not None and base_bytes is not None else None
    return MemoryFields(mem_estimate_bytes_per_rank=estimate_bytes,
                        mem_peak_bytes_per_rank=[peak_bytes], mem_base_bytes_per_rank=[base_bytes],
                        mem_added_bytes_per_rank_max=added,
                        mem_added_max_rank=None if added is None else 0, mem_method=method)


def peak_warning(metrics: TrainMetrics | BlockReading) -> str:
    """A note when a utilisation exceeds 100%: impossible against a true peak, so the measured
    GEMM peak under-read the device (a machine busy while it was measured, or a kernel path
    faster than the GEMMs tried); the number is kept, but not silently.

    Reads a cell's metrics as read back (a train cell's MFU and HFU, a block cell's phases'
    MFU) and the peak's label."""
    if isinstance(metrics, BlockReading):
        shares = [metrics.phase(p).mfu for p in BLOCK_PHASES]
    else:
        shares = [metrics.mfu, metrics.hfu]
    worst = max((v for v in shares if isinstance(v, float)), default=0.0)
    if worst <= 1.0:
        return ""
    return (f"utilisation {100 * worst:.0f}% > 100% against {metrics.peak_label}: the peak "
            "under-reads this device; compare TFLOPS, not MFU")
