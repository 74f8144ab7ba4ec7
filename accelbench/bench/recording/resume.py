"""Resume: a sweep run again reports the cells already finished on this machine from the store
and runs only the rest (the rules, what a fingerprint covers and what counts as finished, are in
store/fingerprint.py). The bench layer asks through `Skip` (bench/outcome.py) before it runs a
cell; this module answers from the store."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from accelbench.bench.outcome import Outcome, Skip
from accelbench.bench.recording.recorder import Recorder
from accelbench.store.fingerprint import (
    FINGERPRINT_KEY,
    FINISHED,
    canonical_json,
    cell_fingerprint,
    stamped_spec,
)
from accelbench.store.record import Record
from accelbench.store.store import ResultStore


def record_fingerprint(record: Record) -> str:
    """The fingerprint a record was stored with; for a record written before fingerprints
    existed, computed from its spec and environment."""
    stored = record.spec.get(FINGERPRINT_KEY)
    return stored or cell_fingerprint(record.kind, record.spec, record.environment)


class FinishedCells:
    """A store's finished records by cell fingerprint, read once per kind (the latest record
    wins where a cell was measured again with --rerun). One index can serve every sweep of a
    study (reading it costs about 0.1 s per thousand records): `add` a sweep's records when it
    ends, so the next sweep finds them; a sweep does not skip its own cells."""

    def __init__(self, store: ResultStore, environment: dict,
                 redo_disturbed: bool = False) -> None:
        self.store, self.environment = store, environment
        self.redo_disturbed = redo_disturbed  # a cell flagged disturbed is not finished
        self._by_kind: dict[str, dict[str, Record]] = {}

    def find(self, kind: str, spec: dict) -> Record | None:
        """The finished record of this cell on this machine, or None."""
        if kind not in self._by_kind:
            self._by_kind[kind] = self._read(kind)
        return self._by_kind[kind].get(cell_fingerprint(kind, spec, self.environment))

    def add(self, record: Record) -> None:
        """A record stored since the index was read: found from now on if it is finished."""
        if record.id is not None and record.status in FINISHED and record.kind in self._by_kind \
                and not self._redone(record):
            self._by_kind[record.kind][record_fingerprint(record)] = record

    def _read(self, kind: str) -> dict[str, Record]:
        records = [r for status in FINISHED for r in self.store.query(kind=kind, status=status)
                   if not self._redone(r)]
        return {record_fingerprint(r): r for r in sorted(records, key=lambda r: r.id or 0)}


    def _redone(self, record: Record) -> bool:
        """Whether this record is measured again: a disturbed cell, when retrying those."""
        return self.redo_disturbed and disturbed(record)


def disturbed(record: Record) -> bool:
    """An ok cell some trial of whose timed window other work disturbed."""
    return record.status == "ok" and record.kind in DISTURBANCE_KINDS \
        and bool(record.typed.disturbed)


DISTURBANCE_KINDS = ("train", "block")  # the kinds whose windows are probed (bench/trials.py)


def outcome_of(record: Record) -> Outcome:
    """A stored record as the outcome a sweep reports for a cell it skipped."""
    return Outcome(record.kind, record.status, record.spec, record.metrics, record.raw,
                   record.reason)


# Spec fields that tell the cells of a sweep apart, with their short names, for skip lines.
_LABEL = (("scale_devices", "devices"), ("seq_len", "seq"), ("batch", "batch"),
          ("micro_batch", "mb"), ("gas", "gas"), ("dtype", ""), ("recompute", "recompute"))


def cell_label(spec: dict) -> str:
    """A short label of a cell from its record spec ('seq 32 mb 1 gas 1 fp32 recompute none')."""
    return " ".join(f"{short} {spec[key]}".strip() for key, short in _LABEL if key in spec)


def skip_line(record: Record) -> str:
    """One line for a skipped cell: which cell, what it ended as, which record holds it."""
    when = record.created_utc[:16].replace("T", " ")
    return (f"  skipped {cell_label(record.spec)}: finished on this machine ({record.status}, "
            f"record {record.id}, {when} UTC)")


class Resume:
    """A sweep's sink and skip: stores what runs, reports what is finished, and keeps both as
    records in sweep order (what the final table shows). With `rerun` nothing is skipped.
    `finished` shares one index between the sweeps of a study (same store and machine)."""

    def __init__(self, recorder: Recorder, say: Callable[[str], None] = lambda text: None,
                 rerun: bool = False, finished: FinishedCells | None = None) -> None:
        self.recorder, self.say = recorder, say
        self.finished = None if rerun else (
            finished or FinishedCells(recorder.store, recorder.environment))
        self.records: list[Record] = []
        self.skipped = self.ran = 0

    def sink(self, outcome: Outcome) -> Record:
        """Store an outcome now, its spec stamped with the cell's fingerprint (the record joins
        the sweep's records)."""
        spec = stamped_spec(outcome.kind, outcome.spec, self.recorder.environment,
                            outcome.asked_spec)
        record = self.recorder(replace(outcome, spec=spec, asked_spec=None))
        self.records.append(record)
        return record

    @property
    def skip(self) -> Skip | None:
        """What the sweep asks before each cell; None with --rerun (every cell runs)."""
        return None if self.finished is None else self._skip

    def _skip(self, kind: str, spec: dict) -> Outcome | None:
        record = self.finished.find(kind, spec) if self.finished else None
        if record is None:
            self.ran += 1
            return None
        self.skipped += 1
        self.records.append(record)
        self.say(skip_line(record))
        return outcome_of(record)

    def summary(self) -> str | None:
        """'N cells skipped (finished on this machine), M run', when any was skipped."""
        if not self.skipped:
            return None
        cells = "cell" if self.skipped == 1 else "cells"
        return (f"{self.skipped} {cells} skipped (finished on this machine), {self.ran} run; "
                "--rerun measures every cell again")


def stored_summary(recorder: Recorder, outcome: Outcome) -> Record:
    """A record derived from a sweep's cells (a scaling summary): the stored one when this
    machine has one with the same spec and the same content (every cell was skipped), else
    `outcome` stored now; a resumed sweep does not store its summary twice."""
    found = FinishedCells(recorder.store, recorder.environment).find(outcome.kind, outcome.spec)
    if found is not None and found.status == outcome.status and \
            canonical_json(found.metrics) == canonical_json(outcome.metrics):
        return found
    return recorder(replace(outcome, spec=stamped_spec(outcome.kind, outcome.spec,
                                                      recorder.environment)))
