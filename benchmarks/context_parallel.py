"""Context parallelism on CPU processes: tokens/s and memory per rank at a long sequence for
cp = 1, 2, 4 (each a torchrun launch of cp ranks, one thread each), beside the planner's memory
estimate of one rank (the record's mem_estimate_bytes_per_rank, analytics.memory with the cp
layout). Ratios are against cp=1 of the same run.

    python benchmarks/context_parallel.py --seq 2048 --cp 1,2,4
"""

from __future__ import annotations

import argparse

from accelbench.bench.train.launch import run_launched_sweep
from accelbench.bench.train.spec import TrainSpec
from accelbench.config.presets import resolve_model

GIB = 2**30


def measure(base: TrainSpec, cp: int) -> dict:
    """The metrics of one launched cell of cp ranks."""
    spec = TrainSpec(**{**vars(base), "nproc": cp, "layout": f"cp={cp}" if cp > 1 else "dp=1"})
    outcome = run_launched_sweep(spec, lambda o: None)[0]
    if outcome.status != "ok":
        raise SystemExit(f"cp={cp}: {outcome.status}: {outcome.reason}")
    return outcome.metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2-tiny:vocab_size=1024,n_positions=8192")
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--cp", default="1,2,4")
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    cfg = resolve_model(args.model)
    base = TrainSpec(cfg, seq_lens=(args.seq,), micro_batches=(1,), gas=(1,), dtypes=("fp32",),
                     steps=args.steps, warmup_steps=1, device="cpu", cell_timeout_s=1200)
    print(f"model {cfg.name}, seq {args.seq}, micro-batch 1, fp32, CPU ranks of 1 thread, "
          f"{args.steps} steps (1 warm-up)")
    print(f"{'cp':>3} {'tokens/s':>9} {'vs cp=1':>8} {'mem GiB/rank':>13} {'vs cp=1':>8} "
          f"{'planner GiB/rank':>17} {'cp MB/step':>11}")
    first = None
    for cp in (int(v) for v in args.cp.split(",")):
        m = measure(base, cp)
        first = first or m
        mem, mem0 = m["mem_added_bytes_per_rank_max"], first["mem_added_bytes_per_rank_max"]
        sent = (m["comm_bytes_per_step_per_rank"] or {}).get("cp_bytes_per_step", 0.0)
        print(f"{cp:>3} {m['tokens_per_s_global']:>9,.0f} "
              f"{m['tokens_per_s_global'] / first['tokens_per_s_global']:>8.2f} "
              f"{mem / GIB:>13.3f} {mem / mem0:>8.2f} "
              f"{m['mem_estimate_bytes_per_rank'] / GIB:>17.3f} {sent / 1e6:>11.1f}")


if __name__ == "__main__":
    main()
