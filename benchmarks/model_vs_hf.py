"""Our GPT-2 against Hugging Face transformers' GPT2LMHeadModel: forward + backward, alternating.

Same configuration, random weights, same batch, fp32 on the chosen device; each repetition times
ours then theirs with accelbench's timer, and the script prints the median of our time over
theirs (target: at most 1.0).

    python benchmarks/model_vs_hf.py --model gpt2 --batch 2 --seq 128 --repeats 10
"""

from __future__ import annotations

import argparse
import statistics

import torch
from peers import hf_gpt2

from accelbench.bench.timing import PhaseTimer, summarize, synchronize
from accelbench.config.presets import resolve_model
from accelbench.hardware.detect import device_name, resolve_device
from accelbench.models.gpt import GPT


def step_ours(model, idx, timer: PhaseTimer) -> None:
    model.zero_grad(set_to_none=True)
    with timer.phase("step"):
        _, loss = model(idx, idx)
        loss.backward()


def step_theirs(model, idx, timer: PhaseTimer) -> None:
    model.zero_grad(set_to_none=True)
    with timer.phase("step"):
        loss = model(input_ids=idx, labels=idx).loss
        loss.backward()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    device = resolve_device(args.device)
    cfg = resolve_model(args.model)
    torch.manual_seed(0)
    ours, theirs = GPT(cfg).to(device).train(), hf_gpt2(cfg).to(device).train()
    idx = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), device=device)
    idle = PhaseTimer(device, enabled=False)
    for _ in range(args.warmup):
        step_ours(ours, idx, idle)
        step_theirs(theirs, idx, idle)
    synchronize(device)
    t_ours, t_theirs = PhaseTimer(device), PhaseTimer(device)
    for _ in range(args.repeats):  # alternate so drift on a shared machine hits both alike
        step_ours(ours, idx, t_ours)
        step_theirs(theirs, idx, t_theirs)
    a, b = t_ours.times_s()["step"], t_theirs.times_s()["step"]
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    sa, sb = summarize(a), summarize(b)
    print(f"device: {device_name(device)} ({device}), torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}")
    print(f"model {cfg.name}, batch {args.batch}, seq {args.seq}, fp32, fwd+bwd, "
          f"{args.repeats} alternating repetitions after {args.warmup} warm-up")
    print(f"ours   median {sa.median_s * 1e3:8.1f} ms  (min {sa.min_s * 1e3:.1f}, "
          f"max {sa.max_s * 1e3:.1f})")
    print(f"theirs median {sb.median_s * 1e3:8.1f} ms  (min {sb.min_s * 1e3:.1f}, "
          f"max {sb.max_s * 1e3:.1f})")
    print(f"ratio ours/theirs: median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}); target <= 1.0")


if __name__ == "__main__":
    main()
