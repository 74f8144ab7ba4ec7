"""The planner's mixture of experts: the all-to-all volume and time, expert state under ep and
ZeRO, active-parameter MFU, and a search that tries ep only where it divides (hand
calculations; the formulas are in docs/planner.md, MoE)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from accelbench.analytics.cluster import make_cluster
from accelbench.analytics.compute_rates import peak_flops
from accelbench.analytics.flops import model_flops_per_token
from accelbench.analytics.model_states import stage_state_bytes
from accelbench.analytics.moe_cost import all_to_all_bytes_per_layer, expert_params
from accelbench.analytics.params import active_params, matmul_params, total_params
from accelbench.analytics.plan_input import resolve_plan_input, run_plan
from accelbench.analytics.plan_options import PlanOptions
from accelbench.analytics.planner import enumerate_layouts, evaluate
from accelbench.analytics.steptime import estimate_step
from accelbench.analytics.train_setup import TrainSetup
from accelbench.cli.main import app
from accelbench.config.errors import ConfigError
from accelbench.config.layout import Layout
from accelbench.config.presets import resolve_model

TINY = resolve_model("moe-tiny")  # d_model 128, 8 experts of width 128, top-2, 2 layers


def test_all_to_all_volume_by_hand() -> None:
    # 1024 tokens x top-2 x 128 values x 2 bytes, 3/4 to the other ranks of ep=4, 4 all-to-alls
    assert all_to_all_bytes_per_layer(TINY, 1024, 4, "bf16") == 4 * 1024 * 2 * 128 * 2 * 3 / 4
    assert all_to_all_bytes_per_layer(TINY, 1024, 1, "bf16") == 0.0
    # full recompute reruns the forward's dispatch and combine: 6 all-to-alls
    assert all_to_all_bytes_per_layer(TINY, 1024, 4, "bf16", "full") == \
        6 * 1024 * 2 * 128 * 2 * 3 / 4
    # capacity factor 1.25: each of the 8 experts padded to ceil(1.25 x 1024 x 2 / 8) = 320
    padded = replace(TINY, capacity_factor=1.25)
    assert all_to_all_bytes_per_layer(padded, 1024, 4, "bf16") == 4 * 8 * 320 * 128 * 2 * 3 / 4


def test_all_to_all_time_in_the_step_by_hand() -> None:
    cluster = make_cluster("h100-sxm", 1)
    setup = TrainSetup(global_batch=16, seq_len=1024)
    layout = Layout(dp=8, ep=4, mb=1)
    step = estimate_step(TINY, cluster, setup, layout)
    bw, lat = cluster.link(4)  # ep=4 neighbouring dp ranks inside the node
    volume = 4 * 1024 * 2 * 128 * 2 * 3 / 4
    per_layer = volume / bw + 4 * lat * 2 * math.ceil(math.log2(4))
    n_micro, layers = 16 // 8, 2
    assert step.ep_comm_s == pytest.approx(n_micro * layers * per_layer)
    assert estimate_step(TINY, cluster, setup, Layout(dp=8, ep=1, mb=1)).ep_comm_s == 0.0
    # across nodes the all-to-all takes the slower link
    wide = make_cluster("h100-sxm", 2)
    slow = estimate_step(TINY, wide, setup, Layout(dp=16, ep=8, mb=1)).ep_comm_s
    assert slow > estimate_step(TINY, wide, setup, Layout(dp=16, ep=4, mb=1)).ep_comm_s


def test_expert_state_under_ep_and_zero_by_hand() -> None:
    per_expert = 3 * 128 * 128  # SwiGLU expert of width 128, no biases
    assert expert_params(TINY) == per_expert
    all_experts = 2 * 8 * per_expert  # 2 MoE layers x 8 experts
    dense = total_params(TINY) - all_experts
    mine = 2 * (8 // 4) * per_expert  # ep=4: 2 experts of each layer on this rank
    zero0 = stage_state_bytes(TINY, Layout(dp=8, ep=4), "first", 2.0, "bf16", "adam")
    assert zero0.params == pytest.approx(2 * (dense + mine))
    assert zero0.optimizer == pytest.approx(12 * (dense + mine))
    # ZeRO-1: optimizer state of dense weights over dp=8, of the experts over dp/ep = 2
    zero1 = stage_state_bytes(TINY, Layout(dp=8, ep=4, zero=1), "first", 2.0, "bf16", "adam")
    assert zero1.params == zero0.params
    assert zero1.optimizer == pytest.approx(12 * dense / 8 + 12 * mine / 2)
    zero3 = stage_state_bytes(TINY, Layout(dp=8, ep=4, zero=3), "first", 2.0, "bf16", "adam")
    assert zero3.params == pytest.approx(2 * dense / 8 + 2 * mine / 2)
    assert zero3.grads == pytest.approx(2 * dense / 8 + 2 * mine / 2)


def test_mfu_counts_active_parameters() -> None:
    cfg = resolve_model("mixtral-8x7b")
    cluster, setup = make_cluster("h100-sxm", 8), TrainSetup(256, 4096)
    layout = Layout(dp=64, ep=8, zero=2, mb=1)
    step = estimate_step(cfg, cluster, setup, layout)
    active_flops = 6 * matmul_params(cfg) + 12 * cfg.n_layer * cfg.d_model * 4096
    assert model_flops_per_token(cfg, 4096).total == pytest.approx(active_flops)
    peak = peak_flops(cluster.device, "bf16")
    assert step.mfu == pytest.approx(step.tokens_per_s / 64 * active_flops / peak)
    assert active_params(cfg) < total_params(cfg) / 3  # 12.9B of 46.7B


def test_search_tries_ep_only_for_moe_and_only_divisors() -> None:
    cluster, setup = make_cluster("h100-sxm", 1), TrainSetup(8, 256)
    dense = resolve_model("gpt2")
    assert {lay.ep for lay in enumerate_layouts(dense, cluster, setup)} == {1}
    twelve = replace(TINY, n_experts=12)
    by_dp: dict[int, set[int]] = {}
    for lay in enumerate_layouts(twelve, cluster, setup):
        by_dp.setdefault(lay.dp, set()).add(lay.ep)
    assert by_dp[8] == {1, 2, 4} and by_dp[2] == {1, 2} and by_dp[1] == {1}
    six = replace(TINY, n_experts=6)
    assert {lay.ep for lay in enumerate_layouts(six, cluster, setup) if lay.dp == 8} == {1, 2}


@pytest.mark.slow
def test_plan_searches_and_evaluates_an_moe_model() -> None:
    request = resolve_plan_input(PlanOptions(model="mixtral-8x7b", device="h100-sxm", nodes=8,
                                           global_batch=256, seq=4096, top=3))
    best = run_plan(request).results
    assert best and all(r.memory.fits and r.layout.dp % r.layout.ep == 0 for r in best)
    assert any(r.layout.ep > 1 for r in best)
    # more expert parallelism: fewer experts per rank, less memory
    cluster, setup = request.cluster, request.setup
    cfg = request.model
    one, eight = (evaluate(cfg, cluster, setup, Layout(dp=64, ep=ep, zero=1, mb=1))
                  for ep in (1, 8))
    assert eight.memory.states.total < one.memory.states.total / 3


@pytest.mark.parametrize(("layout", "message"), [
    ("ep=3", "ep=3 does not divide the 8 experts"),
    ("dp=4,ep=8", "ep=8 does not divide dp=4"),
])
def test_bad_ep_is_one_config_error(layout: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_plan_input(PlanOptions(model="mixtral-8x7b", layout=layout))
    with pytest.raises(ConfigError, match="model gpt3-175b has none"):
        resolve_plan_input(PlanOptions(layout="ep=2"))


def test_published_moe_runs_are_checked_with_sources_never_fitted() -> None:
    from accelbench.analytics.published import validate_all
    from accelbench.analytics.published_csv import MOE_NOT_MODELLED, MOE_RUNS

    mixtral = MOE_RUNS[0]  # the others: tests/unit/test_moe_published_rows.py
    assert mixtral.run_id == "M1-1" and "Megatron-Core MoE README" in mixtral.source
    assert mixtral.layout == Layout(dp=16, pp=4, vp=8, ep=8, zero=1, mb=1,
                                    pp_schedule="interleaved_1f1b")
    # 468 TFLOP/s without recompute is 468 / 989.4 of the H100's dense BF16 peak
    peak = mixtral.device.peak_flops_per_s("bf16")
    assert mixtral.published_mfu() == pytest.approx(468e12 / peak)
    assert {"M2-1", "M3-1", "M4-1"} <= {u.run_id for u in MOE_NOT_MODELLED}
    assert all(u.reason for u in MOE_NOT_MODELLED)
    checked = validate_all([])
    assert [r.run_id for r in checked.moe] == [r.run_id for r in MOE_RUNS]
    assert {"M2-1", "M3-1", "M4-1"} <= {u.run_id for u in checked.not_modelled}
    assert checked.summary()["moe"]["n"] == len(MOE_RUNS)


def test_a_measured_moe_run_is_planned_not_listed() -> None:
    from accelbench.analytics.published import validate_all

    run = {"model": "moe-tiny", "seq_len": 256, "micro_batch": 2, "gas": 1, "dtype": "bf16",
           "device_key": "a100-80gb", "n_devices": 4, "layout": "dp=4,ep=2", "mfu": 0.1}
    (row,) = validate_all([run]).measured
    assert row.observed_mfu == 0.1 and row.predicted_mfu > 0


def test_expert_gemms_at_their_real_shapes_by_hand() -> None:
    from accelbench.analytics.efficiency import GEMM_FIXED_S, BuiltinRates, moe_gemm_delta_s

    rates = BuiltinRates(1e12, 1e12, 0.5, 0.5, 1e11)

    def g(m: int, k: int, n: int) -> float:  # one product: fixed cost + FLOPs at 0.5 x 1e12
        return GEMM_FIXED_S + 2 * m * k * n / 0.5e12

    # moe-tiny, 1024 tokens a rank, ep=4: 2 local experts of 1024 x 2 x 4 / 8 = 1024 rows each
    # (SwiGLU of width 128: [gate|up] 128 -> 256, down 128 -> 128), the shared expert on all
    # 1024 tokens, the router 128 -> 8; in place of the dense MLP of width 384
    expert = g(1024, 128, 256) + g(1024, 128, 128)
    forward = 2 * expert + expert + g(1024, 128, 8) - g(1024, 128, 768) - g(1024, 384, 128)
    fwd, bwd = moe_gemm_delta_s(rates, TINY, 1024, 1, 4)
    assert fwd == pytest.approx(forward)
    assert bwd == pytest.approx(2 * forward)  # input and weight gradients: same FLOPs each


def test_plan_command_shows_ep_and_the_all_to_all_share() -> None:
    out = CliRunner().invoke(app, ["plan", "--model", "mixtral-8x7b", "--device", "h100-sxm",
                                   "--nodes", "8", "--global-batch", "256", "--seq", "4096",
                                   "--layout", "ep=8,tp=1,zero=2", "--top", "2"])
    assert out.exit_code == 0, out.output
    assert " ep " in out.output and "expert-parallel all-to-all share of the step: #1 " in \
        out.output.replace("\n", " ")


def test_report_layout_cell_shows_the_all_to_all_share() -> None:
    from accelbench.report.training import all_to_all_text
    from accelbench.store.record import Record

    moe = Record("train", "ok", {"layout": {"dp": 2, "ep": 2}}, {},
                 metrics={"all_to_all_fraction": 0.123})
    assert all_to_all_text(moe) == " (all-to-all 12% of step)"
    assert all_to_all_text(Record("train", "ok", {}, {}, metrics={"mfu": 0.3})) == ""
