"""A study's block sweep planned before it runs: each cell's memory, fit and rough time."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from accelbench.analytics.flops import block_flops
from accelbench.analytics.memory import block_train_bytes
from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.outcome import Outcome, Progress, Sink, Skip
from accelbench.bench.study_planner import Planner, SweepPlan
from accelbench.workloads.block.options import BlockOptions
from accelbench.workloads.block.runner import build_block_spec, run_block_sweep


def plan_block(values: dict[str, Any], planner: Planner) -> SweepPlan:
    spec = build_block_spec(BlockOptions(**values))
    cfg = spec.model
    cells = []
    for dtype in spec.dtypes:  # run_block_sweep's order
        for batch in spec.batches:
            need = block_train_bytes(cfg, spec.seq_len, batch, dtype, fused_attention=True)
            calls = (spec.warmup + spec.repeats) * spec.trials  # every trial warms up anew
            flops = block_flops(cfg, spec.seq_len, batch).total * calls
            cells.append(planner.cell(f"batch {batch} {dtype}", dtype, need,
                                      spec.mem_limit_bytes, flops, spec.tf32, calls))

    def run(sink: Sink, on_cell: Progress | None, skip: Skip | None,
            peaks: tuple[SweepPeak, ...]) -> list[Outcome]:
        return run_block_sweep(replace(spec, peaks=peaks), sink, on_cell, skip)

    return SweepPlan(f"{cfg.name} block, seq {spec.seq_len}", tuple(cells), run, spec.tf32, True)
