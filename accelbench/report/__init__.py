"""The study's report: records from one or several results databases (one per machine) ->
the findings first (a line per experiment that ran, report/findings.py), the paper's tables
and figures regenerated, machines compared, what differs between their runs, the methods last;
written as a self-contained HTML page, Markdown (with an appendix of the full tables), and
each figure as PNG and SVG.

build_report reads and computes (no matplotlib); write_report (render.py) draws (matplotlib, a
dependency imported only when drawing, so the other commands start fast) and writes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from accelbench.config.errors import ConfigError
from accelbench.config.paths import check_out_dir
from accelbench.store.record import Record

if TYPE_CHECKING:
    from accelbench.report.content import Report
    from accelbench.report.render import Written

DEFAULT_TOKENS = 1e9
TITLE = "accelbench report: LLM training on AI accelerators"


def study_name(record: Record) -> str | None:
    """The study a record was measured for (spec.study.name), or None."""
    tag = record.setup.study
    return tag.get("name") if isinstance(tag, dict) else None


def only_study(loaded: list[tuple[str, Record]], study: str | None) -> list[tuple[str, Record]]:
    """The records of one study (all of them when study is None); ConfigError naming the
    studies present when it has none."""
    if study is None:
        return loaded
    kept = [(source, r) for source, r in loaded if study_name(r) == study]
    if not kept:
        present = sorted({n for _, r in loaded if (n := study_name(r))})
        raise ConfigError("study", f"no records of study {study!r} in these databases",
                          ", ".join(present) or "none: run 'accelbench study run' first")
    return kept


def build_report(db_paths: Sequence[Path], baseline: str | None = None,
                 tokens: float = DEFAULT_TOKENS, study: str | None = None) -> Report:
    """Every section from the records of these databases (of one study, when named): the
    machines, each registered workload's (its `sections`), the comparison and fairness;
    ConfigError on bad input. The sections are imported here, and the renderer in make_report:
    the commands import this package (for DEFAULT_TOKENS) and start faster without them."""
    from accelbench.config.workload import report_sections
    from accelbench.report.compare import compare_section
    from accelbench.report.content import Report
    from accelbench.report.fairness import fairness_section
    from accelbench.report.findings import TERMS
    from accelbench.report.machines import group_machines, load_records, pick_baseline
    from accelbench.report.overview import machines_section

    if not math.isfinite(tokens) or tokens <= 0:
        raise ConfigError("tokens", f"must be a positive number, got {tokens!r}", "> 0")
    if not db_paths:
        raise ConfigError("db", "no database given", "one or more --db files")
    machines = group_machines(only_study(load_records(db_paths), study))
    base = pick_baseline(machines, baseline)
    workload_sections = tuple(section(machines) for section in report_sections())
    sections = (machines_section(machines, base), *workload_sections,
                compare_section(machines, base, tokens), fairness_section(machines))
    intro = (f"{sum(len(m.records) for m in machines)} records, {len(db_paths)} database(s), "
             f"{len(machines)} machine(s). How every number was made: Methods, at the end.",)
    sheets = any(m.environment.get("device_spec_key") for m in machines)
    terms = tuple(t for t in TERMS if sheets or not t[0].startswith("Planner"))  # no prediction
    return Report(TITLE, intro, sections, terms)


def make_report(db_paths: Sequence[Path], out_dir: Path, baseline: str | None = None,
                tokens: float = DEFAULT_TOKENS, study: str | None = None) -> Written:
    """build_report, then write_report into out_dir (a folder that exists or can be made,
    checked before any database is read)."""
    from accelbench.report.render import write_report

    check_out_dir(out_dir)
    return write_report(build_report(db_paths, baseline, tokens, study), out_dir)


__all__ = ["DEFAULT_TOKENS", "build_report", "make_report", "only_study"]
