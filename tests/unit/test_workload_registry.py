"""The workload registry: a workload declared once is found by the command line (a command
generated from its options dataclass), the study runner, the export and the report; and every
registered workload has its parts (report table and sections, declared record kinds)."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields

import pytest
from cli_run import run_main

from accelbench.bench.outcome import Outcome
from accelbench.bench.study import PlannedCell, SweepPlan, plan_study
from accelbench.cli import main as main_mod
from accelbench.config.errors import ConfigError
from accelbench.config.options import option
from accelbench.config.schema import METRICS_BY_KIND, metric_names
from accelbench.config.study import parse_study
from accelbench.config.workload import Workload, registered, report_sections, workloads
from accelbench.report import build_report
from accelbench.report.content import Section
from accelbench.report.export import flat_table
from accelbench.store.store import ResultStore

# --- the toy workload: its options, metrics, spec, runner, plan, table and section -------------


@dataclass(frozen=True)
class ToyOptions:
    """The toy's options: the command's and a study's keys."""

    size: int = option(3, "How many toy cells.")
    flavour: str = option("plain", "The toy's flavour.", choices=("plain", "salty"))
    loud: bool = option(False, "Shout.", "--loud")
    device: str = option("cpu", "auto, cpu, ...")


@dataclass(frozen=True)
class ToyMetrics:
    toy_score_per_s: float | None = None


@dataclass(frozen=True)
class ToySpec:
    size: int
    flavour: str
    device: str

    @property
    def title(self) -> str:
        return f"toy {self.flavour}"


def build_toy(options: ToyOptions) -> ToySpec:
    if options.size < 1:
        raise ConfigError("size", f"must be at least 1, got {options.size}", ">= 1")
    return ToySpec(options.size, options.flavour, options.device)


def run_toy(spec: ToySpec, sink, step, cell, skip) -> list[Outcome]:
    outcomes = []
    for i in range(spec.size):
        if cell is not None:
            cell(i, spec.size, f"toy {i}")
        outcome = Outcome("toy", "ok", {"workload": "toy", "i": i, "flavour": spec.flavour},
                          {"toy_score_per_s": float(i + 1)})
        sink(outcome)
        outcomes.append(outcome)
    return outcomes


def plan_toy(values: dict, planner) -> SweepPlan:
    spec = build_toy(ToyOptions(**values))
    cells = tuple(PlannedCell(f"toy {i}", None, None, "fits", 0.1) for i in range(spec.size))
    return SweepPlan(spec.title, cells, lambda sink, on_cell, skip, peaks:
                     run_toy(spec, sink, None, on_cell, skip), local=True)


def toy_table(records, title):
    from rich.table import Table

    table = Table(title=title)
    table.add_column("score")
    for r in records:
        table.add_row(str(r.metrics["toy_score_per_s"]))
    return table


def toy_section(machines) -> Section:
    scores = [r.metrics["toy_score_per_s"] for m in machines for r in m.records if r.kind == "toy"]
    return Section("toy", "Toy scores", "toy records", (f"{len(scores)} toy scores",))


TOY = Workload("toy", "Score toys.", ToyOptions, {"toy": ToyMetrics}, build=build_toy,
               run=run_toy, table=toy_table, plan=plan_toy, sections=(toy_section,),
               axes=("flavour",))


@pytest.fixture
def toy(monkeypatch):
    """The toy registered and a command line that has it."""
    with registered(TOY):
        monkeypatch.setattr(main_mod, "app", main_mod.make_app())
        yield TOY


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


def test_unregistering_removes_the_toy_everywhere(tmp_path):
    with registered(TOY):
        assert "toy" in METRICS_BY_KIND and metric_names("toy") == ("toy_score_per_s",)
    assert "toy" not in METRICS_BY_KIND
    assert "toy" not in {w.name for w in workloads()}


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
    assert [w.name for w in workloads()][:5] == ["block", "train", "genslm", "scale",
                                                 "calibrate"]
