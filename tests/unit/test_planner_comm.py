"""Planner communication and step time: volumes, bubble and times against hand calculations."""

from __future__ import annotations

import pytest

from accelbench.analytics import comm
from accelbench.analytics.cluster import make_cluster
from accelbench.analytics.compute_rates import layer_rates
from accelbench.analytics.efficiency import layer_cost
from accelbench.analytics.flops import model_flops_per_token
from accelbench.analytics.steptime import estimate_step
from accelbench.analytics.train_setup import TrainSetup
from accelbench.config.errors import ConfigError
from accelbench.config.layout import Layout
from accelbench.config.layout_parse import PLANNER_KEYS, parse_layout_fields
from accelbench.config.model import ModelConfig

GPT3 = ModelConfig("gpt3-175b", 96, 96, 12288, 51200, 2048)


def test_ring_volumes() -> None:
    assert comm.allreduce_bytes_per_rank(800, 8) == 2 * 7 / 8 * 800
    assert comm.gather_bytes_per_rank(800, 8) == 700


def test_zero_dp_volumes_match_zero_paper() -> None:
    # ZeRO sec. 7: 2 Psi for DP and stages 1/2, 3 Psi (1.5x) for stage 3 (one micro-batch)
    psi, n = 1e9, 1024
    base = comm.dp_bytes_per_rank(psi, n, 0)
    assert base == pytest.approx(2 * psi * (n - 1) / n)
    assert comm.dp_bytes_per_rank(psi, n, 1) == base == comm.dp_bytes_per_rank(psi, n, 2)
    assert comm.dp_bytes_per_rank(psi, n, 3) == pytest.approx(1.5 * base)


def test_zero_under_a_pipeline_defers_the_reduce_scatter() -> None:
    """FSDP per stage (accelbench's runtime, torchtitan): with m = 8 micro-batches ZeRO-2
    gathers and reduce-scatters once a step; ZeRO-3 gathers m + 1 times and scatters once,
    the counts accelbench's profiler test measures (parallel/collectives.py)."""
    psi, n, m = 1e9, 8, 8
    one = psi * (n - 1) / n
    assert comm.dp_bytes_per_rank(psi, n, 2, m, pp=4) == pytest.approx(2 * one)
    assert comm.dp_bytes_per_rank(psi, n, 3, m, pp=4) == pytest.approx((m + 2) * one)
    assert comm.dp_bytes_per_rank(psi, n, 2, m) == pytest.approx((m + 1) * one)  # no pipeline
    assert comm.dp_collective_ops(3, m, pp=4) == m + 2 and comm.dp_collective_ops(2, m, 4) == 2


def test_tp_bytes_per_layer_by_hand() -> None:
    # 4 all-reduces of b*s*h bf16 values per layer, ring over t=8: 4 * 2*7/8 * 2048*12288*2
    expected = 4 * 2 * 7 / 8 * 2048 * 12288 * 2
    assert comm.tp_bytes_per_layer(GPT3, 2048, 1, "bf16", 8) == pytest.approx(expected)
    assert comm.tp_bytes_per_layer(GPT3, 2048, 1, "bf16", 8, "full") == pytest.approx(
        expected * 6 / 4)
    assert comm.pp_message_bytes(GPT3, 2048, 1, "bf16", 8) == 2048 * 12288 * 2 / 8


def test_collective_time_by_hand() -> None:
    # 1 GB per rank at 100 GB/s plus 2*ceil(log2 8) = 6 hops of 5 us
    assert comm.collective_time_s(1e9, 8, 100e9, 5e-6) == pytest.approx(0.01 + 30e-6)
    assert comm.collective_time_s(1e9, 1, 100e9, 5e-6) == 0.0


def test_bubble_fraction_1f1b_and_interleaved() -> None:
    cluster = make_cluster("a100-80gb", 8)  # 64 devices
    setup = TrainSetup(global_batch=64, seq_len=2048)
    for vp in (1, 2, 4):
        layout = Layout(dp=1, tp=8, pp=8, vp=vp, mb=1, recompute="selective")
        step = estimate_step(GPT3, cluster, setup, layout)
        slots = step.compute_s + step.recompute_s + step.tp_comm_s + step.pp_comm_s
        # the head (6Vh per token, on the last stage only) is in the slowest slot but not in
        # the fill and drain of the other stages: bubble = (p-1)/v x (slot - head)
        head = layer_cost(layer_rates(cluster, "bf16"), GPT3, 2048, 1, 1, 8, True, "bf16",
                          True).head
        assert step.bubble_s == pytest.approx((8 - 1) / vp * (slots / 64 - head))


def test_compute_only_step_is_its_operations() -> None:
    # one device, no parallelism: the step is m slots of L layers and the head, each the sum
    # of its operations (efficiency.layer_cost), plus the optimizer; MFU follows from it
    cfg = ModelConfig("small", 4, 8, 512, 1000, 256)
    cluster = make_cluster("h100-sxm", 1, devices_per_node=1)
    setup = TrainSetup(global_batch=4, seq_len=256)
    step = estimate_step(cfg, cluster, setup, Layout(dp=1, mb=2), efficiency=0.5)
    cost = layer_cost(layer_rates(cluster, "bf16", 0.5), cfg, 256, 2, 1, 1, False, "bf16", True)
    assert step.compute_s == pytest.approx(2 * (4 * cost.model + cost.head))
    flops = model_flops_per_token(cfg, 256).total * 4 * 256
    assert step.compute_s > flops / (989.4e12 * 0.5)  # small GEMMs and memory-bound ops
    assert step.mfu == pytest.approx(flops / step.step_s / 989.4e12)
    assert step.tp_comm_s == step.pp_comm_s == step.bubble_s == step.dp_comm_exposed_s == 0


def test_full_recompute_hfu_over_mfu() -> None:
    cluster = make_cluster("a100-80gb", 1)
    setup = TrainSetup(global_batch=8, seq_len=2048)
    step = estimate_step(GPT3, cluster, setup, Layout(dp=1, tp=8, mb=1, recompute="full"))
    # hardware/model = 1 + forward/(forward+backward) of the blocks: close to 4/3
    assert 1.30 < step.hfu / step.mfu < 4 / 3


def test_parse_layout_and_errors() -> None:
    assert parse_layout_fields("dp=16,tp=8,pp=8,recompute=full", PLANNER_KEYS) == {
        "dp": 16, "tp": 8, "pp": 8, "recompute": "full"}
    for bad in ("dp=0", "tp=x", "foo=1", "zero=4", "recompute=some", "schedule=gpipe"):
        with pytest.raises(ConfigError):
            parse_layout_fields(bad, PLANNER_KEYS)
