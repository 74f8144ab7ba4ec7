"""`accelbench results list | show ID | export | import FILE | merge DB... --into DB`: read the
results store back, bring back records a sweep could not write (store/unsaved.py), and merge
databases (store/merge.py). Options and checks from report/results_options.py; here only the
calls and the printing."""

from __future__ import annotations

from dataclasses import asdict

import typer

from accelbench.cli.common import console, emit, out
from accelbench.cli.options import dataclass_command
from accelbench.report.export import to_flat_json, to_parquet, write_text
from accelbench.report.listing import list_table
from accelbench.report.results_options import (
    ExportOptions,
    ImportOptions,
    ListOptions,
    MergeOptions,
    ShowOptions,
    exported,
    imported,
    listed,
    merged,
    shown,
)
from accelbench.store.jsontext import dumps


def list_(options: ListOptions) -> None:
    """List stored records with the device and machine each ran on (a table on stdout)."""
    out.widened(options.wide).print(list_table(listed(options)))


def show(options: ShowOptions) -> None:
    """Print one whole record as JSON (strict: a NaN is {"__float__": "nan"})."""
    print(dumps(asdict(shown(options)), indent=2))


def export(options: ExportOptions) -> None:
    """Export records: a flat table (CSV, JSON rows, Parquet) or whole records (JSON)."""
    records, fmt, output = exported(options), options.fmt, options.output
    if fmt in ("csv", "json"):
        emit(records, fmt == "json", fmt == "csv", output)
        return
    data = to_parquet(records) if fmt == "parquet" else to_flat_json(records)
    if output is None:
        print(data)
        return
    write_text(output, data)
    console.print(f"wrote {len(records)} records to {output}", markup=False)


def import_(options: ImportOptions) -> None:
    """Store the records of a file (those a sweep could not write, or an export); a record
    already in the store (same uid) is not stored twice."""
    added, read, path = imported(options)
    console.print(f"imported {added} records into {path}; {read - added} were there already",
                  markup=False, highlight=False)


def merge_(options: MergeOptions) -> None:
    """Copy every record of the databases into one: each as it is stored, once (by uid);
    merging again adds nothing."""
    done = merged(options)
    for m in done:
        line = f"{m.path}: {m.read} records, {m.added} added, {m.present} there already"
        if m.different:
            line += (f" ({m.different} of them with a uid the target holds for another "
                     "record: the target's record kept)")
        console.print(line, markup=False, highlight=False)
    added = sum(m.added for m in done)
    console.print(f"merged into {options.into}: {added} records added", markup=False,
                  highlight=False)


COMMANDS = (("list", list_, ListOptions), ("show", show, ShowOptions),
            ("export", export, ExportOptions), ("import", import_, ImportOptions),
            ("merge", merge_, MergeOptions))


def register(app: typer.Typer) -> None:
    """Add the results command group."""
    results_app = typer.Typer(help="Read stored results.", no_args_is_help=True)
    for name, body, options in COMMANDS:
        results_app.command(name)(dataclass_command(body, options, help=body.__doc__ or "",
                                                    name=name))
    app.add_typer(results_app, name="results")
