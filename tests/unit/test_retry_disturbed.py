"""`study run --retry-disturbed N`: the cells flagged disturbed are measured again, up to N more
passes; both records are kept (the report reads a cell's latest), the undisturbed are not rerun."""

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from cli_run import run_main

from accelbench.bench.recording.resume import FinishedCells, disturbed
from accelbench.store.record import Record
from accelbench.store.store import ResultStore

STUDY = """title = "one block cell"
[profiles.full]
description = "the same"
[profiles.quick]
description = "the same"
[experiments.one]
workload = "block"
[experiments.one.options]
model = "gpt2-tiny"
seq = 64
batch = "4"
dtype = "fp32"
repeats = 20
warmup = 1
trials = "1"
"""
# Starts the hogs and exits, so they are reparented away from our process tree: others' work.
LAUNCH = ("import subprocess, sys\n"
          "for _ in range(int(sys.argv[1])):\n"
          "    p = subprocess.Popen([sys.executable, '-c', 'while True: pass'],\n"
          "                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
          "    print(p.pid, flush=True)\n")


def _cell(flag: bool | None, id_: int) -> Record:
    return Record(kind="block", status="ok", spec={"batch": 1}, environment={"host": "h"},
                  metrics={"disturbed": flag}, id=id_)


def test_a_disturbed_cell_is_unfinished_only_when_retrying(tmp_path):
    store = ResultStore(tmp_path / "r.db")
    for flag in (True, False, None):
        store.add(_cell(flag, None))
    retrying = FinishedCells(store, {"host": "h"}, redo_disturbed=True)
    assert [disturbed(r) for r in store.query()] == [True, False, False]
    assert len(retrying._read("block")) == 1 and len(FinishedCells(store, {})._read("block")) == 1
    assert not retrying._redone(_cell(False, 9)) and retrying._redone(_cell(True, 9))
    store.close()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux /proc")
def test_a_disturbed_cell_is_measured_again(tmp_path, monkeypatch, capsys, quick_peak):
    study, db = tmp_path / "one.toml", tmp_path / "s.db"
    study.write_text(STUDY)
    n = os.cpu_count() or 1
    if n > 16 or len(os.sched_getaffinity(0)) < n:
        pytest.skip("fills every CPU: too many, or not all ours to fill")
    out = subprocess.run([sys.executable, "-c", LAUNCH, str(n)], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    try:
        time.sleep(0.5)  # the hogs are up and spinning
        code, _, err = run_main(monkeypatch, capsys, "study", "run", str(study), "--device",
                                "cpu", "--db", str(db), "--retry-disturbed", "1")
    finally:
        for pid in map(int, out.split()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert code == 0, err
    cells = ResultStore(db, write=False).query(kind="block")
    assert len(cells) == 2 and all(disturbed(c) for c in cells)  # both kept, both flagged
    assert "retry 1/1: 1 cell(s) flagged disturbed, measured again" in err


def test_retries_owed_count_every_run_of_a_cell(tmp_path):
    """A cell is owed a retry while its latest record is disturbed and it was measured
    disturbed at most N times in a row, whichever runs measured it."""
    store = ResultStore(tmp_path / "r.db")
    for flag in (False, True):  # measured undisturbed, then (another run) disturbed
        store.add(_cell(flag, None))
    latest = store.query()[-1]
    assert FinishedCells(store, {"host": "h"}, redo_disturbed=1).owes_retry(latest)
    store.add(_cell(True, None))  # its retry, disturbed again: two in a row
    latest = store.query()[-1]
    assert not FinishedCells(store, {"host": "h"}, redo_disturbed=1).owes_retry(latest)
    assert FinishedCells(store, {"host": "h"}, redo_disturbed=2).owes_retry(latest)
    index = FinishedCells(store, {"host": "h"}, redo_disturbed=2)
    assert index.find("block", {"batch": 1}) is None  # owed: not finished
    store.add(_cell(False, None))
    assert index.find("block", {"batch": 1}) is None  # the index was read before it
    index.add(store.query()[-1])
    assert index.find("block", {"batch": 1}).id == store.query()[-1].id
    store.close()


@pytest.mark.slow
def test_a_resumed_study_performs_the_retries_the_interrupted_one_owed(tmp_path, monkeypatch,
                                                                       capsys, quick_peak):
    """A run killed after its first pass flagged a cell disturbed, before its retry (made here
    by storing the cell's record again, flagged): the resumed run skips the cell in its first
    pass and measures it again in its retry pass; a third run owes nothing and measures
    nothing (the cell was measured once disturbed and retried once)."""
    study, db = tmp_path / "one.toml", tmp_path / "s.db"
    study.write_text(STUDY.replace("seq = 64", "seq = 16").replace("repeats = 20", "repeats = 2")
                     + "disturbance_threshold = 1.0\n")  # no other work flags the real cells
    args = ("study", "run", str(study), "--device", "cpu", "--db", str(db))
    code, _, err = run_main(monkeypatch, capsys, *args)
    assert code == 0, err
    store = ResultStore(db)
    [first] = store.query(kind="block")
    for run_id, flag in (("earlier", False), ("killed", True)):  # the first run's own record
        store.add(replace(first, metrics={**first.metrics, "disturbed": flag}, run_id=run_id,
                          uid=uuid.uuid4().hex, id=None))  # may be flagged beside the other
    # test process's launches: an undisturbed run, then the killed run's disturbed cell
    code, _, err = run_main(monkeypatch, capsys, *args, "--retry-disturbed", "1")
    assert code == 0, err
    assert "retry 1/1: 1 cell(s) flagged disturbed, measured again" in err
    cells = store.query(kind="block")
    assert len(cells) == 4 and cells[-1].run_id not in (first.run_id, "earlier", "killed")
    code, _, err = run_main(monkeypatch, capsys, *args, "--retry-disturbed", "1")
    assert code == 0 and "retry" not in err and len(store.query(kind="block")) == 4
