"""`accelbench results list | show ID | export | import FILE | merge DB... --into DB`: read the
results store back, bring back records a sweep could not write (store/unsaved.py), and merge
databases (store/merge.py)."""

from __future__ import annotations

import sqlite3
from dataclasses import asdict
from pathlib import Path

import typer

from accelbench.cli.common import console, emit, out
from accelbench.config.errors import ConfigError, require_choice
from accelbench.report.export import (
    OUTPUT_ALLOWED,
    check_output,
    to_flat_json,
    to_parquet,
    write_text,
)
from accelbench.report.listing import list_table, select
from accelbench.store.jsontext import dumps
from accelbench.store.merge import merge
from accelbench.store.record import STATUSES
from accelbench.store.store import ResultStore
from accelbench.store.unsaved import read_records

results_app = typer.Typer(help="Read stored results.", no_args_is_help=True)
DB_HELP = "SQLite results file (default: $ACCELBENCH_DB or XDG)."


@results_app.command("list")
def list_(db: Path = typer.Option(None, help=DB_HELP),
          kind: str = typer.Option(None, help="Only this kind (block, train, ...)."),
          machine: str = typer.Option(None, help="Only this machine: a piece of its name or a "
                                                 "prefix of its machine id."),
          model: str = typer.Option(None, help="Only this model (its name, exactly)."),
          status: str = typer.Option(None, help="Only this status (ok, oom, ...)."),
          run_id: str = typer.Option(None, help="Only this sweep."),
          limit: int = typer.Option(50, help="At most this many, newest (at least 1)."),
          wide: bool = typer.Option(False, "--wide", help="Every column of the table, wider "
                                    "than the terminal if need be."),
) -> None:
    """List stored records with the device and machine each ran on (a table on stdout)."""
    if limit < 1:
        raise ConfigError("limit", f"must be at least 1, got {limit}", ">= 1")
    if status is not None:
        require_choice("status", status, STATUSES)
    store = ResultStore(db, write=False)
    if machine is None and model is None:
        records = store.query(kind=kind, run_id=run_id, status=status, limit=limit)
    else:
        records = select(store.query(kind=kind, run_id=run_id, status=status), machine,
                         model)[-limit:]
    out.widened(wide).print(list_table(records))


@results_app.command("show")
def show(record_id: int = typer.Argument(..., help="Record id."),
         db: Path = typer.Option(None, help=DB_HELP)) -> None:
    """Print one whole record as JSON (strict: a NaN is {"__float__": "nan"})."""
    record = ResultStore(db, write=False).get(record_id)
    if record is None:
        raise ConfigError("ID", f"no record {record_id} in the store", "an id from results list")
    print(dumps(asdict(record), indent=2))


EXPORT_FORMATS = ("csv", "json", "flat-json", "parquet")


@results_app.command("export")
def export(fmt: str = typer.Option(
               "csv", "--format",
               help="csv, flat-json or parquet: the flat table, one row per record; json: whole "
                    "records (raw times included; what 'results import' reads)."),
           db: Path = typer.Option(None, help=DB_HELP),
           kind: str = typer.Option(None, help="Only this kind."),
           status: str = typer.Option(None, help="Only this status (ok, oom, ...)."),
           run_id: str = typer.Option(None, help="Only this sweep."),
           output: Path = typer.Option(None, help="File to write (default stdout; parquet "
                                                  "needs a file).")) -> None:
    """Export records: a flat table (CSV, JSON rows, Parquet) or whole records (JSON)."""
    require_choice("format", fmt, EXPORT_FORMATS)
    if status is not None:
        require_choice("status", status, STATUSES)
    if output is not None:
        check_output(output)
    elif fmt == "parquet":
        raise ConfigError("output", "parquet is binary: give a file", OUTPUT_ALLOWED)
    records = ResultStore(db, write=False).query(kind=kind, run_id=run_id, status=status)
    if fmt in ("csv", "json"):
        emit(records, fmt == "json", fmt == "csv", output)
        return
    data = to_parquet(records) if fmt == "parquet" else to_flat_json(records)
    if output is None:
        print(data)
        return
    write_text(output, data)
    console.print(f"wrote {len(records)} records to {output}", markup=False)


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


@results_app.command("merge")
def merge_(dbs: list[Path] = typer.Argument(..., metavar="DB",
                                           help="Databases to merge (read, never changed)."),
           into: Path = typer.Option(..., "--into", help="The database to merge into (made if "
                                     "missing; checked like any --db).")) -> None:
    """Copy every record of the databases into one: each as it is stored, once (by uid);
    merging again adds nothing."""
    try:
        done = merge(dbs, into)
    except (sqlite3.Error, OSError) as err:  # one transaction: the target is unchanged
        raise ConfigError("db", f"'{into}' did not take the records ({err}); nothing was "
                          "merged", "a database that can be written") from err
    for m in done:
        line = f"{m.path}: {m.read} records, {m.added} added, {m.present} there already"
        if m.different:
            line += (f" ({m.different} of them with a uid the target holds for another "
                     "record: the target's record kept)")
        console.print(line, markup=False, highlight=False)
    added = sum(m.added for m in done)
    console.print(f"merged into {into}: {added} records added", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add the results command group."""
    app.add_typer(results_app, name="results")
