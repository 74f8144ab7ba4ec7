"""`accelbench results list | show ID | export | import FILE`: read the results store back, and
bring back records a sweep could not write (results/unsaved.py)."""

from __future__ import annotations

import sqlite3
from dataclasses import asdict
from pathlib import Path

import typer

from accelbench.cli.common import console, emit, out
from accelbench.config.errors import ConfigError, require_choice
from accelbench.results.export import check_output
from accelbench.results.jsontext import dumps
from accelbench.results.store import ResultStore
from accelbench.results.table import summary_table
from accelbench.results.unsaved import read_records

results_app = typer.Typer(help="Read stored results.", no_args_is_help=True)
DB_HELP = "SQLite results file (default: $ACCELBENCH_DB or XDG)."


@results_app.command("list")
def list_(db: Path = typer.Option(None, help=DB_HELP),
          kind: str = typer.Option(None, help="Only this kind (block, train, ...)."),
          run_id: str = typer.Option(None, help="Only this sweep."),
          limit: int = typer.Option(50, help="At most this many, newest (at least 1).")) -> None:
    """List stored records (a table on stdout)."""
    if limit < 1:
        raise ConfigError("limit", f"must be at least 1, got {limit}", ">= 1")
    records = ResultStore(db, write=False).query(kind=kind, run_id=run_id, limit=limit)
    out.print(summary_table(records))


@results_app.command("show")
def show(record_id: int = typer.Argument(..., help="Record id."),
         db: Path = typer.Option(None, help=DB_HELP)) -> None:
    """Print one whole record as JSON (strict: a NaN is {"__float__": "nan"})."""
    record = ResultStore(db, write=False).get(record_id)
    if record is None:
        raise ConfigError("ID", f"no record {record_id} in the store", "an id from results list")
    print(dumps(asdict(record), indent=2))


@results_app.command("export")
def export(fmt: str = typer.Option("csv", "--format", help="csv or json."),
           db: Path = typer.Option(None, help=DB_HELP),
           kind: str = typer.Option(None, help="Only this kind."),
           run_id: str = typer.Option(None, help="Only this sweep."),
           output: Path = typer.Option(None, help="File to write (default stdout).")) -> None:
    """Export records as CSV or JSON."""
    require_choice("format", fmt, ("csv", "json"))
    if output is not None:
        check_output(output)
    records = ResultStore(db, write=False).query(kind=kind, run_id=run_id)
    emit(records, fmt == "json", fmt == "csv", output)


@results_app.command("import")
def import_(file: Path = typer.Argument(..., help="<db>.unsaved.jsonl, or a JSON export."),
            db: Path = typer.Option(None, help=DB_HELP)) -> None:
    """Store the records of a file (those a sweep could not write, or an export); a record
    already in the store (same uid) is not stored twice."""
    records = read_records(file)
    store = ResultStore(db)
    try:
        added = sum(new for _, new in store.add_many(records))
    except (sqlite3.Error, OSError) as err:  # one transaction: nothing was stored
        raise ConfigError("db", f"'{store.path}' did not take the records ({err}); nothing "
                          "was imported", "a database that can be written") from err
    store.close()
    console.print(f"imported {added} records into {store.path}; "
                  f"{len(records) - added} were there already", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add the results command group."""
    app.add_typer(results_app, name="results")
