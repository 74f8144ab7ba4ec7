"""Memory estimates (bytes): activations after Korthikanti et al. 2022, and what a run holds.

The measured benchmarks call these before allocating, to refuse a cell that cannot fit, and
record the estimate beside the measured peak.
"""

from __future__ import annotations

from accelbench.analytics.params import block_params
from accelbench.config.model import ModelConfig

BYTES_PER_VALUE = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}


def activation_bytes_per_layer(cfg: ModelConfig, seq_len: int, micro_batch: int,
                               bytes_per_value: int = 2, tp: int = 1, sp: bool = False,
                               recompute: str = "none") -> float:
    """Activations one transformer layer keeps for backward (Korthikanti et al. 2022, sec. 4-5).

    The paper's constants assume 16-bit values (34 = bytes per element of s*b*h); other widths
    scale them. The attention-score term (5*a*s/h) is what flash attention avoids: kept here, so
    the estimate is an upper bound for fused attention kernels.
    """
    s, b, h, a = seq_len, micro_batch, cfg.d_model, cfg.n_head
    scale = bytes_per_value / 2
    sbh = s * b * h
    if recompute == "full":
        return 2 * sbh * scale / (tp if sp else 1)
    if recompute == "selective":
        per = 34 / tp if sp else 10 + 24 / tp
        return sbh * per * scale
    if recompute != "none":
        raise ValueError(f"recompute must be none, selective or full, got {recompute!r}")
    if sp:
        return sbh / tp * (34 + 5 * a * s / h) * scale
    return sbh * (10 + 24 / tp + 5 * a * s / (h * tp)) * scale


def block_train_bytes(cfg: ModelConfig, seq_len: int, batch: int, dtype: str) -> float:
    """Peak estimate for timing one block forward and backward in `dtype` (micro-benchmark).

    Weights and their gradients, the layer's saved activations, plus the block's input, its
    gradient and the output gradient (3 * s*b*h values).
    """
    width = BYTES_PER_VALUE[dtype]
    weights_and_grads = 2 * block_params(cfg) * width
    io = 3 * seq_len * batch * cfg.d_model * width
    return weights_and_grads + io + activation_bytes_per_layer(cfg, seq_len, batch, width)
