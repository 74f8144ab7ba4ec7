"""The folder of one launched cell, in the pending folder beside the results database
(config/paths.py), not in a temporary folder that dies with its process:

    cell-<id>/launch.json   written before the launch: who launched it (pid, start time, host),
                            the database, environment and run id it is recorded under, the
                            record spec (for an 'interrupted' record when nothing else exists),
                            and [r, n] when the launch is trial r of n of its cell
    cell-<id>/spec.json     the one-cell TrainSpec the ranks run
    cell-<id>/heartbeat/    each rank's heartbeat (parallel/watchdog.py)
    cell-<id>/errors/       each failed rank's own exception (parallel/rank_files.py)
    cell-<id>/logs/         torchrun's per-rank logs
    cell-<id>/outcome.json  rank 0's outcome, once every rank's results are gathered
    cell-<id>/final.json    the outcome the launcher made of it, just before handing it over

Inside a recording session (`recording_into`, entered by bench/recording/session.py) a folder
is removed once its outcome has been recorded: when the next cell starts or the session ends. If
the `accelbench` process dies first, bench/recording/pending.py records what the folder holds the
next time that database is opened. Outside a session nothing could recover it, so it is removed
at once.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import socket
import uuid
from collections.abc import Iterator
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from accelbench.bench.outcome import Outcome
from accelbench.config.paths import pending_dir
from accelbench.parallel.procs import start_ticks

LAUNCH_FILE, SPEC_FILE = "launch.json", "spec.json"
OUTCOME_FILE, FINAL_FILE = "outcome.json", "final.json"
FOLDER_PREFIX = "cell-"
TRIAL_KEY = "trial"  # launch.json: [r, n] of a launch that is trial r (0-based) of n

_targets: list[dict[str, Any]] = []  # the recording session's database, environment, run id
_handed_over: list[Path] = []  # folders whose outcome the caller has (removed once recorded)


def write_json(path: Path, data: dict) -> None:
    """Write whole or not at all (a reader never sees half a file): a temporary, then rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, default=str))
    tmp.replace(path)


def read_outcome(path: Path) -> Outcome:
    """An outcome written as JSON by write_json (rank 0's, or the launcher's final one)."""
    names = {f.name for f in fields(Outcome)}
    return Outcome(**{k: v for k, v in json.loads(path.read_text()).items() if k in names})


@contextlib.contextmanager
def recording_into(db: str, environment: dict, run_id: str) -> Iterator[None]:
    """Cells launched within the block are to be recorded into `db` under this environment and
    run id: their folders say so, and stay until the outcome is recorded."""
    _targets.append({"db": db, "environment": environment, "run_id": run_id})
    try:
        yield
    finally:
        _targets.pop()
        settle()


def settle() -> None:
    """Remove the folders of cells whose outcomes were handed over (and so recorded by now)."""
    while _handed_over:
        shutil.rmtree(_handed_over.pop(), ignore_errors=True)


atexit.register(settle)


def open_cell_folder(spec: dict, record_spec: dict, label: str,
                     trial: tuple[int, int] | None = None) -> Path:
    """A new cell folder with launch.json and spec.json, in the pending folder of the database
    being recorded into (the default database's outside a session); `trial` (r, of n) where
    the launch is one trial of several (TRIAL_KEY: recovered as interrupted, pending.py)."""
    settle()  # the previous cell's outcome has been recorded: the loop sank it before this
    target = _targets[-1] if _targets else {"db": None, "environment": None, "run_id": None}
    folder = pending_dir(target["db"]) / f"{FOLDER_PREFIX}{uuid.uuid4().hex[:12]}"
    folder.mkdir(parents=True)
    write_json(folder / SPEC_FILE, spec)
    write_json(folder / LAUNCH_FILE, {
        **target, "record_spec": record_spec, "label": label,
        **({TRIAL_KEY: list(trial)} if trial else {}),
        "parent": {"pid": os.getpid(), "start_ticks": start_ticks(os.getpid()),
                   "host": socket.gethostname()},
        "created_utc": datetime.now(UTC).isoformat()})
    return folder


def hand_over(folder: Path) -> None:
    """The caller now holds the cell's outcome: remove the folder once it is recorded (at once
    when nothing records it)."""
    if _targets:
        _handed_over.append(folder)
    else:
        shutil.rmtree(folder, ignore_errors=True)
