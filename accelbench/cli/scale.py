"""`accelbench scale`: the scaling study (throughput, speedup, scaling efficiency)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.text import Text

from accelbench.bench.train.options import (
    SCALE_DEFAULTS,
    SCALE_SKIPS,
    TrainOptions,
    build_spec,
)
from accelbench.cli.common import cell_lines, check_emit, console, emit, table_console
from accelbench.cli.options import training_command
from accelbench.cli.train import recorded, sweep_view
from accelbench.config.units import parse_int_list
from accelbench.report.table import scale_table, train_table


@training_command(skip=SCALE_SKIPS, **SCALE_DEFAULTS)
def scale(
    options: TrainOptions, db: Path | None, json_out: bool, csv_out: bool, output: Path | None,
    quiet: bool, rerun: bool, wide: bool,
    devices: str = typer.Option("1,2", help="Device (process) counts, comma-separated."),
    mode: str = typer.Option("weak", help="weak (same micro-batch per device) or strong "
                             "(same global batch)."),
    zero: int = typer.Option(0, help="ZeRO stage of the data-parallel layout (0-3)."),
) -> None:
    """Run one training cell at each device count and report table II's columns."""
    from accelbench.bench.recording.resume import stored_summary
    from accelbench.bench.recording.session import open_recorder
    from accelbench.bench.scale import ScaleSpec, run_scale, summary_outcome, validate_scale

    base = build_spec(options)
    study = validate_scale(ScaleSpec(base, parse_int_list("devices", devices), mode, zero))
    check_emit(json_out, csv_out, output)
    recorder = open_recorder(db, base.device)
    title = f"{base.model.name} {mode} scaling over {list(study.devices)} device(s)"
    lines = cell_lines("scale")
    records = recorded(lambda sink, step, cell, skip: run_scale(study, sink, cell, skip),
                       recorder, sweep_view(base, quiet, lines and lines.update), title,
                       rerun=rerun)
    if lines is not None:
        lines.close()
    if recorder is None:
        return
    cells = [r for r in records if r.kind == "train"]
    summary = stored_summary(recorder, summary_outcome(study, cells))
    tables = table_console((json_out or csv_out) and output is None, wide)
    tables.print(train_table(cells, f"{base.model.name}: cells"))
    tables.print(scale_table(summary.typed.rows, f"{base.model.name}: {mode} scaling"))
    console.print(Text(summary.reason))
    emit([*records, summary], json_out, csv_out, output)
    recorder.close()  # raises, naming the file, if a record could not be stored


def register(app: typer.Typer) -> None:
    """Add the scale command."""
    app.command("scale")(scale)
