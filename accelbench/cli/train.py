"""`accelbench train`: the GPT pretraining benchmark and its sweeps."""

from __future__ import annotations

from pathlib import Path

import typer

from accelbench.bench.dtypes import TORCH_DTYPES
from accelbench.bench.train import run_train_sweep
from accelbench.bench.train_spec import TrainSpec, resolve_model_source, validate_train_spec
from accelbench.cli.common import console, emit
from accelbench.config.units import parse_bytes, parse_choice_list, parse_int_list
from accelbench.hardware.detect import resolve_device
from accelbench.hardware.environment import environment
from accelbench.results.recorder import Recorder
from accelbench.results.store import ResultStore
from accelbench.results.table import train_table

RECOMPUTE = ("none", "selective", "full")


def train(
    model: str = typer.Option("gpt2-xl", help="Preset, preset:overrides, custom:layers=..., "
                              "or hf:DIR (a Hugging Face GPT-2 checkpoint folder)."),
    data: str = typer.Option("synthetic", help="synthetic, default (built-in corpus) or PATH."),
    seq: str = typer.Option("1024", help="Sequence length(s), comma-separated."),
    micro_batch: str = typer.Option("8", help="Micro-batch size(s), comma-separated."),
    gas: str = typer.Option("1", help="Gradient accumulation steps, comma-separated."),
    dtype: str = typer.Option("bf16", help="fp32, fp16 (loss scaling), bf16; comma-separated."),
    recompute: str = typer.Option("none", help="none, selective, full; comma-separated."),
    steps: int = typer.Option(20, help="Optimizer steps per cell."),
    warmup_steps: int = typer.Option(5, help="Steps run but not timed into the summary."),
    time_budget: float = typer.Option(None, help="Seconds per cell before stopping early."),
    max_micro_batch: bool = typer.Option(False, "--max-micro-batch",
                                         help="Find and run the largest micro-batch that fits."),
    lr: float = typer.Option(3e-4, help="Peak learning rate (warm-up then cosine)."),
    weight_decay: float = typer.Option(0.1, help="AdamW weight decay."),
    grad_clip: float = typer.Option(1.0, help="Gradient clipping norm (0: off)."),
    compile: bool = typer.Option(False, "--compile/--no-compile", help="torch.compile the model."),
    tf32: bool = typer.Option(False, "--tf32/--no-tf32", help="Allow TF32 for fp32 matmuls."),
    device: str = typer.Option("auto", help="auto, cpu, cuda, cuda:N, xpu, mps."),
    seed: int = typer.Option(0, help="Seed for weights and data order."),
    mem_limit: str = typer.Option("", help="Refuse cells estimated above this, e.g. 8GiB."),
    db: Path = typer.Option(None, help="SQLite results file (default: $ACCELBENCH_DB or XDG)."),
    json_out: bool = typer.Option(False, "--json", help="Print the records as JSON."),
    csv_out: bool = typer.Option(False, "--csv", help="Print the records as CSV."),
    output: Path = typer.Option(None, help="Write JSON/CSV here instead of stdout."),
    quiet: bool = typer.Option(False, "--quiet", help="No per-step lines."),
) -> None:
    """Run real training steps and report tokens/s, TFLOPS, MFU, HFU, memory and loss."""
    model_cfg, checkpoint = resolve_model_source(model)
    spec = validate_train_spec(TrainSpec(
        model=model_cfg, init_checkpoint=checkpoint, data=data, seq_lens=parse_int_list("seq", seq),
        micro_batches=parse_int_list("micro-batch", micro_batch),
        gas=parse_int_list("gas", gas),
        dtypes=parse_choice_list("dtype", dtype, tuple(TORCH_DTYPES)),
        recomputes=parse_choice_list("recompute", recompute, RECOMPUTE), steps=steps,
        warmup_steps=warmup_steps, time_budget_s=time_budget, lr=lr, weight_decay=weight_decay,
        grad_clip=grad_clip, compile=compile, tf32=tf32, device=device, seed=seed,
        mem_limit_bytes=parse_bytes("mem-limit", mem_limit) if mem_limit else None,
        max_micro_batch=max_micro_batch))
    dev = resolve_device(device)
    recorder = Recorder(ResultStore(db), environment(dev))
    console.print(f"[bold]{spec.model.name}[/] training on {dev} "
                  f"({recorder.environment['device_name']}), data {data}; "
                  f"results -> {recorder.store.path}")

    def on_cell(i: int, total: int, label: str) -> None:
        console.print(f"[bold]cell {i + 1}/{total}[/]: {label}")

    def on_step(step: int, total: int, line: str) -> None:
        if not quiet:
            console.print(f"  step {step:>4}/{total}  {line}", highlight=False)

    def sink(outcome):
        record = recorder(outcome)
        if record.status != "ok":
            console.print(f"  [yellow]{record.status}[/]: {record.reason}")
        return record

    run_train_sweep(spec, sink, on_step, on_cell)
    console.print(train_table(recorder.records, f"{spec.model.name} training"))
    emit(recorder.records, json_out, csv_out, output)


def register(app: typer.Typer) -> None:
    """Add the train command."""
    app.command("train")(train)
