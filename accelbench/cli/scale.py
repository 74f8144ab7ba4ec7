"""`accelbench scale`: the scaling study (throughput, speedup, scaling efficiency)."""

from __future__ import annotations

from pathlib import Path

import typer

from accelbench.bench.scale import ScaleSpec, run_scale, summary_outcome
from accelbench.cli import train as t
from accelbench.cli.common import console, emit
from accelbench.config.units import parse_int_list
from accelbench.hardware.detect import resolve_device
from accelbench.hardware.environment import environment
from accelbench.results.recorder import Recorder
from accelbench.results.store import ResultStore
from accelbench.results.table import scale_table, train_table


def scale(
    devices: str = typer.Option("1,2", help="Device (process) counts, comma-separated."),
    mode: str = typer.Option("weak", help="weak (same micro-batch per device) or strong "
                             "(same global batch)."),
    zero: int = typer.Option(0, help="ZeRO stage of the data-parallel layout (0-3)."),
    model: str = typer.Option("gpt2", help=t.MODEL_HELP),
    data: str = typer.Option("synthetic", help="synthetic, default or PATH."),
    seq: str = typer.Option("1024", help="Sequence length."),
    micro_batch: str = t.MICRO_BATCH_OPT, gas: str = t.GAS_OPT, dtype: str = t.DTYPE_OPT,
    recompute: str = t.RECOMPUTE_OPT, steps: int = t.STEPS_OPT,
    warmup_steps: int = t.WARMUP_STEPS_OPT, lr: float = t.LR_OPT,
    compile: bool = t.COMPILE_OPT, tf32: bool = t.TF32_OPT, device: str = t.DEVICE_OPT,
    seed: int = t.SEED_OPT, mem_limit: str = t.MEM_LIMIT_OPT,
    cell_timeout: float = t.CELL_TIMEOUT_OPT, db: Path = t.DB_OPT,
    json_out: bool = t.JSON_OPT, csv_out: bool = t.CSV_OPT, output: Path = t.OUTPUT_OPT,
) -> None:
    """Run one training cell at each device count and report table II's columns."""
    base = t.build_train_spec(
        model=model, data=data, seq=seq, micro_batch=micro_batch, gas=gas, dtype=dtype,
        recompute=recompute, steps=steps, warmup_steps=warmup_steps, time_budget=None,
        max_micro_batch=False, lr=lr, weight_decay=0.1, grad_clip=1.0, compile=compile,
        tf32=tf32, device=device, seed=seed, mem_limit=mem_limit, cell_timeout=cell_timeout)
    study = ScaleSpec(base, parse_int_list("devices", devices), mode, zero)
    recorder = Recorder(ResultStore(db), environment(resolve_device(device)))
    console.print(f"[bold]{base.model.name}[/] {mode} scaling over {study.devices} device(s); "
                  f"results -> {recorder.store.path}")

    def on_cell(i: int, total: int, label: str) -> None:
        console.print(f"[bold]count {i + 1}/{total}[/]: {label}")

    outcomes = run_scale(study, recorder, on_cell)
    summary = recorder(summary_outcome(study, outcomes))
    console.print(train_table(recorder.records[:-1], f"{base.model.name}: cells"))
    console.print(scale_table(summary.metrics["rows"], f"{base.model.name}: {mode} scaling"))
    emit(recorder.records, json_out, csv_out, output)


def register(app: typer.Typer) -> None:
    """Add the scale command."""
    app.command("scale")(scale)
