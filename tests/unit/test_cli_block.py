"""The block command end to end: bad input is one line and exit 2; a killed sweep keeps rows."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from cli_run import run_main as _run_main

from accelbench.store.store import ResultStore


@pytest.mark.parametrize("args,field", [
    (["--model", "gpt5"], "model: unknown preset 'gpt5'"),
    (["--dtype", "fp64"], "dtype: unknown value 'fp64' (allowed: fp32, fp16, bf16)"),
    (["--model", "custom:layers=2,heads=5,hidden=64"], "model.n_head: 5 heads do not divide"),
    (["--batch", "8,-1"], "batch: must be positive"),
    (["--seq", "0"], "seq: must be a positive number"),
    (["--model", "gpt2:layers=0"], "model.n_layer: must be a positive number"),
    (["--device", "tpu"], "device: unknown device 'tpu'"),
    (["--mem-limit", "lots"], "mem-limit: cannot read size"),
    (["--mem-limit", "1e"], "mem-limit: cannot read size '1e' (allowed: a number with B"),
    (["--mem-limit", "0.5B"], "mem-limit: must be at least one byte"),
    (["--device", "cpu:abc"], "device: cannot read 'cpu:abc'"),
    (["--device", "cpu:3"], "device: 'cpu:3' names device 3 but there are 1"),
    (["--compile", "--warmup", "0"], "warmup: --compile needs at least 1 warm-up"),
])
def test_bad_input_is_one_line_and_exit_2(monkeypatch, capsys, args, field):
    code, out, err = _run_main(monkeypatch, capsys, "block", *args)
    assert code == 2
    assert err.startswith(f"error: {field}") and err.count("\n") == 1
    assert out == ""


@pytest.mark.parametrize("args,start", [
    (["block", "--bogus"], "error: No such option"),  # click 8.3+ words the rest otherwise
    (["train", "--steps", "abc"], "error: Invalid value for '--steps'"),
    (["train", "--steps"], "error: Option '--steps' requires an argument"),
    (["frobnicate"], "error: No such command 'frobnicate'"),
])
def test_parser_errors_are_one_line_and_exit_2(monkeypatch, capsys, args, start):
    """The parser's own errors (wrong type, unknown option) read like ours: no boxed text."""
    code, out, err = _run_main(monkeypatch, capsys, *args)
    assert code == 2 and out == ""
    assert err.startswith(start) and err.count("\n") == 1


def test_help_and_a_plain_run_exit_0(monkeypatch, capsys):
    code, out, _ = _run_main(monkeypatch, capsys, "block", "--help")
    assert code == 0 and "Usage" in out
    code, out, _ = _run_main(monkeypatch, capsys, "plan", "--model", "gpt2", "--device",
                             "a100-80gb", "--nodes", "1", "--global-batch", "8", "--seq", "512",
                             "--json")
    assert code == 0 and out.lstrip().startswith(("{", "["))


def test_block_json_output_and_results_commands(monkeypatch, capsys, tmp_path, quick_peak):
    db = str(tmp_path / "cli.db")
    code, out, err = _run_main(monkeypatch, capsys, "block", "--model", "gpt2-tiny", "--seq",
                               "16", "--batch", "1", "--dtype", "fp32", "--repeats", "2",
                               "--warmup", "0", "--device", "cpu", "--db", db, "--json")
    assert code == 0
    records = json.loads(out)  # stdout holds the JSON alone: the table went to stderr
    assert [r["kind"] for r in records] == ["peak", "block"]  # the CPU's measured peak first
    records = records[1:]
    assert records[0]["status"] == "ok" and records[0]["spec"]["model_name"] == "gpt2-tiny"
    assert "fwd ms" in err
    code, out, _ = _run_main(monkeypatch, capsys, "results", "show", str(records[0]["id"]),
                             "--db", db)
    assert code == 0 and json.loads(out)["metrics"] == records[0]["metrics"]
    code, out, _ = _run_main(monkeypatch, capsys, "results", "export", "--format", "csv",
                             "--db", db)
    assert code == 0 and out.splitlines()[0].startswith("id,run_id,kind,status")
    code, _, err = _run_main(monkeypatch, capsys, "results", "export", "--format", "xml",
                             "--db", db)
    assert code == 2 and "format" in err


def test_tables_on_stdout_messages_on_stderr_and_paths_are_not_markup(monkeypatch, capsys,
                                                                      tmp_path, quick_peak):
    """`accelbench results list | grep ...` works: a command's table is on stdout, the banner on
    stderr; a path that reads like rich markup is printed as it is."""
    db = tmp_path / "a[/x][bold]" / "cli.db"
    db.parent.mkdir(parents=True)
    code, out, err = _run_main(monkeypatch, capsys, "block", "--model", "gpt2-tiny", "--seq",
                               "16", "--batch", "1", "--dtype", "fp32", "--repeats", "2",
                               "--warmup", "0", "--device", "cpu", "--db", str(db))
    assert code == 0, err
    assert "gpt2-tiny block, seq 16" in out and "fwd ms" in out and "fwd ms" not in err
    assert "gpt2-tiny block, seq 16 on " in err and str(db) in err
    code, out, err = _run_main(monkeypatch, capsys, "results", "list", "--db", str(db))
    assert code == 0 and err == ""
    assert [line for line in out.splitlines() if "gpt2-tiny" in line and "ok" in line]


def test_hw_prints_its_table_on_stdout(monkeypatch, capsys):
    code, out, err = _run_main(monkeypatch, capsys, "hw", "--device", "cpu")
    assert code == 0 and err == ""
    assert "Dense peak TFLOPS" in out and "h100-sxm" in out and "detected:" in out


@pytest.mark.slow
def test_sigkill_midway_keeps_every_measured_cell(tmp_path):
    db = tmp_path / "killed.db"
    cmd = [sys.executable, "-m", "accelbench.cli.main", "block", "--model", "gpt2-tiny",
           "--seq", "32", "--batch", ",".join(str(b) for b in range(1, 41)), "--dtype", "fp32",
           "--repeats", "20", "--warmup", "1", "--trials", "1", "--device", "cpu",
           "--db", str(db)]  # one trial: a cell is stored as it is measured, not all at the end
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.time() + 90
    rows = 0
    while time.time() < deadline and rows < 3:  # the peak's record and two cells
        time.sleep(0.2)
        if db.exists():
            try:
                rows = len(ResultStore(db).query())
            except Exception:  # noqa: BLE001 - the file may be mid-creation
                rows = 0
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert rows >= 3, "the sweep wrote too few rows before the deadline"
    kept = ResultStore(db).query()
    assert len(kept) >= rows and len(kept) < 40
    assert all(r.status == "ok" and (r.kind == "peak" or r.raw["forward"]) for r in kept)


@pytest.mark.slow  # starts accelbench as a process and signals it
def test_sigint_midway_says_what_was_kept_as_train_does(tmp_path):
    """Ctrl-C during `accelbench block`: exit 130 and train's one line of what the store kept
    (results.interrupted). The signal is sent once the store holds the CPU peak and a first
    cell, so the sweep's handler is in place; 40 cells of 20 repeats are still to run then."""
    db = tmp_path / "interrupted.db"
    cmd = [sys.executable, "-m", "accelbench.cli.main", "block", "--model", "gpt2-tiny",
           "--seq", "32", "--batch", ",".join(str(b) for b in range(1, 41)), "--dtype", "fp32",
           "--repeats", "20", "--warmup", "1", "--trials", "1", "--device", "cpu",
           "--db", str(db)]  # one trial: a cell is stored as it is measured, not all at the end
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.time() + 90
    rows = 0
    while time.time() < deadline and rows < 2 and proc.poll() is None:
        time.sleep(0.2)
        if db.exists():
            try:
                rows = len(ResultStore(db, write=False).query())
            except Exception:  # noqa: BLE001 - the file may be mid-creation
                rows = 0
    assert rows >= 2, "the sweep wrote too few rows before the deadline"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    cells = [r for r in ResultStore(db, write=False).query() if r.kind == "block"]
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"interrupted by SIGINT: {len(cells)} finished cell(s) recorded in "
                           f"{db}; lost: "), err
    assert line.endswith(("fp32)", "nothing (no trial was running)"))
    assert 1 <= len(cells) < 40 and all(r.status == "ok" for r in cells)
    assert "Traceback" not in err and out == ""  # no table: the sweep did not finish
