"""The workload registry: a workload declared as one folder plus its schema module is found by
the command line (a command generated from its options dataclass), the study runner, the
export, the report and the comparison of machines (by the figure its kind declares); and every
registered workload has its parts (report table and sections, declared record kinds). The toy
is tests/unit/toy_plugin/, copied into tmp_path and put on the two packages' paths, as a
plug-in would be: nothing else in the package knows it."""

from __future__ import annotations

import importlib
import json
import shutil
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from cli_run import run_main

import accelbench.workloads
from accelbench.bench.study_planner import plan_study
from accelbench.cli import main as main_mod
from accelbench.config import records
from accelbench.config.errors import ConfigError
from accelbench.config.record_kinds import METRICS_BY_KIND, metric_names
from accelbench.config.study_file import parse_study
from accelbench.config.workload import (
    Workload,
    register,
    registered,
    report_sections,
    unregister,
    workloads,
)
from accelbench.report import build_report
from accelbench.report.export import flat_table
from accelbench.store.record import Record
from accelbench.store.store import ResultStore

PLUGIN = Path(__file__).parent / "toy_plugin"
TOY_MODULES = ("accelbench.workloads.toy", "accelbench.config.records.toy")


@pytest.fixture
def toy_folders(monkeypatch, tmp_path):
    """The toy's folder and schema module, copied into tmp_path and found on the paths of
    accelbench.workloads and accelbench.config.records (the kind table finds the schema
    module there); the toy's workload module, imported."""
    shutil.copytree(PLUGIN, tmp_path / "plugin")
    monkeypatch.setattr(records, "__path__", [*records.__path__,
                                              str(tmp_path / "plugin" / "records")])
    monkeypatch.setattr(accelbench.workloads, "__path__", [*accelbench.workloads.__path__,
                                                           str(tmp_path / "plugin" / "workloads")])
    try:
        yield importlib.import_module("accelbench.workloads.toy")
    finally:
        for name in TOY_MODULES:
            sys.modules.pop(name, None)
        for package in (accelbench.workloads, records):
            if hasattr(package, "toy"):
                delattr(package, "toy")


@pytest.fixture
def toy(toy_folders, monkeypatch):
    """The toy registered and a command line that has it."""
    with registered(toy_folders.WORKLOAD):
        monkeypatch.setattr(main_mod, "app", main_mod.make_app())
        yield toy_folders.WORKLOAD


def test_the_toy_is_a_command_with_its_options(toy, monkeypatch, capsys):
    code, out, _ = run_main(monkeypatch, capsys, "toy", "--help")
    assert code == 0
    for flag in ("--size", "--flavour", "--loud", "--db", "--json", "How many toy cells."):
        assert flag in out
    assert "plain, salty" in out  # the choices, in the help


@pytest.mark.parametrize("args,line", [
    (("--size", "0"), "error: size: must be at least 1, got 0 (allowed: >= 1)"),
    (("--flavour", "sweet"), "error: flavour: unknown value 'sweet'"),
    (("--size", "many"), "error: Invalid value for '--size'"),
])
def test_bad_toy_input_is_one_line_and_exit_2(toy, monkeypatch, capsys, tmp_path, args, line):
    db = tmp_path / "r.db"
    code, out, err = run_main(monkeypatch, capsys, "toy", *args, "--db", str(db))
    assert code == 2 and out == "" and err.startswith(line) and err.count("\n") == 1
    assert not db.exists()


def test_the_toy_runs_records_exports_and_reports(toy, monkeypatch, capsys, tmp_path):
    db = tmp_path / "r.db"
    code, out, _ = run_main(monkeypatch, capsys, "toy", "--size", "2", "--db", str(db),
                            "--json")
    assert code == 0
    assert [r["metrics"]["toy_score_per_s"] for r in json.loads(out)] == [1.0, 2.0]
    records = ResultStore(db, write=False).query(kind="toy")
    assert len(records) == 2
    columns, _ = flat_table(records)
    assert "metrics.toy_score_per_s" in columns
    code, out, _ = run_main(monkeypatch, capsys, "results", "export", "--db", str(db))
    assert code == 0 and "metrics.toy_score_per_s" in out.splitlines()[0]
    report = build_report([db])
    toy_part = [s for s in report.sections if s.key == "toy"]
    assert toy_part and toy_part[0].paragraphs == ("2 toy scores",)


def _toy_machine(path: Path, host: str, scores: tuple[float, ...]) -> Path:
    """A database of toy cells measured on one machine (`host`)."""
    store = ResultStore(path)
    for score in scores:
        store.add(Record("toy", "ok", {"workload": "toy", "flavour": "plain"},
                         {"hostname": host, "device_name": f"{host} device"},
                         {"toy_score_per_s": score}))
    store.close()
    return path


def test_the_comparison_finds_the_toy_by_the_figure_its_kind_declares(toy, tmp_path):
    dbs = [_toy_machine(tmp_path / "a.db", "alpha", (1.0, 2.0)),
           _toy_machine(tmp_path / "b.db", "beta", (3.0,))]
    (compare,) = [s for s in build_report(dbs).sections if s.key == "compare"]
    per_device, speedup = compare.tables
    assert per_device.header[3] == "rate per device"  # a workload that counts no tokens
    assert [row[:4] for row in per_device.rows] == [("toy", "None", "M1", "2 score/s"),
                                                   ("toy", "None", "M2", "3 score/s")]
    assert [row[3:] for row in speedup.rows] == [
        ("2 score/s", "baseline", "baseline"),
        ("3 score/s", "1.50x (one trial: no interval)", "1.50x")]
    assert "M1: its kind meters no energy" in compare.paragraphs[-1]


STUDY = """
title = "toys"
[profiles.full]
description = "all"
[profiles.quick]
description = "all"
[experiments.t]
workload = "toy"
options = { size = 2 }
sweep = { flavour = ["plain", "salty"] }
"""


def test_a_study_plans_the_toy(toy, tmp_path):
    study = parse_study(STUDY, "toys", tmp_path / "toys.toml")
    plan = plan_study(study, "quick", "cpu")
    assert [c.label for c in plan.cells] == ["toy 0", "toy 1"]  # flavour: an axis, one sweep
    bad = STUDY.replace("size = 2", "size = 0")
    with pytest.raises(ConfigError, match="experiments.t.options.size"):
        plan_study(parse_study(bad, "toys", tmp_path / "toys.toml"), "quick", "cpu")


def test_the_toy_kind_is_its_schema_module_s_and_unregistering_removes_the_toy(toy_folders):
    assert "toy" in METRICS_BY_KIND and metric_names("toy") == ("toy_score_per_s",)
    with registered(toy_folders.WORKLOAD):
        assert "toy" in {w.name for w in workloads()}
    assert "toy" not in {w.name for w in workloads()}
    assert "toy" in METRICS_BY_KIND  # the kind table is the schema modules': never changed


def test_the_kind_table_is_static_without_the_toy_s_schema_module():
    assert "toy" not in METRICS_BY_KIND
    with pytest.raises(TypeError):
        METRICS_BY_KIND["toy"] = object  # type: ignore[index]


def test_a_kind_no_schema_module_declares_is_refused(toy_folders):
    undeclared = Workload("toy2", "Toys again.", toy_folders.ToyOptions,
                          {"toy2": toy_folders.ToyMetrics}, build=toy_folders.build,
                          run=toy_folders.run, table=toy_folders.table)
    with pytest.raises(ValueError, match="writes record kind 'toy2', which no schema module "
                                         "declares"):
        register(undeclared)
    assert "toy2" not in {w.name for w in workloads()}
    clash = Workload("toy3", "Toys again.", toy_folders.ToyOptions,
                     {"train": toy_folders.ToyMetrics}, build=toy_folders.build,
                     run=toy_folders.run, table=toy_folders.table)
    with pytest.raises(ValueError, match="'train' is declared with TrainMetrics, not ToyMetrics"):
        register(clash)
    register(ok := Workload("toy4", "Toys again.", toy_folders.ToyOptions,
                            {"toy": toy_folders.ToyMetrics}, build=toy_folders.build,
                            run=toy_folders.run, table=toy_folders.table))
    unregister(ok.name)


# --- every registered workload has its parts ----------------------------------------------------


@pytest.mark.parametrize("workload", workloads(), ids=lambda w: w.name)
def test_every_workload_has_its_parts(workload):
    for kind, metrics in workload.kinds.items():
        assert METRICS_BY_KIND[kind] is metrics
    assert workload.table.__module__ == f"accelbench.workloads.{workload.name}" or (
        workload.table.__module__ == "accelbench.workloads.train")  # genslm, scale: train's
    for section in workload.sections:
        assert section in report_sections()
    names = {f.name for f in fields(workload.options)}
    assert set(workload.axes) <= names and set(workload.skip) <= names
    assert set(workload.defaults) <= names
    for f in fields(workload.options):
        assert f.metadata.get("help"), (workload.name, f.name)  # every option says what it is


def test_the_report_keeps_the_paper_order():
    assert [f.__name__ for f in report_sections()][:7] == [
        "section", "section", "seq_section", "gas_section", "sparsity_section", "section",
        "section"]
    assert [f.__module__.rsplit(".", 1)[1] for f in report_sections()][:7] == [
        "block", "scale", "train", "train", "train", "genslm", "noise"]


def test_the_built_in_workloads_in_order():
    """The package's folders, found and ordered by each declaration's command_order: the
    order of `accelbench --help` and of a study's listing."""
    names = ["block", "train", "genslm", "scale", "calibrate", "noise"]
    assert [w.name for w in accelbench.workloads.BUILT_IN] == names
    assert [w.name for w in workloads()][:6] == names
    orders = [w.command_order for w in accelbench.workloads.BUILT_IN]
    assert orders == sorted(set(orders))  # each built-in states its own place


def test_a_folder_on_the_workloads_path_is_found_with_nothing_listed(toy_folders):
    found = accelbench.workloads.find_workloads()
    assert found[:-1] == accelbench.workloads.BUILT_IN  # the toy states no order: last
    assert found[-1] is toy_folders.WORKLOAD


def test_a_folder_that_declares_no_workload_is_an_error(monkeypatch, tmp_path):
    (tmp_path / "stray").mkdir()
    (tmp_path / "stray" / "__init__.py").write_text('"""Not a workload."""\n')
    monkeypatch.setattr(accelbench.workloads, "__path__", [*accelbench.workloads.__path__,
                                                           str(tmp_path)])
    try:
        with pytest.raises(ValueError, match="accelbench.workloads.stray declares no WORKLOAD"):
            accelbench.workloads.find_workloads()
    finally:
        sys.modules.pop("accelbench.workloads.stray", None)
        if hasattr(accelbench.workloads, "stray"):
            delattr(accelbench.workloads, "stray")
