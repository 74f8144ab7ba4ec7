"""How a table shows a cell measured as trials (bench/trials.py): its interval beside the main
figure, compactly, a disturbed cell marked, and one caption line saying what both mean. Records
written before trials existed show none of it (no interval is invented)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from accelbench.store.record import Record

DISTURBED_MARK = "!"


def with_interval(metrics: Mapping[str, Any], key: str, fmt: str) -> str:
    """The figure with its 95% interval, compactly: '12,345 ±2.1%' (the interval's larger side
    over the figure, so the whole interval lies within it), or '146 [41-658]' where that side
    is half the figure or more; the figure alone without an interval, '-' without a figure."""
    value = metrics.get(key)
    if value is None:
        return "-"
    text = format(value, fmt)
    bounds = (metrics.get("intervals") or {}).get(key)
    if not bounds or None in bounds or value == 0:
        return text
    low, high = bounds
    side = max(high - value, value - low) / abs(value)
    if side >= 0.5:
        return f"{text} [{format(low, fmt)}-{format(high, fmt)}]"
    return f"{text} ±{100 * side:.1f}%" if side < 0.1 else f"{text} ±{100 * side:.0f}%"


def status_text(status: str, metrics: Mapping[str, Any]) -> str:
    """The status, marked when some trial's timed window was disturbed."""
    return f"{status}{DISTURBED_MARK}" if metrics.get("disturbed") else status


def trials_caption(records: Sequence[Record]) -> str:
    """What the ± and the ! of these rows mean; empty when no row was measured as trials."""
    counted = [r.metrics for r in records if r.metrics.get("trials")]
    if not counted:
        return ""
    counts = sorted({m["trials"] for m in counted})
    shown = "/".join(str(n) for n in counts)
    parts = [f"median of {shown} trial(s) a cell, interleaved"]
    if any(m.get("interval_coverage") for m in counted):
        parts.append("±: the larger side of the 95% interval of that median")
    if any(m.get("interval_coverage") is None for m in counted):
        parts.append("no interval under 6 trials")
    flagged = [m for m in counted if m.get("disturbed")]
    if flagged:
        worst = max((m.get("other_cpu_fraction_max") or 0.0) for m in flagged)
        parts.append(f"{DISTURBED_MARK} disturbed: other processes used up to {worst:.0%} of "
                     f"the CPU in a timed window of {len(flagged)} cell(s) (disturbance_reasons)")
    return "; ".join(parts)
