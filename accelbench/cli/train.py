"""`accelbench train`: the GPT pretraining benchmark and its sweeps.

The option definitions (`*_OPT`), `build_train_spec` and `run_and_report` are shared with
`accelbench genslm`, which is the same benchmark on codon data with other defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import RenderableType

from accelbench.bench.dtypes import TORCH_DTYPES
from accelbench.bench.outcome import Outcome, Progress, Sink
from accelbench.bench.train import run_train_sweep
from accelbench.bench.train_data import check_data
from accelbench.bench.train_spec import TrainSpec, resolve_model_source, validate_train_spec
from accelbench.cli.common import console, emit
from accelbench.config.units import parse_bytes, parse_choice_list, parse_int_list
from accelbench.hardware.detect import resolve_device
from accelbench.hardware.environment import environment
from accelbench.parallel.dist import is_rank_zero
from accelbench.results.record import Record
from accelbench.results.recorder import Recorder
from accelbench.results.store import ResultStore
from accelbench.results.table import train_table

RECOMPUTE = ("none", "selective", "full")
MODEL_HELP = ("Preset, preset:overrides, custom:layers=..., hf:DIR (a Hugging Face GPT-2 "
              "checkpoint folder) or neox:FILE (a GPT-NeoX config.json, e.g. GenSLM's).")
SEQ_HELP = "Sequence length(s), comma-separated."

MICRO_BATCH_OPT = typer.Option("8", help="Micro-batch size(s), comma-separated.")
GAS_OPT = typer.Option("1", help="Gradient accumulation steps, comma-separated.")
DTYPE_OPT = typer.Option("bf16", help="fp32, fp16 (loss scaling), bf16; comma-separated.")
RECOMPUTE_OPT = typer.Option("none", help="none, selective, full; comma-separated.")
STEPS_OPT = typer.Option(20, help="Optimizer steps per cell.")
WARMUP_STEPS_OPT = typer.Option(5, help="Steps run but not timed into the summary.")
TIME_BUDGET_OPT = typer.Option(None, help="Seconds per cell before stopping early.")
MAX_MICRO_BATCH_OPT = typer.Option(False, "--max-micro-batch",
                                   help="Find and run the largest micro-batch that fits.")
LR_OPT = typer.Option(3e-4, help="Peak learning rate (warm-up then cosine).")
LR_WARMUP_OPT = typer.Option(10, help="Steps of linear learning-rate warm-up before the cosine "
                             "decay (to 10% of --lr at the last step).")
WEIGHT_DECAY_OPT = typer.Option(0.1, help="AdamW weight decay.")
GRAD_CLIP_OPT = typer.Option(1.0, help="Gradient clipping norm (0: off).")
COMPILE_OPT = typer.Option(False, "--compile/--no-compile", help="torch.compile the model.")
TF32_OPT = typer.Option(False, "--tf32/--no-tf32", help="Allow TF32 for fp32 matmuls.")
DEVICE_OPT = typer.Option("auto", help="auto, cpu, cuda, cuda:N, xpu, mps.")
SEED_OPT = typer.Option(0, help="Seed for weights and data order.")
MEM_LIMIT_OPT = typer.Option("", help="Refuse cells estimated above this, e.g. 8GiB.")
DB_OPT = typer.Option(None, help="SQLite results file (default: $ACCELBENCH_DB or XDG).")
JSON_OPT = typer.Option(False, "--json", help="Print the records as JSON.")
CSV_OPT = typer.Option(False, "--csv", help="Print the records as CSV.")
OUTPUT_OPT = typer.Option(None, help="Write JSON/CSV here instead of stdout.")
QUIET_OPT = typer.Option(False, "--quiet", help="No per-step lines.")
NPROC_OPT = typer.Option(1, help="Processes to start with torchrun (gloo on CPU, NCCL on GPUs); "
                         "under torchrun or srun the launcher's processes are used.")
LAYOUT_OPT = typer.Option("", help="dp=..,tp=..,pp=..,vp=..,zero=0-3,sp=0|1,schedule=gpipe|1f1b|"
                          "interleaved_1f1b (default: data parallel over all processes).")
CELL_TIMEOUT_OPT = typer.Option(3600.0, help="Seconds before a launched cell is killed.")

Sweep = Callable[[TrainSpec, Sink, Progress | None, Progress | None], list[Outcome]]


def build_train_spec(*, model: str, data: str, seq: str, micro_batch: str, gas: str, dtype: str,
                     recompute: str, steps: int, warmup_steps: int, time_budget: float | None,
                     max_micro_batch: bool, lr: float, weight_decay: float, grad_clip: float,
                     compile: bool, tf32: bool, device: str, seed: int, mem_limit: str,
                     tokenizer: str = "gpt2", nproc: int = 1, layout: str = "",
                     cell_timeout: float = 3600.0, lr_warmup_steps: int = 10) -> TrainSpec:
    """Command-line values to a validated TrainSpec, its data checked too (ConfigError on the
    first bad one, before a banner is printed or a results file is made)."""
    model_cfg, checkpoint = resolve_model_source(model)
    spec = validate_train_spec(TrainSpec(
        model=model_cfg, init_checkpoint=checkpoint, data=data, tokenizer=tokenizer,
        seq_lens=parse_int_list("seq", seq),
        micro_batches=parse_int_list("micro-batch", micro_batch),
        gas=parse_int_list("gas", gas),
        dtypes=parse_choice_list("dtype", dtype, tuple(TORCH_DTYPES)),
        recomputes=parse_choice_list("recompute", recompute, RECOMPUTE), steps=steps,
        warmup_steps=warmup_steps, time_budget_s=time_budget, lr=lr, weight_decay=weight_decay,
        grad_clip=grad_clip, compile=compile, tf32=tf32, device=device, seed=seed,
        mem_limit_bytes=parse_bytes("mem-limit", mem_limit) if mem_limit else None,
        max_micro_batch=max_micro_batch, nproc=nproc, layout=layout,
        cell_timeout_s=cell_timeout, lr_warmup_steps=lr_warmup_steps))
    check_data(spec)
    return spec


def run_and_report(spec: TrainSpec, *, db: Path | None, json_out: bool, csv_out: bool,
                   output: Path | None, quiet: bool, sweep: Sweep = run_train_sweep,
                   tag: Callable[[Outcome], Outcome] | None = None,
                   table: Callable[[list[Record], str], RenderableType] = train_table,
                   step_text: Callable[[str], str] = str) -> list[Record]:
    """Run a sweep, print per-step lines and the table, store every record, emit JSON/CSV."""
    dev = resolve_device(spec.device)
    recorder = Recorder(ResultStore(db), environment(dev))
    console.quiet = not is_rank_zero()  # under torchrun/srun rank 0 alone prints and records
    console.print(f"[bold]{spec.model.name}[/] training on {dev} "
                  f"({recorder.environment['device_name']}), data {spec.data}; "
                  f"results -> {recorder.store.path}")

    def on_cell(i: int, total: int, label: str) -> None:
        console.print(f"[bold]cell {i + 1}/{total}[/]: {label}")

    def on_step(step: int, total: int, line: str) -> None:
        if not quiet:
            console.print(f"  step {step:>4}/{total}  {step_text(line)}", highlight=False)

    def sink(outcome: Outcome) -> Record:
        record = recorder(tag(outcome) if tag else outcome)
        if record.status != "ok":
            console.print(f"  [yellow]{record.status}[/]: {record.reason}")
        return record

    sweep(spec, sink, on_step, on_cell)
    console.print(table(recorder.records, f"{spec.model.name} training"))
    emit(recorder.records, json_out, csv_out, output)
    return recorder.records


def train(
    model: str = typer.Option("gpt2-xl", help=MODEL_HELP),
    data: str = typer.Option("synthetic", help="synthetic, default (built-in corpus) or PATH."),
    seq: str = typer.Option("1024", help=SEQ_HELP),
    micro_batch: str = MICRO_BATCH_OPT,
    gas: str = GAS_OPT,
    dtype: str = DTYPE_OPT,
    recompute: str = RECOMPUTE_OPT,
    steps: int = STEPS_OPT,
    warmup_steps: int = WARMUP_STEPS_OPT,
    time_budget: float = TIME_BUDGET_OPT,
    max_micro_batch: bool = MAX_MICRO_BATCH_OPT,
    lr: float = LR_OPT,
    lr_warmup_steps: int = LR_WARMUP_OPT,
    weight_decay: float = WEIGHT_DECAY_OPT,
    grad_clip: float = GRAD_CLIP_OPT,
    compile: bool = COMPILE_OPT,
    tf32: bool = TF32_OPT,
    device: str = DEVICE_OPT,
    seed: int = SEED_OPT,
    mem_limit: str = MEM_LIMIT_OPT,
    db: Path = DB_OPT,
    json_out: bool = JSON_OPT,
    csv_out: bool = CSV_OPT,
    output: Path = OUTPUT_OPT,
    quiet: bool = QUIET_OPT,
    nproc: int = NPROC_OPT,
    layout: str = LAYOUT_OPT,
    cell_timeout: float = CELL_TIMEOUT_OPT,
) -> None:
    """Run real training steps and report tokens/s, TFLOPS, MFU, HFU, memory and loss."""
    spec = build_train_spec(
        model=model, data=data, seq=seq, micro_batch=micro_batch, gas=gas, dtype=dtype,
        recompute=recompute, steps=steps, warmup_steps=warmup_steps, time_budget=time_budget,
        max_micro_batch=max_micro_batch, lr=lr, weight_decay=weight_decay, grad_clip=grad_clip,
        compile=compile, tf32=tf32, device=device, seed=seed, mem_limit=mem_limit, nproc=nproc,
        layout=layout, cell_timeout=cell_timeout, lr_warmup_steps=lr_warmup_steps)
    run_and_report(spec, db=db, json_out=json_out, csv_out=csv_out, output=output, quiet=quiet)


def register(app: typer.Typer) -> None:
    """Add the train command."""
    app.command("train")(train)
