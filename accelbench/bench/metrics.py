"""Metric dicts from timing stats, FLOPs and a peak; names carry scope and unit."""

from __future__ import annotations

from accelbench.analytics.metrics import per_second, tflops, utilisation
from accelbench.bench.peak import Peak
from accelbench.bench.timing import TimingStats


def phase_metrics(phase: str, stats: TimingStats, flops: float, tokens: int,
                  peak: Peak) -> dict[str, float | int | bool | None]:
    """Time spread, TFLOPS, tokens/s and MFU of one timed phase (median time)."""
    t = stats.median_s
    return {
        f"{phase}_time_s_median": t,
        f"{phase}_time_s_min": stats.min_s,
        f"{phase}_time_s_max": stats.max_s,
        f"{phase}_time_s_iqr": stats.iqr_s,
        f"{phase}_samples": stats.count,
        f"{phase}_few_samples": stats.few_samples,
        f"{phase}_flops": flops,
        f"{phase}_tflops_per_device": tflops(flops, t),
        f"{phase}_tokens_per_s_per_device": per_second(tokens, t),
        f"{phase}_mfu": utilisation(flops, t, peak.flops_per_s),
    }


def peak_warning(metrics: dict) -> str:
    """A note when a utilisation exceeds 100%: impossible against a true peak, so the measured
    GEMM peak under-read the device (a machine busy while it was measured, or a kernel path
    faster than the GEMMs tried); the number is kept, but not silently."""
    worst = max((v for k, v in metrics.items() if k.endswith(("mfu", "hfu"))
                 and isinstance(v, float)), default=0.0)
    if worst <= 1.0:
        return ""
    return (f"utilisation {100 * worst:.0f}% > 100% against {metrics.get('peak_label')}: the peak "
            "under-reads this device; compare TFLOPS, not MFU")
