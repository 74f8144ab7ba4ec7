"""Recovering launched cells whose `accelbench` process died before it recorded them.

A launched cell's folder (bench/train/cell_folder.py) sits beside the results database until
its outcome is recorded. A folder still there whose launching process is gone (same host, that
pid with that start time no longer running) is turned into a record the next time a sweep opens
that database, with the environment and run id the dead process had, and then removed:

- final.json (the launcher's outcome, made just before it died): that outcome;
- outcome.json (rank 0 finished, the launcher never read it): the measured outcome;
- neither: status 'interrupted', nothing measured (the ranks stopped with their parent);
- a launch that was one trial of several (launch.json's `trial`): 'interrupted', since a cell's
  record is made of all its trials; the trials the dead process had finished are kept in the
  store (store/trial_rows.py), and a resumed sweep measures only the missing ones.

A record the dead process did store (it died between storing and removing the folder) is not
stored again: same run id, kind and spec. Folders launched from another host are left alone.
"""

from __future__ import annotations

import json
import shutil
import socket
import time
from dataclasses import replace
from pathlib import Path

from accelbench.bench.outcome import Outcome
from accelbench.bench.recording.recorder import Recorder
from accelbench.bench.train.cell import KIND
from accelbench.bench.train.cell_folder import (
    FINAL_FILE,
    FOLDER_PREFIX,
    LAUNCH_FILE,
    OUTCOME_FILE,
    TRIAL_KEY,
    read_outcome,
)
from accelbench.config.paths import pending_dir
from accelbench.parallel.procs import alive
from accelbench.store.record import Record
from accelbench.store.store import ResultStore

_HALF_MADE_S = 60.0  # a folder without launch.json this old was never launched


def recover(store: ResultStore) -> list[Record]:
    """Record every pending cell meant for `store` whose launching process is gone, and remove
    its folder (and the folders of dead launches that had no database); the records added."""
    folder = pending_dir(store.path)
    if not folder.is_dir():
        return []
    added = []
    for entry in sorted(folder.glob(f"{FOLDER_PREFIX}*")):
        meta = _read(entry / LAUNCH_FILE)
        if meta is None:
            if time.time() - entry.stat().st_mtime > _HALF_MADE_S:
                shutil.rmtree(entry, ignore_errors=True)
            continue
        if _launcher_alive(meta) or not _for_store(meta, store):
            continue
        if meta.get("db"):
            record = _record(entry, meta, store)
            if record is not None:
                added.append(record)
        shutil.rmtree(entry, ignore_errors=True)
    return added


def recovered_line(record: Record) -> str:
    """One line for the user about a record recovered from a pending folder."""
    return (f"recovered: a {record.kind} cell of run {record.run_id} launched by an accelbench "
            f"process that died, recorded as {record.status} (id {record.id})")


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _launcher_alive(meta: dict) -> bool:
    """The process that launched the cell still runs (or runs on another host: not ours)."""
    parent = meta.get("parent") or {}
    if parent.get("host") != socket.gethostname():
        return True
    return alive(int(parent.get("pid", 0)), parent.get("start_ticks"))


def _for_store(meta: dict, store: ResultStore) -> bool:
    """Launched to be recorded into this store (or into none: then only cleaned up)."""
    if not meta.get("db"):
        return True
    try:
        return Path(meta["db"]).resolve() == Path(store.path).resolve()
    except OSError:
        return False


def _record(entry: Path, meta: dict, store: ResultStore) -> Record | None:
    """The record the folder holds, stored; None when the dead process had stored it."""
    outcome = _outcome(entry, meta)
    if _already_stored(store, meta["run_id"], outcome):
        return None
    return Recorder(store, meta["environment"], meta["run_id"])(outcome)


def _outcome(entry: Path, meta: dict) -> Outcome:
    """The launcher's final outcome, rank 0's, or an interrupted one, noted as recovered; one
    trial of several is interrupted (a cell's trials are combined by the launcher once all
    have run: one trial is not the cell's record; its finished trials are kept apart)."""
    pid = (meta.get("parent") or {}).get("pid")
    trial = meta.get(TRIAL_KEY)
    if trial:
        return Outcome(KIND, "interrupted", meta["record_spec"],
                       reason=f"the accelbench process (pid {pid}) that launched trial "
                              f"{trial[0] + 1} of {trial[1]} of this cell died: the trials it "
                              "had finished are kept in the store and a resumed sweep measures "
                              f"only the missing ones (recovered from {entry.name})")
    for name, how in ((FINAL_FILE, "made before"), (OUTCOME_FILE, "finished after")):
        if (entry / name).exists():
            try:
                outcome = read_outcome(entry / name)
            except (OSError, ValueError, TypeError):
                continue
            note = (f"recovered from {entry.name}: {how} the accelbench process (pid {pid}) "
                    "that launched it died")
            return replace(outcome, reason=f"{outcome.reason}; {note}" if outcome.reason
                           else note)
    return Outcome(KIND, "interrupted", meta["record_spec"],
                   reason=f"the accelbench process (pid {pid}) that launched this cell died "
                          "during it and its ranks stopped with it: nothing was measured "
                          f"(recovered from {entry.name})")


def _already_stored(store: ResultStore, run_id: str, outcome: Outcome) -> bool:
    """A record of this run with this kind and (at least) this spec exists: its stored spec
    holds every item of the outcome's (as stored: through JSON), whatever the store added (the
    fingerprint, the workload)."""
    asked = json.loads(json.dumps(outcome.spec, default=str)).items()
    return any(asked <= record.spec.items()
               for record in store.query(kind=outcome.kind, run_id=run_id))
