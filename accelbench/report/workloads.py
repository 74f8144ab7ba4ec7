"""The report's parts of each registered workload, attached by workload name: the table a
sweep of it prints, and its sections of `accelbench report` (each `(machines) -> Section`,
named as "module:function" and imported when the report is built, so a command that prints a
table does not import every section). The order of attachment is the order of the sections in
the report; the machines overview comes before them, the comparison and fairness after.
`tests/unit/test_workload_registry.py` checks every registered workload has its parts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import accelbench.bench.workloads  # noqa: F401 - registers the built-in workloads
from accelbench.config.workload import Ref, workloads
from accelbench.report.noise import noise_table
from accelbench.report.profile import profile_table
from accelbench.report.table import block_table, train_table
from accelbench.store.record import Record

Table = Callable[[list[Record], str], Any]  # records, title -> a rich renderable


@dataclass(frozen=True)
class ReportParts:
    """A workload's table and its report sections."""

    table: Table
    sections: tuple[Ref, ...] = ()


_PARTS: dict[str, ReportParts] = {}


def attach(name: str, parts: ReportParts) -> None:
    """Give a workload its report parts (a new workload's report module calls this)."""
    _PARTS[name] = parts


def detach(name: str) -> None:
    """Take a workload's report parts away (tests)."""
    _PARTS.pop(name, None)


def parts_of(name: str) -> ReportParts:
    """The report parts of a registered workload; KeyError naming it when it has none."""
    if name not in _PARTS:
        raise KeyError(f"workload {name!r} has no report parts: attach them in "
                       "report/workloads.py")
    return _PARTS[name]


def section_refs() -> list[Ref]:
    """Every registered workload's sections, in the order attached."""
    registered = {w.name for w in workloads()}
    return [ref for name, parts in _PARTS.items() if name in registered
            for ref in parts.sections]


def _profile(records: list[Record], title: str) -> Any:
    """A calibration's profile (its one record)."""
    return profile_table(records[0])


_SECTIONS = "accelbench.report"
attach("block", ReportParts(block_table, (f"{_SECTIONS}.block:block_section",)))
attach("scale", ReportParts(train_table, (f"{_SECTIONS}.scaling:scaling_section",)))
attach("train", ReportParts(train_table, (f"{_SECTIONS}.seqlen:seq_section",
                                          f"{_SECTIONS}.gas:gas_section",
                                          f"{_SECTIONS}.sparsity:sparsity_section")))
attach("genslm", ReportParts(train_table, (f"{_SECTIONS}.genslm:genslm_section",)))
attach("calibrate", ReportParts(_profile))
attach("noise", ReportParts(noise_table, (f"{_SECTIONS}.noise:noise_section",)))
