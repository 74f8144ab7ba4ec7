"""Run under torchrun (tests/dist/shared_launch.py): trials of a small training cell on a layout,
through the runtime's own step loop (bench/train/steps.py run_rank_steps), some with rank 1
slowed by the test-only delay (ACCELBENCH_TEST_SLOW_RANK), and which rank each trial names as
slow (bench/train/cell_metrics.py straggler_fields).

A case is 'name:layout:fraction:trials[:steps]' (fraction 0: no delay; steps STEPS unless
given, of which WARMUP_STEPS untimed). Rank 0 returns, per case, the
rank named in each trial (None: none), each trial's evidence and each rank's median compute
and wait (benchmarks/straggler.py runs it for the 10-trial figures).
"""

from __future__ import annotations

import os

import torch
from shared_launch import launched  # this folder: the script's own, on the path

from accelbench.bench.train.cell_metrics import straggler_fields
from accelbench.bench.train.spec import TrainSpec
from accelbench.bench.train.steps import run_rank_steps
from accelbench.bench.train.straggler import TEST_DELAY_ENV
from accelbench.config.layout_parse import RUNTIME_KEYS, parse_layout
from accelbench.config.layout_rules import validate_layout
from accelbench.config.presets import get_preset
from accelbench.parallel.gather import gather_rank_results

SLOWED_RANK = 1
WARMUP_STEPS = 1
STEPS = 9  # 8 timed


def _spec(layout_text: str, steps: int = STEPS) -> tuple[TrainSpec, object]:
    """gpt2-tiny at sequence 128, micro-batch 2 (a pipeline: 2 micro-batches), fp32."""
    layout = parse_layout(layout_text, RUNTIME_KEYS)
    gas = 2 if layout.pp > 1 else 1
    spec = TrainSpec(get_preset("gpt2-tiny"), seq_lens=(128,), micro_batches=(2,), gas=(gas,),
                     dtypes=("fp32",), steps=steps, warmup_steps=WARMUP_STEPS, device="cpu",
                     layout=layout_text)
    world = torch.distributed.get_world_size()
    return spec, validate_layout(layout, spec.model, world, gas)


def _trial(spec: TrainSpec, layout, device: torch.device) -> dict:
    """One trial's named rank and evidence, on every rank (rank 0's answer is kept)."""
    local = run_rank_steps(spec, spec.cells()[0], layout, device, None, None)
    ranks = sorted(gather_rank_results(local), key=lambda r: r.rank)
    fields = straggler_fields(ranks, spec.warmup_steps)
    return {"named": fields.get("slow_rank"), "evidence": fields.get("slow_rank_evidence"),
            "compute_s": fields.get("compute_time_s_median_per_rank"),
            "wait_s": fields.get("wait_time_s_median_per_rank")}


def run(cases: list[str], device: torch.device) -> dict:
    """Every case's trials in turn; the delay set on every rank for the delayed ones."""
    results = {}
    for case in cases:
        name, layout_text, fraction, trials, *steps = case.split(":")
        spec, layout = _spec(layout_text, int(steps[0]) if steps else STEPS)
        if float(fraction):
            os.environ[TEST_DELAY_ENV] = f"{SLOWED_RANK}:{fraction}"
        try:
            results[name] = [_trial(spec, layout, device) for _ in range(int(trials))]
        finally:
            os.environ.pop(TEST_DELAY_ENV, None)
    return results if torch.distributed.get_rank() == 0 else {}


def main() -> None:
    launched(run)


if __name__ == "__main__":
    main()
