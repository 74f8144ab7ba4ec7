"""`accelbench genslm`: the training benchmark on codon data (GenSLM), and the longest sequence.

Every `accelbench train` option (the one option set), with GenSLM's defaults: model genslm-25m,
data default = the shipped genomes through the codon tokenizer, seq 2048. Tokens are codons;
the records say so (token_unit) and the tables label throughput from it.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Group, RenderableType
from rich.table import Table

from accelbench.bench.train.options import GENSLM_DEFAULTS, TrainOptions, build_spec
from accelbench.cli.options import training_command
from accelbench.cli.train import run_and_show
from accelbench.config.vocab import GIB
from accelbench.data.genome_corpus import codon_tokenizer_name
from accelbench.report.fit import KEY
from accelbench.report.table import add_plain_row, plain_table, train_table
from accelbench.store.record import Record


def _probe_table(records: list[Record]) -> Table:
    """The longest-sequence search, one row per probe in the order tried."""

    table = plain_table("longest-sequence search (probes)")
    for column, priority in (("mb", 2), ("gas", 2), ("dtype", KEY), ("recompute", 1),
                             ("probe", KEY), ("seq", KEY), ("method", 3), ("fits", KEY),
                             ("est. GiB", KEY), ("budget GiB", 1)):
        table.add_column(column, justify="right", priority=priority)
    for r in records:
        s, m = r.spec, r.typed
        budget = m.mem_budget_bytes_per_rank
        add_plain_row(table, s["micro_batch"], s["gas"], s["dtype"], s["recompute"],
                      s["probe"], s["seq_len"], s["method"],
                      "yes" if m.fits else "no", f"{m.mem_estimate_bytes_per_rank / GIB:.2f}",
                      "-" if budget is None else f"{budget / GIB:.2f}")
    return table


def codon_tables(records: list[Record], title: str) -> RenderableType:
    """The training table (codons/s from the records' token unit), after the search's probes."""
    from accelbench.bench.train.search import SEARCH_KIND

    probes = [r for r in records if r.kind == SEARCH_KIND]
    table = train_table([r for r in records if r.kind != SEARCH_KIND], title)
    return Group(_probe_table(probes), table) if probes else table


@training_command(**GENSLM_DEFAULTS)
def genslm(
    options: TrainOptions, db: Path | None, json_out: bool, csv_out: bool, output: Path | None,
    quiet: bool, rerun: bool, wide: bool,
    frame: int = typer.Option(0, help="Codon reading frame of the data: 0, 1 or 2."),
    longest_seq: bool = typer.Option(
        False, "--longest-seq", help="Find the longest sequence that fits (doubling from --seq, "
        "then bisection; trial on an accelerator, memory estimate on a CPU), then measure it."),
) -> None:
    """GenSLM training on genomes: codons/s, TFLOPS, MFU, HFU, memory, loss; longest sequence."""
    from accelbench.bench.train.search import run_longest_seq_sweep, search_cells
    from accelbench.bench.train.sweep import run_train_sweep

    spec = build_spec(options, benchmark="genslm", tokenizer=codon_tokenizer_name(frame))
    if longest_seq:
        search_cells(spec)  # refuse a spec that cannot be searched before anything runs
    sweep = run_longest_seq_sweep if longest_seq else run_train_sweep
    run_and_show(spec, lambda sink, step, cell, skip: sweep(spec, sink, step, cell, skip),
                 db=db, json_out=json_out, csv_out=csv_out, output=output, quiet=quiet,
                 rerun=rerun, table=codon_tables, wide=wide)


def register(app: typer.Typer) -> None:
    """Add the genslm command."""
    app.command("genslm")(genslm)
