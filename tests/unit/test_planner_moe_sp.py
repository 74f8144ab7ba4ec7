"""Sequence parallelism with an MoE model in the planner, as the runtime builds it (each tensor
rank routes its own tokens / tp): the expert GEMMs, the all-to-all bytes and the MoE layer's
saved activations are those of tokens / tp under sp, of all tokens on every tensor rank
without (docs/moe.md)."""

from __future__ import annotations

import pytest

from accelbench.analytics.activations import moe_activation_delta
from accelbench.analytics.cluster import make_cluster
from accelbench.analytics.comm import collective_time_s
from accelbench.analytics.efficiency import BuiltinRates, moe_gemm_delta_s
from accelbench.analytics.moe_cost import moe_tokens
from accelbench.analytics.step_comm import all_to_all_s
from accelbench.analytics.train_setup import TrainSetup
from accelbench.config.layout import Layout
from accelbench.config.presets import resolve_model

TINY = resolve_model("moe-tiny")  # d_model 128, 8 SwiGLU experts of 128, top-2, 1 shared
RATES = BuiltinRates(1e12, 1e12, 0.5, 0.5, 1e11)


def test_moe_tokens() -> None:
    assert (moe_tokens(1024, 2, True), moe_tokens(1024, 2, False)) == (512, 1024)


def test_expert_gemms_of_the_rank_s_shard() -> None:
    """sp at tp=2 runs the MoE part on half the tokens (less time than every tensor rank
    running all of them); sp changes nothing at tp=1."""
    sp_fwd, sp_bwd = moe_gemm_delta_s(RATES, TINY, 1024, 2, 2, sp=True)
    full_fwd, full_bwd = moe_gemm_delta_s(RATES, TINY, 1024, 2, 2, sp=False)
    assert sp_fwd < full_fwd and sp_bwd < full_bwd
    assert moe_gemm_delta_s(RATES, TINY, 1024, 1, 2, sp=True) == moe_gemm_delta_s(
        RATES, TINY, 1024, 1, 2, sp=False)


def test_all_to_all_of_the_rank_s_shard_by_hand() -> None:
    """4 all-to-alls a layer of the routed vectors (tokens x top-2 x 128 x 2 bytes, half
    remote at ep 2): 1024 tokens a rank without sp, 512 with it, on both MoE layers."""
    cluster = make_cluster("h100-sxm", 1)
    setup = TrainSetup(global_batch=8, seq_len=1024)
    bw, lat = cluster.link(2 * 2)  # ep 2 ranks of tp 2 consecutive devices each
    for sp, tokens in ((False, 1024), (True, 512)):
        volume = 4 * tokens * 2 * 128 * 2 / 2
        expected = collective_time_s(volume, 2, bw, lat, 4)
        got = all_to_all_s(TINY, cluster, setup, Layout(dp=4, tp=2, ep=2, sp=sp))
        assert got == pytest.approx(expected), sp


def test_saved_activations_of_the_rank_s_shard_by_hand() -> None:
    """Per routed assignment 2h + 8f (eager SwiGLU) = 1280 bytes, the shared expert's 8f =
    1024 a token and the router's 2E = 16 a token, of 512 tokens under sp (1024 without),
    less the dense MLP's 8 x 384 / tp a token of all 1024 tokens."""
    dense = 1024 * 8 * 384 / 2
    for sp, own in ((False, 1024), (True, 512)):
        expected = own * 2 * 1280 + own * 1024 + own * 16 - dense
        assert moe_activation_delta(TINY, 1024, 2, sp=sp) == pytest.approx(expected), sp
