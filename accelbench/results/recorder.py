"""Turns a cell's outcome into an immutable record and writes it to the store at once."""

from __future__ import annotations

from accelbench.bench.outcome import Outcome
from accelbench.results.record import Record, new_run_id
from accelbench.results.store import ResultStore


class Recorder:
    """A sweep's sink: every outcome becomes a stored record the moment it is measured."""

    def __init__(self, store: ResultStore, environment: dict, run_id: str | None = None) -> None:
        self.store = store
        self.environment = environment
        self.run_id = run_id or new_run_id()
        self.records: list[Record] = []

    def __call__(self, outcome: Outcome) -> Record:
        record = Record(kind=outcome.kind, status=outcome.status, spec=outcome.spec,
                        environment=self.environment, metrics=outcome.metrics, raw=outcome.raw,
                        reason=outcome.reason, run_id=self.run_id)
        record_id = self.store.add(record)
        stored = Record.from_json(record.to_json(), record_id)
        self.records.append(stored)
        return stored
