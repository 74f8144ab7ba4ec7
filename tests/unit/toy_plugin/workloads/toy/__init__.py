"""The toy workload, declared as a new workload is: one folder (this one, copied into a directory
on accelbench.workloads' path) plus its schema module (../../records/toy.py), nothing else
touched: tests/unit/test_workload_registry.py finds it in the CLI, a study, the export, the
report and the comparison."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.config.records.toy import ToyMetrics

from accelbench.bench.outcome import Outcome
from accelbench.bench.study_planner import PlannedCell, SweepPlan
from accelbench.config.errors import ConfigError
from accelbench.config.option_fields import option
from accelbench.config.record_kinds import carries, metrics_dict
from accelbench.config.workload import Workload
from accelbench.report.content import Section


@dataclass(frozen=True)
class ToyOptions:
    """The toy's options: the command's and a study's keys."""

    size: int = option(3, "How many toy cells.")
    flavour: str = option("plain", "The toy's flavour.", choices=("plain", "salty"))
    loud: bool = option(False, "Shout.", "--loud")
    device: str = option("cpu", "auto, cpu, ...")


@dataclass(frozen=True)
class ToySpec:
    """A checked toy run."""

    size: int
    flavour: str
    device: str

    @property
    def title(self) -> str:
        return f"toy {self.flavour}"


def build(options: ToyOptions) -> ToySpec:
    """The checked spec; ConfigError before anything runs."""
    if options.size < 1:
        raise ConfigError("size", f"must be at least 1, got {options.size}", ">= 1")
    return ToySpec(options.size, options.flavour, options.device)


def run(spec: ToySpec, sink: Any, step: Any = None, cell: Any = None,
        skip: Any = None) -> list[Outcome]:
    """One outcome a toy cell, each scored i + 1."""
    outcomes = []
    for i in range(spec.size):
        if cell is not None:
            cell(i, spec.size, f"toy {i}")
        outcome = Outcome("toy", "ok", {"workload": "toy", "i": i, "flavour": spec.flavour},
                          metrics_dict(ToyMetrics(toy_score_per_s=float(i + 1))))
        sink(outcome)
        outcomes.append(outcome)
    return outcomes


def plan(values: dict[str, Any], planner: Any) -> SweepPlan:
    """A study's toy sweep."""
    spec = build(ToyOptions(**values))
    cells = tuple(PlannedCell(f"toy {i}", None, None, "fits", 0.1) for i in range(spec.size))
    return SweepPlan(spec.title, cells, lambda sink, on_cell, skip, peaks:
                     run(spec, sink, None, on_cell, skip), local=True)


def table(records: list[Any], title: str) -> Any:
    """The table `accelbench toy` prints."""
    from rich.table import Table

    shown = Table(title=title)
    shown.add_column("score")
    for r in records:
        shown.add_row(str(r.typed.toy_score_per_s))
    return shown


def section(machines: list[Any]) -> Section:
    """The report's toy section."""
    scores = [r.typed.toy_score_per_s for m in machines for r in m.records
              if carries(r.kind, ToyMetrics)]
    return Section("toy", "Toy scores", "toy records", (f"{len(scores)} toy scores",))


WORKLOAD = Workload("toy", "Score toys.", ToyOptions, {"toy": ToyMetrics}, build=build,
                    run=run, table=table, plan=plan, sections=(section,), axes=("flavour",))
