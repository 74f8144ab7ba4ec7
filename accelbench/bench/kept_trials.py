"""A sweep's finished trials, kept as they end and found again by a resumed sweep."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol

from accelbench.bench.outcome import Outcome


@dataclass(frozen=True)
class KeptTrial:
    """A finished trial of a cell: its index, outcome, its place in its round and that round's
    order (cell labels), and, where a store keeps it, its row id and the run that measured it."""

    trial: int
    outcome: Outcome
    position: int
    order: list[str]
    row: int | None = None
    run_id: str | None = None

    def to_data(self) -> dict[str, Any]:
        """What the store keeps of the trial (store/trial_rows.py)."""
        return {"outcome": asdict(self.outcome), "position": self.position,
                "order": self.order}

    @classmethod
    def from_data(cls, trial: int, data: dict[str, Any], row: int | None = None,
                  run_id: str | None = None) -> KeptTrial:
        """A trial as the store kept it."""
        names = {f.name for f in fields(Outcome)}
        outcome = Outcome(**{k: v for k, v in data["outcome"].items() if k in names})
        return cls(trial, outcome, int(data["position"]), list(data["order"]), row, run_id)


class TrialKeeper(Protocol):
    """Where a sweep's finished trials are kept as they end (bench/recording/resume.py
    TrialStore: the results store), and found again by a resumed sweep."""

    def kept(self, kind: str, spec: dict[str, Any], trials: int) -> list[KeptTrial]:
        """The trials of this cell already kept (none to measure again)."""

    def keep(self, kind: str, spec: dict[str, Any], trial: KeptTrial) -> KeptTrial:
        """Keep one finished trial now; the trial with its row id and run."""


active_keepers: list[TrialKeeper] = []


@contextlib.contextmanager
def keeping_trials(keeper: TrialKeeper) -> Iterator[None]:
    """Within the block, interleaved cells that name their kind and spec keep every finished
    trial through `keeper` and resume from the trials it kept before."""
    active_keepers.append(keeper)
    try:
        yield
    finally:
        active_keepers.remove(keeper)
