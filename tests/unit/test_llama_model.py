"""The Llama switches of the one decoder: parameter counts of real modules against
analytics/params.py, FLOPs against torch's operator-level count (FlopCounterMode) on the real
Llama block and model, forward and backward, and recompute's hardware FLOPs."""

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from accelbench.analytics.flops import (
    block_flops,
    hardware_flops_per_token,
    model_flops_per_step,
    model_flops_per_token,
)
from accelbench.analytics.params import (
    block_params,
    matmul_params,
    total_params,
    tp_whole_block_params,
)
from accelbench.config.presets import get_preset
from accelbench.models.gpt import GPT, Block

# the tiny Llama, its multi-head form, Qwen2's q/k/v-only biases, one key/value head, and
# Llama 3.1's rope scaling with a tied head
VARIANTS = [{}, {"n_kv_head": 0}, {"qkv_bias": True}, {"n_kv_head": 1},
            {"rope_scaling": "llama3", "rope_original_positions": 64, "tie_embeddings": True}]


def _count(fn) -> int:
    """FLOPs torch counts for fn, attention through the math backend (seen as matmuls)."""
    counter = FlopCounterMode(display=False)
    with counter, sdpa_kernel(SDPBackend.MATH):
        fn()
    return counter.get_total_flops()


@pytest.mark.parametrize("variant", VARIANTS)
def test_params_match_instantiated_model(variant):
    cfg = get_preset("llama-tiny").with_changes(**variant)
    model = GPT(cfg)
    assert model.num_params() == total_params(cfg)
    assert sum(p.numel() for p in model.h[0].parameters()) == block_params(cfg)
    matmul = sum(p.numel() for n, p in model.named_parameters()
                 if p.dim() == 2 and not n.startswith("wte"))
    assert matmul == matmul_params(cfg) - (cfg.vocab_size * cfg.d_model
                                           if cfg.tie_embeddings else 0)


@pytest.mark.parametrize("name", ["llama-tiny", "gpt2-tiny"])
def test_tp_whole_params_are_the_norms_and_row_parallel_biases(name):
    block = Block(get_preset(name))
    whole = [block.ln_1, block.ln_2, block.attn.c_proj.bias, block.mlp.c_proj.bias]
    count = sum(sum(p.numel() for p in m.parameters()) if isinstance(m, torch.nn.Module)
                else (m.numel() if m is not None else 0) for m in whole)
    assert tp_whole_block_params(get_preset(name)) == count


def test_llama_modules_have_no_biases_and_rmsnorm():
    model = GPT(get_preset("llama-tiny"))
    assert all(n.endswith("weight") for n, _ in model.named_parameters())
    assert isinstance(model.h[0].ln_1, torch.nn.RMSNorm)
    assert model.h[0].attn.c_attn.out_features == 128 + 2 * 2 * 32  # q + k + v, 2 kv heads
    assert model.h[0].mlp.c_fc.out_features == 2 * 384  # fused gate and up
    assert model.lm_head.weight is not model.wte.weight


@pytest.mark.parametrize("variant", VARIANTS[:4])
def test_block_flops_match_flop_counter(variant):
    cfg = get_preset("llama-tiny").with_changes(**variant)
    batch, seq = 3, 64
    block = Block(cfg)
    x = torch.randn(batch, seq, cfg.d_model, requires_grad=True)
    out = {}
    fwd = _count(lambda: out.update(y=block(x)))
    bwd = _count(lambda: out["y"].backward(torch.ones_like(out["y"])))
    expected = block_flops(cfg, seq, batch)
    assert expected.forward == pytest.approx(fwd, rel=0.01)
    assert expected.backward == pytest.approx(bwd, rel=0.01)


@pytest.mark.parametrize("variant", VARIANTS)
def test_model_flops_match_flop_counter(variant):
    cfg = get_preset("llama-tiny").with_changes(**variant)
    model = GPT(cfg)
    batch, seq = 2, 96
    idx = torch.randint(0, cfg.vocab_size, (batch, seq))
    out = {}
    fwd = _count(lambda: out.update(loss=model(idx, idx)[1]))
    bwd = _count(lambda: out["loss"].backward())
    expected = model_flops_per_step(cfg, seq, batch * seq)
    assert expected.forward == pytest.approx(fwd, rel=0.01)
    assert expected.backward == pytest.approx(bwd, rel=0.01)


@pytest.mark.slow
@pytest.mark.parametrize("recompute", ["full", "selective"])
def test_hardware_flops_count_what_recompute_reruns(recompute):
    cfg = get_preset("llama-tiny")
    model = GPT(cfg)
    model.set_recompute(recompute)
    batch, seq = 2, 64
    idx = torch.randint(0, cfg.vocab_size, (batch, seq))
    total = _count(lambda: model(idx, idx)[1].backward())
    expected = hardware_flops_per_token(cfg, seq, recompute, early_stop=True) * batch * seq
    assert expected == pytest.approx(total, rel=0.01)
    assert expected > model_flops_per_token(cfg, seq).total * batch * seq


def test_llama2_7b_flops_by_hand():
    """6N + 12*L*H*Q*T, N = 32 x (4 x 4096^2 + 3 x 4096 x 11008) + 32000 x 4096, T = 4096."""
    n = 32 * (4 * 4096**2 + 3 * 4096 * 11008) + 32000 * 4096
    cfg = get_preset("llama2-7b")
    assert model_flops_per_token(cfg, 4096).total == 6 * n + 12 * 32 * 4096 * 4096


def test_gqa_shrinks_only_the_key_value_projections():
    """llama3-8b: q and o are 4096 x 4096, k and v 4096 x 1024 (8 heads of 128)."""
    cfg = get_preset("llama3-8b")
    attention = 4096 * (4096 + 2 * 1024) + 4096 * 4096
    assert block_params(cfg) == attention + 3 * 4096 * 14336 + 2 * 4096
