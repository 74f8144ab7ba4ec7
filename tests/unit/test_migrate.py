"""Version-1 records, as the code of commit 06e7e51 wrote them (tests/data/results_v1.db), read
back by the current store as version 2: declared names, the same values, the file untouched."""

import copy
import hashlib
import io
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console

from accelbench.config.record_kinds import SCHEMA_VERSION, metric_names
from accelbench.report.table import block_table, summary_table, train_table
from accelbench.store.migrate import upgrade
from accelbench.store.record import Record
from accelbench.store.store import ResultStore

V1_DB = Path(__file__).parents[1] / "data" / "results_v1.db"

# old name -> new name, written out here rather than taken from the migration under test
RENAMED = {"tokens_per_step": "tokens_per_step_global",
           "model_flops_per_step": "model_flops_per_step_global",
           "hardware_flops_per_step": "hardware_flops_per_step_global",
           "peak_flops_per_s": "peak_flops_per_s_per_device",
           "mem_estimate_bytes": "mem_estimate_bytes_per_rank",
           "step_time_s_per_rank": "step_time_s_median_per_rank",
           "pipeline_bubble_theory": "pipeline_bubble_fraction_theory",
           "samples_global": "samples_per_step_global"}
MEMORY_V1 = {"mem_peak_bytes", "mem_base_bytes", "mem_peak_rank", "mem_peak_bytes_per_rank",
             "mem_base_bytes_per_rank", "mem_peak_bytes_max", "mem_base_bytes_max"}
DUPLICATES_V1 = {"n_ranks", "tokens_global", "step_time_s_median_max_rank"}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def v1_copy(tmp_path):
    """A copy of the fixture (SQLite writes -wal/-shm files beside what it opens)."""
    path = tmp_path / "results_v1.db"
    shutil.copyfile(V1_DB, path)
    return path


def _stored(path: Path) -> dict[int, dict]:
    """The stored JSON of every row, read without the store (read-only)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {rid: {**json.loads(text), "column_version": version} for rid, text, version in
                conn.execute("SELECT id, record_json, schema_version FROM results")}
    finally:
        conn.close()


def _read(path: Path) -> list[Record]:
    store = ResultStore(path)
    try:
        records = store.query()
        assert store.get(records[0].id) == records[0]
        return records
    finally:
        store.close()


def test_the_fixture_is_version_1_of_every_kind(v1_copy):
    stored = _stored(v1_copy)
    assert {d["schema_version"] for d in stored.values()} == {1}
    kinds = sorted(d["kind"] for d in stored.values())
    assert kinds.count("block") == 3 and kinds.count("train") == 6
    assert {"seq-search", "scale"} <= set(kinds)
    assert any(d["spec"].get("world_size") == 2 for d in stored.values())


def test_reading_does_not_change_the_file(v1_copy):
    before = _sha(v1_copy)
    _read(v1_copy)
    _read(v1_copy)
    assert _sha(v1_copy) == before
    assert {d["column_version"] for d in _stored(v1_copy).values()} == {1}


def test_every_block_and_train_record_has_exactly_the_declared_names(v1_copy):
    records = _read(v1_copy)
    assert {r.schema_version for r in records} == {SCHEMA_VERSION} == {2}
    for r in records:
        if r.kind in ("block", "train"):
            assert tuple(r.metrics) == metric_names(r.kind), (r.id, r.kind)


def _check_renamed_and_kept(old: dict, new: dict) -> None:
    for key, value in old.items():
        if key in RENAMED:
            assert new[RENAMED[key]] == value, key
        elif key not in MEMORY_V1 | DUPLICATES_V1:
            assert new[key] == value, key


@pytest.mark.parametrize("kind", ["block", "train"])
def test_values_are_the_old_ones_under_the_new_names(v1_copy, kind):
    stored = _stored(v1_copy)
    checked = 0
    for r in _read(v1_copy):
        if r.kind != kind:
            continue
        old, new = stored[r.id]["metrics"], r.metrics
        assert r.spec == stored[r.id]["spec"] and r.raw == stored[r.id]["raw"]
        _check_renamed_and_kept(old, new)
        if "mem_peak_bytes" not in old:  # a refusal: only the estimate was known
            assert r.status == "oom" and new["mem_estimate_bytes_per_rank"] > 0
            assert [k for k, v in new.items() if v is not None] == ["mem_estimate_bytes_per_rank"]
            continue
        checked += 1
        assert new["mem_added_bytes_per_rank_max"] == old["mem_peak_bytes"] - old["mem_base_bytes"]
        if "mem_peak_bytes_per_rank" in old:  # several processes
            assert new["mem_peak_bytes_per_rank"] == old["mem_peak_bytes_per_rank"]
            assert new["mem_base_bytes_per_rank"] == old["mem_base_bytes_per_rank"]
            assert new["mem_added_max_rank"] == old["mem_peak_rank"]
            assert max(new["mem_peak_bytes_per_rank"]) == old["mem_peak_bytes_max"]
            assert new["n_devices"] == old["n_ranks"]
            assert new["tokens_per_step_global"] == old["tokens_global"]
            assert new["step_time_s_median"] == old["step_time_s_median_max_rank"]
        else:
            assert new["mem_peak_bytes_per_rank"] == [old["mem_peak_bytes"]]
            assert new["mem_base_bytes_per_rank"] == [old["mem_base_bytes"]]
            assert new["mem_added_max_rank"] == 0
        if kind == "train":
            spec = r.spec
            per_replica = spec["micro_batch"] * spec["gas"]
            assert new["samples_per_step_global"] == per_replica * new["n_devices"]
            assert new["step_time_s_median_per_rank"][new["step_time_slowest_rank"] or 0] == \
                new["step_time_s_median"]
    assert checked >= 2


def test_other_kinds_keep_their_metrics(v1_copy):
    stored = _stored(v1_copy)
    for r in _read(v1_copy):
        old = stored[r.id]["metrics"]
        if r.kind == "scale":
            assert r.metrics == old
        elif r.kind == "seq-search":  # the probes take the per-rank memory names
            assert r.metrics == {"fits": old["fits"],
                                 "mem_estimate_bytes_per_rank": old["mem_estimate_bytes"],
                                 "mem_budget_bytes_per_rank": old["mem_budget_bytes"]}


def _render(table) -> str:
    console = Console(file=io.StringIO(), width=300)
    console.print(table)
    return console.file.getvalue()


def test_tables_render_migrated_records(v1_copy):
    records = _read(v1_copy)
    block = _render(block_table([r for r in records if r.kind == "block"]))
    train = _render(train_table([r for r in records if r.kind == "train"]))
    assert "does not fit" in block and "does not fit" in train
    assert "fp32 0.197 TFLOPS, measured peak" in block  # the peak, under its new name
    assert _render(summary_table(records)).count("tok/s, MFU") == 7  # 2 block + 5 train cells


def test_upgrade_is_pure_and_keeps_what_it_does_not_know():
    v1 = {"kind": "train", "status": "ok", "schema_version": 1, "spec": {"seq_len": 8},
          "metrics": {"tokens_per_step": 32, "mem_peak_bytes": 10, "mem_base_bytes": 4,
                      "step_time_s_median": 0.5, "something_else": 7}}
    before = copy.deepcopy(v1)
    v2 = upgrade(v1)
    assert v1 == before and v2["schema_version"] == 2
    m = v2["metrics"]
    assert m["tokens_per_step_global"] == 32 and m["samples_per_step_global"] == 4
    assert m["mem_added_bytes_per_rank_max"] == 6 and m["mem_added_max_rank"] == 0
    assert m["step_time_s_median_per_rank"] == [0.5] and m["something_else"] == 7
    assert upgrade(v2) is v2


def test_a_record_that_measured_nothing_stays_empty_and_unknown_memory_is_none():
    error = {"kind": "block", "status": "error", "schema_version": 1, "metrics": {}}
    assert upgrade(error)["metrics"] == {}
    unavailable = {"kind": "block", "status": "ok", "schema_version": 1,
                   "metrics": {"mem_peak_bytes": None, "mem_base_bytes": 0,
                               "mem_method": "unavailable: no peak counter"}}
    m = upgrade(unavailable)["metrics"]
    assert m["mem_peak_bytes_per_rank"] == [None] and m["mem_added_bytes_per_rank_max"] is None
    assert m["mem_added_max_rank"] is None
