"""The database never loses a measurement, and a database that is not ours is never changed.

Real SQLite files in tmp_path, real processes for the race, real permission changes (chmod,
or `chattr +i` when the tests run as root, whom file modes do not stop)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cli_run import run_main as _run_main

from accelbench.bench.outcome import Outcome
from accelbench.bench.recording.recorder import Recorder, RecordsNotStored
from accelbench.config.errors import ConfigError
from accelbench.report.export import to_csv, to_json
from accelbench.store.dbfile import retry_busy
from accelbench.store.jsontext import FLOAT_TAG, dumps, loads
from accelbench.store.record import Record
from accelbench.store.store import ResultStore
from accelbench.store.unsaved import read_records, unsaved_path

ROOT = os.geteuid() == 0
TINY_BLOCK = ["block", "--model", "gpt2-tiny", "--seq", "16", "--dtype", "fp32", "--repeats",
              "1", "--warmup", "0", "--device", "cpu"]




def _strict(text: str):
    """A strict JSON reader: bare NaN/Infinity are refused."""
    def refuse(name):
        raise ValueError(f"not standard JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def _record(**kw) -> Record:
    base = dict(kind="block", status="ok", spec={"batch": 1, "model_name": "gpt2-tiny"},
                environment={"device_name": "cpu"}, metrics={"x": 1.5}, raw={"t": [0.1]},
                run_id="r1")
    return Record(**(base | kw))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _wal_mode(path: Path) -> bool:
    """The file's header says WAL (bytes 18 and 19 are 2)."""
    return path.is_file() and path.read_bytes()[18:20] == b"\x02\x02"


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else -1


def _foreign_wal(path: Path) -> None:
    _foreign(path)
    sqlite3.connect(path).execute("PRAGMA journal_mode=WAL").fetchall()


def _freeze(path: Path, request) -> None:
    """Make a file or folder unwritable for this process: chmod, or chattr +i as root."""
    if not ROOT:
        mode = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        request.addfinalizer(lambda: path.chmod(mode))
        return
    if shutil.which("chattr") is None or subprocess.run(
            ["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("running as root, and chattr +i is not available here")
    request.addfinalizer(lambda: subprocess.run(["chattr", "-i", str(path)], check=False))


def _foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE people (name TEXT)")
    conn.execute("INSERT INTO people VALUES ('ada')")
    conn.commit()
    conn.close()


def _corrupt(path: Path) -> None:
    store = ResultStore(path)
    store.add_many([_record(spec={"i": i, "pad": "x" * 500}) for i in range(100)])
    store.close()
    with path.open("r+b") as f:
        f.seek(4096 * 3 + 100)
        f.write(b"\xff" * 3000)


# ---------------------------------------------------------------- opening checks

BAD_DBS = {
    "directory": (lambda p: p.mkdir(), "is a directory"),
    "garbage": (lambda p: p.write_bytes(os.urandom(300)), "is not an SQLite file"),
    "text": (lambda p: p.write_text("name,value\nada,1\n" * 20), "is not an SQLite file"),
    "foreign": (_foreign, "is an SQLite database of another program (tables: people); "
                          "it was not changed"),
    "foreign-wal": (_foreign_wal, "is an SQLite database of another program (tables: people)"),
    "foreign-results": (lambda p: sqlite3.connect(p).execute("CREATE TABLE results (a, b)"),
                        "is an SQLite database of another program (tables: results)"),
    "corrupt": (_corrupt, "is corrupt (quick_check:"),
}


@pytest.mark.parametrize("case", sorted(BAD_DBS))
@pytest.mark.parametrize("command", ["list", "block"])
def test_a_database_that_is_not_ours_is_refused_unchanged(monkeypatch, capsys, tmp_path, case,
                                                          command):
    path = tmp_path / "x.db"
    make, problem = BAD_DBS[case]
    make(path)
    before = sorted(os.listdir(tmp_path))
    digest = None if path.is_dir() else _sha(path)
    args = ["results", "list"] if command == "list" else [*TINY_BLOCK, "--batch", "1"]
    code, out, err = _run_main(monkeypatch, capsys, *args, "--db", str(path))
    assert code == 2 and out == ""
    assert err.startswith(f"error: db: '{path}' {problem}") and err.count("\n") == 1, err
    assert "allowed:" in err and "results ->" not in err  # no banner: refused before it
    after = set(os.listdir(tmp_path)) - set(before)
    if _wal_mode(path):  # SQLite's read-only connection may leave its empty side files
        after -= {"x.db-shm"} | ({"x.db-wal"} if _size(tmp_path / "x.db-wal") == 0 else set())
    assert after == set()
    if digest:
        assert _sha(path) == digest


def test_a_foreign_database_keeps_its_journal_mode_and_tables(tmp_path):
    path = tmp_path / "other.db"
    _foreign(path)
    for write in (True, False):
        with pytest.raises(ConfigError, match="another program"):
            ResultStore(path, write=write)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["people"]
    conn.close()


@pytest.mark.parametrize("db,problem", [
    ("", "db: empty path"),
    (".", "db: empty path"),
    ("afile/x.db", "db: 'afile/x.db' cannot be made: its folder 'afile' cannot be created"),
])
def test_paths_that_cannot_name_a_database(monkeypatch, capsys, tmp_path, db, problem):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("a file, not a folder")
    code, out, err = _run_main(monkeypatch, capsys, *TINY_BLOCK, "--batch", "1", "--db", db)
    assert code == 2 and out == "" and err.startswith(f"error: {problem}"), err
    assert err.count("\n") == 1 and sorted(os.listdir(tmp_path)) == ["afile"]


def test_a_read_only_database_is_refused_before_measuring(monkeypatch, capsys, tmp_path,
                                                          request):
    path = tmp_path / "ro.db"
    ResultStore(path).add(_record())
    _freeze(path, request)
    code, out, err = _run_main(monkeypatch, capsys, *TINY_BLOCK, "--batch", "1", "--db",
                               str(path))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"error: db: '{path}' cannot be written"), err
    code, out, err = _run_main(monkeypatch, capsys, "results", "list", "--db", str(path))
    assert code == 0 and "gpt2-tiny" in out  # reading needs no write access


def test_a_read_only_folder_is_refused_before_measuring(monkeypatch, capsys, tmp_path,
                                                        request):
    folder = tmp_path / "runs"
    folder.mkdir()
    ResultStore(folder / "old.db").add(_record())
    _freeze(folder, request)
    for name in ("new.db", "old.db"):
        code, out, err = _run_main(monkeypatch, capsys, *TINY_BLOCK, "--batch", "1", "--db",
                                   str(folder / name))
        assert code == 2 and out == "" and err.count("\n") == 1
        assert f"its folder '{folder}' is not writable" in err, err
    code, out, err = _run_main(monkeypatch, capsys, "results", "list", "--db",
                               str(folder / "old.db"))
    assert code == 0 and "gpt2-tiny" in out, err  # read without SQLite's side files


@pytest.mark.skipif(ROOT, reason="root reads every file")
def test_an_unreadable_database_is_refused(monkeypatch, capsys, tmp_path):
    path = tmp_path / "secret.db"
    ResultStore(path).add(_record())
    path.chmod(0)
    try:
        code, _, err = _run_main(monkeypatch, capsys, "results", "list", "--db", str(path))
    finally:
        path.chmod(0o644)
    assert code == 2 and err.startswith(f"error: db: '{path}' cannot be read"), err


def test_bad_input_creates_no_database(monkeypatch, capsys, tmp_path):
    """The command's own checks come first: refused input leaves no file and no folder."""
    db = tmp_path / "new" / "results.db"
    code, _, err = _run_main(monkeypatch, capsys, *TINY_BLOCK, "--batch", "1,-1", "--db",
                             str(db))
    assert code == 2 and err.startswith("error: batch")
    assert not (tmp_path / "new").exists()


def test_reading_a_missing_database_creates_nothing(monkeypatch, capsys, tmp_path):
    db = tmp_path / "none" / "results.db"
    code, out, _ = _run_main(monkeypatch, capsys, "results", "list", "--db", str(db))
    assert code == 0 and "Results" in out
    code, out, _ = _run_main(monkeypatch, capsys, "results", "export", "--format", "json",
                             "--db", str(db))
    assert code == 0 and _strict(out) == []
    assert not (tmp_path / "none").exists()


def test_an_old_store_reads_unchanged_and_takes_uids_on_its_next_record(tmp_path):
    path = tmp_path / "old.db"
    shutil.copyfile(Path(__file__).parents[1] / "data" / "results_v1.db", path)
    digest = _sha(path)
    old = ResultStore(path).query()
    assert _sha(path) == digest and {r.uid for r in old} == {""}
    store = ResultStore(path)
    new = _record()
    assert store.add(new) == store.add(new)  # the same uid is stored once
    assert [r.uid for r in store.query()] == [""] * len(old) + [new.uid]


# ---------------------------------------------------------------- busy, locked, races

_WORKER = r"""
import sys, time
from pathlib import Path
from accelbench.store.record import Record
from accelbench.store.store import ResultStore
db, gate, i = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
(gate.parent / f"ready{i}").touch()
while not gate.exists():
    time.sleep(0.001)
store = ResultStore(db)
for k in range(3):
    store.add(Record(kind="block", status="ok", spec={"proc": i, "k": k}, environment={}))
store.close()
"""


@pytest.mark.slow
def test_six_processes_open_and_write_a_new_database_at_once(tmp_path):
    for trial in range(2):
        db, gate = tmp_path / f"race{trial}" / "results.db", tmp_path / f"go{trial}"
        procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(db), str(gate), str(i)],
                                  stderr=subprocess.PIPE, text=True) for i in range(6)]
        deadline = time.time() + 60
        while len(list(tmp_path.glob("ready*"))) < 6 and time.time() < deadline:
            time.sleep(0.01)
        gate.touch()  # all six open the same new file at this instant
        errors = [p.communicate(timeout=120)[1] for p in procs]
        assert [p.returncode for p in procs] == [0] * 6, errors
        for ready in tmp_path.glob("ready*"):
            ready.unlink()
        records = ResultStore(db, write=False).query()
        assert sorted((r.spec["proc"], r.spec["k"]) for r in records) == \
            sorted((str(i), k) for i in range(6) for k in range(3))


def test_busy_and_locked_are_retried_within_a_bound():
    calls = []

    def flaky():
        calls.append(time.monotonic())
        if len(calls) < 4:
            raise sqlite3.OperationalError("database is locked")
        return "done"

    assert retry_busy(flaky, 5.0) == "done" and len(calls) == 4
    start = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        retry_busy(lambda: (_ for _ in ()).throw(sqlite3.OperationalError("database is locked")),
                   0.3)
    assert time.monotonic() - start < 2.0
    with pytest.raises(sqlite3.OperationalError, match="no such table"):  # not retried
        retry_busy(lambda: (_ for _ in ()).throw(sqlite3.OperationalError("no such table")),
                   30.0)


def test_a_lock_released_within_the_budget_loses_nothing(tmp_path):
    db = tmp_path / "busy.db"
    store = ResultStore(db, busy_budget_s=20)
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(2.5, holder.execute, ("COMMIT",))
    release.start()
    rid = store.add(_record())  # waits past SQLite's own 2 s busy wait, then gets in
    release.join()
    holder.close()
    assert store.get(rid).uid and len(store.query()) == 1


# ---------------------------------------------------------------- durability

@pytest.mark.slow
def test_the_db_file_alone_holds_every_record_after_the_sweep(monkeypatch, capsys, tmp_path,
                                                               quick_peak):
    db = tmp_path / "sweep.db"
    code, _, err = _run_main(monkeypatch, capsys, *TINY_BLOCK, "--batch", "1,2", "--db",
                             str(db), "--json")
    assert code == 0, err
    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0
    alone = tmp_path / "copy" / "sweep.db"
    alone.parent.mkdir()
    shutil.copyfile(db, alone)  # the .db alone, no -wal, no -shm
    records = ResultStore(alone, write=False).query()
    assert [r.kind for r in records] == ["peak", "block", "block"]
    assert records == ResultStore(db, write=False).query()


_KILLED = r"""
import os, signal, sys
from accelbench.store.record import Record
from accelbench.store.store import ResultStore
store = ResultStore(sys.argv[1])
for k in range(3):
    store.add(Record(kind="block", status="ok", spec={"k": k}, environment={}))
reader = ResultStore(sys.argv[1])  # another open handle, as a concurrent reader would be
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow
def test_records_are_in_the_db_file_even_after_sigkill(tmp_path):
    db = tmp_path / "killed.db"
    proc = subprocess.run([sys.executable, "-c", _KILLED, str(db)], timeout=60)
    assert proc.returncode == -signal.SIGKILL
    alone = tmp_path / "copy.db"
    shutil.copyfile(db, alone)
    assert [r.spec["k"] for r in ResultStore(alone, write=False).query()] == [0, 1, 2]


# ---------------------------------------------------------------- non-finite floats

def _diverged() -> Outcome:
    return Outcome(kind="train", status="diverged",
                   spec={"model_name": "gpt2-tiny", "lr": 1e9},
                   metrics={"loss_first": 10.5, "loss_last": math.nan, "grad_norm": math.inf,
                            "tflops": -math.inf, "diverged_step": 3},
                   raw={"rank0": {"loss": [10.5, math.inf, math.nan]}},
                   reason="loss is nan at step 3")


def _check_diverged(data: dict) -> None:
    m, loss = data["metrics"], data["raw"]["rank0"]["loss"]
    assert m["loss_first"] == 10.5 and math.isnan(m["loss_last"])
    assert m["grad_norm"] == math.inf and m["tflops"] == -math.inf
    assert loss[:2] == [10.5, math.inf] and math.isnan(loss[2])


def test_non_finite_floats_are_standard_json_and_read_back_exactly(monkeypatch, capsys,
                                                                   tmp_path):
    db = tmp_path / "nan.db"
    recorder = Recorder(ResultStore(db), {"device_name": "cpu"})
    record = recorder(_diverged())
    recorder.close()
    stored = sqlite3.connect(db).execute("SELECT record_json FROM results").fetchone()[0]
    assert "NaN" not in stored and "Infinity" not in stored
    assert _strict(stored)["metrics"]["loss_last"] == {FLOAT_TAG: "nan"}
    back = ResultStore(db).get(record.id)
    _check_diverged(back.__dict__)
    code, out, _ = _run_main(monkeypatch, capsys, "results", "show", str(record.id), "--db",
                             str(db))
    assert code == 0 and _strict(out)["metrics"]["grad_norm"] == {FLOAT_TAG: "inf"}
    _check_diverged(loads(out))
    code, out, _ = _run_main(monkeypatch, capsys, "results", "export", "--format", "json",
                             "--db", str(db))
    assert code == 0 and len(_strict(out)) == 1
    _check_diverged(loads(out)[0])
    row = next(csv.DictReader(io.StringIO(to_csv(ResultStore(db).query()))))
    assert row["metrics.loss_last"] == "nan" and row["metrics.grad_norm"] == "inf"
    _strict(to_json([back]))
    assert dumps({"a": [math.nan]}) == '{"a": [{"__float__": "nan"}]}'


def test_rows_written_with_bare_nan_still_read(tmp_path):
    db = tmp_path / "legacy.db"
    store = ResultStore(db)
    text = json.dumps({**json.loads(_record().to_json()), "metrics": {"loss": math.nan}})
    assert "NaN" in text
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO results (run_id, kind, status, created_utc, schema_version,"
                 " record_json) VALUES ('r', 'block', 'ok', 'now', 2, ?)", (text,))
    conn.commit()
    conn.close()
    assert math.isnan(store.query()[0].metrics["loss"])


# ---------------------------------------------------------------- a write failing mid-sweep

def _freeze_after_first_add(monkeypatch, request, db: Path) -> None:
    add = ResultStore.add_many

    def add_then_freeze(self, records):
        done = add(self, records)
        if not getattr(add_then_freeze, "frozen", False):
            add_then_freeze.frozen = True
            _freeze(db, request)
        return done

    monkeypatch.setattr(ResultStore, "add_many", add_then_freeze)


@pytest.mark.slow
def test_a_database_that_turns_read_only_mid_sweep_loses_nothing(monkeypatch, capsys,
                                                                 tmp_path, request, quick_peak):
    db = tmp_path / "sweep.db"
    _freeze_after_first_add(monkeypatch, request, db)  # after the first record (the peak)
    code, out, err = _run_main(monkeypatch, capsys, *TINY_BLOCK, "--batch", "1,2", "--db",
                               str(db), "--json")
    unsaved = unsaved_path(db)
    assert code == 2
    assert len(_strict(out)) == 3  # the sweep went on: every record is still shown
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"error: db: 2 measured records could not be written to '{db}'")
    assert f"kept in '{unsaved}'" in last and f"accelbench results import {unsaved}" in last
    assert f"warning: db: a block record could not be written to '{db}'" in err
    assert [r.kind for r in ResultStore(db, write=False).query()] == ["peak"]
    kept = read_records(unsaved)
    assert [r.kind for r in kept] == ["block", "block"]
    assert [r.spec["batch"] for r in kept] == [1, 2]
    monkeypatch.undo()
    if ROOT:  # unfreeze now to import (the finalizer does it again, harmlessly)
        subprocess.run(["chattr", "-i", str(db)], check=True)
    else:
        db.chmod(0o644)
    for again in (False, True):
        code, _, err = _run_main(monkeypatch, capsys, "results", "import", str(unsaved), "--db",
                                 str(db))
        assert code == 0
        assert (f"imported {0 if again else 2} records into {db}; "
                f"{2 if again else 0} were there already") in err
    records = ResultStore(db).query()
    assert [r.kind for r in records] == ["peak", "block", "block"]
    assert [r.uid for r in records[1:]] == [r.uid for r in kept]
    assert [r.raw for r in records[1:]] == [r.raw for r in kept]


def test_a_database_locked_past_the_retries_keeps_the_record_beside_it(tmp_path, capsys):
    db = tmp_path / "locked.db"
    recorder = Recorder(ResultStore(db, busy_budget_s=0.3), {"device_name": "cpu"})
    first = recorder(_diverged())
    holder = sqlite3.connect(db, isolation_level=None, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        second = recorder(_diverged())
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert first.id == 1 and second.id is None
    assert "locked" in capsys.readouterr().err
    with pytest.raises(RecordsNotStored, match=r"1 measured record could not be written"):
        recorder.close()
    kept = read_records(unsaved_path(db))
    assert [r.uid for r in kept] == [second.uid]
    _check_diverged(kept[0].__dict__)


def test_when_even_the_unsaved_file_fails_the_record_goes_to_stderr(tmp_path, capsys,
                                                                    request):
    db = tmp_path / "full.db"
    recorder = Recorder(ResultStore(db), {"device_name": "cpu"})
    unsaved_path(db).mkdir()  # the unsaved file cannot be opened
    _freeze(db, request)
    record = recorder(_diverged())
    err = capsys.readouterr().err
    line = next(line for line in err.splitlines() if line.startswith("{"))
    assert Record.from_json(line).uid == record.uid
    _check_diverged(loads(line))
    with pytest.raises(RecordsNotStored, match="printed on stderr as JSON"):
        recorder.close()


def test_recorder_as_a_context_manager_closes_and_reports(tmp_path):
    db = tmp_path / "ctx.db"
    with Recorder(ResultStore(db), {"device_name": "cpu"}) as recorder:
        recorder(_diverged())
    assert len(ResultStore(db).query()) == 1


# ---------------------------------------------------------------- import and results commands

def test_import_takes_an_export_and_refuses_a_bad_file(monkeypatch, capsys, tmp_path):
    src, dst = tmp_path / "a.db", tmp_path / "b.db"
    Recorder(ResultStore(src), {"device_name": "cpu"})(_diverged())
    export = tmp_path / "a.json"
    code, _, _ = _run_main(monkeypatch, capsys, "results", "export", "--format", "json",
                           "--db", str(src), "--output", str(export))
    assert code == 0
    for _ in range(2):
        code, _, err = _run_main(monkeypatch, capsys, "results", "import", str(export),
                                 "--db", str(dst))
        assert code == 0, err
    assert [r.uid for r in ResultStore(dst).query()] == [r.uid for r in ResultStore(src).query()]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(_record().to_json() + "\n{\"kind\": \"block\"\n")
    code, out, err = _run_main(monkeypatch, capsys, "results", "import", str(bad), "--db",
                               str(dst))
    assert code == 2 and err.startswith(f"error: FILE: '{bad}' line 2 is not JSON")
    assert len(ResultStore(dst).query()) == 1  # nothing of a refused file was imported


@pytest.mark.parametrize("args,start", [
    (["list", "--limit", "-1"], "error: limit: must be at least 1, got -1 (allowed: >= 1)"),
    (["list", "--limit", "0"], "error: limit: must be at least 1, got 0"),
    (["export", "--output", "{tmp}/missing/x.csv"], "error: output: '{tmp}/missing/x.csv': "
                                                    "folder '{tmp}/missing' does not exist"),
    (["export", "--output", "{tmp}"], "error: output: '{tmp}' is a directory"),
    (["import", "{tmp}/nothing.jsonl"], "error: FILE: '{tmp}/nothing.jsonl' cannot be read"),
    (["import", "{tmp}"], "error: FILE: '{tmp}' is a directory"),
])
def test_bad_values_of_results_commands_are_one_line(monkeypatch, capsys, tmp_path, args,
                                                     start):
    args = [a.format(tmp=tmp_path) for a in args]
    code, out, err = _run_main(monkeypatch, capsys, "results", *args)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(start.format(tmp=tmp_path)), err


def test_text_from_records_and_paths_prints_as_text(monkeypatch, capsys, tmp_path):
    db = tmp_path / "runs[/x]" / "r[bold].db"
    ResultStore(db).add(_record(status="error", reason="rank 1: [/red] failed",
                                spec={"model_name": "m[/x]", "batch": 1}))
    code, out, err = _run_main(monkeypatch, capsys, "results", "list", "--db", str(db))
    assert code == 0 and "m[/x]" in out and err == ""
    code, out, _ = _run_main(monkeypatch, capsys, "results", "show", "1", "--db", str(db))
    assert code == 0 and _strict(out)["reason"] == "rank 1: [/red] failed"
    code, _, err = _run_main(monkeypatch, capsys, "results", "export", "--db", str(db),
                             "--output", str(db.parent / "o[bold]x[red].csv"))
    assert code == 0 and "o[bold]x[red].csv" in err, err
    code, _, err = _run_main(monkeypatch, capsys, "results", "list", "--db",
                             str(db.parent / "[/x]"))
    assert code == 0  # a missing file reads as empty; the path was never markup
