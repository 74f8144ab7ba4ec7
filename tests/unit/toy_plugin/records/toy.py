"""The toy workload's schema module: its record kind and the metrics its records carry (copied
into a directory on accelbench.config.records' path by tests/unit/test_workload_registry.py)."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.config.records.base import RecordKind


@dataclass(frozen=True)
class ToyMetrics:
    """A toy cell's score."""

    toy_score_per_s: float | None = None


KINDS = {"toy": RecordKind(ToyMetrics)}
