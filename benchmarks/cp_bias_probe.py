"""Context-parallel attention's causal bias on this device, against a materialised mask.

Under context parallelism each rank's two query chunks attend the gathered keys causally
aligned at their end: on CUDA through torch's lower-right CausalBias (flash or memory-efficient
attention, no mask tensor), on a CPU through models/prefix_attention.py. No GPU has run the
CUDA branch (docs/gpu.md). This probe runs the model's own attention seam
(models/gpt.py `_causal_attention` with parallel/context.py `ContextShard.spans`) for every
rank of a cp group in one process, eager and under torch.compile, and compares its output and
the gradients of q, k and v with SDPA's math backend given the causal mask as a boolean tensor
(the queries' global positions against every key position), computed in fp32.

    python benchmarks/cp_bias_probe.py [--device cuda] [--seq 1024,8192] [--cp 2,4]
        [--heads 25] [--head-dim 64] [--batch 2] [--dtype bf16] [--compile-backend inductor]
        [--out probes.jsonl]

One JSON line a case (device, dtype, seq, cp, rank, mode, the bias class that ran, max
absolute errors of the output and of dq, dk, dv, the tolerance, ok, seconds) appended to --out;
a table on stdout. Exit 1 when a case is off by more than its tolerance, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from accelbench.models.gpt import _causal_attention
from accelbench.parallel.context import ContextShard, local_positions

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# max |probe - fp32 reference| over a reference value of order 1: bf16's rounding of the
# inputs and the output (2^-8) with room for a softmax's accumulation; fp32's kernels differ
# from the math backend by summation order only
TOLERANCE = {"fp32": 2e-4, "bf16": 3e-2, "fp16": 5e-3}


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.split(",") if t.strip()]


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor
              ) -> torch.Tensor:
    """The rank's queries (at their global positions) against every key, under the causal mask
    as a materialised boolean tensor, through SDPA's math backend in fp32."""
    keys = torch.arange(k.shape[2], device=k.device)
    mask = positions[:, None] >= keys[None, :]
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask)


def _grads(out: torch.Tensor, grad: torch.Tensor, inputs: list[torch.Tensor]
           ) -> list[torch.Tensor]:
    """d(sum(out * grad)) / d inputs."""
    return list(torch.autograd.grad(out, inputs, grad.to(out.dtype)))


def one_case(args: argparse.Namespace, seq: int, cp: int, rank: int, compiled: bool) -> dict:
    """One rank of one cp group: the seam's output and gradients against the reference."""
    device, dtype = torch.device(args.device), DTYPES[args.dtype]
    gen = torch.Generator(device="cpu").manual_seed(seq * 100 + cp)
    shape = (args.batch, args.heads, seq, args.head_dim)
    q_full, k, v = (torch.randn(shape, generator=gen).to(device, dtype).requires_grad_()
                    for _ in range(3))
    local = seq // cp
    positions = local_positions(cp, rank, local).to(device)
    shard = ContextShard(None, cp, rank)
    spans = shard.spans(local, device)

    def seam(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """As Attention.forward runs it: the spans (and their biases) made inside."""
        return _causal_attention(q, k, v, shard.spans(local, device))

    attend = torch.compile(seam, backend=args.compile_backend) if compiled else seam
    grad = torch.randn((args.batch, args.heads, local, args.head_dim), generator=gen).to(device)
    start = time.perf_counter()
    out = attend(q_full[:, :, positions], k, v)
    got = _grads(out, grad, [q_full, k, v])
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    leaves = [t.detach().float().requires_grad_() for t in (q_full, k, v)]
    ref = reference(leaves[0][:, :, positions], leaves[1], leaves[2], positions)
    want = _grads(ref, grad, leaves)
    errors = [(out.float() - ref).abs().max().item()] + [
        (a.float() - b).abs().max().item() for a, b in zip(got, want, strict=True)]
    tolerance = TOLERANCE[args.dtype]
    return dict(probe="cp_causal_bias", device=str(device), dtype=args.dtype, seq=seq, cp=cp,
                rank=rank, mode=f"compiled ({args.compile_backend})" if compiled else "eager",
                bias=type(spans[0][3]).__name__ if spans[0][3] is not None
                else "none (prefix_attention)",
                max_abs_err_out=errors[0], max_abs_err_dq=errors[1], max_abs_err_dk=errors[2],
                max_abs_err_dv=errors[3], tolerance=tolerance,
                ok=max(errors) <= tolerance, seconds=round(seconds, 4))


def _guarded(args: argparse.Namespace, seq: int, cp: int, rank: int, compiled: bool) -> dict:
    """one_case, or its error as a failed line (the other cases still run)."""
    try:
        return one_case(args, seq, cp, rank, compiled)
    except Exception as err:  # noqa: BLE001 - what the device refused is the finding
        first = str(err).splitlines()[0][:300] if str(err) else ""
        return dict(probe="cp_causal_bias", device=args.device, dtype=args.dtype, seq=seq, cp=cp,
                    rank=rank, mode=f"compiled ({args.compile_backend})" if compiled else "eager",
                    bias="?", max_abs_err_out=float("nan"), max_abs_err_dq=float("nan"),
                    max_abs_err_dk=float("nan"), max_abs_err_dv=float("nan"),
                    tolerance=TOLERANCE[args.dtype], ok=False, seconds=0.0,
                    error=f"{type(err).__name__}: {first}")


def parse(argv: list[str]) -> argparse.Namespace:
    """The options; exit 2 with one line on a bad one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seq", default="1024,8192")
    parser.add_argument("--cp", default="2,4")
    parser.add_argument("--heads", type=int, default=25)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default=None)
    parser.add_argument("--compile-backend", default="inductor",
                        choices=("inductor", "aot_eager", "eager"))
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    args.dtype = args.dtype or ("bf16" if args.device.startswith("cuda") else "fp32")
    args.seqs, args.cps = _ints(args.seq), _ints(args.cp)
    bad = [(s, c) for s in args.seqs for c in args.cps if s % (2 * c)]
    if bad:
        parser.error(f"seq: {bad[0][0]} does not split into 2 x cp={bad[0][1]} chunks")
    return args


def main(argv: list[str]) -> int:
    """Every (seq, cp, rank, mode) case, a JSON line each; exit 1 when one is off."""
    args = parse(argv)
    modes = (False,) if args.no_compile else (False, True)
    failed = 0
    for seq in args.seqs:
        for cp in args.cps:
            for compiled in modes:
                for rank in range(cp):
                    row = _guarded(args, seq, cp, rank, compiled)
                    failed += not row["ok"]
                    if args.out:
                        with open(args.out, "a") as out:
                            out.write(json.dumps(row) + "\n")
                    print(f"{row['mode']:>20} seq {seq:>6} cp {cp} rank {rank} "
                          f"{row['bias']}: out {row['max_abs_err_out']:.2e} dq "
                          f"{row['max_abs_err_dq']:.2e} dk {row['max_abs_err_dk']:.2e} dv "
                          f"{row['max_abs_err_dv']:.2e} (tol {row['tolerance']:g}) "
                          f"{'ok' if row['ok'] else 'OFF'} {row['seconds']:.3f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
