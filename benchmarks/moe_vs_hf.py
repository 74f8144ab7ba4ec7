"""Our MoE layer against transformers' MixtralSparseMoeBlock: forward + backward, alternating.

The same router and expert weights (ours copied into theirs: both keep the experts stacked,
[gate | up] rows then down), the same input, fp32 on the chosen device; the outputs are checked
equal first. Each repetition times ours then theirs with accelbench's timer, and the script
prints the median of our time over theirs (target: at most 1.0).

    python benchmarks/moe_vs_hf.py --experts 8 --top-k 2 --hidden 256 --ffn 512 --tokens 1024
"""

from __future__ import annotations

import argparse

import torch
from alternate import alternate, report
from transformers import MixtralConfig
from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

from accelbench.bench.timing import PhaseTimer
from accelbench.config.presets import get_preset
from accelbench.hardware.detect import resolve_device
from accelbench.models.moe import MoE


def pair(experts: int, top_k: int, hidden: int, ffn: int) -> tuple[MoE, MixtralSparseMoeBlock]:
    """Our MoE (Mixtral's routing: softmax, top-k, renormalised; no shared experts) and
    transformers' block holding the same weights."""
    cfg = get_preset("moe-tiny").with_changes(
        d_model=hidden, n_head=4, n_kv_head=0, n_experts=experts, moe_top_k=top_k,
        n_shared_experts=0, moe_ffn_dim=ffn, aux_loss_coef=0.0)
    ours = MoE(cfg)
    theirs = MixtralSparseMoeBlock(MixtralConfig(
        hidden_size=hidden, intermediate_size=ffn, num_local_experts=experts,
        num_experts_per_tok=top_k, num_attention_heads=4))
    with torch.no_grad():
        theirs.gate.weight.copy_(ours.router.weight)
        theirs.experts.gate_up_proj.copy_(ours.experts.w_fc)
        theirs.experts.down_proj.copy_(ours.experts.w_proj)
    return ours, theirs


def step(module, x: torch.Tensor, timer: PhaseTimer) -> None:
    """One forward and backward of the layer (the gradient of the sum of its output)."""
    module.zero_grad(set_to_none=True)
    x.grad = None
    with timer.phase("step"):
        module(x).sum().backward()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--ffn", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    device = resolve_device(args.device)
    torch.manual_seed(0)
    ours, theirs = (m.to(device).train() for m in pair(args.experts, args.top_k, args.hidden,
                                                       args.ffn))
    x = torch.randn(1, args.tokens, args.hidden, device=device, requires_grad=True)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x), rtol=1e-5, atol=1e-5)
    a, b = alternate(lambda t: step(ours, x, t), lambda t: step(theirs, x, t), device,
                     args.warmup, args.repeats)
    report(device, f"MoE layer: {args.experts} experts, top-{args.top_k}, hidden {args.hidden}, "
           f"expert width {args.ffn}, {args.tokens} tokens, fp32, fwd+bwd, {args.repeats} "
           f"alternating repetitions after {args.warmup} warm-up; outputs equal (1e-5)", a, b)

if __name__ == "__main__":
    main()
