"""Launched cells when things go wrong, with real ranks under torchrun (gloo on the CPU): Ctrl-C
and SIGTERM to `accelbench`, its parent killed with SIGKILL, a stopped rank, a rank that dies.

Faults are injected with ACCELBENCH_TEST_FAULT=<action>:<rank>:<step or phase> (read by the
launched rank: bench/train/fault_injection.py `with_test_fault`); `wait` holds a rank until the test
creates the file `release` in the cell's folder, so a cell cannot finish before the signal the
test sends, on a machine of any speed or load. Every process of a test carries a
marker in its environment, so a test finds what it left running; each test also checks that no
cell folder and no temporary folder is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import closing
from pathlib import Path

import pytest

from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.recording.pending import recover
from accelbench.bench.train.fault_injection import TEST_RELEASE_FILE
from accelbench.bench.train.spec import TrainSpec
from accelbench.bench.train.sweep import run_train_sweep
from accelbench.config.presets import get_preset
from accelbench.parallel.watchdog import read_heartbeats
from accelbench.store.store import ResultStore
from tests.seeded_peak import seed_peak

pytestmark = pytest.mark.dist
TINY = get_preset("gpt2-tiny").with_changes(n_layer=2, vocab_size=1024, n_positions=64)
CLI_ARGS = ["train", "--model", "gpt2-tiny:n_layer=2,vocab_size=1024,n_positions=64", "--seq",
            "16", "--warmup-steps", "1", "--dtype", "fp32", "--device", "cpu", "--nproc", "2",
            "--quiet", "--cell-timeout", "120"]
MARKER = "ACCELBENCH_TEST_MARKER"


def _marked(marker: str) -> list[int]:
    """Live processes whose environment carries this test's marker."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"{MARKER}={marker}".encode() not in (entry / "environ").read_bytes():
                continue
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2] not in "ZX":
            found.append(int(entry.name))
    return found


def _gone_within(marker: str, limit_s: float) -> float:
    """Seconds until no marked process is left (fails the test past limit_s)."""
    start = time.monotonic()
    while _marked(marker):
        assert time.monotonic() - start < limit_s, f"still running: {_marked(marker)}"
        time.sleep(0.2)
    return time.monotonic() - start


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """This test's marker, database, pending folder and temporary folder."""
    marker, tmp = uuid.uuid4().hex, tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv(MARKER, marker)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    yield marker, tmp_path / "results.db", tmp
    _gone_within(marker, 20)
    assert not list((tmp_path / "accelbench-pending").glob("cell-*")), "a cell folder was left"
    assert not list(tmp.iterdir()), "a temporary file or folder was left"


def _cli(db: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "accelbench.cli.main", *CLI_ARGS, "--db",
                             str(db), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {})})


def _wait_for(predicate, limit_s: float = 90) -> None:
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < limit_s
        time.sleep(0.1)


def _cell_folder(db: Path, n: int, trial: int | None = None) -> Path | None:
    """The launched cell of micro-batch n (its trial `trial`, 0-based, of several), once its
    folder and launch file are there."""
    for folder in (db.parent / "accelbench-pending").glob("cell-*"):
        try:
            launch = json.loads((folder / "launch.json").read_text())
        except (OSError, ValueError):  # not written yet
            continue
        if f" mb {n} " in f" {launch['label']} " and (trial is None or
                                                       launch.get("trial", [0])[0] == trial):
            return folder
    return None


def _waiting(db: Path, n: int, trial: int | None = None) -> bool:
    """Rank 1 of micro-batch n's cell has reached step 2, where its `wait` fault holds it."""
    folder = _cell_folder(db, n, trial)
    return folder is not None and read_heartbeats(folder / "heartbeat").get(1, {}).get(
        "step") == 2


def _release(db: Path, n: int, trial: int | None = None) -> bool:
    """Let micro-batch n's cell go on past its `wait` fault (True once done)."""
    folder = _cell_folder(db, n, trial)
    if folder is not None:
        (folder / TEST_RELEASE_FILE).touch()
    return folder is not None


def _trial_rows(db: Path) -> int:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT count(*) FROM trials").fetchone()[0]


def _recorded(db: Path, kind: str) -> int:
    return len(ResultStore(db).query(kind=kind)) if db.exists() else 0


def _spec(**changes) -> TrainSpec:
    base = dict(model=TINY, seq_lens=(16,), micro_batches=(1,), gas=(1,), dtypes=("fp32",),
                steps=4, warmup_steps=1, device="cpu", nproc=2, cell_timeout_s=120, trials=1,
                peaks=(SweepPeak("fp32", 1e11, "fp32", "given"),))  # no GEMM peak measured
    return TrainSpec(**{**base, **changes})


@pytest.mark.parametrize("sig, batches, trials, code", [(signal.SIGINT, "1,2", 1, 130),
                                                        (signal.SIGTERM, "1", 2, 143)])
def test_a_signal_stops_the_ranks_records_the_cell_and_says_what_was_kept(isolated, sig,
                                                                          batches, trials, code):
    """Every launch's rank 1 waits at step 2 until the test releases it: the cells (or trials)
    before the last are released and finish; the last one cannot finish before the signal,
    however slow or loaded the machine (events, not timing). With two trials the cell is
    recorded with its finished trial, and a rerun launches only the missing one."""
    marker, db, _ = isolated
    seed_peak(db)  # no GEMM peak measured by either run (the killed parent's test measures one)
    cells = len(batches.split(","))
    proc = _cli(db, "--micro-batch", batches, "--steps", "4", "--trials", str(trials),
                env={"ACCELBENCH_TEST_FAULT": "wait:1:2"})
    for n in range(1, cells):
        _wait_for(lambda n=n: _release(db, n))
    last = trials - 1 if trials > 1 else None
    if trials > 1:
        _wait_for(lambda: _release(db, cells, 0))
    _wait_for(lambda: _waiting(db, cells, last))
    sent = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    stopped_s = time.monotonic() - sent
    assert proc.returncode == code, err
    assert stopped_s < 15 and not _marked(marker)
    said = [line for line in err.splitlines() if line.startswith("interrupted")]
    label = f"seq 16 mb {cells} gas 1 fp32 recompute none on 2 processes"
    running = label if trials == 1 else f"{label}, trial {trials}/{trials}"
    assert said == [f"interrupted by {sig.name}: {cells - 1} finished cell(s) and 1 interrupted "
                    f"cell(s) with {trials - 1} of their {trials} trial(s) recorded in {db}; "
                    f"lost: the running trial ({running})"]
    assert err.rstrip().endswith(said[0]) and out == ""
    records = ResultStore(db).query(kind="train")
    assert [r.status for r in records] == ["ok"] * (cells - 1) + ["interrupted"]
    assert records[-1].reason.startswith(f"interrupted by {sig.name} after")
    assert records[-1].spec["layout"]["dp"] == 2 and records[-1].spec["world_size"] == 2
    if trials == 1:
        return
    assert records[-1].metrics["trials"] == 1 and _trial_rows(db) == 1
    resumed = _cli(db, "--micro-batch", batches, "--steps", "4", "--trials", str(trials))
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    final = ResultStore(db).query(kind="train")[-1]
    assert final.status == "ok" and final.metrics["trials"] == 2, final.reason
    assert _trial_rows(db) == 2 and len(set(final.raw["trial_runs"])) == 2  # one launch more
    assert "1 trial(s) of unfinished cells kept by an earlier run" in err


def test_a_killed_parent_leaves_no_process_and_its_finished_cell_is_recovered(isolated):
    """Rank 0 has written the outcome and holds (a slow teardown) when the parent is killed:
    agent and ranks follow it within seconds, and the next run records the measurement."""
    marker, db, _ = isolated
    proc = _cli(db, "--micro-batch", "1", "--steps", "3", "--trials", "1",
                env={"ACCELBENCH_TEST_FAULT": "hold:0:outcome written"})
    pending = db.parent / "accelbench-pending"
    _wait_for(lambda: list(pending.glob("cell-*/outcome.json")))
    proc.kill()
    proc.communicate()
    assert _gone_within(marker, 20) < 20
    assert _recorded(db, "train") == 0
    [record] = recover(ResultStore(db))
    assert record.status == "ok" and record.metrics["tokens_per_s_global"] > 0
    assert record.run_id == ResultStore(db).query(kind="peak")[0].run_id  # the dead run's id
    assert "finished after the accelbench process" in record.reason
    assert recover(ResultStore(db)) == [] and _recorded(db, "train") == 1


def test_a_rank_stopped_before_its_first_heartbeat_is_a_hang(isolated, monkeypatch):
    """Rank 1 stops itself before it writes a heartbeat; rank 0 waits for it in the group's
    start. The watchdog judges rank 1 from the launch's start and names it hung, stopped
    (not a SIGKILL's error: it is accelbench that kills the stopped rank)."""
    monkeypatch.setenv("ACCELBENCH_TEST_FAULT", "stop:1:before")
    start = time.monotonic()
    outcome = run_train_sweep(_spec(hang_timeout_s=5), lambda o: None)[0]
    wall_s = time.monotonic() - start
    assert outcome.status == "timeout", outcome.reason
    assert outcome.reason.startswith("rank 1: hung: no rank made progress for ")
    assert "rank 1 (process stopped), no heartbeat in the " in outcome.reason
    assert "SIGKILL" not in outcome.reason and wall_s < 60


def test_a_killed_agent_is_recorded_as_that_with_its_signal(isolated):
    """The torchrun agent of a running cell is killed (SIGKILL, by someone else): the cell is
    recorded as that, its ranks end with it, and the sweep goes on to its end."""
    marker, db, _ = isolated
    seed_peak(db)
    proc = _cli(db, "--micro-batch", "1", "--steps", "4", "--trials", "1",
                env={"ACCELBENCH_TEST_FAULT": "wait:1:2"})
    _wait_for(lambda: _waiting(db, 1))
    [agent] = [pid for pid in _marked(marker) if b"accelbench.parallel.torchrun_launch\0agent"
               in Path(f"/proc/{pid}/cmdline").read_bytes()]
    os.kill(agent, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err
    [record] = ResultStore(db).query(kind="train")
    assert record.status == "error"
    assert record.reason == ("the torchrun agent was killed by SIGKILL (signal 9), sent by "
                             "another process; its ranks ended with it")


def test_a_stopped_rank_is_found_by_the_watchdog_and_named(isolated, monkeypatch):
    monkeypatch.setenv("ACCELBENCH_TEST_FAULT", "stop:1:2")
    start = time.monotonic()
    outcome = run_train_sweep(_spec(hang_timeout_s=5), lambda o: None)[0]
    wall_s = time.monotonic() - start
    assert outcome.status == "timeout"
    assert outcome.reason.startswith("rank 1: hung: no rank made progress for ")
    assert "rank 1 (process stopped), last heartbeat 'step 2: data'" in outcome.reason
    assert "rank 0, last heartbeat 'step 2: " in outcome.reason
    assert wall_s < 60 and outcome.spec["hang_timeout_s"] == 5


@pytest.mark.parametrize("fault, reason", [
    ("kill:1:2", "rank 1: killed by SIGKILL (signal 9)"),
    ("raise:1:2", "rank 1: RuntimeError: boom"),
])
def test_a_dead_rank_is_recorded_with_its_own_signal_or_exception(isolated, monkeypatch, fault,
                                                                  reason):
    monkeypatch.setenv("ACCELBENCH_TEST_FAULT", fault)
    outcome = run_train_sweep(_spec(), lambda o: None)[0]
    assert outcome.status == "error" and outcome.reason.startswith(reason), outcome.reason
    assert "Connection closed" not in outcome.reason and "profiler" not in outcome.reason
