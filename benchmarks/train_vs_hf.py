"""Training-step throughput: accelbench's training step against transformers' GPT2LMHeadModel
trained by a plain PyTorch loop. Same configuration, batch, optimizer (AdamW, fused where
available, betas 0.9/0.95, weight decay 0.1, clipping at 1.0), alternating step by step in one
run. Prints tokens/s of each and the median ratio ours/theirs (target: at least 1.0).

    python benchmarks/train_vs_hf.py --model gpt2 --micro-batch 2 --seq 128 --steps 10
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch
from peers import hf_gpt2

from accelbench.bench.timing import PhaseTimer, summarize
from accelbench.bench.train.batches import open_batches
from accelbench.bench.train.build import build_trainer
from accelbench.bench.train.spec import TrainSpec
from accelbench.bench.train.steps import StepLog, run_step
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig
from accelbench.config.presets import resolve_model
from accelbench.hardware.detect import device_name, resolve_device
from accelbench.parallel.optim import adamw, param_groups


def plain_step(model, optimizer, x, y, timer: PhaseTimer) -> None:
    """The textbook loop: forward with labels, backward, clip, step, zero."""
    with timer.phase("step"):
        loss = model(input_ids=x, labels=y).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def parse_args(description: str, model: str) -> argparse.Namespace:
    """The benchmark's options (shared by the GPT-2 and Llama comparisons)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", default=model)
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    return parser.parse_args()


def compare(args: argparse.Namespace, make_peer: Callable[[ModelConfig], torch.nn.Module]) -> None:
    """Alternate our runner's step and the peer's plain loop; print tokens/s and the ratio."""
    device = resolve_device(args.device)
    spec = TrainSpec(resolve_model(args.model), seq_lens=(args.seq,),
                     micro_batches=(args.micro_batch,), dtypes=("fp32",), steps=args.steps,
                     warmup_steps=0, device=str(device))
    cell = spec.cells()[0]
    layout = Layout()  # one device: the runner's own build and step, as `accelbench train` runs
    ours = build_trainer(spec, cell, layout, device)
    theirs = make_peer(spec.model).to(device).train()
    opt_theirs, _ = adamw(param_groups([p for p in theirs.parameters()], spec.weight_decay),
                          spec.lr)
    flavour = ours.optimizer_label
    batches = open_batches(spec, cell, device)
    log, t_theirs = StepLog(), PhaseTimer(device)
    idle = PhaseTimer(device, enabled=False)
    for step in range(args.warmup + args.steps):  # alternate: drift hits both alike
        run_step(spec, cell, layout, device, ours, batches, step, log, {})
        x, y = batches.next()
        plain_step(theirs, opt_theirs, x, y, idle if step < args.warmup else t_theirs)
    a, b = log.step_time_s[args.warmup:], t_theirs.times_s()["step"]
    tokens = args.micro_batch * args.seq
    ratios = [y_ / x_ for x_, y_ in zip(a, b, strict=True)]  # tokens/s ours over theirs
    sa, sb = summarize(a), summarize(b)
    print(f"device: {device_name(device)} ({device}), torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}, {flavour} for both")
    print(f"model {spec.model.name}, micro-batch {args.micro_batch}, seq {args.seq}, fp32, "
          f"{args.steps} alternating steps after {args.warmup} warm-up; "
          f"peer {type(theirs).__name__}")
    print(f"ours   {tokens / sa.median_s:10.1f} tokens/s (median step {sa.median_s * 1e3:.1f} ms)")
    print(f"theirs {tokens / sb.median_s:10.1f} tokens/s (median step {sb.median_s * 1e3:.1f} ms)")
    print(f"tokens/s ratio ours/theirs: median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}); target >= 1.0")


def main() -> None:
    compare(parse_args(__doc__.splitlines()[0], "gpt2"), hf_gpt2)


if __name__ == "__main__":
    main()
