"""`accelbench report`: the study's tables and figures from one or several results databases
(one per machine), machines compared, written as HTML, Markdown, PNG and SVG. Options from
report/report_options.py."""

from __future__ import annotations

import typer

from accelbench.cli.common import console, out
from accelbench.cli.options import dataclass_command
from accelbench.report import make_report
from accelbench.report.report_options import ReportOptions


def report(options: ReportOptions) -> None:
    """Regenerate the study's figures 3, 4, 6, 7 and tables II, III, IV from the records, and
    compare machines (MFU, time to train, speedups, what differs between their runs)."""
    paths = options.paths
    written = make_report(paths, options.out_dir, options.baseline, options.tokens,
                          options.study)
    console.print(f"report from {len(paths)} database(s): {len(written.pngs)} figures; open "
                  f"{written.html} in any browser (no network needed)", markup=False,
                  soft_wrap=True)
    appendix = (written.appendix,) if written.appendix else ()
    for path in (written.html, written.markdown, *appendix, *written.pngs, *written.svgs):
        out.print(str(path))


def register(app: typer.Typer) -> None:
    """Add the report command."""
    app.command("report")(dataclass_command(report, ReportOptions, help=report.__doc__ or "",
                                            name="report"))
