"""How a measured peak is named in every cell divided by it (no torch: the report reads these
labels back): what was measured, and whether other work used the machine meanwhile."""

from __future__ import annotations

from accelbench.config.records.peak import PeakMetrics

DISTURBED_PEAK = "disturbed in"  # in a label: measured while other work used the machine


def measured_label(metrics: PeakMetrics, record: str = "") -> str:
    """How a measured peak was measured, for captions and records (a disturbed one says so)."""
    flag = (f", {DISTURBED_PEAK} {metrics.attempts} attempt(s)" if metrics.disturbed
            else "")
    return (f"measured peak (GEMM n={metrics.gemm_n} {metrics.gemm_layout}, best of "
            f"{metrics.repetitions}, {metrics.threads} thread(s){flag}{record})")
