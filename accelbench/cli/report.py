"""`accelbench report`: the study's tables and figures from one or several results databases
(one per machine), machines compared, written as HTML, Markdown, PNG and SVG."""

from __future__ import annotations

from pathlib import Path

import typer

from accelbench.cli.common import console, out
from accelbench.report import DEFAULT_TOKENS, make_report
from accelbench.store.store import default_db_path


def report(
    out_dir: Path = typer.Option(..., "--out", help="Folder to write report.html, report.md "
                                 "and figures/ into (made if missing)."),
    db: list[Path] = typer.Option(None, "--db", help="A results database; repeat for several "
                                  "machines (default: $ACCELBENCH_DB or XDG)."),
    baseline: str = typer.Option(None, help="The machine speedups are over: its number in the "
                                 "report (1 = the first) or its name (default: the first)."),
    tokens: float = typer.Option(DEFAULT_TOKENS, help="Tokens to train, for the time-to-train "
                                 "comparison (e.g. 1e9)."),
    study: str = typer.Option(None, help="Only the records of this study (e.g. emani2023; "
                              "default: every record)."),
) -> None:
    """Regenerate the study's figures 3, 4, 6, 7 and tables II, III, IV from the records, and
    compare machines (MFU, time to train, speedups, what differs between their runs)."""
    paths = list(db) if db else [default_db_path()]
    written = make_report(paths, out_dir, baseline, tokens, study)
    console.print(f"report from {len(paths)} database(s): {len(written.pngs)} figures; open "
                  f"{written.html} in any browser (no network needed)", markup=False,
                  soft_wrap=True)
    for path in (written.html, written.markdown, *written.pngs, *written.svgs):
        out.print(str(path))


def register(app: typer.Typer) -> None:
    """Add the report command."""
    app.command("report")(report)
