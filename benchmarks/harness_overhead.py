"""Harness overhead: accelbench's training step (run_step: learning-rate schedule, phase timer,
clipping, loss read back) against a bare PyTorch loop (autocast, forward, backward, clip,
step, zero) on the same model, optimizer and batches, alternating step by step in one run.
Each step is timed on the wall with the device drained at both ends, so the comparison holds
everything either side makes the device wait for. Target: ours/bare at most 1.02 (issue 23).
Also prints the step time the runner records, and with --profile where the step's device time
goes (step_profile.py).

    python benchmarks/harness_overhead.py --model gpt2-xl --micro-batch 8 --seq 1024 --dtype bf16
    python benchmarks/harness_overhead.py --model gpt2-tiny --micro-batch 2 --seq 64 --device cpu
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext

import torch
from step_profile import profile_steps

from accelbench.bench.dtypes import TORCH_DTYPES
from accelbench.bench.timing import summarize, synchronize
from accelbench.bench.train.batches import open_batches
from accelbench.bench.train.build import build_trainer
from accelbench.bench.train.spec import TrainSpec
from accelbench.bench.train.steps import StepLog, run_step
from accelbench.config.layout import Layout
from accelbench.config.precision import resolve
from accelbench.config.presets import resolve_model
from accelbench.hardware.detect import device_name, resolve_device

TARGET_RATIO = 1.02


def parse_args() -> argparse.Namespace:
    """The benchmark's options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2-xl")
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--dtype", default="bf16", choices=("fp32", "bf16", "fp16", "fp8"))
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--sparsity", type=float, default=0.0,
                        help="2:4 sparsity of the blocks' matrices (0.5); ours only, no bare loop")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--profile", action="store_true", help="also where the time goes")
    return parser.parse_args()


def make_spec(args: argparse.Namespace, device: torch.device) -> TrainSpec:
    """The runner's spec for the one cell both sides train."""
    return TrainSpec(resolve_model(args.model), seq_lens=(args.seq,),
                     micro_batches=(args.micro_batch,), dtypes=(args.dtype,),
                     sparsities=(args.sparsity,),
                     sparsity_pattern="2:4" if args.sparsity else "unstructured",
                     steps=args.steps + args.warmup, warmup_steps=args.warmup,
                     compile=args.compile, device=str(device))


def bare_step(trainer, batches, dtype: str, device: torch.device,
              clip: float) -> Callable[[], None]:
    """The textbook loop over the runner's own model and optimizer."""
    compute = resolve(dtype).autocast
    autocast = (lambda: torch.autocast(device.type, dtype=TORCH_DTYPES[compute])
                ) if compute else nullcontext
    model, optimizer = trainer.module, trainer.optimizer

    def step() -> None:
        x, y = batches.next()
        with autocast():
            _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def wall_s(step: Callable[[], None], device: torch.device) -> float:
    """One step's wall time with the device drained before and after."""
    synchronize(device)
    start = time.perf_counter()
    step()
    synchronize(device)
    return time.perf_counter() - start


def line(label: str, times_s: list[float], tokens: int) -> str:
    """Median step, its spread and tokens/s."""
    s = summarize(times_s)
    return (f"{label:<22} median {s.median_s * 1e3:8.2f} ms (min {s.min_s * 1e3:.2f}, max "
            f"{s.max_s * 1e3:.2f}); {tokens / s.median_s:,.0f} tokens/s")


def main() -> None:
    args = parse_args()
    device = resolve_device(args.device)
    spec = make_spec(args, device)
    cell, layout = spec.cells()[0], Layout()
    trainer = build_trainer(spec, cell, layout, device)
    batches = open_batches(spec, cell, device)
    log, step_no = StepLog(), iter(range(10**9))

    def ours() -> None:
        run_step(spec, cell, layout, device, trainer, batches, next(step_no), log, {})
    bare = bare_step(trainer, batches, args.dtype, device, spec.grad_clip)
    sides = [ours] if args.sparsity else [ours, bare]
    walls: list[list[float]] = [[] for _ in sides]
    for i in range(args.warmup + args.steps):  # alternate: drift hits both alike
        for j, side in enumerate(sides if i % 2 == 0 else sides[::-1]):
            k = j if i % 2 == 0 else len(sides) - 1 - j
            elapsed = wall_s(side, device)
            if i >= args.warmup:
                walls[k].append(elapsed)
    tokens = args.micro_batch * args.seq
    print(f"device: {device_name(device)} ({device}), torch {torch.__version__}; model "
          f"{spec.model.name}, micro-batch {args.micro_batch}, seq {args.seq}, {args.dtype}"
          f"{', compiled' if args.compile else ''}"
          f"{f', 2:4 sparsity {args.sparsity:g}' if args.sparsity else ''}; "
          f"{trainer.optimizer_label}; "
          f"{args.steps} alternating steps after {args.warmup} warm-up")
    print(line("ours (wall)", walls[0], tokens))
    print(line("ours (as recorded)", log.step_time_s[-args.steps:], tokens))
    if len(sides) == 2:
        print(line("bare loop (wall)", walls[1], tokens))
        ratios = [a / b for a, b in zip(walls[0], walls[1], strict=True)]
        print(f"step time ratio ours/bare: median {statistics.median(ratios):.3f} (min "
              f"{min(ratios):.3f}, max {max(ratios):.3f}); target <= {TARGET_RATIO}")
    if args.profile:
        profile_steps(ours, device)


if __name__ == "__main__":
    main()
