"""`accelbench results list | show ID | export`: read the results store back."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import typer

from accelbench.cli.common import emit, out
from accelbench.config.errors import ConfigError, require_choice
from accelbench.results.store import ResultStore
from accelbench.results.table import summary_table

results_app = typer.Typer(help="Read stored results.", no_args_is_help=True)
DB_HELP = "SQLite results file (default: $ACCELBENCH_DB or XDG)."


@results_app.command("list")
def list_(db: Path = typer.Option(None, help=DB_HELP),
          kind: str = typer.Option(None, help="Only this kind (block, train, ...)."),
          run_id: str = typer.Option(None, help="Only this sweep."),
          limit: int = typer.Option(50, help="At most this many, newest.")) -> None:
    """List stored records (a table on stdout)."""
    out.print(summary_table(ResultStore(db).query(kind=kind, run_id=run_id, limit=limit)))


@results_app.command("show")
def show(record_id: int = typer.Argument(..., help="Record id."),
         db: Path = typer.Option(None, help=DB_HELP)) -> None:
    """Print one whole record as JSON."""
    record = ResultStore(db).get(record_id)
    if record is None:
        raise ConfigError("ID", f"no record {record_id} in the store", "an id from results list")
    print(json.dumps(asdict(record), indent=2, default=str))


@results_app.command("export")
def export(fmt: str = typer.Option("csv", "--format", help="csv or json."),
           db: Path = typer.Option(None, help=DB_HELP),
           kind: str = typer.Option(None, help="Only this kind."),
           run_id: str = typer.Option(None, help="Only this sweep."),
           output: Path = typer.Option(None, help="File to write (default stdout).")) -> None:
    """Export records as CSV or JSON."""
    require_choice("format", fmt, ("csv", "json"))
    emit(ResultStore(db).query(kind=kind, run_id=run_id), fmt == "json", fmt == "csv", output)


def register(app: typer.Typer) -> None:
    """Add the results command group."""
    app.add_typer(results_app, name="results")
