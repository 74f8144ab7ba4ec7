"""The interrupted line counts what the store holds: a SIGINT that lands after a record's
write and before the recorder's bookkeeping once made `accelbench block` say '0 cell(s)
recorded' over a database holding one (seen under load in test_cli_block)."""

from __future__ import annotations

import signal

from accelbench.bench.outcome import Outcome
from accelbench.bench.recording.interrupted import CellSeen, stopped_sweep
from accelbench.bench.recording.recorder import Recorder
from accelbench.parallel.procs import Interrupted
from accelbench.store.store import ResultStore


def test_a_cell_written_before_the_bookkeeping_is_counted(tmp_path):
    db = tmp_path / "r.db"
    recorder = Recorder(ResultStore(db), {"device_type": "cpu"})
    recorder(Outcome("block", "ok", {"batch": 1}))
    recorder(Outcome("block", "ok", {"batch": 2}))
    recorder.records.pop()  # the signal arrived between the write and the append
    seen = CellSeen(lambda i, total, label: None)
    seen(2, 4, "batch 3")
    line = stopped_sweep(Interrupted(signal.SIGINT), recorder, seen).line
    assert line == (f"interrupted by SIGINT: 2 finished cell(s) recorded in {db}; lost: "
                    "cell 3/4 (batch 3), which was running in this process")


def test_another_run_in_the_same_store_is_not_counted(tmp_path):
    db = tmp_path / "r.db"
    Recorder(ResultStore(db), {"device_type": "cpu"})(Outcome("block", "ok", {"batch": 9}))
    recorder = Recorder(ResultStore(db), {"device_type": "cpu"})
    seen = CellSeen(lambda i, total, label: None)
    line = stopped_sweep(Interrupted(signal.SIGINT), recorder, seen).line
    assert line.startswith("interrupted by SIGINT: 0 finished cell(s) recorded")
    assert line.endswith("lost: nothing (no cell was running)")
