"""`accelbench train`: the GPT pretraining benchmark and its sweeps (parse, call, render)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.text import Text

from accelbench.bench.train.options import TrainOptions, build_spec
from accelbench.cli.common import cell_lines, check_emit, console, emit, table_console
from accelbench.cli.options import training_command
from accelbench.report.table import train_table
from accelbench.store.record import Record

if TYPE_CHECKING:  # the runner imports torch: loaded when a command runs, not for --help
    from accelbench.bench.outcome import Outcome
    from accelbench.bench.recording.session import Sweep, SweepView
    from accelbench.bench.train.metrics import StepReport
    from accelbench.bench.train.spec import TrainSpec


def sweep_view(spec: TrainSpec, quiet: bool,
               lines: Callable[[int, int, str], None] | None = None) -> SweepView:
    """Banner, cell and step lines on stderr; text from outside printed as text; `lines` is
    told of each cell too (off a terminal: a line per finished cell with its time)."""
    from accelbench.bench.recording.session import SweepView
    from accelbench.report.lines import step_line

    def step(report: StepReport) -> None:
        console.print(Text("  " + step_line(report, spec.token_unit)), highlight=False)

    def failed(record: Record) -> None:
        console.print(Text(f"  {record.status}: {record.reason}", style="yellow"))

    def cell(i: int, total: int, label: str) -> None:
        if lines is not None:
            lines(i, total, label)
        console.print(Text(f"cell {i + 1}/{total}: {label}"))

    return SweepView(
        banner=lambda text: console.print(Text(text, style="bold")),
        cell=cell,
        step=None if quiet else step, failed=failed,
        note=lambda text: console.print(Text(text), highlight=False))


def recorded(*args, **kwargs) -> list[Record]:
    """record_sweep; a sweep stopped by SIGINT/SIGTERM prints its one line of what was kept and
    exits with 130/143."""
    from accelbench.bench.recording.interrupted import SweepInterrupted
    from accelbench.bench.recording.session import record_sweep

    try:
        return record_sweep(*args, **kwargs)
    except SweepInterrupted as stop:
        console.print(Text(stop.line), soft_wrap=True, highlight=False)
        raise typer.Exit(stop.exit_code) from None


def run_and_show(spec: TrainSpec, sweep: Sweep, *, db: Path | None, json_out: bool,
                 csv_out: bool, output: Path | None, quiet: bool, rerun: bool = False,
                 table: Callable[[list[Record], str], object] = train_table,
                 tag: Callable[[Outcome], Outcome] | None = None,
                 wide: bool = False) -> list[Record]:
    """Record the sweep (rank 0), then print its table and any JSON/CSV (the cells finished
    on this machine before, unless `rerun`, are skipped and shown from the store)."""
    from accelbench.bench.peak import PEAK_KIND
    from accelbench.bench.recording.session import open_recorder

    check_emit(json_out, csv_out, output)
    recorder = open_recorder(db, spec.device)
    title = f"{spec.model.name} {spec.benchmark}"
    lines = cell_lines(spec.benchmark)
    records = recorded(sweep, recorder, sweep_view(spec, quiet, lines and lines.update),
                       f"{title}, data {spec.data}", tag, rerun)
    if lines is not None:
        lines.close()
    if recorder is not None:
        cells = [r for r in records if r.kind != PEAK_KIND]  # peaks are named in the caption
        table_console((json_out or csv_out) and output is None, wide).print(table(cells, title))
        emit(records, json_out, csv_out, output)
        recorder.close()  # raises, naming the file, if a record could not be stored
    return records


@training_command()
def train(options: TrainOptions, db: Path | None, json_out: bool, csv_out: bool,
          output: Path | None, quiet: bool, rerun: bool, wide: bool) -> None:
    """Run real training steps and report tokens/s, TFLOPS, MFU, HFU, memory and loss."""
    from accelbench.bench.train.sweep import run_train_sweep

    spec = build_spec(options)
    run_and_show(spec, lambda sink, step, cell, skip: run_train_sweep(spec, sink, step, cell,
                                                                      skip),
                 db=db, json_out=json_out, csv_out=csv_out, output=output, quiet=quiet,
                 rerun=rerun, wide=wide)


def register(app: typer.Typer) -> None:
    """Add the train command."""
    app.command("train")(train)
