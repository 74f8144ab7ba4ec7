"""`accelbench check`: what of accelbench works on this device, stored as a 'check' record."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.text import Text

from accelbench.cli.common import check_emit, console, emit, progress_bar, table_console
from accelbench.config.errors import require_choice
from accelbench.config.vocab import COMPILE_BACKENDS


def check(
    device: str = typer.Option("auto", help="auto, cpu, cuda, cuda:N, xpu, mps."),
    compile_backend: str = typer.Option("inductor", help="torch.compile backend of the compile "
                                        "probe: inductor, aot_eager, eager."),
    db: Path = typer.Option(None, help="SQLite results file (default: $ACCELBENCH_DB or XDG)."),
    json_out: bool = typer.Option(False, "--json", help="Print the check record as JSON."),
) -> None:
    """Probe every feature accelbench uses on this device (timing, memory, matmul precisions,
    attention backends, compile, fused AdamW, FP8, 2:4, energy, collectives, FSDP2); store the
    matrix."""
    require_choice("compile-backend", compile_backend, COMPILE_BACKENDS)
    check_emit(json_out, False, None)
    from accelbench.bench.check import run_check, settings_for
    from accelbench.bench.recording.recorder import Recorder
    from accelbench.hardware.detect import resolve_device
    from accelbench.hardware.environment import environment
    from accelbench.report.check import check_table
    from accelbench.store.store import ResultStore

    target = resolve_device(device)
    recorder = Recorder(ResultStore(db), environment(target))
    console.print(Text(f"check on {target} ({recorder.environment['device_name']}); results -> "
                       f"{recorder.store.path}"))
    with progress_bar("check") as progress:
        record = recorder(run_check(settings_for(target, compile_backend), progress=progress))
    table_console(json_out).print(check_table(record))
    emit([record], json_out, False)
    recorder.close()


def register(app: typer.Typer) -> None:
    """Add the check command."""
    app.command("check")(check)
