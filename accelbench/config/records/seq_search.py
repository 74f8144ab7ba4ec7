"""The longest-sequence search's record kind ('seq-search': genslm's `--longest-seq` probes)."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.config.records.base import RecordKind
from accelbench.config.records.train import TrainRecordSpec


@dataclass(frozen=True)
class SeqSearchMetrics:
    """One probe of the longest-sequence search (kind 'seq-search'): whether the length fits,
    and the estimate and budget behind the answer."""

    fits: bool | None = None
    mem_estimate_bytes_per_rank: float | None = None
    mem_budget_bytes_per_rank: float | None = None


# The verdict word of a cell or layout that fits, as seq-search's metric is named: the study's
# plan, the plan's JSON and the search's reasons say it (config/fit.py has the other words).
FITS = "fits"


@dataclass(frozen=True)
class SeqSearchRecordSpec(TrainRecordSpec):
    """A probe's spec: the training cell it asked about, and how the search chose it."""

    method: str | None = None  # estimate, or run
    probe: int | None = None  # 1-based place of this probe in the search


KINDS = {"seq-search": RecordKind(SeqSearchMetrics, spec=SeqSearchRecordSpec)}
