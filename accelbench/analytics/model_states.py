"""Weights, gradients and optimizer state one rank holds, under ZeRO, per stage; no torch."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from accelbench.analytics.moe_cost import stage_split
from accelbench.analytics.params import block_matmul_params, block_params
from accelbench.analytics.training_widths import training_widths
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig
from accelbench.config.vocab import ZERO_STAGES


@lru_cache(maxsize=64)
def block_sizes(cfg: ModelConfig) -> tuple[int, int]:
    """(parameters, GEMM weights) of one block, from accelbench.analytics.params; cached, as
    the planner asks for them for every layout it evaluates."""
    return block_params(cfg), block_matmul_params(cfg)


# Optimizer bytes per parameter beyond the weights and gradients: fp32 moments (Adam: m and v;
# SGD: momentum) plus an fp32 master copy when the weights are narrower than fp32.
OPTIMIZER_MOMENTS = {"adam": 2, "sgd": 1}


@dataclass(frozen=True)
class ModelStateBytes:
    """Weights, gradients and optimizer state one rank holds, in bytes."""

    params: float
    grads: float
    optimizer: float

    @property
    def total(self) -> float:
        """All model states."""
        return self.params + self.grads + self.optimizer


def optimizer_bytes_per_param(dtype: str, optimizer: str = "adam") -> int:
    """K of the ZeRO paper: 12 for mixed-precision Adam (fp32 copy, m, v), 8 for fp32 Adam;
    FP8 training keeps the same fp32 master copy and moments as BF16 (precision.py)."""
    return 4 * OPTIMIZER_MOMENTS[optimizer] + training_widths(dtype).master


def model_state_bytes(n_params: float, dp: int = 1, zero: int = 0, dtype: str = "bf16",
                      optimizer: str = "adam", gemm_params: float = 0.0) -> ModelStateBytes:
    """ZeRO sec. 3.1: stage 1 shards optimizer state over dp, 2 also gradients, 3 also weights.

    Widths from precision.training_widths: under fp8 the weights and gradients stay BF16 and
    each block GEMM weight (`gemm_params` of them) adds its 1-byte FP8 copy, counted with the
    weights.
    """
    if zero not in ZERO_STAGES:
        raise ValueError(f"zero must be one of {ZERO_STAGES}, got {zero!r}")
    widths = training_widths(dtype)
    params = widths.weights * n_params + widths.fp8_weight_copy * gemm_params
    grads = widths.grads * n_params
    opt = optimizer_bytes_per_param(dtype, optimizer) * n_params
    return ModelStateBytes(params / dp if zero >= 3 else params,
                           grads / dp if zero >= 2 else grads,
                           opt / dp if zero >= 1 else opt)


def stage_params(cfg: ModelConfig, tp: int, pp: int, stage: str,
                 vocab_parallel: bool = True, layers: float | None = None) -> float:
    """Parameters on one rank of the "first", a "middle" or the "last" pipeline stage.

    Blocks split over stages (`layers` of them on this stage, else L/pp) and over tensor ranks;
    the token embedding and the output head are vocabulary-parallel (split over tp, as Megatron
    does) unless vocab_parallel=False (accelbench's own tensor parallel replicates them);
    learned positions are replicated. A tied head lives on both end stages when pp > 1
    (Megatron keeps a copy there), once when pp == 1.
    """
    h = cfg.d_model
    vocab_tp = tp if vocab_parallel else 1
    blocks = (cfg.n_layer / pp if layers is None else layers) * block_sizes(cfg)[0] / tp
    embed = cfg.padded_vocab * h / vocab_tp + (cfg.n_positions * h if cfg.position == "learned"
                                             else 0)
    norm = cfg.norm_params  # the final norm, on the last stage
    head = cfg.padded_vocab * h / vocab_tp + norm
    if pp == 1:
        return blocks + embed + (0 if cfg.tie_embeddings else head - norm) + norm
    return blocks + {"first": embed, "last": head}.get(stage, 0.0)


def stage_state_bytes(cfg: ModelConfig, layout: Layout, stage: str, layers: float, dtype: str,
                      optimizer: str, gemm_params: float = 0.0,
                      vocab_parallel: bool = True) -> ModelStateBytes:
    """Model states one rank of a stage holds: ZeRO shards dense state over dp x cp and, in a
    mixture of experts, the rank's E / ep experts' state over the dp x cp / ep ranks that hold
    the same experts (moe_cost.stage_split)."""
    params = stage_params(cfg, layout.tp, layout.pp, stage, vocab_parallel, layers)
    group = layout.dp * layout.cp
    if not cfg.n_experts:
        return model_state_bytes(params, group, layout.zero, dtype, optimizer, gemm_params)
    dense, expert = stage_split(cfg, params, layout.tp, layout.ep, layers)
    d = model_state_bytes(dense, group, layout.zero, dtype, optimizer, gemm_params)
    e = model_state_bytes(expert, group // layout.ep, layout.zero, dtype, optimizer)
    return ModelStateBytes(d.params + e.params, d.grads + e.grads, d.optimizer + e.optimizer)
