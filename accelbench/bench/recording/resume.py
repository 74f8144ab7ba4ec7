"""Resume: a sweep run again reports the cells already finished on this machine from the store
and runs only the rest (the rules, what a fingerprint covers and what counts as finished, are in
store/fingerprint.py). The bench layer asks through `Skip` (bench/outcome.py) before it runs a
cell; this module answers from the store."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import replace

from accelbench.bench.kept_trials import KeptTrial
from accelbench.bench.outcome import Outcome, Skip
from accelbench.bench.recording.recorder import Recorder
from accelbench.config.record_kinds import carries, record_kind
from accelbench.config.records.fields import RecordSpec, TrialFields
from accelbench.config.records.train import TrainRecordSpec
from accelbench.store.fingerprint import (
    FINISHED,
    canonical_json,
    cell_fingerprint,
    stamped_spec,
)
from accelbench.store.record import Record
from accelbench.store.store import ResultStore
from accelbench.store.trial_rows import add_trial, cell_trials, closed_up_to, open_trials


def record_fingerprint(record: Record) -> str:
    """The fingerprint a record was stored with; for a record written before fingerprints
    existed, computed from its spec and environment."""
    stored = record.setup.fingerprint
    return stored or cell_fingerprint(record.kind, record.spec, record.environment)


class FinishedCells:
    """A store's finished records by cell fingerprint, read once per kind (the latest record
    wins where a cell was measured again with --rerun). One index can serve every sweep of a
    study (reading it costs about 0.1 s per thousand records): `add` a sweep's records when it
    ends, so the next sweep finds them; a sweep does not skip its own cells.
    With `redo_disturbed` N (--retry-disturbed), a cell whose latest record is flagged
    disturbed is not finished while it has been measured disturbed at most N times in a row
    (its first measurement and N - 1 retries), whichever runs measured it: a resumed study
    performs the retries an interrupted one still owed."""

    def __init__(self, store: ResultStore, environment: dict,
                 redo_disturbed: int = 0) -> None:
        self.store, self.environment = store, environment
        self.redo_disturbed = int(redo_disturbed)  # retries a disturbed cell may have
        self._by_kind: dict[str, dict[str, Record]] = {}
        self._closed: dict[str, dict[str, int]] = {}  # kind -> fingerprint -> last trial row
        self._streak: dict[str, dict[str, int]] = {}  # kind -> fingerprint -> disturbed in a row

    def find(self, kind: str, spec: dict) -> Record | None:
        """The finished record of this cell on this machine, or None."""
        if kind not in self._by_kind:
            self._by_kind[kind] = self._read(kind)
        return self._by_kind[kind].get(cell_fingerprint(kind, spec, self.environment))

    def add(self, record: Record) -> None:
        """A record stored since the index was read: found from now on if it is finished."""
        if record.id is None or record.status not in FINISHED or record.kind not in self._by_kind:
            return
        self._note(record)
        cells = self._by_kind[record.kind]
        if self._redone(record):
            cells.pop(record_fingerprint(record), None)
        else:
            cells[record_fingerprint(record)] = record

    def closed_trials(self, kind: str, fingerprint: str) -> int:
        """The last kept trial row a finished record of this cell was made of (0: none): the
        rows after it are the cell's open trials."""
        if kind not in self._by_kind:
            self._by_kind[kind] = self._read(kind)
        return self._closed.get(kind, {}).get(fingerprint, 0)

    def owes_retry(self, record: Record) -> bool:
        """Whether this (latest) record's cell is to be measured again: it is disturbed and
        was measured disturbed at most `redo_disturbed` times in a row."""
        if record.kind not in self._by_kind:
            self._by_kind[record.kind] = self._read(record.kind)
        return self._redone(record)

    def _note(self, record: Record) -> None:
        """A finished record, oldest first: its trial rows are closed, its streak counted."""
        fingerprint = record_fingerprint(record)
        closed = self._closed.setdefault(record.kind, {})
        closed[fingerprint] = max(closed.get(fingerprint, 0), closed_up_to(record.raw))
        streak = self._streak.setdefault(record.kind, {})
        streak[fingerprint] = streak.get(fingerprint, 0) + 1 if disturbed(record) else 0

    def _read(self, kind: str) -> dict[str, Record]:
        every = sorted((r for status in FINISHED for r in self.store.query(kind=kind,
                                                                          status=status)),
                       key=lambda r: r.id or 0)
        self._closed[kind], self._streak[kind] = {}, {}
        latest: dict[str, Record] = {}
        for record in every:
            self._note(record)
            latest[record_fingerprint(record)] = record
        return {fp: r for fp, r in latest.items() if not self._redone(r)}

    def _redone(self, record: Record) -> bool:
        """Whether this record is measured again: a disturbed cell, when retrying those, not
        yet measured disturbed more than the retries allow."""
        if not self.redo_disturbed or not disturbed(record):
            return False
        streak = self._streak.get(record.kind, {}).get(record_fingerprint(record), 1)
        return streak <= self.redo_disturbed


def disturbed(record: Record) -> bool:
    """An ok cell some trial of whose timed window other work disturbed, that a sweep measures
    again on its own: measured as trials (TrialFields), and not a check's condition (a noise
    check's conditions are measured again only with their check)."""
    return (record.status == "ok" and carries(record.kind, TrialFields)
            and not record_kind(record.kind).condition and bool(record.typed.disturbed))


def outcome_of(record: Record) -> Outcome:
    """A stored record as the outcome a sweep reports for a cell it skipped."""
    return Outcome(record.kind, record.status, record.spec, record.metrics, record.raw,
                   record.reason)


def cell_label(s: RecordSpec) -> str:
    """A short label of a cell from the spec fields that tell the cells of a sweep apart
    ('seq 32 mb 1 gas 1 fp32 recompute none'), those it has."""
    devices = s.scale_devices if isinstance(s, TrainRecordSpec) else None
    named = (("devices", devices), ("seq", s.seq_len), ("batch", s.batch),
             ("mb", s.micro_batch), ("gas", s.gas), ("", s.dtype), ("recompute", s.recompute))
    return " ".join(f"{short} {value}".strip() for short, value in named if value is not None)


def skip_line(record: Record) -> str:
    """One line for a skipped cell: which cell, what it ended as, which record holds it."""
    when = record.created_utc[:16].replace("T", " ")
    return (f"  skipped {cell_label(record.setup)}: finished on this machine ({record.status}, "
            f"record {record.id}, {when} UTC)")


class TrialStore:
    """Keeps a sweep's finished trials in the store as they end (store/trial_rows.py) and finds
    the ones an earlier run of a cell kept (bench/kept_trials.py TrialKeeper). With `rerun` none is
    found: every trial is measured again. `tag` is the study's tag of a record spec; `warn`
    names a trial the store refused (it stays in memory and joins its cell's record)."""

    def __init__(self, recorder: Recorder, finished: FinishedCells | None, rerun: bool = False,
                 tag: Callable[[Outcome], Outcome] | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        self.recorder, self.finished, self.rerun, self.tag = recorder, finished, rerun, tag
        self.warn = warn or recorder.warn
        self.resumed = 0  # trials found kept by an earlier run, not measured again

    def _fingerprint(self, kind: str, spec: dict) -> str:
        outcome = Outcome(kind, "ok", spec)
        tagged = self.tag(outcome).spec if self.tag else spec
        return cell_fingerprint(kind, tagged, self.recorder.environment)

    def kept(self, kind: str, spec: dict, trials: int) -> list[KeptTrial]:
        """The open trials of this cell (after its last finished record's), latest per index."""
        if self.rerun or self.finished is None:
            return []
        fingerprint = self._fingerprint(kind, spec)
        after = self.finished.closed_trials(kind, fingerprint)
        rows = open_trials(cell_trials(self.recorder.store, fingerprint, after), trials)
        found = [KeptTrial.from_data(r.trial, r.data, r.id, r.run_id) for r in rows.values()]
        self.resumed += len(found)
        return found

    def keep(self, kind: str, spec: dict, trial: KeptTrial) -> KeptTrial:
        """Write the trial now; where the store refuses it, the trial stays in memory only."""
        run_id = self.recorder.run_id
        try:
            row = add_trial(self.recorder.store, run_id, self._fingerprint(kind, spec),
                            trial.trial, trial.to_data())
        except (sqlite3.Error, OSError) as err:
            self.warn(f"warning: db: trial {trial.trial + 1} of a {kind} cell could not be "
                      f"kept in '{self.recorder.store.path}' ({err}); it joins its cell's "
                      "record when the cell ends")
            return replace(trial, run_id=run_id)
        return replace(trial, row=row, run_id=run_id)


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

    def summary(self, resumed_trials: int = 0) -> str | None:
        """'N cells skipped (finished on this machine), M run', when any was skipped; and the
        trials an earlier run had kept, when any was (not measured again)."""
        kept = (f"{resumed_trials} trial(s) of unfinished cells kept by an earlier run, not "
                "measured again") if resumed_trials else ""
        if not self.skipped:
            return kept or None
        cells = "cell" if self.skipped == 1 else "cells"
        return (f"{self.skipped} {cells} skipped (finished on this machine), {self.ran} run"
                f"{f' ({kept})' if kept else ''}; --rerun measures every cell again")


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
