"""The toy workload's schema module: its record kind, the metrics its records carry and the figure
its cells are compared on across machines (copied into a directory on accelbench.config.records'
path by tests/unit/test_workload_registry.py)."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.config.records.base import ComparedFigure, RecordKind
from accelbench.config.records.fields import RecordSpec


@dataclass(frozen=True)
class ToyMetrics:
    """A toy cell's score."""

    toy_score_per_s: float | None = None


def toy_figure(m: ToyMetrics, s: RecordSpec) -> ComparedFigure:
    """What a toy cell is compared on: its score, already a rate (a second's scores over a
    second), on one device."""
    return ComparedFigure(m.toy_score_per_s, 1.0, unit="score", label="toy")


KINDS = {"toy": RecordKind(ToyMetrics, cell=True, compared=toy_figure)}
