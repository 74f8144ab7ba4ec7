"""bf16 and float8 GEMMs at a transformer layer's shapes on this device: where FP8's time goes.

The H200 runs measured FP8 training of GPT-2 XL at 1.08-1.09x bf16, and its profile put the
float8 GEMMs at 59 ms against bf16's 107, with torchao's scaling casts and amax reductions
adding 45 and 22 ms (docs/gpu.md). This probe times, for each linear layer of a GPT-2 XL block
(width 1600, MLP 6400) and of a 4096-wide one (MLP 16384), at `--tokens` tokens:

  mm          the forward GEMM alone: bf16 x @ w.T against torch._scaled_mm of e4m3 operands
              with tensorwise scales (the float8 GEMM without any cast)
  linear      a layer's forward and backward (three GEMMs): nn.Linear under bf16 autocast
              against torchao's Float8Linear for each recipe given (casts included), eager or
              compiled (--compile)

    python benchmarks/gemm_fp8_probe.py [--device cuda] [--tokens 32768] [--widths 1600,4096]
        [--recipes tensorwise,rowwise] [--compile] [--repeats 20] [--out probes.jsonl]

The median of --repeats timed calls after warm-up (CUDA events where the device has them),
TFLOPS from 2 x m x k x n a GEMM; one JSON line a measurement appended to --out, a table on
stdout. A case the device cannot run (no float8 GEMM on a CPU, say) is a line with its reason.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

LAYERS = {  # (name, in, out) of one block's linear layers at a width (GPT-2: MLP 4 x width)
    "qkv": lambda d: (d, 3 * d), "proj": lambda d: (d, d),
    "fc": lambda d: (d, 4 * d), "fc2": lambda d: (4 * d, d)}


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.split(",") if t.strip()]


def time_s(fn: Callable[[], object], device: torch.device, repeats: int, warmup: int = 3
           ) -> float:
    """Median seconds of one call after `warmup` calls, synchronised at each edge."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            begin = time.perf_counter()
            fn()
            times.append(time.perf_counter() - begin)
    return statistics.median(times)


def _fp8_operands(x: torch.Tensor, w: torch.Tensor):
    """e4m3 copies of x and w with their tensorwise scales (amax / 448), w column-major as
    _scaled_mm takes its second operand."""
    e4m3 = torch.float8_e4m3fn
    sx = (x.abs().max().float() / torch.finfo(e4m3).max).clamp(min=1e-12)
    sw = (w.abs().max().float() / torch.finfo(e4m3).max).clamp(min=1e-12)
    return (x / sx).to(e4m3), (w / sw).to(e4m3).t(), sx, sw


def mm_rows(device: torch.device, tokens: int, d_in: int, d_out: int, repeats: int) -> list[dict]:
    """The forward GEMM in bf16 and in float8 (no casts timed)."""
    x = torch.randn(tokens, d_in, device=device, dtype=torch.bfloat16)
    w = torch.randn(d_out, d_in, device=device, dtype=torch.bfloat16)
    flops = 2 * tokens * d_in * d_out
    rows = [dict(kind="mm", precision="bf16", seconds=time_s(lambda: x @ w.t(), device, repeats))]
    try:
        xq, wq, sx, sw = _fp8_operands(x, w)
        run = lambda: torch._scaled_mm(xq, wq, scale_a=sx, scale_b=sw,  # noqa: E731
                                       out_dtype=torch.bfloat16)
        rows.append(dict(kind="mm", precision="fp8 e4m3 tensorwise",
                         seconds=time_s(run, device, repeats)))
    except Exception as err:  # noqa: BLE001 - a device without float8 GEMMs: a line, not a crash
        rows.append(dict(kind="mm", precision="fp8 e4m3 tensorwise",
                         unavailable=f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"))
    for row in rows:
        if "seconds" in row:
            row["tflops"] = flops / row["seconds"] / 1e12
    return rows


def _linear_step(layer: nn.Module, x: torch.Tensor, device: torch.device) -> Callable[[], None]:
    """One forward and backward of the layer under bf16 autocast (gradients dropped)."""
    def step() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            out = layer(x)
        out.backward(torch.ones_like(out))
        layer.weight.grad = None
    return step


def linear_rows(args: argparse.Namespace, device: torch.device, d_in: int, d_out: int
                ) -> list[dict]:
    """A layer's forward and backward: bf16 nn.Linear, then Float8Linear per recipe."""
    x = torch.randn(args.tokens, d_in, device=device, requires_grad=True)
    flops = 6 * args.tokens * d_in * d_out
    rows = []
    for recipe in ["bf16", *args.recipe_list]:
        layer = nn.Linear(d_in, d_out, bias=False, device=device)
        row = dict(kind="linear fwd+bwd", precision=recipe if recipe == "bf16" else
                   f"fp8 {recipe}", compiled=args.compile)
        try:
            if recipe != "bf16":
                from accelbench.models.float8 import (
                    _cast_to_autocast,
                    float8_config,
                    torchao_float8,
                )

                emulate = device.type != "cuda"
                layer = torchao_float8().convert_to_float8_training(
                    nn.Sequential(layer), config=float8_config(recipe, emulate, False))[0]
                layer.register_forward_pre_hook(_cast_to_autocast)  # as the runner converts
                row["emulated"] = emulate
            module = torch.compile(layer) if args.compile else layer
            row["seconds"] = time_s(_linear_step(module, x, device), device, args.repeats)
            row["tflops"] = flops / row["seconds"] / 1e12
        except Exception as err:  # noqa: BLE001 - recorded as a line
            row["unavailable"] = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
        rows.append(row)
    return rows


def parse(argv: list[str]) -> argparse.Namespace:
    """The options; exit 2 with one line on a bad one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tokens", type=int, default=32768)
    parser.add_argument("--widths", default="1600,4096")
    parser.add_argument("--recipes", default="tensorwise,rowwise")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    args.width_list = _ints(args.widths)
    args.recipe_list = [r for r in args.recipes.split(",") if r.strip()]
    from accelbench.config.vocab import FP8_RECIPES

    unknown = [r for r in args.recipe_list if r not in FP8_RECIPES]
    if unknown:
        parser.error(f"recipes: unknown {unknown[0]!r} (allowed: {', '.join(FP8_RECIPES)})")
    if args.tokens < 16 or args.repeats < 1 or any(w % 16 for w in args.width_list):
        parser.error("tokens >= 16, repeats >= 1, widths multiples of 16 (float8 GEMMs)")
    return args


def main(argv: list[str]) -> int:
    """Every width's layers, GEMM and layer rows; a JSON line each."""
    args = parse(argv)
    device = torch.device(args.device)
    for width in args.width_list:
        for name, shape in LAYERS.items():
            d_in, d_out = shape(width)
            for row in (mm_rows(device, args.tokens, d_in, d_out, args.repeats)
                        + linear_rows(args, device, d_in, d_out)):
                row = dict(probe="gemm", device=str(device), width=width, layer=name,
                           tokens=args.tokens, d_in=d_in, d_out=d_out, **row)
                if args.out:
                    with open(args.out, "a") as out:
                        out.write(json.dumps(row) + "\n")
                shown = (f"{row['seconds'] * 1e3:9.3f} ms {row['tflops']:8.1f} TFLOPS"
                         if "seconds" in row else f"unavailable: {row['unavailable']}")
                print(f"width {width} {name:>4} {d_in}x{d_out} {row['kind']:>14} "
                      f"{row['precision']:>22}: {shown}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
