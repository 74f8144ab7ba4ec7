"""Our GPT-2 against Hugging Face transformers' GPT2LMHeadModel: forward + backward, alternating.

Same configuration, random weights, same batch, fp32 on the chosen device; each repetition times
ours then theirs with accelbench's timer, and the script prints the median of our time over
theirs (target: at most 1.0).

    python benchmarks/model_vs_hf.py --model gpt2 --batch 2 --seq 128 --repeats 10
"""

from __future__ import annotations

import argparse

import torch
from alternate import alternate, report
from peers import hf_gpt2

from accelbench.bench.timing import PhaseTimer
from accelbench.config.presets import resolve_model
from accelbench.hardware.detect import resolve_device
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
    a, b = alternate(lambda t: step_ours(ours, idx, t), lambda t: step_theirs(theirs, idx, t),
                     device, args.warmup, args.repeats)
    report(device, f"model {cfg.name}, batch {args.batch}, seq {args.seq}, fp32, fwd+bwd, "
           f"{args.repeats} alternating repetitions after {args.warmup} warm-up", a, b)

if __name__ == "__main__":
    main()
