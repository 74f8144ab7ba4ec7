"""The study's report: records from one or several results databases (one per machine) ->
the paper's tables and figures regenerated, machines compared, what differs between their
runs; written as a self-contained HTML page, Markdown, and each figure as PNG and SVG.

build_report reads and computes (no matplotlib); write_report draws (matplotlib, the optional
'report' extra, imported only when drawing) and writes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from accelbench.config.errors import ConfigError
from accelbench.results.report.block import block_section
from accelbench.results.report.compare import compare_section
from accelbench.results.report.content import Report
from accelbench.results.report.fairness import fairness_section
from accelbench.results.report.gas import gas_section
from accelbench.results.report.genslm import genslm_section
from accelbench.results.report.machines import group_machines, load_records, pick_baseline
from accelbench.results.report.overview import machines_section
from accelbench.results.report.render import Written, write_report
from accelbench.results.report.scaling import scaling_section
from accelbench.results.report.seqlen import seq_section
from accelbench.results.report.sparsity import sparsity_section

DEFAULT_TOKENS = 1e9
TITLE = "accelbench report: LLM training on AI accelerators"


def build_report(db_paths: Sequence[Path], baseline: str | None = None,
                 tokens: float = DEFAULT_TOKENS) -> Report:
    """Every section from the records of these databases; ConfigError on bad input."""
    if not math.isfinite(tokens) or tokens <= 0:
        raise ConfigError("tokens", f"must be a positive number, got {tokens!r}", "> 0")
    if not db_paths:
        raise ConfigError("db", "no database given", "one or more --db files")
    machines = group_machines(load_records(db_paths))
    base = pick_baseline(machines, baseline)
    sections = (machines_section(machines, base), block_section(machines),
                scaling_section(machines), seq_section(machines), gas_section(machines),
                sparsity_section(machines), genslm_section(machines),
                compare_section(machines, base, tokens), fairness_section(machines))
    intro = (f"{sum(len(m.records) for m in machines)} records from "
             f"{len(db_paths)} database(s), {len(machines)} machine(s).",)
    return Report(TITLE, intro, sections)


def make_report(db_paths: Sequence[Path], out_dir: Path, baseline: str | None = None,
                tokens: float = DEFAULT_TOKENS) -> Written:
    """build_report, then write_report into out_dir."""
    return write_report(build_report(db_paths, baseline, tokens), out_dir)


__all__ = ["DEFAULT_TOKENS", "Written", "build_report", "make_report", "write_report"]
