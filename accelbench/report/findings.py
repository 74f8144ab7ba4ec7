"""The report's opening in plain words: a comparison's verdicts over several conditions said in
one phrase ("no significant difference at 2, 4, 8 (0.93x-1.00x)", "8: 1.21x [1.10, 1.30]"),
and the terms the Methods section defines once for every table and figure."""

from __future__ import annotations

from collections.abc import Sequence

from accelbench.analytics.stats import NO_DIFFERENCE, NOT_A_GAIN, Verdict
from accelbench.report.cells import SPREAD
from accelbench.report.evidence import ONE_TRIAL
from accelbench.report.predict import INTERVAL_NOTE

Compared = tuple[str, Verdict | None, float | None]  # (condition, its verdict, plain ratio)


def _range(values: Sequence[float]) -> str:
    """'0.93x-1.00x', or '0.97x' for one value."""
    low, high = min(values), max(values)
    return f"{low:.2f}x" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}x-{high:.2f}x"


def verdicts_text(items: Sequence[Compared]) -> str:
    """Each significant ratio with its interval; the conditions of no significant difference
    together, with the range of their ratios and of their intervals; the rest with why they
    claim nothing ('1.10x (one trial: no interval)')."""
    parts, quiet = [], []
    for name, verdict, ratio in items:
        if verdict is None:
            if ratio is not None:
                parts.append(f"{name}: {ratio:.2f}x ({ONE_TRIAL})")
        elif verdict.outcome in (NO_DIFFERENCE, NOT_A_GAIN) and verdict.ratio.low is not None:
            quiet.append((name, verdict))
        else:
            parts.append(f"{name}: {verdict.text()}")
    if quiet:
        names = ", ".join(n for n, _ in quiet)
        lows = [v.ratio.low for _, v in quiet if v.ratio.low is not None]
        highs = [v.ratio.high for _, v in quiet if v.ratio.high is not None]
        bounds = f"; intervals within [{min(lows):.2f}, {max(highs):.2f}]" if lows else ""
        parts.insert(0, f"no significant difference at {names} "
                        f"({_range([v.ratio.value for _, v in quiet])}{bounds})")
    return "; ".join(parts) or "nothing to compare"


def prefixed(label: str, text: str, many: bool) -> str:
    """'M1 fp32: text' where several series share a finding's line, else the text."""
    return f"{label}: {text}" if many and label else text


# The Methods section's shared terms: said once here instead of in every caption.
TERMS = (
    ("(low-high) after a figure, error bars", f"{SPREAD[0].upper()}{SPREAD[1:]}."),
    ("Speedup [low, high]", "The ratio of median throughputs with the 95% interval from both "
     "cells' independent trials (a seeded bootstrap); 'no significant difference' where it "
     "includes 1; 'too few samples' under 5 trials a cell; 'one trial: no interval' where "
     "there was one (docs/metrics.md)."),
    ("MFU", "Model FLOPs (6N + 12·L·H·Q·T a token, attention included) over the machine's own "
     "dense peak for the precision that ran: the datasheet's, or a GEMM peak measured on a "
     "device without one (Machines gives each, and flags one measured while the machine was "
     "disturbed)."),
    ("Does not fit", "Refused by the memory estimate against the device's budget (estimated), "
     "out of memory when run (measured), or over --mem-limit (user budget); the tables say "
     "which. In a figure: an x at the axis."),
    ("Planner (lo-hi)", f"{INTERVAL_NOTE[0].upper()}{INTERVAL_NOTE[1:]}; a CPU has no "
     "datasheet, so no prediction."),
    ("Disturbed (!)", "Other processes used more than 10% of the machine's CPU, or the "
     "hypervisor stole more than 5%, during a timed window (docs/metrics.md); such a figure "
     "is measured, but not a clean one."),
    ("mem, est.", "Measured peak memory above the cell's start (worst rank; malloc's bytes in "
     "use on a CPU), and the analytics estimate of it."),
)
