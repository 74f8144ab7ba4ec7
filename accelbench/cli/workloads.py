"""Every registered workload as a command (config/workload.py; the built-in ones declared in
accelbench/workloads/): options generated from its options dataclass, a body that runs it and
prints its table. A workload with its own way of showing results (the training commands'
per-step lines, genslm's search, scale's summary, calibrate's profile) has its body attached
here by name; any other runs through `run_sweep`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from rich.text import Text

import accelbench.workloads  # noqa: F401 - registers the built-in workloads
from accelbench.cli.calibrate import run_calibrate
from accelbench.cli.common import check_emit, console, emit, progress_bar, table_console
from accelbench.cli.genslm import run_genslm
from accelbench.cli.options import Outputs, workload_command
from accelbench.cli.scale import run_scale
from accelbench.cli.train import recorded, run_train
from accelbench.config.workload import Workload, workloads

Body = Callable[[Workload, Any, Outputs], None]

BODIES: dict[str, Body] = {"train": run_train, "genslm": run_genslm, "scale": run_scale,
                           "calibrate": run_calibrate}


def run_sweep(workload: Workload, options: Any, out: Outputs) -> None:
    """Build the spec (bad input: exit 2 before anything runs), run the sweep through the one
    run-and-record session with a progress bar, print the workload's table of its first
    record kind (JSON/CSV if asked). Cells finished on this machine before are skipped and
    shown from the store, unless --rerun."""
    from accelbench.bench.recording.recorder import Recorder
    from accelbench.bench.recording.session import SweepView
    from accelbench.hardware.detect import resolve_device
    from accelbench.hardware.environment import environment
    from accelbench.store.store import ResultStore

    spec = workload.build(options)
    check_emit(out.json_out, out.csv_out, out.output)
    recorder = Recorder(ResultStore(out.db), environment(resolve_device(spec.device)))
    title = getattr(spec, "title", workload.name)

    def sweep(sink, step, cell, skip):  # the bar ends before a line about an interruption
        with progress_bar(workload.name) as progress:
            return workload.run(spec, sink, None, _both(cell, progress), skip)

    view = SweepView(banner=lambda text: console.print(Text(text, style="bold")),
                     cell=lambda i, total, label: None, step=None, failed=lambda record: None,
                     note=lambda text: console.print(Text(text), highlight=False))
    records = recorded(sweep, recorder, view, title, rerun=out.rerun,
                       remeasure_peak=out.remeasure_peak)
    cells = [r for r in records if r.kind == next(iter(workload.kinds))]  # peaks: the caption
    shown = table_console((out.json_out or out.csv_out) and out.output is None, out.wide)
    shown.print(workload.table(cells, title))
    emit(records, out.json_out, out.csv_out, out.output)
    recorder.close()  # raises, naming the file, if a record could not be stored


def _both(first: Callable, second: Callable) -> Callable:
    """A progress callback that tells both."""
    def told(i: int, total: int, label: str) -> None:
        first(i, total, label)
        second(i, total, label)
    return told


def register(app: typer.Typer) -> None:
    """A command for every registered workload, in the order registered."""
    for workload in workloads():
        body = BODIES.get(workload.name, run_sweep)
        app.command(workload.name)(workload_command(workload, body))
