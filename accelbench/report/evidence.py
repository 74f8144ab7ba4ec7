"""Claims gated by evidence: a speedup or slowdown between two cells is stated with the 95%
interval of the ratio of their median throughputs, from their independent trials (analytics/stats.py
`compare`: a seeded bootstrap over trials), and as "no significant difference" where that
interval includes no change. A cell of one trial (a record from before trials, a launched cell)
gives a ratio with no verdict, and says so: never a bare ratio that reads as a finding."""

from __future__ import annotations

from accelbench.analytics.stats import CONFIDENCE, Estimate, Verdict, compare, without_gain
from accelbench.config.records.block import BlockReading
from accelbench.config.records.fields import ShownFigure
from accelbench.config.trial_count import trial_samples
from accelbench.store.record import Record

ONE_TRIAL = "one trial: no interval"


def time_figure(record: Record) -> str:
    """The timed figure a cell's comparisons divide: a training step, or a block's f+b."""
    block = isinstance(record.typed, BlockReading)
    return ShownFigure.BLOCK_TIME if block else ShownFigure.STEP_TIME


def throughput_samples(record: Record) -> list[float] | None:
    """Each trial's tokens a second (tokens a step over that trial's median time), or None."""
    times = trial_samples(record.raw, time_figure(record))
    if times is None:
        return None
    tokens = record.typed.tokens_per_step_global if record.status == "ok" else None
    if not tokens or any(t <= 0 for t in times):
        return None
    return [tokens / t for t in times]


def speedup(base: Record, cell: Record, can_gain: bool = True) -> Verdict | None:
    """The cell's throughput over the base's (ratio of medians) with its verdict, or None where
    either ran one trial; `can_gain` False (masked dense): never 'faster' (stats.without_gain)."""
    a, b = throughput_samples(base), throughput_samples(cell)
    if a is None or b is None:
        return None
    verdict = compare(a, b, lower_is_better=False)
    return verdict if can_gain else without_gain(verdict)


def speedup_text(base: Record, cell: Record, ratio: float | None, can_gain: bool = True) -> str:
    """'1.41x [1.20, 1.63]', 'no significant difference (0.88x [0.71, 1.10])', 'too few
    samples (n=3, 3): 1.10x', or '1.10x (one trial: no interval)'; '-' with no ratio."""
    verdict = speedup(base, cell, can_gain)
    if verdict is not None:
        return verdict.text()
    return "-" if ratio is None else f"{ratio:.2f}x ({ONE_TRIAL})"


def stored_speedup_text(ratio: float | None, low: float | None, high: float | None,
                        verdict: str | None, n: tuple[int, ...]) -> str:
    """A speedup a record stores with its evidence (a scaling row's), in speedup_text's words;
    '1.10x (one trial: no interval)' where it stores no verdict, '-' with no ratio."""
    if ratio is None:
        return "-"
    if verdict is None:
        return f"{ratio:.2f}x ({ONE_TRIAL})"
    return Verdict(Estimate(ratio, low, high, n, CONFIDENCE, "stored"), verdict).text()
