"""Records read as their kind's metrics class: attributes, not strings. The stored JSON does not
change; a version-1 record reads through the migration; an undeclared key stays reachable; a
kind that declares no metrics is a clear error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from accelbench.config.record_kinds import metrics_dict, read_metrics
from accelbench.config.records.block import BlockReading
from accelbench.config.records.peak import PeakMetrics
from accelbench.config.records.scale import ScaleMetrics, ScaleRow
from accelbench.config.records.seq_search import SeqSearchMetrics
from accelbench.config.records.train import TrainMetrics
from accelbench.store.record import Record, metrics_of
from accelbench.store.store import ResultStore

V1_DB = Path(__file__).parents[1] / "data" / "results_v1.db"


def _record(kind: str, metrics: dict) -> Record:
    return Record(kind=kind, status="ok", spec={}, environment={}, metrics=metrics)


def test_a_train_record_reads_as_train_metrics_and_writes_the_same_json():
    metrics = metrics_dict(TrainMetrics(n_devices=2, mfu=0.41, tokens_per_s_global=1e4))
    record = _record("train", metrics)
    typed = record.typed
    assert isinstance(typed, TrainMetrics) and typed == metrics_of(record)
    assert (typed.mfu, typed.n_devices, typed.hfu) == (0.41, 2, None)
    assert Record.from_json(record.to_json()).to_json() == record.to_json()
    with pytest.raises(AttributeError):
        typed.mfu_typo  # noqa: B018 - a typo fails instead of reading as '-'


def test_a_block_record_gathers_its_phases():
    record = _record("block", {"forward_mfu": 0.5, "forward_backward_time_s_median": 0.02,
                               "peak_label": "datasheet dense (h100-sxm)"})
    typed = record.typed
    assert isinstance(typed, BlockReading)
    assert typed.forward.mfu == 0.5 and typed.phase("forward_backward").time_s_median == 0.02
    assert typed.backward.mfu is None and typed.peak_label.startswith("datasheet")
    with pytest.raises(ValueError, match="phase must be one of"):
        typed.phase("sideways")


def test_every_declared_kind_reads_as_its_class():
    assert isinstance(_record("peak", {"threads": 4}).typed, PeakMetrics)
    assert _record("seq-search", {"fits": False}).typed == SeqSearchMetrics(fits=False)
    rows = [ScaleRow(devices=1, status="ok", reason="", baseline_devices=1, global_batch=8,
                     tokens_per_s_global=10.0, tokens_per_s_per_device=10.0, speedup=1.0,
                     scaling_efficiency=1.0, mfu=0.3).stored(),
            ScaleRow(devices=2, status="oom", reason="oom", baseline_devices=1,
                     global_batch=16).stored()]
    assert "speedup" not in rows[1]  # a count that did not run stores no measured field
    scale = _record("scale", {"rows": rows, "baseline_devices": 1}).typed
    assert isinstance(scale, ScaleMetrics) and scale.rows[0].speedup == 1.0
    assert scale.rows[1].status == "oom" and scale.rows[1].speedup is None


def test_an_undeclared_key_is_kept_reachable():
    record = _record("train", {"mfu": 0.3, "watts_from_another_tool": 250})
    assert record.typed.mfu == 0.3
    assert record.extra_metrics == {"watts_from_another_tool": 250}
    assert record.metrics["watts_from_another_tool"] == 250  # the stored dict is unchanged


def test_a_kind_without_a_metrics_class_is_a_clear_error():
    with pytest.raises(ValueError, match="'inference' declares no metrics"):
        _record("inference", {"tokens_per_s": 1.0}).typed  # noqa: B018
    with pytest.raises(ValueError, match="declares no metrics"):
        read_metrics("inference", {})


def test_version_1_records_read_typed_through_the_migration(tmp_path):
    path = tmp_path / "v1.db"
    shutil.copyfile(V1_DB, path)
    store = ResultStore(path, write=False)
    try:
        records = store.query()
    finally:
        store.close()
    assert {r.kind for r in records} >= {"block", "train"}
    for r in records:
        typed = r.typed
        if r.kind == "train" and r.status == "ok":
            # version 1 kept 'tokens_per_step'; version 2 reads it as tokens_per_step_global
            assert typed.tokens_per_step_global == r.metrics["tokens_per_step_global"]
            assert typed.mem_peak_bytes_per_rank is not None
        if r.kind == "block" and r.status == "ok":
            assert typed.forward_backward.mfu == r.metrics["forward_backward_mfu"]
