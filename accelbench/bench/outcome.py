"""What a measured cell hands to the results layer (which adds environment, ids and time), and
how a sweep asks whether a cell needs running at all (resume)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accelbench.config.record_kinds import read_metrics, read_spec


@dataclass(frozen=True)
class Outcome:
    """One cell's status, spec, metrics and raw per-repetition times.

    `asked_spec` is the spec the sweep asked `Skip` about, set only where a search made `spec`
    differ from it (the largest micro-batch, the longest sequence): the record is found again
    by what was asked, not by what the search chose."""

    kind: str
    status: str  # ok, oom, unsupported, error, diverged, timeout
    spec: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    asked_spec: dict[str, Any] | None = None

    @property
    def typed(self) -> Any:
        """The metrics as the kind's frozen class (config.record_kinds.read_metrics), as a stored
        record reads them."""
        return read_metrics(self.kind, self.metrics)

    @property
    def setup(self) -> Any:
        """The spec as the kind's frozen spec class (config.record_kinds.read_spec), as a stored
        record reads it."""
        return read_spec(self.kind, self.spec)


Sink = Callable[[Outcome], Any]
Progress = Callable[[int, int, str], None]  # (done, total, label of the cell starting now)
Skip = Callable[[str, dict[str, Any]], Outcome | None]
"""Asked before a cell runs, with its kind and the record spec it would have: the finished
outcome to report instead of running it (resume), or None to run it. A sweep asks before it
decides a peak or searches, so a sweep whose cells are all finished measures nothing."""


def finished(skip: Skip | None, kind: str, spec: dict[str, Any]) -> Outcome | None:
    """The finished outcome `skip` reports for this cell, or None (run it; no skip: run all)."""
    return skip(kind, spec) if skip is not None else None
