"""Finished trials are kept (issue 38): each trial of a cell of several is written to the store's
`trials` table as it ends, a signal records every unfinished cell with the trials it has
('interrupted'), and a resumed sweep measures only the missing trials, so that its final
records equal an uninterrupted sweep's (same cells, same trial counts, the same trial values)
and no trial is measured twice. Real store, real signals (in this process); the cells are
stand-ins whose trial r of cell i measures a known value."""

from __future__ import annotations

import os
import signal
import sqlite3
from contextlib import closing

import pytest

from accelbench.bench.outcome import Outcome
from accelbench.bench.recording.interrupted import SweepInterrupted
from accelbench.bench.recording.session import SweepView, open_recorder, record_sweep
from accelbench.bench.trial_record import combine_timed
from accelbench.bench.trials import CellTrials, interleave
from accelbench.store.store import ResultStore
from accelbench.store.trial_rows import TRIAL_ROWS_KEY

TRIALS = 3
TIMED = {"forward_time_s_median": ("forward_mfu",)}


def _spec(i: int) -> dict:
    return {"workload": "block", "batch": i + 1, "trials": TRIALS}


def _cells(n: int, log: list, stop_at: tuple[int, int, int] | None = None) -> list[CellTrials]:
    """n cells; trial r of cell i measures 1 + i + r/10 and is logged. `stop_at` (signal,
    cell, trial): that signal reaches this process as that trial starts (nothing measured)."""
    def run(i: int, r: int) -> Outcome:
        if stop_at is not None and stop_at[1:] == (i, r):
            os.kill(os.getpid(), stop_at[0])
        log.append((i, r))
        t = 1.0 + i + r / 10
        return Outcome("block", "ok", _spec(i), {"forward_time_s_median": t,
                                                  "forward_mfu": 0.5 / t})

    def finish(trials: list[Outcome]) -> Outcome:
        metrics, values = combine_timed([o.metrics for o in trials], TIMED)
        return Outcome("block", "ok", trials[0].spec,
                       {**trials[0].metrics, **metrics, "trials": len(trials)},
                       {"trial_values": values})

    return [CellTrials(f"batch {i + 1}", lambda r, i=i: run(i, r), finish, "block", _spec(i))
            for i in range(n)]


def _view(notes: list[str]) -> SweepView:
    return SweepView(banner=lambda text: None, cell=lambda i, n, label: None, step=None,
                     failed=lambda record: None, note=notes.append)


def _sweep(cells: list[CellTrials]):
    def sweep(sink, step, progress, skip):
        return interleave(cells, TRIALS, 7, sink, progress)
    return sweep


def _rows(db) -> int:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT count(*) FROM trials").fetchone()[0]


def _final(db) -> dict[int, tuple]:
    """The latest record of each cell: status, trials, per-trial times."""
    latest = {}
    for r in ResultStore(db, write=False).query(kind="block"):
        latest[r.spec["batch"]] = (r.status, r.metrics.get("trials"),
                                   r.raw.get("trial_values", {}).get("forward_time_s_median"))
    return latest


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_sweep_resumes_only_its_missing_trials(tmp_path, sig):
    reference = tmp_path / "whole.db"
    record_sweep(_sweep(_cells(3, [])), open_recorder(reference, "cpu"), _view([]), "t")

    db, log, notes = tmp_path / "r.db", [], []
    with pytest.raises(SweepInterrupted) as caught:  # as cell 1's trial 2 (0-based 1) starts
        record_sweep(_sweep(_cells(3, log, (sig, 1, 1))), open_recorder(db, "cpu"),
                     _view(notes), "t")
    first = list(log)  # round 1 (3 trials), and round 2 up to cell 1
    assert 3 <= len(first) < 6 and _rows(db) == len(first) and (1, 1) not in first
    stopped = ResultStore(db, write=False).query(kind="block")
    assert [r.status for r in stopped] == ["interrupted"] * 3
    assert sum(r.metrics["trials"] for r in stopped) == len(first)
    assert all(len(r.raw[TRIAL_ROWS_KEY]) == r.metrics["trials"] for r in stopped)
    assert caught.value.exit_code == 128 + sig
    assert caught.value.line == (
        f"interrupted by {sig.name}: 0 finished cell(s) and 3 interrupted cell(s) with "
        f"{len(first)} of their 9 trial(s) recorded in {db}; lost: the running trial "
        "(batch 2, trial 2/3)")

    log.clear()
    records = record_sweep(_sweep(_cells(3, log)), open_recorder(db, "cpu"), _view(notes), "t")
    assert not set(log) & set(first) and len(log) == 9 - len(first)  # only the missing ran
    assert sorted(log, key=lambda t: t[1]) == log  # still round by round
    assert [r.status for r in records] == ["ok"] * 3 and _rows(db) == 9
    assert _final(db) == _final(reference)  # same cells, trial counts and trial values
    assert f"{len(first)} trial(s) of unfinished cells kept by an earlier run" in notes[-1]
    rows = sorted(i for r in records for i in r.raw[TRIAL_ROWS_KEY])
    assert rows == list(range(1, 10))  # every kept trial in exactly one final record


def test_a_signal_between_trials_loses_nothing(tmp_path):
    """The signal lands while nothing runs (between two trials): every trial is kept."""
    db, log = tmp_path / "r.db", []
    starts = []

    def sweep(sink, step, progress, skip):
        def told(i, total, label):
            starts.append(label)
            if len(starts) == 3:
                os.kill(os.getpid(), signal.SIGINT)
        return interleave(_cells(2, log), TRIALS, 7, sink, told)

    with pytest.raises(SweepInterrupted) as caught:
        record_sweep(sweep, open_recorder(db, "cpu"), _view([]), "t")
    assert caught.value.line.endswith("with 2 of their 6 trial(s) recorded in "
                                      f"{db}; lost: nothing (no trial was running)")
    assert _rows(db) == len(log) == 2


def test_rerun_measures_every_trial_again(tmp_path):
    db, log = tmp_path / "r.db", []
    with pytest.raises(SweepInterrupted):
        record_sweep(_sweep(_cells(2, log, (signal.SIGINT, 0, 2))), open_recorder(db, "cpu"),
                     _view([]), "t")
    log.clear()
    record_sweep(_sweep(_cells(2, log)), open_recorder(db, "cpu"), _view([]), "t", rerun=True)
    assert len(log) == 6 and _rows(db) == 4 + 6


def test_all_trials_kept_but_no_record_makes_the_record_without_measuring(tmp_path):
    """SIGKILL after a cell's last trial was kept and before its record: the resume makes the
    record from the kept trials alone."""
    db, log = tmp_path / "r.db", []
    recorder = open_recorder(db, "cpu")

    def no_records(sink, step, progress, skip):  # trials kept, every record 'lost'
        return interleave(_cells(1, log), TRIALS, 7, lambda outcome: None, progress)

    record_sweep(no_records, recorder, _view([]), "t")
    assert ResultStore(db, write=False).query(kind="block") == [] and _rows(db) == 3
    log.clear()
    [record] = record_sweep(_sweep(_cells(1, log)), open_recorder(db, "cpu"), _view([]), "t")
    assert log == [] and record.status == "ok" and record.metrics["trials"] == 3


BLOCK = ["block", "--model", "gpt2-tiny", "--seq", "32", "--batch", "1,2", "--dtype", "fp32",
         "--repeats", "3", "--warmup", "1", "--trials", "6", "--device", "cpu"]


def _cells_of(db) -> list[tuple]:
    """The block cells a store holds: batch, status, trials, per-trial times recorded."""
    return sorted((r.spec["batch"], r.status, r.metrics["trials"],
                   len(r.raw["trial_values"]["forward_time_s_median"]), len(r.raw["trial_order"]))
                  for r in ResultStore(db, write=False).query(kind="block"))


@pytest.mark.slow
def test_a_block_sweep_killed_with_sigkill_resumes_to_the_uninterrupted_records(
        tmp_path, monkeypatch, capsys):
    """`accelbench block --trials 6` over two cells, killed (SIGKILL: no handler runs) once it
    has kept two trials: the kept trials are in the store, the rerun measures only the missing
    ones, and its records are an uninterrupted sweep's: same cells, same trial counts; 12
    trials in all, none measured twice."""
    import subprocess
    import sys
    import time

    import torch
    from cli_run import run_main

    db = tmp_path / "killed.db"
    proc = subprocess.Popen([sys.executable, "-m", "accelbench.cli.main", *BLOCK, "--db",
                             str(db)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ,  # this process's threads: the same machine
                                 "OMP_NUM_THREADS": str(torch.get_num_threads())})
    deadline = time.monotonic() + 120
    kept = 0
    while kept < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
        try:
            kept = _rows(db)
        except sqlite3.Error:  # no file or no table yet
            kept = 0
    proc.kill()
    proc.communicate()
    kept = _rows(db)
    assert 2 <= kept < 12, f"{kept} trials kept when killed: the sweep was not stopped midway"
    assert ResultStore(db, write=False).query(kind="block") == []  # no record: SIGKILL

    code, _, err = run_main(monkeypatch, capsys, *BLOCK, "--db", str(db))
    assert code == 0, err
    assert f"{kept} trial(s) of unfinished cells kept by an earlier run" in err
    assert _rows(db) == 12  # each trial measured once
    records = ResultStore(db, write=False).query(kind="block")
    assert sorted(i for r in records for i in r.raw[TRIAL_ROWS_KEY]) == list(range(1, 13))

    whole = tmp_path / "whole.db"
    code, _, err = run_main(monkeypatch, capsys, *BLOCK, "--db", str(whole))
    assert code == 0, err
    assert _cells_of(db) == _cells_of(whole) == [(1, "ok", 6, 6, 6), (2, "ok", 6, 6, 6)]


def test_a_resumed_max_micro_batch_cell_measures_the_micro_batch_its_kept_trials_did():
    """--max-micro-batch: the search is not run again for a cell with kept trials, so every
    trial of the cell measures one micro-batch (and is keyed by the cell as asked)."""
    from types import SimpleNamespace

    from accelbench.bench.train.cell_trials import LocalCell
    from accelbench.bench.train.spec import TrainCell

    cell = TrainCell(seq_len=16, micro_batch=1, gas=1, dtype="fp32", recompute="none")
    local = LocalCell(SimpleNamespace(max_micro_batch=True), cell, None, None, None, {"asked": 1})
    kept = Outcome("train", "ok", {"micro_batch": 12, "micro_batch_search": {"largest": 12}})
    local.adopt([kept])
    assert local.cell.micro_batch == 12 and local.searched
    assert local.search == {"largest": 12}
