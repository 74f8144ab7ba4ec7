"""Rendering helpers shared by the commands: console, progress bar, output formats."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from accelbench.bench.outcome import Progress as ProgressFn
from accelbench.config.errors import ConfigError
from accelbench.report.cell_lines import CellLines
from accelbench.report.export import check_output, to_csv, to_json, write_text
from accelbench.report.table_width import FitConsole
from accelbench.store.record import Record

# Two consoles (report/table_width.py's: the terminal's width on a terminal; off one, COLUMNS
# or a width for the widest table), and their tables fit that width (`widened` for --wide):
# `out` (stdout) for a command's own result: its tables and listings. It never reads markup, so
# names, paths and reasons from users, files and other processes print as they are.
# `console` (stderr) for messages: banners, progress, per-step lines, warnings; it reads markup,
# so text from outside goes to it as rich.text.Text or with markup=False.
# --json/--csv data goes to stdout through print() alone (nothing else on stdout then).
out = FitConsole(markup=False)
console = FitConsole(stderr=True)
_err_tables = FitConsole(stderr=True, markup=False)


def table_console(data_on_stdout: bool, wide: bool = False) -> FitConsole:
    """Where a command's table goes: `out`, or stderr while --json/--csv data holds stdout (so
    the data stays clean); neither reads markup. `wide`: every column (--wide)."""
    return (_err_tables if data_on_stdout else out).widened(wide)


def say_line(line: str) -> None:
    """One line of text on stderr, as it is (no markup, no wrapping)."""
    console.print(Text(line), highlight=False, soft_wrap=True)


def cell_lines(title: str) -> CellLines | None:
    """Off a terminal (stderr to a log or a pipe), the line per finished cell that stands in for
    a progress bar there; None on a terminal."""
    return None if sys.stderr.isatty() else CellLines(title, say_line)


@contextmanager
def progress_bar(title: str) -> Iterator[ProgressFn]:
    """A sweep's (done, total, label) callback shown as a rich progress bar on a terminal, or,
    off one (a log, a pipe), as one plain line per finished cell on stderr."""
    lines = cell_lines(title)
    if lines is not None:
        yield lines.update
        lines.close()
        return
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total} {task.fields[label]}", markup=False),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task(title, total=None, label="")

        def update(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, label=label)

        yield update


def check_emit(as_json: bool, as_csv: bool, path: Path | None) -> None:
    """The output options of a measuring command, checked before a banner, a results file or
    a measurement: one format at most, and --output a file in an existing folder that a format
    is written to."""
    if as_json and as_csv:
        raise ConfigError("csv", "give --json or --csv, not both", "one of them")
    if path is not None:
        if not (as_json or as_csv):
            raise ConfigError("output", "writes the --json or --csv text, and neither was "
                              "given", "--output with --json or --csv")
        check_output(path)


def emit(records: list[Record], as_json: bool, as_csv: bool, path: Path | None = None) -> None:
    """Write records as JSON or CSV to a file or stdout when asked."""
    if not (as_json or as_csv):
        return
    text = to_json(records) if as_json else to_csv(records)
    if path:
        write_text(path, text)
        console.print(f"wrote {len(records)} records to {path}", markup=False)
    else:
        print(text)
