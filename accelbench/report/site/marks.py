"""Trust marks: what a reader of the site should know about each result before believing it.

- reproduced: another bundle holds the same workload on the same device class and count, and
  the two spreads of tokens/s overlap; disagrees: it holds one and they do not overlap;
  measured once: no other bundle ran it on that class and count.
- disturbed window: some trial's timed window was disturbed (other processes took the machine).
- noisy: the cell's own spread (its interval's half-width over the median) is wider than the
  machine's noise floor (its latest A/A check), so a difference smaller than the spread is not
  evidence.
- estimated: a figure that was estimated, not measured (a fit verdict reached by the memory
  estimate or a user budget, a longest-sequence probe's answer).
- reference: a published figure from the paper, on its own page, never ranked with measurements.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from accelbench.config.fit import fit_basis
from accelbench.config.record_kinds import carries
from accelbench.config.records.seq_search import SeqSearchMetrics
from accelbench.report.cells import Rate
from accelbench.report.site.html import esc
from accelbench.report.site.site_model import Ranked
from accelbench.store.record import Record

REPRODUCED, DISAGREES, ONCE = "reproduced", "disagrees", "once"
DISTURBED, NOISY, ESTIMATED, REFERENCE = "disturbance", "noisy", "estimated", "reference"
WORDS = {REPRODUCED: "reproduced", DISAGREES: "not reproduced", ONCE: "measured once",
         DISTURBED: "disturbed window", NOISY: "spread above noise floor", ESTIMATED: "estimated",
         REFERENCE: "published (reference)"}


@dataclass(frozen=True)
class Mark:
    """One mark: its kind (the CSS class) and the sentence shown beside it."""

    kind: str
    why: str

    @property
    def word(self) -> str:
        """The mark's short name."""
        return WORDS[self.kind]


def overlap(a: Rate, b: Rate) -> bool | None:
    """Whether two spreads overlap; None where either has none."""
    if None in (a.low, a.high, b.low, b.high):
        return None
    return a.low <= b.high and b.low <= a.high


@dataclass(frozen=True)
class Peers:
    """A workload's cells on one device class and count, their spreads' ends sorted, so the
    cells a spread overlaps are counted by bisection, not by comparing every pair."""

    cells: tuple[Ranked, ...]
    lows: tuple[float, ...]
    highs: tuple[float, ...]
    by_bundle: dict[str, tuple[Ranked, ...]]


def peer_groups(cells: list[Ranked]) -> dict[tuple[str, int], Peers]:
    """A workload's cells grouped by device class and count."""
    groups: dict[tuple[str, int], list[Ranked]] = {}
    for c in cells:
        groups.setdefault((c.device_class, c.devices), []).append(c)
    made = {}
    for key, group in groups.items():
        spread = [c.best.total for c in group if c.best.total.low is not None
                  and c.best.total.high is not None]
        by_bundle: dict[str, list[Ranked]] = {}
        for c in group:
            by_bundle.setdefault(c.bundle, []).append(c)
        made[key] = Peers(tuple(group), tuple(sorted(r.low for r in spread)),
                          tuple(sorted(r.high for r in spread)),
                          {b: tuple(v) for b, v in by_bundle.items()})
    return made


def _overlapping(rate: Rate, peers: Peers) -> int:
    """How many of the group's spreads overlap this one: those starting at or below its high
    end, less those ending below its low end (a subset of them)."""
    if rate.low is None or rate.high is None:
        return 0
    return bisect_right(peers.lows, rate.high) - bisect_left(peers.highs, rate.low)


def reproduction(cell: Ranked, peers: Peers) -> Mark:
    """reproduced, not reproduced or measured once, against the workload's cells that other
    bundles carry on the same device class and count (`peers`: peer_groups' group of it)."""
    same = peers.by_bundle.get(cell.bundle, ())
    others = len(peers.cells) - len(same)
    where = f"{cell.device_class} x{cell.devices}"
    if not others:
        return Mark(ONCE, f"no other bundle ran this workload on {where}")
    rate = cell.best.total
    agree = _overlapping(rate, peers) - sum(bool(overlap(rate, o.best.total)) for o in same)
    if agree:
        return Mark(REPRODUCED, f"{agree} of {others} cell(s) from other bundles on {where} "
                    "overlap this spread")
    return Mark(DISAGREES, f"{others} cell(s) from other bundles on {where}, none overlapping "
                "this spread (or this one has none)")


def spread_fraction(rate: Rate) -> float | None:
    """The spread's half-width over the median, or None without a spread."""
    if rate.low is None or rate.high is None or rate.value <= 0:
        return None
    return (rate.high - rate.low) / 2 / rate.value


def cell_marks(cell: Ranked, peers: Peers, floor: float | None) -> list[Mark]:
    """Every mark of a measured cell (`peers`: its group from peer_groups; `floor`: its
    machine's noise floor, None if unmeasured)."""
    marks = [reproduction(cell, peers)]
    if cell.record.typed.disturbed:
        marks.append(Mark(DISTURBED, "a trial's timed window was disturbed by other work"))
    spread = spread_fraction(cell.best.total)
    if floor is not None and spread is not None and spread > floor:
        marks.append(Mark(NOISY, f"spread ±{100 * spread:.1f}% is wider than this machine's "
                          f"noise floor ±{100 * floor:.1f}%"))
    return marks


def record_marks(record: Record) -> list[Mark]:
    """Marks of any record on a machine page: estimated where it was not measured."""
    basis = fit_basis(record.status, record.reason)
    if basis in ("estimated", "budget"):
        return [Mark(ESTIMATED, f"'does not fit' decided by the {basis}, not by running it")]
    if carries(record.kind, SeqSearchMetrics):
        return [Mark(ESTIMATED, "a longest-sequence probe: fits or not by the memory estimate")]
    return []


def marks_html(marks: list[Mark]) -> str:
    """The marks as small labelled spans (their text escaped)."""
    return "".join(f'<span class="mark {m.kind}" title="{esc(m.why)}">{esc(m.word)}</span>'
                   for m in marks)
