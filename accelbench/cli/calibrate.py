"""`accelbench calibrate`: measure this machine's micro-benchmarks into a stored profile."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.text import Text

from accelbench.bench.calibrate.spec import CalibrateOptions, build_calibrate_spec
from accelbench.bench.recording.recorder import Recorder
from accelbench.cli.common import check_emit, console, emit, progress_bar, table_console
from accelbench.report.profile import profile_table, profile_with_blocks
from accelbench.store.store import ResultStore

_DEFAULT = CalibrateOptions()


def calibrate(
    device: str = typer.Option("auto", help="auto, cpu, cuda, cuda:N, xpu, mps."),
    ops: str = typer.Option(_DEFAULT.ops, help="Comma-separated micro-benchmarks."),
    dtype: str = typer.Option(_DEFAULT.dtype, help="GEMM and attention precisions."),
    model: str = typer.Option(_DEFAULT.model, help="Preset whose layer GEMM shapes are timed."),
    tokens: str = typer.Option("", help="GEMM rows (batch x sequence), e.g. 128,512,2048."),
    gemm_passes: str = typer.Option(_DEFAULT.gemm_passes, help="Products of a linear layer."),
    seq: str = typer.Option("", help="Attention sequence lengths, e.g. 256,512,1024."),
    head_dim: str = typer.Option("", help="Attention head sizes (default: the model's)."),
    memory_ops: str = typer.Option(_DEFAULT.memory_ops, help="Streaming ops: copy, adamw."),
    memory_sizes: str = typer.Option("", help="fp32 buffer sizes, e.g. 16MiB,64MiB."),
    collectives: str = typer.Option(_DEFAULT.collectives, help="Collectives to time."),
    message_sizes: str = typer.Option("", help="Collective message sizes, e.g. 4KiB,1MiB."),
    optimizer_params: str = typer.Option("", help="Optimizer update sizes, e.g. 16M,128M."),
    nproc: int = typer.Option(0, help="Collective processes (0: every device; 2 on a CPU)."),
    threads: int = typer.Option(0, help="CPU threads of GEMM, attention, memory (0: torch's)."),
    repeats: int = typer.Option(_DEFAULT.repeats, help="Timed repetitions per point."),
    warmup: int = typer.Option(_DEFAULT.warmup, help="Untimed warm-up calls per point."),
    timeout: float = typer.Option(_DEFAULT.timeout_s, help="Seconds the collectives may take."),
    quick: bool = typer.Option(False, "--quick", help="Fewer, smaller sizes (seconds on a CPU)."),
    concurrent: bool = typer.Option(False, "--concurrent", help="Compute points on all --nproc "
                                    "ranks at once, one thread each (a launched rank's view)."),
    from_block: bool = typer.Option(False, "--from-block", help="Measure nothing: store the "
                                    "newest profile (at --threads) plus the block records."),
    db: Path = typer.Option(None, help="SQLite results file (default: $ACCELBENCH_DB or XDG)."),
    json_out: bool = typer.Option(False, "--json", help="Print the profile record as JSON."),
    wide: bool = typer.Option(False, "--wide", help="Every column of the table, wider than the "
                              "terminal if need be."),
) -> None:
    """Time GEMMs, fused attention, memory, the loss, embedding, optimizer and collectives;
    store the profile."""
    if from_block:
        _from_block(db, threads, json_out, wide)
        return
    from accelbench.bench.calibrate.run import CalibrationInterrupted, run_calibration
    from accelbench.hardware.detect import resolve_device
    from accelbench.hardware.environment import environment

    target = resolve_device(device)
    spec = build_calibrate_spec(CalibrateOptions(
        device=device, ops=ops, dtype=dtype, model=model, tokens=tokens, gemm_passes=gemm_passes,
        seq=seq,
        head_dim=head_dim, memory_ops=memory_ops, memory_sizes=memory_sizes,
        collectives=collectives, message_sizes=message_sizes, optimizer_params=optimizer_params,
        nproc=nproc, threads=threads,
        repeats=repeats,
        warmup=warmup, timeout_s=timeout, quick=quick, concurrent=concurrent), target.type)
    check_emit(json_out, False, None)
    recorder = Recorder(ResultStore(db), environment(target))
    console.print(Text(f"calibrate {','.join(spec.ops)} on {target} "
                       f"({recorder.environment['device_name']}); results -> "
                       f"{recorder.store.path}"))
    try:
        with progress_bar("calibrate") as progress:
            record = recorder(run_calibration(spec, target, progress))
    except CalibrationInterrupted as stop:
        kept = recorder(stop.outcome)
        console.print(Text(f"{stop.outcome.reason}; the points measured before are kept as "
                           f"record {kept.id} (status interrupted)"))
        recorder.close()
        raise typer.Exit(stop.exit_code) from None
    if record.reason:
        console.print(Text(f"note: {record.reason}"))
    table_console(json_out, wide).print(profile_table(record))
    emit([record], json_out, False)
    recorder.close()


def _from_block(db: Path | None, threads: int, json_out: bool, wide: bool = False) -> None:
    """Store the newest profile refined with the store's block records, and print it."""
    check_emit(json_out, False, None)
    store = ResultStore(db)
    outcome, env = profile_with_blocks(store, threads)
    recorder = Recorder(store, env)
    record = recorder(outcome)
    console.print(Text(f"note: {record.reason}"))
    table_console(json_out, wide).print(profile_table(record))
    emit([record], json_out, False)
    recorder.close()


def register(app: typer.Typer) -> None:
    """Add the calibrate command."""
    app.command("calibrate")(calibrate)
