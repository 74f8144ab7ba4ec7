"""Context parallelism on CPU processes: tokens/s, step time and memory per rank at a long
sequence for cp = 1, 2, 4 (each a torchrun launch of cp one-thread ranks) beside the planner's
step time and memory for the same cell. Each cp gets its own store: `accelbench calibrate
--threads 1 --nproc cp --concurrent` measures the machine as its cp ranks see it (all at once,
one thread each, gloo collectives among them), then `accelbench train` runs the cell, and the
planner times the cell through that profile (`plan --validate`'s path for this machine's own
cells). Ratios are against cp=1 of the same run.

    python benchmarks/context_parallel.py --seq 8192 --cp 1,2,4
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from accelbench.analytics.measured_step_runs import StepRow, validate_measured_steps
from accelbench.config.records.train import TrainMetrics
from accelbench.config.vocab import GIB
from accelbench.report.measured_steps import measured_step_runs, profiles_by_threads
from accelbench.store.store import ResultStore

MODEL = "gpt2-tiny:d_model=256,n_head=4,vocab_size=1024,n_positions=8192"


def accelbench(*args: str) -> None:
    """One accelbench command at one torch thread (cp=1 runs in its process, so one thread
    there too, as a launched rank has); its output to stderr, a failure ends the benchmark."""
    done = subprocess.run([sys.executable, "-m", "accelbench", *args], stdout=sys.stderr,
                          stderr=sys.stderr, check=False,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    if done.returncode:
        raise SystemExit(f"accelbench {args[0]} exited {done.returncode}")


def measure(args: argparse.Namespace, cp: int, db: Path) -> tuple[TrainMetrics, StepRow]:
    """Calibrate as cp ranks, run the cell, and read back its metrics and the planner's step
    time beside the measured one."""
    rows = ",".join(str(n) for n in sorted({args.seq // cp, args.seq}))
    ops = "gemm,attention,memory,loss,embedding,optimizer" + (",collective" if cp > 1 else "")
    ranks = ("--nproc", str(cp), "--concurrent") if cp > 1 else ()  # one rank: one process
    accelbench("calibrate", "--model", args.model, "--dtype", "fp32", "--tokens", rows,
               "--seq", rows, "--threads", "1", *ranks, "--ops", ops, "--db", str(db))
    accelbench("train", "--model", args.model, "--seq", str(args.seq), "--micro-batch", "1",
               "--dtype", "fp32", "--steps", str(args.steps), "--warmup-steps", "1",
               "--nproc", str(cp), "--layout", f"cp={cp}" if cp > 1 else "dp=1",
               "--trials", "1", "--db", str(db))
    store = ResultStore(db, write=False)
    try:
        (record,) = store.query(kind="train", status="ok")
        (row,) = validate_measured_steps(measured_step_runs(store), profiles_by_threads(store))
    finally:
        store.close()
    return record.typed, row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--seq", type=int, default=8192)
    parser.add_argument("--cp", default="1,2,4")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--keep", type=Path, help="keep each cp's store here (cpN.db), for "
                        "`accelbench plan --validate --db` and `accelbench report`")
    args = parser.parse_args()
    print(f"model {args.model}, seq {args.seq}, micro-batch 1, fp32, CPU ranks of 1 thread, "
          f"{args.steps} steps (1 warm-up)")
    print(f"{'cp':>3} {'tokens/s':>9} {'vs cp=1':>8} {'step s':>7} {'planner s':>10} "
          f"{'error':>7} {'GiB/rank':>9} {'vs cp=1':>8} {'planner GiB':>12} {'cp MB/step':>11}")
    first = None
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for cp in (int(v) for v in args.cp.split(",")):
            m, row = measure(args, cp, folder / f"cp{cp}.db")
            first = first or m
            print_row(cp, m, row, first)


def print_row(cp: int, m: TrainMetrics, row: StepRow, first: TrainMetrics) -> None:
    """One cp's line: measured, the planner's, and the ratios against cp=1."""
    mem, mem0 = m.mem_added_bytes_per_rank_max, first.mem_added_bytes_per_rank_max
    sent = (m.comm_bytes_per_step_per_rank or {}).get("cp_bytes_per_step", 0.0)
    print(f"{cp:>3} {m.tokens_per_s_global:>9,.0f} "
          f"{m.tokens_per_s_global / first.tokens_per_s_global:>8.2f} "
          f"{row.measured_s:>7.3f} {row.predicted_s:>10.3f} {row.error:>+7.1%} "
          f"{mem / GIB:>9.3f} {mem / mem0:>8.2f} "
          f"{m.mem_estimate_bytes_per_rank / GIB:>12.3f} {sent / 1e6:>11.1f}", flush=True)


if __name__ == "__main__":
    main()
