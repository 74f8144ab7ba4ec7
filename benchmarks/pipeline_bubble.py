"""The pipeline bubble measured against the (p-1)/m theory, on CPU processes under torchrun.

For each number of micro-batches m, the same step (m micro-batches) runs once on one process
(pp=1) and once as a pipeline of p processes (1F1B); the measured bubble is the pipeline's
excess over a perfect p-way split of the one-process step time
(accelbench.parallel.bubble.bubble_fraction_measured), which also holds stage sends and
stage imbalance, so it bounds the pure bubble from above.

    python benchmarks/pipeline_bubble.py --pp 2 --micro-batches 2,4,8
"""

from __future__ import annotations

import argparse

from accelbench.bench.train.launch import run_launched_sweep
from accelbench.bench.train.spec import TrainSpec
from accelbench.config.presets import resolve_model
from accelbench.parallel.bubble import bubble_fraction_measured, bubble_fraction_theory


def step_time_s(spec: TrainSpec) -> float:
    """Median step time of one launched cell (the slowest rank's)."""
    outcome = run_launched_sweep(spec, lambda o: None)[0]
    if outcome.status != "ok":
        raise SystemExit(f"{spec.layout}: {outcome.status}: {outcome.reason}")
    return outcome.metrics["step_time_s_median"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2:layers=4")
    parser.add_argument("--pp", type=int, default=2)
    parser.add_argument("--micro-batches", default="2,4,8")
    parser.add_argument("--micro-batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    cfg = resolve_model(args.model)
    print(f"model {cfg.name}, pp {args.pp} (1F1B), micro-batch {args.micro_batch}, seq {args.seq},"
          f" fp32, CPU processes with 1 thread each, {args.steps} steps (2 warm-up)")
    print(f"{'m':>4} {'1-proc step s':>14} {'pp step s':>10} {'measured':>9} {'theory':>7}")
    for m in (int(v) for v in args.micro_batches.split(",")):
        base = TrainSpec(cfg, seq_lens=(args.seq,), micro_batches=(args.micro_batch,), gas=(m,),
                         dtypes=("fp32",), steps=args.steps, warmup_steps=2, device="cpu",
                         cell_timeout_s=600)
        single = step_time_s(TrainSpec(**{**vars(base), "nproc": 1, "layout": "dp=1"}))
        piped = step_time_s(TrainSpec(**{**vars(base), "nproc": args.pp,
                                         "layout": f"pp={args.pp},schedule=1f1b"}))
        print(f"{m:>4} {single:>14.3f} {piped:>10.3f} "
              f"{bubble_fraction_measured(piped, single, args.pp):>9.1%} "
              f"{bubble_fraction_theory(args.pp, m):>7.1%}")


if __name__ == "__main__":
    main()
