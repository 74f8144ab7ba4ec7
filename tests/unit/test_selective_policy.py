"""torchtitan's op-level selective recompute ("every_other_mm") against hand counts: which
matmuls it reruns, what a block keeps, and the step's recompute under it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from accelbench.analytics.activations import Kernels, activation_bytes_per_layer
from accelbench.analytics.cluster import make_cluster
from accelbench.analytics.flops import (
    every_other_mm_rerun_params,
    forward_matmuls,
    model_flops_per_token,
    recompute_flops_per_token,
)
from accelbench.analytics.steptime import estimate_step
from accelbench.analytics.train_setup import TrainSetup
from accelbench.analytics.validation_rows import validate_found
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig

# Llama-style: h 64, 8 heads of 8, 2 key/value heads (kv width 16), SwiGLU of 160
LLAMA = ModelConfig("t", n_layer=3, n_head=8, d_model=64, vocab_size=100, n_positions=32,
                    d_ff=160, n_kv_head=2, activation="swiglu", norm="rmsnorm",
                    position="rotary", bias=False, tie_embeddings=False)
TITAN = Kernels(dropout=False, selective="every_other_mm")


def test_matmul_order_and_the_ones_rerun() -> None:
    """q, k, v, o, gate, up, down; the policy reruns k, o and up (the 2nd, 4th, 6th)."""
    h, kv, f = 64, 16, 160
    assert forward_matmuls(LLAMA) == ((h * h, h), (h * kv, kv), (h * kv, kv), (h * h, h),
                                      (h * f, f), (h * f, f), (f * h, h))
    assert every_other_mm_rerun_params(LLAMA) == h * kv + h * h + h * f
    gelu = replace(LLAMA, activation="gelu", n_kv_head=0)
    assert every_other_mm_rerun_params(gelu) == h * h + h * h + f * h  # k, o, proj
    assert recompute_flops_per_token(LLAMA, 32, "selective", selective="every_other_mm") == \
        3 * 2 * (h * kv + h * h + h * f)


def test_what_a_block_keeps() -> None:
    """Input h, q h, v kv, gate f, down h, attention output h: 2 bytes each per token; tp
    splits all but the input, which sequence parallelism splits too."""
    s, b, h, kv, f = 32, 2, 64, 16, 160
    kept = activation_bytes_per_layer(LLAMA, s, b, 2, 1, False, "selective", True,
                                      kernels=TITAN)
    assert kept == 2 * s * b * (h + h + kv + f + h + h)
    tp2 = activation_bytes_per_layer(LLAMA, s, b, 2, 2, False, "selective", True, kernels=TITAN)
    assert tp2 == 2 * s * b * h + 2 * s * b * (h + kv + f + h + h) / 2
    sp = activation_bytes_per_layer(LLAMA, s, b, 2, 2, True, "selective", True, kernels=TITAN)
    assert sp == kept / 2
    korthikanti = activation_bytes_per_layer(LLAMA, s, b, 2, 1, False, "selective", True,
                                             kernels=Kernels(dropout=False))
    assert kept < korthikanti


def test_the_step_reruns_the_policy_s_share() -> None:
    """The recompute time is the rerun matmuls' share of the forward GEMMs plus the
    memory-bound ops; HFU counts their FLOPs."""
    cluster = make_cluster("a100-80gb", 1, 8)
    layout = Layout(dp=8, zero=3, recompute="selective", mb=1)
    base = TrainSetup(8, 32, "bf16", kernels=Kernels(dropout=False))
    titan = estimate_step(LLAMA, cluster, replace(base, kernels=TITAN), layout)
    plain = estimate_step(LLAMA, cluster, base, layout)
    assert titan.compute_s == pytest.approx(plain.compute_s)
    assert titan.recompute_s != pytest.approx(plain.recompute_s)
    model = titan.mfu
    extra = 3 * 2 * every_other_mm_rerun_params(LLAMA)
    per_token = model_flops_per_token(LLAMA, 32).total
    assert titan.hfu == pytest.approx(model * (per_token + extra) / per_token)


def test_memory_against_torchtitan_s_published_peaks() -> None:
    """torchtitan's Table 1 and 3 (reserved peak, GiB): the estimate is 91-100% of it, as the
    8% allocator margin says the allocated part is (the one compiled Float8 run saves more)."""
    rows = [r for r in validate_found() if r.published_memory_gib]
    assert len(rows) == 3
    for row in rows:
        estimate_gib = row.memory_gb * 1e9 / 2**30
        assert row.fits
        assert 0.9 < estimate_gib / row.published_memory_gib <= 1.0, (row.name, estimate_gib)
