"""The planner's activation count against what accelbench's real blocks save for backward:
saved-tensor hooks on one block, unique storages counted (weights excluded), bf16 on CPU."""

from __future__ import annotations

import pytest
import torch

from accelbench.analytics.activations import layer_activation_terms
from accelbench.config.model import ModelConfig, validate_model
from accelbench.models.gpt import Block

S, B, H = 128, 2, 256


def saved_bytes(cfg: ModelConfig) -> int:
    """Bytes of the distinct storages one block's forward saves for backward."""
    torch.manual_seed(0)
    block = Block(cfg).to(torch.bfloat16)
    weights = {p.untyped_storage().data_ptr() for p in block.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in weights:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    x = torch.randn(B, S, H, dtype=torch.bfloat16, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        block(x)
    return sum(seen.values())


def estimate(cfg: ModelConfig) -> float:
    """The planner's count less Korthikanti's two dropout masks (sbh bytes each), which
    accelbench's model, like Llama, does not have; fused attention (no scores)."""
    replicated, split, _ = layer_activation_terms(cfg, S, B)
    return replicated + split - 2 * S * B * H


@pytest.mark.parametrize("extra", [
    {},  # GPT-2: LayerNorm, GELU, learned positions
    # Llama-shaped: SwiGLU of width 688, 2 of 8 heads for keys and values, full rotary; with
    # LayerNorm, whose saved input the planner counts for both norms (see the RMSNorm test)
    {"norm": "layernorm", "bias": False, "activation": "swiglu", "n_kv_head": 2,
     "position": "rotary", "tie_embeddings": False, "d_ff": 688},
])
def test_block_saves_what_the_planner_counts(extra: dict) -> None:
    cfg = validate_model(ModelConfig("probe", 1, 8, H, 1000, 512, **extra))
    assert saved_bytes(cfg) == pytest.approx(estimate(cfg), rel=0.02)


def test_gqa_and_swiglu_change_the_count_as_the_blocks_do() -> None:
    """Fewer KV heads and the gated MLP move the real and the planned count together."""
    base = {"norm": "layernorm", "bias": False, "position": "rotary", "tie_embeddings": False}
    mha = validate_model(ModelConfig("mha", 1, 8, H, 1000, 512, 688, activation="swiglu",
                                     **base))
    gqa = validate_model(ModelConfig("gqa", 1, 8, H, 1000, 512, 688, activation="swiglu",
                                     n_kv_head=2, **base))
    gelu = validate_model(ModelConfig("gelu", 1, 8, H, 1000, 512, 688, activation="gelu",
                                      **base))
    for a, b in ((mha, gqa), (mha, gelu)):
        assert saved_bytes(a) - saved_bytes(b) == pytest.approx(estimate(a) - estimate(b),
                                                                rel=0.03)


def test_cpu_rmsnorm_saves_fp32_copies_the_planner_does_not_count() -> None:
    """torch's composite nn.RMSNorm (CPU) saves its input and output upcast to fp32; the
    planner counts the fused kernels GPU frameworks run (the 16-bit input and one statistic a
    token), so on CPU a Llama block saves more than planned (docs/planner.md says so)."""
    base = {"bias": False, "activation": "swiglu", "n_kv_head": 2, "position": "rotary",
            "tie_embeddings": False}
    ln = validate_model(ModelConfig("ln", 1, 8, H, 1000, 512, 688, norm="layernorm", **base))
    rms = validate_model(ModelConfig("rms", 1, 8, H, 1000, 512, 688, norm="rmsnorm", **base))
    assert estimate(rms) == estimate(ln)
    assert saved_bytes(rms) > saved_bytes(ln)
