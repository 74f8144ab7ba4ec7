"""How a table shows a cell measured as trials (bench/trials.py): its interval beside the main
figure, compactly, a disturbed cell marked, and one caption line saying what both mean. Records
written before trials existed show none of it (no interval is invented)."""

from __future__ import annotations

from collections.abc import Sequence

from accelbench.analytics.stats import FASTER, NOT_A_GAIN, SLOWER
from accelbench.config.records.fields import TrialFields
from accelbench.config.records.scale import ScaleRow
from accelbench.store.record import Record

DISTURBED_MARK = "!"


def with_interval(value: float | None, bounds: Sequence[float | None] | None, fmt: str) -> str:
    """The figure with its 95% interval, compactly: '12,345 ±2.1%' (the interval's larger side
    over the figure, so the whole interval lies within it), or '146 [41-658]' where that side
    is half the figure or more; the figure alone without an interval, '-' without a figure."""
    if value is None:
        return "-"
    text = format(value, fmt)
    if not bounds or None in bounds or value == 0:
        return text
    low, high = bounds
    side = max(high - value, value - low) / abs(value)
    if side >= 0.5:
        return f"{text} [{format(low, fmt)}-{format(high, fmt)}]"
    return f"{text} ±{100 * side:.1f}%" if side < 0.1 else f"{text} ±{100 * side:.0f}%"


def claim_text(ratio: float | None, low: float | None, high: float | None,
               verdict: str | None) -> str:
    """A stored ratio with its evidence: '1.41x [1.20-1.63]', 'n.s. 0.88x [0.71-1.10]' (no
    significant difference), 'noise 1.08x [1.01-1.15]' (not a speedup: it cannot be faster),
    '0.88x (too few trials)' or '0.88x (1 trial)'."""
    if ratio is None:
        return "-"
    if verdict is None:
        return f"{ratio:.2f}x (1 trial)"
    if low is None or high is None:
        return f"{ratio:.2f}x (too few trials)"
    shown = f"{ratio:.2f}x [{low:.2f}-{high:.2f}]"
    if verdict == NOT_A_GAIN:
        return f"noise {shown}"
    return shown if verdict in (FASTER, SLOWER) else f"n.s. {shown}"


def pct_interval(value: float | None, low: float | None, high: float | None) -> str:
    """A fraction as a percentage with its 95% interval where it has one: '92.5% [85.1-99.0%]'
    (scaling efficiency); '-' without a value."""
    if value is None:
        return "-"
    shown = f"{100 * value:.1f}%"
    return shown if low is None or high is None else \
        f"{shown} [{100 * low:.1f}-{100 * high:.1f}%]"


def scale_speedup_text(row: ScaleRow) -> str:
    """A scaling row's speedup with its evidence (claim_text); the baseline count's is 1 by
    definition: '1.00x (baseline)'."""
    if row.speedup is not None and row.devices == row.baseline_devices:
        return f"{row.speedup:.2f}x (baseline)"
    return claim_text(row.speedup, row.speedup_low, row.speedup_high, row.speedup_verdict)


# What a scaling table's speedup and efficiency intervals are, in its caption.
SCALE_EVIDENCE = ("speedup: ratio of median tokens/s over the baseline count; [low-high] its "
                  "95% interval from both counts' trials (bootstrap, 5 or more trials a count), "
                  "efficiency's that over the device ratio; n.s.: no significant difference")


def status_text(status: str, disturbed: bool | None) -> str:
    """The status, marked when some trial's timed window was disturbed."""
    return f"{status}{DISTURBED_MARK}" if disturbed else status


def trials_caption(records: Sequence[Record]) -> str:
    """What the ± and the ! of these rows mean; empty when no row was measured as trials."""
    counted = [m for r in records if isinstance(m := r.typed, TrialFields) and m.trials]
    if not counted:
        return ""
    shown = "/".join(str(n) for n in sorted({m.trials for m in counted}))
    parts = [f"median of {shown} trial(s) a cell, interleaved"]
    if any(m.interval_coverage for m in counted):
        parts.append("±: the larger side of the 95% interval of that median")
    if any(m.interval_coverage is None for m in counted):
        parts.append("no interval under 6 trials")
    flagged = [m for m in counted if m.disturbed]
    if flagged:
        worst = max((m.other_cpu_fraction_max or 0.0) for m in flagged)
        parts.append(f"{DISTURBED_MARK} disturbed: other processes used up to {worst:.0%} of "
                     f"the CPU in a timed window of {len(flagged)} cell(s) (disturbance_reasons)")
    return "; ".join(parts)
