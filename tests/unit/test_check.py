"""accelbench check: every probe isolated (a missing feature is 'unavailable' with its reason,
a broken one 'failed' with the error, never a crash), the matrix stored as a 'check' record,
shown by the command and in the report's machine section."""

from __future__ import annotations

import json

import pytest
import torch

from accelbench.bench import feature_check as check
from accelbench.bench.check_probe import CheckSettings
from accelbench.bench.feature_check import FAILED, OK, UNAVAILABLE, run_check, run_probe
from accelbench.config.errors import ConfigError
from accelbench.config.record_kinds import metric_names
from accelbench.hardware.energy.choose import set_source_factory
from accelbench.hardware.energy.source import Unavailable
from accelbench.report.machines import group_machines
from accelbench.report.overview import check_tables
from accelbench.store.record import Record
from tests.unit.cli_run import run_main

CPU = CheckSettings(torch.device("cpu"), matmul_n=64, matmul_repeats=2,
                    attention_shape=(1, 2, 32, 16), compile_backend="eager",
                    energy_window_s=0.01)
QUICK = tuple((n, p) for n, p in check.PROBES
              if n in ("device", "memory", "timing", "matmul_fp32", "matmul_tf32",
                       "attention_math", "sparse_2to4"))


def _probe(name: str):
    return dict(check.PROBES)[name]


def test_every_probe_is_named_once():
    assert len(set(check.PROBE_NAMES)) == len(check.PROBE_NAMES)
    assert {"device", "memory", "timing", "matmul_fp32", "matmul_tf32", "matmul_fp16",
            "matmul_bf16", "attention_flash", "attention_efficient", "attention_math",
            "compile", "fused_adamw", "fp8", "sparse_2to4", "energy", "collective",
            "fsdp2"} <= set(check.PROBE_NAMES)


@pytest.mark.parametrize("name", ["device", "memory", "timing", "matmul_fp32", "fused_adamw",
                                  "attention_math", "collective", "fsdp2", "compile"])
def test_what_a_cpu_has_is_ok(name):
    feature = run_probe(name, _probe(name), CPU)
    assert feature.status == OK, feature.detail
    assert feature.seconds >= 0


@pytest.mark.parametrize("name, reason", [
    ("matmul_tf32", "tf32 is an NVIDIA matmul mode (cpu here)"),
    ("sparse_2to4", "cpu (torch's 2:4 semi-structured kernels are CUDA-only)"),
    ("attention_efficient", "torch has no efficient kernel for cpu"),
])
def test_what_a_cpu_lacks_is_unavailable_with_the_reason(name, reason):
    feature = run_probe(name, _probe(name), CPU)
    assert feature.status == UNAVAILABLE
    assert feature.detail.startswith(reason)


def test_matmul_reports_achieved_tflops():
    feature = run_probe("matmul_fp32", _probe("matmul_fp32"), CPU)
    assert feature.values["tflops"] > 0 and feature.values["n"] == 64
    assert "TFLOPS at n=64" in feature.detail


def test_energy_without_a_counter_is_unavailable_with_the_source_reason():
    set_source_factory(lambda device: Unavailable("no counter in this test"))
    try:
        feature = run_probe("energy", _probe("energy"), CPU)
    finally:
        set_source_factory(None)
    assert (feature.status, feature.detail) == (UNAVAILABLE, "no counter in this test")


class _StuckCounter:
    name, interval_s, devices, host_wide = "stuck", 0.001, ("dev-0",), False

    def read_j(self):
        return (1.0,)

    def power_w(self):
        return None

    def close(self):
        pass


def test_an_energy_counter_that_does_not_advance_fails():
    set_source_factory(lambda device: _StuckCounter())
    try:
        feature = run_probe("energy", _probe("energy"), CPU)
    finally:
        set_source_factory(None)
    assert feature.status == FAILED
    assert "stuck: counter did not advance" in feature.detail


def test_fp8_without_torchao_is_unavailable(monkeypatch):
    def missing():
        raise ConfigError("dtype", "fp8 needs torchao, which is not installed here")

    monkeypatch.setattr("accelbench.models.float8.torchao_float8", missing)
    feature = run_probe("fp8", _probe("fp8"), CPU)
    assert (feature.status, feature.detail) == (
        UNAVAILABLE, "fp8 needs torchao, which is not installed here")


def test_fp8_on_a_cpu_is_emulated():
    feature = run_probe("fp8", _probe("fp8"), CPU)
    assert feature.status == OK, feature.detail
    assert feature.values == {"mode": "emulated"}


def test_memory_without_statistics_is_unavailable(monkeypatch):
    monkeypatch.setattr("accelbench.hardware.device.memory_reporting", lambda device: None)
    monkeypatch.setattr("accelbench.hardware.device.memory_unavailable_reason",
                        lambda device: "no peak here")
    feature = run_probe("memory", _probe("memory"), CPU)
    assert (feature.status, feature.detail) == (UNAVAILABLE, "no peak here")


def test_a_probe_that_raises_is_failed_and_the_check_goes_on():
    def broken(settings):
        raise RuntimeError("driver fell over\nsecond line")

    outcome = run_check(CPU, (("broken", broken), *QUICK[:1]))
    features = outcome.metrics["features"]
    assert [f["status"] for f in features] == [FAILED, OK]
    assert features[0]["detail"] == "RuntimeError: driver fell over"
    assert outcome.status == OK and outcome.reason == "failed: broken"
    assert outcome.metrics["features_failed"] == 1 and outcome.metrics["features_ok"] == 1


def test_a_group_that_exists_already_makes_the_collective_unavailable(one_rank_group):
    feature = run_probe("collective", _probe("collective"), CPU)
    assert feature.status == UNAVAILABLE and "process group exists already" in feature.detail


def test_the_outcome_declares_the_check_schema():
    outcome = run_check(CPU, QUICK)
    assert outcome.kind == "check"
    assert set(outcome.metrics) == set(metric_names("check"))
    assert outcome.spec["probes"] == [n for n, _ in QUICK]


def test_the_command_stores_prints_and_reports_the_matrix(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(check, "PROBES", QUICK)
    db = tmp_path / "check.db"
    code, out, err = run_main(monkeypatch, capsys, "check", "--device", "cpu", "--json",
                              "--db", str(db))
    assert code == 0, err
    (record,) = json.loads(out)
    assert record["kind"] == "check" and record["status"] == "ok"
    names = [f["name"] for f in record["metrics"]["features"]]
    assert names == [n for n, _ in QUICK]
    assert "check on cpu" in err
    from accelbench.store.store import ResultStore

    store = ResultStore(db, write=False)
    (stored,) = store.query(kind="check")
    store.close()
    (table,) = check_tables(group_machines([("check.db", stored)]))
    assert table.header == ("feature", "status", "seconds", "detail")
    assert [row[0] for row in table.rows] == names
    assert ("matmul_tf32", "unavailable") == table.rows[names.index("matmul_tf32")][:2]


def test_a_machine_without_a_check_has_no_feature_table():
    record = Record(kind="train", status="ok", spec={}, environment={"device_type": "cpu"},
                    metrics={})
    assert check_tables(group_machines([("a.db", record)])) == []


@pytest.mark.parametrize("args, line", [
    (("--device", "tpu"), "error: device: unknown device 'tpu'"),
    (("--compile-backend", "tvm"), "error: compile-backend: unknown value 'tvm'"),
])
def test_bad_input_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path, args, line):
    db = tmp_path / "never.db"
    code, out, err = run_main(monkeypatch, capsys, "check", *args, "--db", str(db))
    assert code == 2 and out == ""
    assert err.startswith(line) and err.count("\n") == 1, err
    assert not db.exists()
