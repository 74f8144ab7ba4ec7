"""The training commands' presentation (train, genslm, scale): the sweep's banner, cell and
step lines, recording through the one session, the table; `run_train` is train's body."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import typer
from rich.text import Text

from accelbench.bench.train.train_options import TrainOptions
from accelbench.cli.common import cell_lines, check_emit, console, emit, table_console
from accelbench.cli.options import Outputs
from accelbench.config.record_kinds import carries
from accelbench.config.records.peak import PeakMetrics
from accelbench.config.workload import Workload
from accelbench.report.table import train_table
from accelbench.store.record import Record

if TYPE_CHECKING:  # the runner imports torch: loaded when a command runs, not for --help
    from accelbench.bench.outcome import Outcome
    from accelbench.bench.recording.session import Sweep, SweepView
    from accelbench.bench.train.cell_metrics import StepReport
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


def run_and_show(spec: TrainSpec, sweep: Sweep, out: Outputs,
                 table: Callable[[list[Record], str], object] = train_table,
                 tag: Callable[[Outcome], Outcome] | None = None) -> list[Record]:
    """Record the sweep (rank 0), then print its table and any JSON/CSV (the cells finished
    on this machine before, unless `rerun`, are skipped and shown from the store)."""
    from accelbench.bench.recording.session import open_recorder

    check_emit(out.json_out, out.csv_out, out.output)
    recorder = open_recorder(out.db, spec.device)
    title = f"{spec.model.name} {spec.benchmark}"
    lines = cell_lines(spec.benchmark)
    records = recorded(sweep, recorder, sweep_view(spec, out.quiet, lines and lines.update),
                       f"{title}, data {spec.data}", tag, out.rerun,
                       remeasure_peak=out.remeasure_peak)
    if lines is not None:
        lines.close()
    if recorder is not None:
        # peaks are named in the caption
        cells = [r for r in records if not carries(r.kind, PeakMetrics)]
        table_console((out.json_out or out.csv_out) and out.output is None,
                      out.wide).print(table(cells, title))
        emit(records, out.json_out, out.csv_out, out.output)
        recorder.close()  # raises, naming the file, if a record could not be stored
    return records


def run_train(workload: Workload, options: TrainOptions, out: Outputs) -> None:
    """`accelbench train`: real training steps; tokens/s, TFLOPS, MFU, HFU, memory and loss."""
    spec = workload.build(options)
    run = workload.run
    run_and_show(spec, lambda sink, step, cell, skip: run(spec, sink, step, cell, skip), out)
