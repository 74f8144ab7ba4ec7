"""Reading one record for a report: throughput with the spread of its repeated measurements,
labels, the cell's settings, and number formats. Shared by every section."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from accelbench.config.fit import fit_text
from accelbench.config.record_kinds import carries, record_kind, record_kinds
from accelbench.config.records.base import ComparedFigure
from accelbench.config.records.block import PhaseTimed
from accelbench.config.records.fields import RSS_METHOD, MemoryFields
from accelbench.config.records.train import TrainMetrics, step_figure
from accelbench.config.vocab import GIB
from accelbench.report.content import MEASURED, Series
from accelbench.store.record import Record

DOES_NOT_FIT = "does not fit (the tables say whether estimated, measured or by a user budget)"


@dataclass(frozen=True)
class Rate:
    """A throughput over the median time, and its spread (SPREAD: the 95% interval over
    trials, else the slowest and fastest repetition)."""

    value: float
    low: float | None = None
    high: float | None = None

    def scaled(self, factor: float) -> Rate:
        """The same rate in another unit (TFLOPS from FLOP/s, per device from global)."""
        return Rate(self.value * factor, None if self.low is None else self.low * factor,
                    None if self.high is None else self.high * factor)

    def text(self, fmt: str = ",.0f", unit: str = "") -> str:
        """'1,234 (1,100-1,300)': the median's rate, then its spread (SPREAD); a unit
        such as 'x' after each number."""
        if self.low is None or self.high is None:
            return f"{self.value:{fmt}}{unit}"
        return f"{self.value:{fmt}}{unit} ({self.low:{fmt}}-{self.high:{fmt}}{unit})"


# What the (low-high) after a figure and its error bars are, in every caption that shows them.
SPREAD = ("the 95% interval of the median over the cell's trials where it ran 6 or more, else "
          "its slowest and fastest timed step or repetition")


def rate(amount: float | None, median: float | None, fastest: float | None = None,
         slowest: float | None = None, iqr: float | None = None,
         interval: list[float | None] | None = None) -> Rate | None:
    """amount / time: at the median, and over the 95% interval of the median time where the
    cell ran enough trials; else at the slowest and fastest repetition (min/max); without
    those, the median +- half the interquartile range."""
    if amount is None or not median:
        return None
    if interval and None not in interval and min(interval) > 0:
        return Rate(amount / median, amount / max(interval), amount / min(interval))
    if fastest and slowest:
        return Rate(amount / median, amount / slowest, amount / fastest)
    if iqr is not None and median > iqr / 2:
        return Rate(amount / median, amount / (median + iqr / 2), amount / (median - iqr / 2))
    return Rate(amount / median)


def phase_rate(record: Record, phase: str, what: str) -> Rate | None:
    """A block phase's FLOP/s ('flops') or tokens/s ('tokens') per device, with its spread."""
    m = record.typed
    p = m.phase(phase)
    amount = p.flops if what == "flops" else m.tokens_per_step_global
    return rate(amount, p.time_s_median, p.time_s_min, p.time_s_max, p.time_s_iqr,
                m.interval(f"{phase}_{PhaseTimed.TIME_S_MEDIAN}"))


def figure_rate(figure: ComparedFigure, per_device: bool = True) -> Rate | None:
    """A compared figure's rate (its amount over its timed unit; per device or all devices),
    with the spread of its time."""
    amount = figure.amount
    if amount is not None and per_device:
        amount /= figure.devices
    return rate(amount, figure.median_s, figure.fastest_s, figure.slowest_s, figure.iqr_s,
                figure.interval)


def train_rate(record: Record, per_device: bool = True) -> Rate | None:
    """A training cell's tokens/s (per device or global) with the spread of its steps."""
    return figure_rate(step_figure(record.typed, record.setup), per_device)


def token_unit(record: Record) -> str:
    """What one token of this record is: 'codon' for GenSLM, else 'token'."""
    return record.setup.token_unit or "token"


def is_training(record: Record) -> bool:
    """A training cell shown as one: its kind written from TrainMetrics, and not the condition
    of another kind's check (a noise check's A and B are shown through that check)."""
    return carries(record.kind, TrainMetrics) and not record_kind(record.kind).condition


def is_training_cell(record: Record, benchmark: str = "train") -> bool:
    """A training cell of this benchmark that is not a scaling study's per-count cell."""
    return (is_training(record) and (record.setup.benchmark or "train") == benchmark
            and record.setup.scale_devices is None)


def compared_figure(record: Record) -> ComparedFigure | None:
    """The figure its kind declares a cell is compared on across machines, or None (a kind that
    declares none, or no kind at all)."""
    declared = record_kinds().get(record.kind)
    if declared is None or declared.compared is None:
        return None
    return declared.compared(record.typed, record.setup)


def latest(records: Iterable[Record], key: Callable[[Record], Any]) -> dict[Any, Record]:
    """One record per key: the latest written (a cell measured again replaces the older)."""
    chosen: dict[Any, Record] = {}
    for record in sorted(records, key=lambda r: r.created_utc):
        chosen[key(record)] = record
    return chosen


def layout_text(record: Record) -> str:
    """The cell's layout as 'dp=1 tp=1 pp=1 zero=0' (fields that matter for comparing)."""
    layout = record.setup.layout or {}
    if not layout:
        return "-"
    parts = [f"{k}={layout[k]}" for k in ("dp", "tp", "pp", "zero") if k in layout]
    parts += [f"{k}={layout[k]}" for k in ("cp", "ep") if (layout.get(k) or 1) > 1]
    if layout.get("sp"):
        parts.append("sp")
    return " ".join(parts)


def short_layout(record: Record) -> str:
    """The layout's parallel degrees above one, for a sentence or an axis: 'cp=2', 'dp=2 zero=1'
    ('' for one device, no parallelism)."""
    return " ".join(w for w in layout_text(record).split() if w != "-"
                    and not w.endswith(("=1", "=0")))


def canonical(value: Any) -> str:
    """A value as one comparable text (dicts with sorted keys)."""
    return json.dumps(value, sort_keys=True, default=str)


def status_text(record: Record) -> str:
    """'ok', or 'does not fit (estimated|measured|user budget)' for an oom cell, or the
    status; a cell whose slow rank was named says which (its evidence is the record's
    reason)."""
    text = fit_text(record.status, record.reason)
    typed = record.typed
    slow = typed.slow_rank if isinstance(typed, TrainMetrics) else None
    return text if slow is None else f"{text}, rank {slow} slow"


def num(value: float | None, fmt: str = ",.0f") -> str:
    """A number, or '-' where there is none."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return format(value, fmt)


def pct(value: float | None, digits: int = 1) -> str:
    """A fraction as a percentage."""
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def gib(value: float | None) -> str:
    """Bytes in GiB (measured and estimated memory)."""
    return "-" if value is None else f"{value / GIB:.2f}"


RSS_MARK = " (RSS)"
RSS_NOTE = ("(RSS): measured as the process's resident memory (a CPU record from before "
            "2026-11-27, or a machine without glibc), which counts freed blocks the C library "
            "keeps: not comparable with the other CPU figures, malloc's bytes in use")


def rss_note(records: Iterable[Record]) -> str:
    """RSS_NOTE (with a leading space) when some of these records measured RSS, else ''."""
    measured = (r.typed for r in records)
    return f" {RSS_NOTE}." if any(isinstance(m, MemoryFields) and m.mem_method == RSS_METHOD
                                  for m in measured) else ""


def measured_gib(m: MemoryFields) -> str:
    """A cell's measured memory in GiB, marked where it was the process's RSS (RSS_NOTE)."""
    shown = gib(m.mem_added_bytes_per_rank_max)
    return shown + RSS_MARK if shown != "-" and m.mem_method == RSS_METHOD else shown


def duration(seconds: float | None) -> str:
    """Seconds as the largest unit that keeps the number readable."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    for unit, size in (("years", 365 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:,.1f} s"


def tflops(value: float | None) -> str:
    """FLOP/s as TFLOPS with enough digits for a CPU's small numbers."""
    return "-" if value is None else f"{value / 1e12:.3g}"


def varying_label(parts: list[dict[str, str]]) -> list[str]:
    """Series labels from their parts, keeping only the parts that differ between series (the
    machine too only where it differs: the Machines table is the key), joined by ' · '; a
    lone series is named by its first part (the machine)."""
    if not parts:
        return []
    keys = [k for k in parts[0] if len({p.get(k) for p in parts}) > 1] or list(parts[0])[:1]
    return [" · ".join(p[k] for k in keys if p.get(k)) for p in parts]


def points_series(label: str, points: list[tuple[float, Rate | None, bool]],
                  kind: str = MEASURED) -> Series:
    """A series from (x, rate, does-not-fit) points: a rate is drawn with its spread, a point
    that does not fit is marked at x, a point with neither is left out."""
    drawn = sorted(((x, r) for x, r, _ in points if r is not None), key=lambda p: p[0])
    spread = all(r.low is not None and r.high is not None for _, r in drawn)
    return Series(label, tuple(x for x, _ in drawn), tuple(r.value for _, r in drawn),
                  tuple(r.low for _, r in drawn) if spread else None,
                  tuple(r.high for _, r in drawn) if spread else None, kind,
                  tuple(sorted({x for x, r, misfit in points if misfit and r is None})))


def wide_range(xs: Iterable[float]) -> bool:
    """Whether x values span enough (4x or more) to want a logarithmic axis."""
    values = [x for x in xs if x and x > 0]
    return bool(values) and max(values) >= 4 * min(values)
