"""What a training step spends outside its layers, measured as the model runs it: the loss
(cross-entropy over tokens x vocab, forward and backward), the token embedding (gather and
its dense gradient, plus the tied head's gradient added in), and the optimizer update (the
train loop's gradient norm, clip and fused AdamW over a transformer's parameter tensors).
Each call allocates its results afresh, as a step does: on a CPU that includes the first
touch of new pages, which a copy into a reused buffer (the `memory` points) does not pay.
Bytes per call are counted by analytics/kernels.py."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.analytics.kernels import (
    LOSS_BYTES,
    embedding_bytes,
    loss_bytes,
    optimizer_bytes,
)
from accelbench.analytics.machine_profile import Point, curve_key
from accelbench.bench.dtypes import parse_dtype
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig
from accelbench.parallel.optim import adamw, clip_grad_norm_, param_groups
from accelbench.workloads.calibrate.compute import make_point, time_call
from accelbench.workloads.calibrate.options import FP32_BYTES, CalibrateSpec

GRAD_CLIP = 1.0  # the train loop's default (bench/train/spec.py grad_clip)


def _loss_call(tokens: int, vocab: int, dtype: torch.dtype, device: torch.device
               ) -> Callable[[], object]:
    """Cross-entropy of (tokens x vocab) logits in `dtype`, cast to fp32 as models/gpt.py
    does, and its backward into the logits."""
    logits = torch.randn(tokens, vocab, device=device, dtype=dtype, requires_grad=True)
    targets = torch.randint(0, vocab, (tokens,), device=device)

    def call() -> None:
        logits.grad = None
        F.cross_entropy(logits.float(), targets).backward()

    return call


def measure_loss(spec: CalibrateSpec, device: torch.device, dtype: str) -> list[Point]:
    """The loss over the model's vocabulary at each token count."""
    points, vocab = [], spec.model.vocab_size
    for tokens in spec.tokens:
        torch_dtype = parse_dtype(dtype)
        stats = time_call(_loss_call(tokens, vocab, torch_dtype, device), device, spec)
        moved = loss_bytes(tokens, vocab, torch_dtype.itemsize)
        points.append(make_point("loss", curve_key("loss", dtype), f"loss {tokens}x{vocab}",
                                 dtype, moved, moved, stats,
                                 {"tokens": tokens, "vocab": vocab, "loss_dtype": "fp32",
                                  "bytes_per_value": torch_dtype.itemsize,
                                  "loss_bytes_per_value": LOSS_BYTES}))
    return points


def _embedding_call(tokens: int, cfg: ModelConfig, device: torch.device
                    ) -> Callable[[], object]:
    """The token embedding's gather and backward (fp32: parameters stay fp32 under
    autocast); a tied table then adds the head's gradient, out of place as autograd does."""
    table = nn.Parameter(0.02 * torch.randn(cfg.vocab_size, cfg.d_model, device=device))
    ids = torch.randint(0, cfg.vocab_size, (tokens,), device=device)
    grad = torch.randn(tokens, cfg.d_model, device=device)
    head_grad = torch.randn_like(table) if cfg.tie_embeddings else None

    def call() -> object:
        table.grad = None
        F.embedding(ids, table).backward(grad)
        return table.grad + head_grad if head_grad is not None else table.grad

    return call


def measure_embedding(spec: CalibrateSpec, device: torch.device) -> list[Point]:
    """The model's token embedding at each token count."""
    cfg, points = spec.model, []
    for tokens in spec.tokens:
        stats = time_call(_embedding_call(tokens, cfg, device), device, spec)
        moved = embedding_bytes(tokens, cfg.vocab_size, cfg.d_model, cfg.tie_embeddings,
                                FP32_BYTES)
        points.append(make_point(
            "embedding", curve_key("embedding", "fp32"),
            f"embedding {tokens} of {cfg.vocab_size}x{cfg.d_model}"
            + (" tied" if cfg.tie_embeddings else ""), "fp32", moved, moved, stats,
            dict(tokens=tokens, rows=cfg.vocab_size, width=cfg.d_model,
                 tied=cfg.tie_embeddings)))  # the shape: rows are vocabulary entries
    return points


def parameter_shapes(cfg: ModelConfig, n_params: int) -> list[tuple[int, ...]]:
    """Tensors of one layer's shapes (QKV, attention output, MLP in and out, their biases and
    the two norms), repeated until they hold n_params: as many tensors per parameter as the
    model has, which a fused or foreach kernel's per-tensor cost depends on."""
    h, ffn = cfg.d_model, cfg.ffn_dim
    up = 2 * ffn if cfg.activation == "swiglu" else ffn
    qkv = h + 2 * cfg.kv_heads * cfg.head_dim
    layer = [(qkv, h), (qkv,), (h, h), (h,), (up, h), (up,), (h, ffn), (h,), (h,), (h,)]
    shapes, total = [], 0
    while total < n_params:
        for shape in layer:
            numel = min(_numel(shape), n_params - total)
            if numel <= 0:
                break
            shapes.append(shape if numel == _numel(shape) else (numel,))
            total += numel
    return shapes


def _numel(shape: tuple[int, ...]) -> int:
    """Elements of a shape."""
    out = 1
    for dim in shape:
        out *= dim
    return out


def optimizer_update(shapes: list[tuple[int, ...]], device: torch.device
                     ) -> tuple[Callable[[], object], str, nn.Module]:
    """The train loop's update (bench/train/steps.py): global-norm clip, then AdamW; with
    the kernel that runs and the parameters it updates."""
    module = nn.ParameterList(nn.Parameter(torch.randn(s, device=device)) for s in shapes)
    for p in module:
        p.grad = torch.randn_like(p)
    optimizer, kernel = adamw(param_groups(list(module), 0.1), lr=1e-4)
    layout = Layout()

    def call() -> None:
        clip_grad_norm_(module, GRAD_CLIP, layout)
        optimizer.step()

    return call, kernel, module


def measure_optimizer(spec: CalibrateSpec, device: torch.device) -> list[Point]:
    """The update at each parameter count, over tensors of the model's layer shapes."""
    points = []
    for n_params in spec.optimizer_params:
        shapes = parameter_shapes(spec.model, n_params)
        call, kernel, _ = optimizer_update(shapes, device)
        stats = time_call(call, device, spec)
        moved = optimizer_bytes(n_params)
        points.append(make_point(
            "optimizer", curve_key("optimizer", "adamw"),
            f"clip + AdamW ({kernel}) {n_params} params", "fp32", moved, moved, stats,
            {"params": n_params, "tensors": len(shapes), "kernel": kernel,
             "grad_clip": GRAD_CLIP}))
    return points
