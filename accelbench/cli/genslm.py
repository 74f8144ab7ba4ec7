"""`accelbench genslm`: the training benchmark on codon data (GenSLM), and the longest sequence.

Every `accelbench train` option (the one option set), with GenSLM's defaults: model genslm-25m,
data default = the shipped genomes through the codon tokenizer, seq 2048. Tokens are codons;
the records say so (token_unit) and the tables label throughput from it.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table

from accelbench.cli.options import Outputs
from accelbench.cli.train import run_and_show
from accelbench.config.record_kinds import carries
from accelbench.config.records.seq_search import FITS, SeqSearchMetrics
from accelbench.config.vocab import GIB
from accelbench.config.workload import Workload
from accelbench.report.table import add_plain_row, plain_table, train_table
from accelbench.report.table_width import KEY
from accelbench.store.record import Record
from accelbench.workloads.genslm.options import GenslmOptions


def _probe_table(records: list[Record]) -> Table:
    """The longest-sequence search, one row per probe in the order tried."""

    table = plain_table("longest-sequence search (probes)")
    for column, priority in (("mb", 2), ("gas", 2), ("dtype", KEY), ("recompute", 1),
                             ("probe", KEY), ("seq", KEY), ("method", 3), (FITS, KEY),
                             ("est. GiB", KEY), ("budget GiB", 1)):
        table.add_column(column, justify="right", priority=priority)
    for r in records:
        s, m = r.setup, r.typed
        budget = m.mem_budget_bytes_per_rank
        add_plain_row(table, s.micro_batch, s.gas, s.dtype, s.recompute, s.probe, s.seq_len,
                      s.method,
                      "yes" if m.fits else "no", f"{m.mem_estimate_bytes_per_rank / GIB:.2f}",
                      "-" if budget is None else f"{budget / GIB:.2f}")
    return table


def codon_tables(records: list[Record], title: str) -> RenderableType:
    """The training table (codons/s from the records' token unit), after the search's probes."""
    probes = [r for r in records if carries(r.kind, SeqSearchMetrics)]
    table = train_table([r for r in records if not carries(r.kind, SeqSearchMetrics)], title)
    return Group(_probe_table(probes), table) if probes else table


def run_genslm(workload: Workload, options: GenslmOptions, out: Outputs) -> None:
    """`accelbench genslm`: the training sweep on codons, or with --longest-seq the search
    (its probes in a table before the cells')."""
    from accelbench.bench.train.search import run_longest_seq_sweep

    spec = workload.build(options)
    sweep = run_longest_seq_sweep if options.longest_seq else workload.run
    run_and_show(spec, lambda sink, step, cell, skip: sweep(spec, sink, step, cell, skip), out,
                 table=codon_tables)
