"""Results plumbing: `results merge` (lossless, no duplicates, idempotent, inputs unchanged),
`results export` of the flat table (CSV, flat JSON, Parquet read back, NaN included) and
`results list` filtered by kind, machine, model and status, with its device column.

Databases are real SQLite files: records made through the Recorder from small outcomes on two
machines, one real tiny block sweep (a measured CPU peak and a block cell), and the version-1
store of tests/data (records without uids)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest
from cli_run import run_main as _run_main

from accelbench.bench.outcome import Outcome
from accelbench.bench.recording.recorder import Recorder
from accelbench.config.errors import ConfigError
from accelbench.config.presets import resolve_model
from accelbench.config.record_kinds import metric_names, metrics_dict
from accelbench.config.records.train import TrainMetrics
from accelbench.hardware.detect import resolve_device
from accelbench.hardware.environment import environment
from accelbench.report.export import HEAD_COLUMNS, flat_table, to_parquet
from accelbench.store.fingerprint import machine_fingerprint
from accelbench.store.jsontext import loads
from accelbench.store.merge import merge
from accelbench.store.record import Record, content_uid
from accelbench.store.store import ResultStore
from accelbench.workloads.block.runner import BlockSpec, run_block_sweep

# most tests read a real block sweep's database (a measured peak): one test process (xdist
# group) makes it
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_results_plumbing")]
OLD_DB = Path(__file__).parents[1] / "data" / "results_v1.db"


def _env(device_type: str, name: str, count: int, host: str) -> dict:
    return {"device_type": device_type, "device_name": name, "device_count": count,
            "device_spec_key": None, "device_capability": None, "driver_version": None,
            "cuda_runtime": None, "hip_runtime": None, "torch": "2.13.0+cpu",
            "python": "3.11.7", "cpu": "AMD EPYC", "cpu_count": 2, "torch_threads": 2,
            "host": host, "os": "Linux", "accelbench": "0.1.0", "git_revision": "abc"}


CPU = _env("cpu", "AMD EPYC", 1, "vm")
GPU = _env("cuda", "NVIDIA H100 80GB HBM3", 4, "node[/x]")


def _train(model: str, status: str = "ok", **metrics) -> Outcome:
    values = metrics_dict(TrainMetrics(n_devices=1, tokens_per_s_global=1000.0, mfu=0.25,
                                       few_samples=True, timed_steps=3,
                                       mem_peak_bytes_per_rank=[10, None],
                                       comm_bytes_per_step_per_rank={"dp": 1.5}, **metrics))
    return Outcome("train", status, {"model_name": model, "seq_len": 64, "dtype": "fp32"},
                   values if status != "error" else {}, {"rank0": {"step_times_s": [0.1]}},
                   "rank 1: [/red] failed" if status == "error" else "")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rows(path: Path) -> list[tuple]:
    """(uid, record_json, run_id, kind, status, created_utc, schema_version) of every row, read
    through a read-only connection (uid None in a store that has no uid column)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(results)")}
        uid = "uid" if "uid" in columns else "NULL"
        return conn.execute(f"SELECT {uid}, record_json, run_id, kind, status, created_utc,"
                            " schema_version FROM results ORDER BY id").fetchall()
    finally:
        conn.close()




@pytest.fixture(scope="module")
def block_db(tmp_path_factory) -> Path:
    """A real tiny block sweep on this CPU: its measured peak and one block cell."""
    path = tmp_path_factory.mktemp("block") / "block.db"
    spec = BlockSpec(model=resolve_model("gpt2-tiny"), seq_len=16, batches=(1,),
                     dtypes=("fp32",), device="cpu", repeats=2, warmup=0)
    with Recorder(ResultStore(path), environment(resolve_device("cpu"))) as recorder:
        run_block_sweep(spec, recorder)
    return path


@pytest.fixture
def dbs(tmp_path, block_db) -> tuple[Path, Path, Path]:
    """A: this CPU (small outcomes, a diverged NaN, an error, plus the real block sweep);
    B: a 4-GPU machine, one record copied from A (same uid); old: the version-1 store."""
    a, b, old = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "old.db"
    shutil.copyfile(block_db, a)
    shutil.copyfile(OLD_DB, old)
    with Recorder(ResultStore(a), CPU) as rec:
        rec(_train("gpt2-tiny"))
        rec(_train("gpt2-tiny", "diverged", loss_last=math.nan, diverged_step=2))
        rec(_train("gpt2-tiny", "error"))
    with Recorder(ResultStore(b), GPU) as rec:
        rec(_train("gpt2-xl"))
        rec(_train("gpt2-xl", "oom"))
    shared = ResultStore(a).query(kind="train")[0]
    ResultStore(b).add(shared)  # the same record (uid) in both inputs
    return a, b, old


# ---------------------------------------------------------------------------------- merge

def test_merge_is_lossless_idempotent_and_leaves_the_inputs_unchanged(monkeypatch, capsys,
                                                                       tmp_path, dbs):
    a, b, old = dbs
    before = {p: _sha(p) for p in dbs}
    into = tmp_path / "merged" / "c.db"
    code, out, err = _run_main(monkeypatch, capsys, "results", "merge", str(a), str(b), str(old),
                               "--into", str(into))
    assert code == 0 and out == "", err
    assert f"{b}: 3 records, 2 added, 1 there already" in err
    assert {p: _sha(p) for p in dbs} == before  # opened read-only, never written

    merged = _rows(into)
    uids = [row[0] for row in merged]
    assert len(uids) == len(set(uids)) and all(uids)
    # every record of every input, once, its stored JSON and columns byte for byte
    by_uid = {row[0]: row[1:] for row in merged}
    inputs = _rows(a) + _rows(b) + _rows(old)
    for uid, *stored in inputs:
        key = uid or content_uid(Record.from_json(stored[0]))
        assert by_uid[key] == tuple(stored)
    assert len(merged) == len({row[1] for row in inputs}) == len(_rows(a)) + 2 + 18
    assert all(r[0] is None for r in _rows(old))  # the old store had no uids: now from content

    back = {r.uid or content_uid(r): r for r in ResultStore(into, write=False).query()}
    for source in dbs:
        for r in ResultStore(source, write=False).query():
            assert back[r.uid or content_uid(r)].to_json() == r.to_json()
    diverged = next(r for r in back.values() if r.status == "diverged")
    assert math.isnan(diverged.metrics["loss_last"])

    snapshot = _sha(into)
    for _ in range(2):  # idempotent: merging again adds nothing
        code, _, err = _run_main(monkeypatch, capsys, "results", "merge", str(old), str(b),
                                 str(a), "--into", str(into))
        assert code == 0 and "merged into" in err and ": 0 records added" in err
    assert _rows(into) == merged and {p: _sha(p) for p in dbs} == before
    assert len(_rows(into)) == len(merged) and _sha(into) == snapshot


def test_merge_into_a_copy_of_an_old_store_finds_its_uidless_records(tmp_path, dbs):
    """A target whose own rows have no uid (an old store, rows immutable) still holds them once."""
    _, b, old = dbs
    target = tmp_path / "old-copy.db"
    shutil.copyfile(OLD_DB, target)
    done = merge([old, b], target)
    assert [(m.read, m.added, m.present, m.different) for m in done] == [(18, 0, 18, 0),
                                                                          (3, 3, 0, 0)]
    assert len(_rows(target)) == 21
    again = merge([old, b, target.parent / "old-copy.db"], tmp_path / "d.db")
    assert sum(m.added for m in again) == 21


def test_merge_keeps_the_record_already_there_when_a_uid_is_reused(tmp_path, dbs):
    a, _, _ = dbs
    first = ResultStore(a).query(kind="train")[0]
    other = tmp_path / "other.db"
    ResultStore(other).add(Record(**{**first.__dict__, "id": None, "status": "oom"}))
    into = tmp_path / "c.db"
    merge([a], into)
    done = merge([other], into)
    assert (done[0].added, done[0].present, done[0].different) == (0, 1, 1)
    assert ResultStore(into).query(status="oom") == []


@pytest.mark.parametrize("case,start", [
    ("self", "error: db: '{a}' is the target of the merge"),
    ("missing", "error: db: '{tmp}/none.db' does not exist"),
    ("garbage-target", "error: db: '{tmp}/garbage.db' is not an SQLite file"),
    ("garbage-input", "error: db: '{tmp}/garbage.db' is not an SQLite file"),
    ("folder-target", "error: db: '{tmp}' is a directory"),
])
def test_bad_merges_are_one_line_and_change_nothing(monkeypatch, capsys, tmp_path, dbs, case,
                                                    start):
    a, b, _ = dbs
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all" * 10)
    args = {"self": [a, b, "--into", a], "missing": [a, tmp_path / "none.db", "--into",
                                                     tmp_path / "c.db"],
            "garbage-target": [a, "--into", garbage], "garbage-input": [a, garbage, "--into",
                                                                        tmp_path / "c.db"],
            "folder-target": [a, "--into", tmp_path]}[case]
    before = {p: _sha(p) for p in (a, b, garbage)}
    code, out, err = _run_main(monkeypatch, capsys, "results", "merge", *map(str, args))
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(start.format(a=a, tmp=tmp_path)), err
    assert {p: _sha(p) for p in (a, b, garbage)} == before
    assert not (tmp_path / "c.db").exists()


# ---------------------------------------------------------------------------------- export

def _expected_columns(records: list[Record]) -> list[str]:
    flat = [r.flat() for r in records]
    keys = {k for row in flat for k in row}
    declared = [f"metrics.{n}" for kind in ("block", "train", "peak") for n in metric_names(kind)]
    metrics = [c for c in dict.fromkeys(declared) if c in keys]
    metrics += sorted(k for k in keys if k.startswith("metrics.") and k not in metrics)
    return ([c for c in HEAD_COLUMNS if c in keys]
            + sorted(k for k in keys if k.startswith("spec.")) + metrics
            + sorted(k for k in keys if k.startswith("env.")))


def _same(got, want) -> bool:
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    return got == want


def test_flat_table_has_every_column_in_a_stable_order(dbs):
    a, b, _ = dbs
    records = ResultStore(a).query() + ResultStore(b).query()
    columns, rows = flat_table(records)
    assert columns == _expected_columns(records)
    assert columns[:5] == ["id", "run_id", "kind", "status", "reason"]
    assert columns.index("metrics.peak_flops_per_s_per_device") < columns.index(
        "metrics.forward_time_s_median") < columns.index("metrics.n_devices")
    assert all(list(row) == columns for row in rows)
    assert flat_table(list(reversed(records)))[0] == columns  # not the order records came in
    error = next(row for row in rows if row["status"] == "error")
    assert error["metrics.mfu"] is None and error["reason"] == "rank 1: [/red] failed"


@pytest.mark.parametrize("fmt", ["csv", "flat-json", "parquet"])
def test_export_round_trips_the_flat_table(monkeypatch, capsys, tmp_path, dbs, fmt):
    if fmt == "parquet":
        pytest.importorskip("pyarrow", reason="pyarrow (the 'parquet' extra) is not installed")
    a, b, _ = dbs
    into = tmp_path / "all.db"
    merge([a, b], into)
    records = ResultStore(into).query(kind="train")
    columns, rows = flat_table(records)
    path = tmp_path / f"t.{fmt}"
    code, _, err = _run_main(monkeypatch, capsys, "results", "export", "--format", fmt, "--db",
                             str(into), "--kind", "train", "--output", str(path))
    assert code == 0 and f"wrote {len(records)} records" in err, err
    if fmt == "csv":
        reader = csv.DictReader(io.StringIO(path.read_text()))
        assert reader.fieldnames == columns
        back = list(reader)
        want = [{c: "" if v is None else str(v) for c, v in row.items()} for row in rows]
        assert back == want
        assert next(r for r in back if r["status"] == "diverged")["metrics.loss_last"] == "nan"
    elif fmt == "flat-json":
        json.loads(path.read_text(), parse_constant=lambda name: pytest.fail(name))  # strict
        back = loads(path.read_text())
        assert [list(r) for r in back] == [columns] * len(rows)
        assert all(_same(got[c], want[c]) for got, want in zip(back, rows, strict=True)
                   for c in columns)
    else:
        import pyarrow.parquet as pq
        table = pq.read_table(path)
        assert table.column_names == columns
        back = table.to_pylist()
        assert all(_same(got[c], want[c]) for got, want in zip(back, rows, strict=True)
                   for c in columns)
        types = {name: str(table.schema.field(name).type) for name in columns}
        assert types["id"] == "int64" and types["metrics.mfu"] == "double"
        assert types["metrics.few_samples"] == "bool" and types["status"] == "string"
        assert types["metrics.loss_last"] == "double"  # a real NaN in the diverged row
        assert types["metrics.mem_peak_bytes_per_rank"] == "string"  # JSON text
        assert json.loads(back[0]["metrics.mem_peak_bytes_per_rank"]) == [10, None]
        assert types["metrics.collective_time_source"] == "null"  # nothing measured it
    diverged = next(r for r in rows if r["status"] == "diverged")
    assert math.isnan(diverged["metrics.loss_last"])


def test_export_filters_by_kind_and_status(monkeypatch, capsys, tmp_path, dbs):
    a, _, _ = dbs
    code, out, _ = _run_main(monkeypatch, capsys, "results", "export", "--db", str(a),
                             "--format", "flat-json", "--status", "ok")
    assert code == 0
    rows = loads(out)
    assert {r["status"] for r in rows} == {"ok"} and {r["kind"] for r in rows} == {
        "peak", "block", "train"}
    code, out, _ = _run_main(monkeypatch, capsys, "results", "export", "--db", str(a),
                             "--kind", "block")
    assert code == 0 and [r["kind"] for r in csv.DictReader(io.StringIO(out))] == ["block"]
    code, out, err = _run_main(monkeypatch, capsys, "results", "export", "--db", str(a),
                               "--status", "fine")
    assert code == 2 and err.startswith("error: status: unknown value 'fine'")


def test_parquet_needs_a_file_and_names_its_extra_when_pyarrow_is_missing(monkeypatch, capsys,
                                                                          dbs):
    a, _, _ = dbs
    code, out, err = _run_main(monkeypatch, capsys, "results", "export", "--db", str(a),
                               "--format", "parquet")
    assert code == 2 and out == "" and err.startswith("error: output: parquet is binary")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow fails
    with pytest.raises(ConfigError, match=r"accelbench\[parquet\]") as info:
        to_parquet(ResultStore(a).query())
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------------------- list

def _listed_ids(out: str) -> list[str]:
    return [line.split("│")[1].strip() for line in out.splitlines()
            if line.startswith("│") and line.split("│")[1].strip()]


def test_list_filters_by_kind_machine_model_and_status(monkeypatch, capsys, tmp_path, dbs):
    a, b, _ = dbs
    into = tmp_path / "all.db"
    merge([a, b], into)
    records = ResultStore(into).query()

    def ids(*args):
        code, out, err = _run_main(monkeypatch, capsys, "results", "list", "--db", str(into),
                                   *args)
        assert code == 0 and err == "", err
        return _listed_ids(out), out

    def want(keep):
        return [str(r.id) for r in records if keep(r)]

    gpu = machine_fingerprint(GPU)
    assert ids("--machine", "h100")[0] == want(lambda r: r.environment == GPU)
    assert ids("--machine", gpu[:6])[0] == want(lambda r: r.environment == GPU)
    assert ids("--machine", "node[/x]")[0] == []  # the host is not the name
    assert ids("--model", "gpt2-tiny")[0] == want(lambda r: r.spec.get("model_name") == "gpt2-tiny")
    assert ids("--status", "oom")[0] == want(lambda r: r.status == "oom")
    assert ids("--kind", "peak")[0] == want(lambda r: r.kind == "peak")
    assert ids("--model", "gpt2-xl", "--status", "ok", "--machine", "NVIDIA")[0] == want(
        lambda r: r.spec.get("model_name") == "gpt2-xl" and r.status == "ok")
    cpu = machine_fingerprint(CPU)
    assert ids("--machine", cpu[:8], "--limit", "2")[0] == want(
        lambda r: machine_fingerprint(r.environment) == cpu)[-2:]
    listed, out = ids("--model", "gpt2-xl", "--status", "oom")
    assert listed == want(lambda r: r.spec.get("model_name") == "gpt2-xl" and r.status == "oom")
    row = next(line for line in out.splitlines() if line.startswith(f"│ {listed[0]} "))
    assert "│ NVIDIA H100 80GB HBM3 x4 │" in row and f"│ {gpu[:8]} " in row  # device, machine
    assert " ".join(out.split()).endswith(  # the caption names the machine once
        f"machines: {gpu[:8]} = NVIDIA H100 80GB HBM3 x4, torch 2.13.0, host node[/x]")
    _, out = ids("--status", "error")
    assert "AMD EPYC x1" in out and "rank 1: [/red] failed" in out  # text, never markup
    code, _, err = _run_main(monkeypatch, capsys, "results", "list", "--db", str(into),
                             "--machine", " ")
    assert code == 2 and err.startswith("error: machine: empty")
