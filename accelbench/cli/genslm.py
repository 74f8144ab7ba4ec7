"""`accelbench genslm`: the training benchmark on codon data (GenSLM), and the longest sequence.

Every `accelbench train` option, shared from accelbench/cli/train.py; only the defaults differ
(model genslm-25m, data default = the shipped genomes through the codon tokenizer, seq 2048).
Tokens are codons, so throughput is labelled codons/s (the same tokens_per_s metrics).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer
from rich.console import Group, RenderableType
from rich.table import Table

from accelbench.bench.outcome import Outcome
from accelbench.bench.search import SEARCH_KIND, run_longest_seq_sweep, search_cells
from accelbench.bench.train import run_train_sweep
from accelbench.cli import train as train_cli
from accelbench.data.genome_corpus import codon_tokenizer_name
from accelbench.results.record import Record
from accelbench.results.table import train_table

GIB = 2**30


def _tag(outcome: Outcome) -> Outcome:
    """Mark GenSLM records: the benchmark that ran them and what a token is."""
    return replace(outcome, spec={**outcome.spec, "benchmark": "genslm", "token_unit": "codon"})


def _probe_table(records: list[Record]) -> Table:
    """The longest-sequence search, one row per probe in the order tried."""
    table = Table(title="longest-sequence search (probes)")
    for column in ("mb", "gas", "dtype", "recompute", "probe", "seq", "method", "fits",
                   "est. GiB", "budget GiB"):
        table.add_column(column, justify="right")
    for r in records:
        s, m = r.spec, r.metrics
        budget = m.get("mem_budget_bytes")
        table.add_row(str(s["micro_batch"]), str(s["gas"]), s["dtype"], s["recompute"],
                      str(s["probe"]), str(s["seq_len"]), s["method"],
                      "yes" if m["fits"] else "no", f"{m['mem_estimate_bytes'] / GIB:.2f}",
                      "-" if budget is None else f"{budget / GIB:.2f}")
    return table


def codon_tables(records: list[Record], title: str) -> RenderableType:
    """The training table with throughput labelled codons/s, after the search's probes if any."""
    probes = [r for r in records if r.kind == SEARCH_KIND]
    table = train_table([r for r in records if r.kind != SEARCH_KIND], title)
    for column in table.columns:
        if column.header == "tokens/s":
            column.header = "codons/s"
    if table.caption:
        table.caption = str(table.caption).replace("tokens/s", "codons/s (1 token = 1 codon)")
    return Group(_probe_table(probes), table) if probes else table


def genslm(
    model: str = typer.Option("genslm-25m", help=train_cli.MODEL_HELP + " GenSLM presets: "
                              "genslm-25m, -250m, -2.5b, -25b (+ -10k), genslm-13b, -1.5b."),
    data: str = typer.Option("default", help="default (the shipped SARS-CoV-2 genomes as codons),"
                             " synthetic, or a shard folder from `data prepare --genome`."),
    frame: int = typer.Option(0, help="Codon reading frame of the data: 0, 1 or 2."),
    seq: str = typer.Option("2048", help=train_cli.SEQ_HELP + " With --longest-seq: the start."),
    longest_seq: bool = typer.Option(
        False, "--longest-seq", help="Find the longest sequence that fits (doubling from --seq, "
        "then bisection; trial on an accelerator, memory estimate on a CPU), then measure it."),
    micro_batch: str = train_cli.MICRO_BATCH_OPT,
    gas: str = train_cli.GAS_OPT,
    dtype: str = train_cli.DTYPE_OPT,
    recompute: str = train_cli.RECOMPUTE_OPT,
    steps: int = train_cli.STEPS_OPT,
    warmup_steps: int = train_cli.WARMUP_STEPS_OPT,
    time_budget: float = train_cli.TIME_BUDGET_OPT,
    max_micro_batch: bool = train_cli.MAX_MICRO_BATCH_OPT,
    lr: float = train_cli.LR_OPT,
    lr_warmup_steps: int = train_cli.LR_WARMUP_OPT,
    weight_decay: float = train_cli.WEIGHT_DECAY_OPT,
    grad_clip: float = train_cli.GRAD_CLIP_OPT,
    compile: bool = train_cli.COMPILE_OPT,
    tf32: bool = train_cli.TF32_OPT,
    device: str = train_cli.DEVICE_OPT,
    seed: int = train_cli.SEED_OPT,
    mem_limit: str = train_cli.MEM_LIMIT_OPT,
    db: Path = train_cli.DB_OPT,
    json_out: bool = train_cli.JSON_OPT,
    csv_out: bool = train_cli.CSV_OPT,
    output: Path = train_cli.OUTPUT_OPT,
    quiet: bool = train_cli.QUIET_OPT,
    nproc: int = train_cli.NPROC_OPT,
    layout: str = train_cli.LAYOUT_OPT,
    cell_timeout: float = train_cli.CELL_TIMEOUT_OPT,
) -> None:
    """GenSLM training on genomes: codons/s, TFLOPS, MFU, HFU, memory, loss; longest sequence."""
    spec = train_cli.build_train_spec(
        model=model, data=data, seq=seq, micro_batch=micro_batch, gas=gas, dtype=dtype,
        recompute=recompute, steps=steps, warmup_steps=warmup_steps, time_budget=time_budget,
        max_micro_batch=max_micro_batch, lr=lr, weight_decay=weight_decay, grad_clip=grad_clip,
        compile=compile, tf32=tf32, device=device, seed=seed, mem_limit=mem_limit,
        tokenizer=codon_tokenizer_name(frame), nproc=nproc, layout=layout,
        cell_timeout=cell_timeout, lr_warmup_steps=lr_warmup_steps)
    if longest_seq:
        search_cells(spec)  # refuse a spec that cannot be searched before anything runs
    train_cli.run_and_report(
        spec, db=db, json_out=json_out, csv_out=csv_out, output=output, quiet=quiet,
        sweep=run_longest_seq_sweep if longest_seq else run_train_sweep, tag=_tag,
        table=codon_tables, step_text=lambda line: line.replace("tok/s", "codons/s"))


def register(app: typer.Typer) -> None:
    """Add the genslm command."""
    app.command("genslm")(genslm)
