"""Check probes of the kernels a cell runs: matmuls, SDPA backends, compile, AdamW, fp8, 2:4."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.bench.check_probe import (
    CheckSettings,
    Found,
    NotHere,
    Probe,
    first_line,
    sync_device,
    timed_s,
)

MATMUL_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
SDPA_BACKENDS = ("flash", "efficient", "cudnn", "math")  # torch's priority order, roughly
_SDPA_ENUM = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
              "cudnn": "CUDNN_ATTENTION", "math": "MATH"}


@contextmanager
def _tf32(device: torch.device, allow: bool) -> Iterator[None]:
    """TF32 matmuls allowed (or not) inside, restored after."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allow
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _matmul_problem(device: torch.device, precision: str) -> str | None:
    """Why this precision has no matmul here, or None."""
    from accelbench.bench.dtypes import dtype_support

    if precision == "tf32":
        if device.type != "cuda" or torch.version.hip:
            return f"tf32 is an NVIDIA matmul mode ({device.type} here)"
        major, minor = torch.cuda.get_device_capability(device)
        return None if major >= 8 else f"compute capability {major}.{minor} (tf32 needs 8.0+)"
    return dtype_support(device, precision)


def probe_matmul(precision: str) -> Probe:
    """A square matmul in `precision` and its achieved TFLOPS (with the datasheet's share)."""

    def probe(s: CheckSettings) -> Found:
        from accelbench.bench.dtypes import TORCH_DTYPES

        problem = _matmul_problem(s.device, precision)
        if problem:
            raise NotHere(problem)
        dtype = TORCH_DTYPES["fp32" if precision == "tf32" else precision]
        a = torch.randn(s.matmul_n, s.matmul_n, device=s.device, dtype=dtype)
        with _tf32(s.device, precision == "tf32"):
            seconds = timed_s(s, lambda: a @ a, s.matmul_repeats)
        tflops = 2 * s.matmul_n**3 / seconds / 1e12
        return (f"{tflops:.3f} TFLOPS at n={s.matmul_n}{_share(s.device, precision, tflops)}",
                {"tflops": tflops, "n": s.matmul_n})

    probe.__doc__ = f"A {precision} matmul and its achieved TFLOPS."
    return probe


def _share(device: torch.device, precision: str, tflops: float) -> str:
    """'; 61% of the datasheet's dense <precision> peak (<key>)', or nothing without a row."""
    from accelbench.hardware.detect import detect_spec

    spec = detect_spec(device)
    peak = spec.peak_tflops.get(precision) if spec else None
    return f"; {tflops / peak:.0%} of the dense {precision} peak ({spec.key})" if peak else ""


def probe_attention(backend: str) -> Probe:
    """Whether SDPA's `backend` runs a causal bf16 (fp16 where bf16 is not) shape here."""

    def probe(s: CheckSettings) -> Found:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        wanted = getattr(SDPBackend, _SDPA_ENUM[backend], None)
        if wanted is None:
            raise NotHere(f"this torch {torch.__version__} has no {_SDPA_ENUM[backend]}")
        q = _attention_input(s)
        chosen = _sdpa_choice(q)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            try:
                with sdpa_kernel([wanted]):
                    F.scaled_dot_product_attention(q, q, q, is_causal=True)
            except RuntimeError as err:  # torch says why in warnings, the error is generic
                why = [str(w.message).splitlines()[0] for w in said if "kernel" in str(w.message)]
                raise NotHere("; ".join(why[:2]) or _no_kernel(backend, q, err)) from None
        sync_device(s.device)
        used = "; torch picks it by default" if chosen == backend else (
            f"; torch picks {chosen} by default" if chosen else "")
        return (f"runs {q.dtype} {tuple(q.shape)} causal{used}",
                {"default_backend": chosen, "shape": list(q.shape)})

    probe.__doc__ = f"Whether SDPA's {backend} backend runs here."
    return probe


def _no_kernel(backend: str, q: torch.Tensor, err: RuntimeError) -> str:
    """Why SDPA refused a backend when torch gave no warning saying so."""
    if "No viable backend" in str(err):
        return (f"torch has no {backend} kernel for {q.device.type} {q.dtype} "
                f"{tuple(q.shape)} causal")
    return first_line(err)


def _attention_input(s: CheckSettings) -> torch.Tensor:
    """A (batch, heads, seq, head) query in bf16, or fp16 where bf16 does not run."""
    from accelbench.bench.dtypes import dtype_support

    dtype = torch.bfloat16 if dtype_support(s.device, "bf16") is None else torch.float16
    return torch.randn(*s.attention_shape, device=s.device, dtype=dtype)


def _sdpa_choice(q: torch.Tensor) -> str | None:
    """The backend torch's dispatcher picks for causal attention of q (torch._fused_sdp_choice),
    or None where this torch does not say."""
    from torch.nn.attention import SDPBackend

    choose = getattr(torch, "_fused_sdp_choice", None)
    if choose is None:
        return None
    index = choose(q, q, q, None, 0.0, True)
    names = {getattr(SDPBackend, enum, None): name for name, enum in _SDPA_ENUM.items()}
    return names.get(SDPBackend(index), str(SDPBackend(index)))


def _tiny_block(s: CheckSettings) -> nn.Module:
    """One GPT-2 tiny block on the device (the model's own Block)."""
    from accelbench.config.presets import resolve_model
    from accelbench.models.gpt import Block

    return Block(resolve_model("gpt2-tiny")).to(s.device)


def probe_compile(s: CheckSettings) -> Found:
    """torch.compile of one block, forward and backward, agrees with eager."""
    block = _tiny_block(s)
    x = torch.randn(2, 64, block.ln_1.normalized_shape[0], device=s.device, requires_grad=True)
    eager = block(x)
    torch._dynamo.reset()  # a fresh cache: this compile is this probe's own
    compiled = torch.compile(block, backend=s.compile_backend)
    start = time.perf_counter()
    y = compiled(x)
    y.sum().backward()
    sync_device(s.device)
    seconds = time.perf_counter() - start
    err = (y - eager).abs().max().item()
    torch._dynamo.reset()
    if not err < 1e-3:
        raise RuntimeError(f"compiled block differs from eager by {err:.3g}")
    return (f"{s.compile_backend}: forward+backward compiled in {seconds:.1f} s, "
            f"max |compiled - eager| {err:.1e}", {"backend": s.compile_backend})


def probe_fused_adamw(s: CheckSettings) -> Found:
    """torch.optim.AdamW(fused=True) takes a step here."""
    weight = nn.Parameter(torch.ones(256, device=s.device))
    opt = torch.optim.AdamW([weight], lr=0.1, fused=True)
    weight.grad = torch.ones_like(weight)
    opt.step()
    sync_device(s.device)
    if not bool((weight < 1).all()):
        raise RuntimeError("the fused step did not move the weight")
    return "AdamW(fused=True) stepped", {}


def probe_fp8(s: CheckSettings) -> Found:
    """torchao float8 training of a linear layer: on float8 units, or emulated."""
    from accelbench.bench.dtypes import fp8_mode
    from accelbench.config.errors import ConfigError
    from accelbench.models.float8 import float8_config, torchao_float8

    try:
        float8 = torchao_float8()
    except ConfigError as err:
        raise NotHere(err.problem) from None
    mode, why = fp8_mode(s.device)
    model = nn.Sequential(nn.Linear(64, 64)).to(s.device)
    float8.convert_to_float8_training(model, config=float8_config(
        "tensorwise", mode != "native", False))
    x = torch.randn(32, 64, device=s.device, dtype=torch.bfloat16)
    with torch.autocast(s.device.type, dtype=torch.bfloat16):
        model(x).float().sum().backward()
    sync_device(s.device)
    if model[0].weight.grad is None:
        raise RuntimeError("no gradient reached the float8 layer")
    return f"{mode}: {why}", {"mode": mode}


def memory_order(t: torch.Tensor) -> str:
    """How a matrix's rows lie in memory: a check line never calls a transposed output row-major."""
    if t.is_contiguous():
        return "row-major"
    rows = t.flatten(0, -2)  # a view where the leading dims merge; a copy (row-major) if not
    if rows.stride(0) == 1 and rows.stride(1) == rows.shape[0]:
        return "column-major"
    return "neither row- nor column-major"


def probe_two_four(s: CheckSettings) -> Found:
    """torch's 2:4 semi-structured kernels: a compressed linear equals the dense one."""
    from accelbench.models.semi_structured import device_problem, kernel_backend
    from accelbench.models.weight_masks import transposable_two_four_mask

    problem = device_problem(s.device, "bf16")
    if problem:
        raise NotHere(problem)
    w = torch.randn(128, 128, device=s.device, dtype=torch.bfloat16)
    w = w * transposable_two_four_mask(w.float().abs())
    x = torch.randn(2, 64, 128, device=s.device, dtype=torch.bfloat16)
    y = F.linear(x, torch.sparse.to_sparse_semi_structured(w))
    err = (y - F.linear(x, w)).abs().max().item()
    if not err < 0.5:
        raise RuntimeError(f"sparse result differs from dense by {err:.3g}")
    layout = f"{memory_order(y)}, strides {tuple(y.stride())}"
    return (f"{kernel_backend()}: bf16 linear, max error {err:.2g}, output {layout}",
            {"backend": kernel_backend(), "output_contiguous": y.is_contiguous()})
