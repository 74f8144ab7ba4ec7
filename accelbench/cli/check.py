"""`accelbench check`: what of accelbench works on this device, stored as a 'check' record.
Options from bench/check_options.py; the probes in bench/feature_check.py."""

from __future__ import annotations

import typer
from rich.text import Text

from accelbench.bench.check_options import CheckOptions, check_check_options
from accelbench.cli.common import check_emit, console, emit, progress_bar, table_console
from accelbench.cli.options import dataclass_command


def check(options: CheckOptions) -> None:
    """Probe every feature accelbench uses on this device (timing, memory, matmul precisions,
    attention backends, compile, fused AdamW, FP8, 2:4, energy, collectives, FSDP2); store the
    matrix."""
    check_check_options(options)
    check_emit(options.json_out, False, None)
    from accelbench.bench.feature_check import run_check, settings_for
    from accelbench.bench.recording.recorder import Recorder
    from accelbench.hardware.detect import resolve_device
    from accelbench.hardware.environment import environment
    from accelbench.report.feature_rows import check_table
    from accelbench.store.store import ResultStore

    target = resolve_device(options.device)
    recorder = Recorder(ResultStore(options.db), environment(target))
    console.print(Text(f"check on {target} ({recorder.environment['device_name']}); results -> "
                       f"{recorder.store.path}"))
    with progress_bar("check") as progress:
        record = recorder(run_check(settings_for(target, options.compile_backend),
                                    progress=progress))
    table_console(options.json_out).print(check_table(record))
    emit([record], options.json_out, False)
    recorder.close()


def register(app: typer.Typer) -> None:
    """Add the check command."""
    app.command("check")(dataclass_command(check, CheckOptions, help=check.__doc__ or "",
                                           name="check"))
