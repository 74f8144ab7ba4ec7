"""Resume (issue 12 point 6): a sweep run again skips the cells finished on this machine and
runs only the rest; --rerun measures every cell again. The fingerprint ignores what does not
change a measurement and changes with everything that does."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from accelbench.bench.outcome import Outcome
from accelbench.bench.recording.recorder import Recorder
from accelbench.bench.recording.resume import FinishedCells, Resume
from accelbench.bench.train import launch as launch_mod
from accelbench.bench.train import search as search_mod
from accelbench.bench.train.cell import cell_spec
from accelbench.bench.train.search import SEARCH_KIND, run_longest_seq_sweep
from accelbench.bench.train.sweep import run_local_sweep
from accelbench.bench.train.train_options import build_spec, with_defaults
from accelbench.cli.main import main
from accelbench.config.layout import Layout
from accelbench.hardware.environment import environment
from accelbench.store.fingerprint import (
    FINGERPRINT_KEY,
    FINISHED,
    IGNORED_SPEC_FIELDS,
    MACHINE_FIELDS,
    NOT_MACHINE_FIELDS,
    RETRIED,
    cell_fingerprint,
    machine_fingerprint,
)
from accelbench.store.record import STATUSES
from accelbench.store.store import ResultStore
from accelbench.workloads.scale.runner import ScaleSpec, run_scale

ROOT = Path(__file__).resolve().parents[2]
ENV = {"device_type": "cpu", "device_name": "AMD EPYC", "device_count": 1,
       "device_spec_key": None, "device_capability": None, "driver_version": None,
       "cuda_runtime": None, "hip_runtime": None, "torch": "2.13.0+cpu", "python": "3.11.7",
       "cpu": "AMD EPYC", "cpu_count": 2, "torch_threads": 2, "host": "vm",
       "os": "Linux-6.1-x86_64", "accelbench": "0.1.0", "git_revision": "abc"}
TINY = ["--model", "gpt2-tiny", "--seq", "32", "--warmup-steps", "1", "--dtype", "fp32",
        "--device", "cpu", "--quiet"]


# --- the fingerprint ---------------------------------------------------------------------------

def _spec(**changes):
    spec = build_spec(with_defaults(model="gpt2-tiny", seq="32", micro_batch="1", steps=3,
                                    warmup_steps=1, dtype="fp32", device="cpu"))
    return {**cell_spec(spec, spec.cells()[0], Layout(), "cpu"), **changes}


@pytest.mark.parametrize("changes", [
    {"cell_timeout_s": 5.0}, {"hang_timeout_s": 9.0}, {"device": "cuda:3"},
    {FINGERPRINT_KEY: "0" * 64},
    {"base": {"steps": 3, "peaks": [{"dtype": "fp32", "flops_per_s": 1e12}]}},
])
def test_the_fingerprint_ignores_what_does_not_change_a_measurement(changes):
    base = _spec(base={"steps": 3, "peaks": []})
    assert cell_fingerprint("train", {**base, **changes}, ENV) == \
        cell_fingerprint("train", base, ENV)


@pytest.mark.parametrize("changes", [
    {"steps": 4}, {"seq_len": 64}, {"micro_batch": 2}, {"nproc": 2}, {"dtype": "bf16"},
    {"lr": 1e-3}, {"seed": 1}, {"warmup_steps": 2}, {"data": "default"}, {"tf32": True},
    {"layout": {**Layout(dp=2).to_dict()}}, {"max_micro_batch": True},
    {"mem_limit_bytes": 2**30}, {"seq_search": "longest"},
])
def test_the_fingerprint_changes_with_every_spec_field_that_does(changes):
    assert cell_fingerprint("train", _spec(**changes), ENV) != cell_fingerprint("train", _spec(),
                                                                               ENV)


def test_the_fingerprint_is_stable_across_json_and_names_the_kind():
    spec = _spec()
    assert cell_fingerprint("train", json.loads(json.dumps(spec)), ENV) == \
        cell_fingerprint("train", spec, ENV)
    assert cell_fingerprint("train", spec, ENV) != cell_fingerprint("block", spec, ENV)
    assert len(cell_fingerprint("train", spec, ENV)) == 64


@pytest.mark.parametrize("key,value,same", [
    ("git_revision", "def-dirty", True), ("accelbench", "0.2.0", True),
    ("os", "Linux-6.2-x86_64", True), ("device_spec_key", "h100-sxm", True),
    ("python", "3.11.9", True), ("python", "3.12.1", False), ("torch", "2.14.0", False),
    ("device_name", "NVIDIA H100", False), ("device_count", 2, False), ("host", "node2", False),
    ("cpu", "Intel Xeon", False), ("torch_threads", 1, False), ("driver_version", "550", False),
])
def test_the_machine_part(key, value, same):
    other = {**ENV, key: value}
    assert (machine_fingerprint(other) == machine_fingerprint(ENV)) is same
    assert (cell_fingerprint("train", _spec(), other) ==
            cell_fingerprint("train", _spec(), ENV)) is same


def test_every_environment_field_and_status_is_decided():
    """A new environment field or status must be put in or left out of resume on purpose."""
    env = environment(torch.device("cpu"))
    assert set(env) == set(MACHINE_FIELDS) | set(NOT_MACHINE_FIELDS)
    assert not set(MACHINE_FIELDS) & set(NOT_MACHINE_FIELDS)
    assert set(STATUSES) <= set(FINISHED) | set(RETRIED)
    assert not set(FINISHED) & set(RETRIED)
    assert "cell_timeout_s" in IGNORED_SPEC_FIELDS and "nproc" not in IGNORED_SPEC_FIELDS


# --- the command line ----------------------------------------------------------------------

def _run_main(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["accelbench", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    captured = capsys.readouterr()
    assert exit_info.value.code == 0, captured.err
    return captured.out, captured.err


def _rows(db, kind=None):
    """(id, kind, status) of every stored record, oldest first."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT id, kind, status FROM results ORDER BY id").fetchall()
    return [r for r in rows if kind is None or r[1] == kind]


def _count(db, kind):
    try:
        return len(_rows(db, kind))
    except sqlite3.Error:  # not made yet
        return 0


def _emitted(out, kind):
    return [r["id"] for r in json.loads(out) if r["kind"] == kind]


@pytest.mark.slow
def test_a_killed_train_sweep_resumes_with_one_finished_record_per_cell(tmp_path, monkeypatch,
                                                                         capsys, quick_peak):
    db = tmp_path / "r.db"
    args = ["train", *TINY, "--micro-batch", "1,2,4", "--steps", "3", "--db", str(db),
            "--trials", "1"]  # one trial: each cell is stored as it is measured
    threads = str(torch.get_num_threads())  # as the rerun below: a cell's fingerprint has them
    proc = subprocess.Popen([sys.executable, "-m", "accelbench.cli.main", *args], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "OMP_NUM_THREADS": threads})
    try:
        deadline = time.monotonic() + 120
        while _count(db, "train") < 2:
            assert proc.poll() is None, "the sweep ended before two cells were stored"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    first = _rows(db, "train")
    assert len(first) == 2 and {r[2] for r in first} == {"ok"}
    peaks = _count(db, "peak")

    out, err = _run_main(monkeypatch, capsys, *args, "--json")
    cells = _rows(db, "train")
    assert len(cells) == 3 and cells[:2] == first  # the first two kept, the third measured
    assert _emitted(out, "train") == [r[0] for r in cells]  # the table has every cell
    assert "2 cells skipped (finished on this machine), 1 run" in err
    assert err.count("  skipped seq 32 mb ") == 2
    assert _count(db, "peak") == peaks  # divided by the skipped cells' peak, not measured again

    before = _rows(db)
    out, err = _run_main(monkeypatch, capsys, *args, "--json")
    assert _rows(db) == before  # all finished: nothing measured, not even the CPU peak
    assert "3 cells skipped (finished on this machine), 0 run" in err
    assert _emitted(out, "train") == [r[0] for r in cells]

    _run_main(monkeypatch, capsys, *args, "--rerun")
    assert _count(db, "train") == 6

    changed = ["train", *TINY, "--micro-batch", "1", "--steps", "2", "--db", str(db)]
    _, err = _run_main(monkeypatch, capsys, *changed)
    assert _count(db, "train") == 7 and "skipped" not in err


def _error_record(db, spec, status):
    """A record of `status` for the cell `spec`, on this machine, as a sweep would store it."""
    env = environment(torch.device("cpu"))
    Resume(Recorder(ResultStore(db), env)).sink(Outcome("train", status, spec, reason="injected"))


@pytest.mark.slow
@pytest.mark.parametrize("status", ["error", "timeout"])
def test_a_cell_that_ended_in_error_or_timeout_is_measured_again(tmp_path, monkeypatch, capsys,
                                                                  status, quick_peak):
    db = tmp_path / "r.db"
    _error_record(db, _spec(steps=2, warmup_steps=1), status)
    args = ["train", *TINY, "--micro-batch", "1", "--steps", "2", "--db", str(db)]
    _, err = _run_main(monkeypatch, capsys, *args)
    assert [r[2] for r in _rows(db, "train")] == [status, "ok"] and "skipped" not in err
    _, err = _run_main(monkeypatch, capsys, *args)
    assert len(_rows(db, "train")) == 2 and "1 cell skipped" in err


@pytest.mark.slow
def test_block_resume_rerun_and_a_changed_field(tmp_path, monkeypatch, capsys, quick_peak):
    db = tmp_path / "b.db"
    args = ["block", "--model", "gpt2-tiny", "--seq", "32", "--batch", "1,2", "--dtype", "fp32",
            "--repeats", "2", "--warmup", "1", "--device", "cpu", "--db", str(db)]
    _run_main(monkeypatch, capsys, *args)
    first = _rows(db)
    assert [r[1] for r in first] == ["peak", "block", "block"]

    out, err = _run_main(monkeypatch, capsys, *args, "--json")
    assert _rows(db) == first  # no cell, no peak
    assert "2 cells skipped (finished on this machine), 0 run" in err
    assert _emitted(out, "block") == [r[0] for r in first[1:]]

    _run_main(monkeypatch, capsys, *args, "--rerun")
    assert _count(db, "block") == 4
    _, err = _run_main(monkeypatch, capsys, *args, "--repeats", "3")
    assert _count(db, "block") == 6 and "skipped" not in err


def test_block_does_not_fit_is_finished_and_a_timeout_is_not(tmp_path, monkeypatch, capsys,
                                                              quick_peak):
    db = tmp_path / "b.db"
    args = ["block", "--model", "gpt2-tiny", "--seq", "32", "--batch", "1", "--dtype", "fp32",
            "--repeats", "2", "--warmup", "1", "--device", "cpu", "--db", str(db)]
    _run_main(monkeypatch, capsys, *args, "--mem-limit", "1KiB")
    assert [r[2] for r in _rows(db, "block")] == ["oom"]
    _, err = _run_main(monkeypatch, capsys, *args, "--mem-limit", "1KiB")
    assert len(_rows(db, "block")) == 1 and "(oom, record" in err

    ok = json.loads(_run_main(monkeypatch, capsys, *args, "--json")[0])[-1]
    store, env = ResultStore(db), ok["environment"]
    cells = FinishedCells(store, env)
    assert cells.find("block", ok["spec"]).id is not None
    Resume(Recorder(store, env)).sink(Outcome("block", "timeout", ok["spec"]))  # a later try
    assert FinishedCells(store, env).find("block", ok["spec"]).status == "ok"


# --- every workload asks before it measures ----------------------------------------------------

def _fail(*args, **kwargs):
    raise AssertionError("a finished cell was measured")


def _all_finished(asked):
    """A skip that reports every cell finished (ok), noting what it was asked."""
    def skip(kind, spec):
        asked.append((kind, spec))
        return Outcome(kind, "ok", spec, {"peak_flops_per_s_per_device": 1e12,
                                          "peak_label": "measured peak (record 7)",
                                          "peak_precision": "fp32"})
    return skip


def _tiny_spec(**changes):
    return build_spec(with_defaults(**{"model": "gpt2-tiny", "seq": "64", "micro_batch": "1",
                                       "steps": 2, "warmup_steps": 1, "dtype": "fp32",
                                       "device": "cpu", **changes}))


def test_launched_and_scale_sweeps_skip_without_a_launch_or_a_peak(monkeypatch):
    monkeypatch.setattr(launch_mod, "launch_cell", _fail)  # scale launches through it too
    monkeypatch.setattr(launch_mod, "with_launch_peaks", _fail)
    asked, sunk = [], []
    spec = _tiny_spec(nproc=2, micro_batch="1,2")
    outcomes = launch_mod.run_launched_sweep(spec, sunk.append, skip=_all_finished(asked))
    assert len(outcomes) == 2 and not sunk
    assert [s["world_size"] for _, s in asked] == [2, 2]
    asked.clear()
    outcomes = run_scale(ScaleSpec(_tiny_spec(), (1, 2)), sunk.append,
                         skip=_all_finished(asked))
    assert [o.spec["scale_devices"] for o in outcomes] == [1, 2] and not sunk
    assert [(s["scale_devices"], s["world_size"]) for _, s in asked] == [(1, 1), (2, 2)]


@pytest.mark.slow
def test_searches_are_skipped_whole_and_found_again_by_the_cell_asked(tmp_path, monkeypatch,
                                                                      quick_peak):
    """The longest-sequence and largest-micro-batch cells are stored with the fingerprint of
    the cell as asked (before the search), so a second run skips the search itself."""
    env = environment(torch.device("cpu"))
    db = tmp_path / "s.db"
    longest = _tiny_spec(mem_limit="1.2GiB")
    largest = _tiny_spec(seq="32", max_micro_batch=True, mem_limit="1.1GiB")
    first = Resume(Recorder(ResultStore(db), env))
    run_longest_seq_sweep(longest, first.sink, skip=first.skip)
    run_local_sweep(largest, first.sink, skip=first.skip)
    measured = [r for r in first.records if r.kind == "train"]
    assert [r.status for r in measured] == ["ok", "ok"]
    assert measured[0].spec["seq_len"] > 64 and "seq_search" in measured[0].spec
    assert measured[1].spec["micro_batch"] > 1 and "micro_batch_search" in measured[1].spec

    monkeypatch.setattr(search_mod, "find_longest_seq", _fail)
    monkeypatch.setattr("accelbench.bench.train.cell_trials.find_max_micro_batch", _fail)
    again = Resume(Recorder(ResultStore(db), env))
    before = _rows(db)
    run_longest_seq_sweep(longest, again.sink, skip=again.skip)
    run_local_sweep(largest, again.sink, skip=again.skip)
    assert _rows(db) == before and again.skipped == 2 and again.ran == 0
    assert [r.id for r in again.records] == [r.id for r in measured]
    # a plain cell at the search's start length is another cell
    plain = Resume(Recorder(ResultStore(db), env))
    assert plain.skip("train", cell_spec(longest, longest.cells()[0], Layout(), "cpu")) is None
    assert {r[1] for r in before} >= {SEARCH_KIND, "train"}


@pytest.mark.slow
def test_a_scaling_study_resumes_without_a_launch(tmp_path, monkeypatch, capsys, quick_peak):
    db = tmp_path / "sc.db"
    args = ["scale", *TINY, "--micro-batch", "1", "--steps", "2", "--devices", "1",
            "--db", str(db)]
    _run_main(monkeypatch, capsys, *args)
    first = _rows(db)
    assert [r[1] for r in first] == ["peak", "train", "scale"]
    monkeypatch.setattr(launch_mod, "launch_torchrun", _fail)
    _, err = _run_main(monkeypatch, capsys, *args)
    assert _rows(db) == first  # nothing launched, the summary not stored twice
    assert "1 cell skipped (finished on this machine), 0 run" in err


def test_a_shared_index_sees_the_records_of_the_sweeps_before(tmp_path):
    """A study's sweeps share one index: a sweep's records join it when the sweep ends."""
    store = ResultStore(tmp_path / "i.db")
    cells = FinishedCells(store, ENV)
    spec = _spec()
    first = Resume(Recorder(store, ENV), finished=cells)
    assert first.skip("train", spec) is None
    first.sink(Outcome("train", "diverged", spec))
    assert first.skip("train", spec) is None  # a sweep does not skip its own cells
    for record in first.records:
        cells.add(record)
    second = Resume(Recorder(store, ENV), finished=cells)
    assert second.skip("train", spec).status == "diverged" and second.skipped == 1
