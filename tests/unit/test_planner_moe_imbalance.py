"""The planner's expert-load imbalance and all-to-all overlap (issue 16): a balanced plan is
today's, a factor of 2 adds the busiest rank's extra expert GEMMs and all-to-all bytes by hand,
the overlap modes hide the all-to-all as OVERLAP_MODES says, and a bad factor is one line and
exit 2 (docs/planner.md, MoE)."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from unittest import mock

import pytest

from accelbench.analytics.cluster import make_cluster
from accelbench.analytics.compute_rates import layer_rates
from accelbench.analytics.efficiency import GEMM_FIXED_S, BuiltinRates, moe_gemm_delta_s
from accelbench.analytics.moe_cost import all_to_all_bytes_per_layer, busiest_rank_factor
from accelbench.analytics.plan_input import resolve_plan_input
from accelbench.analytics.plan_options import PlanOptions
from accelbench.analytics.steptime import _layer_seconds, estimate_step
from accelbench.analytics.train_setup import A2A_OVERLAP_MODES, OVERLAP_MODES, TrainSetup
from accelbench.cli.main import main
from accelbench.config.layout import Layout
from accelbench.config.presets import resolve_model

TINY = resolve_model("moe-tiny")  # d_model 128, 8 SwiGLU experts of width 128, top-2, 2 layers
LAYOUT = Layout(dp=8, ep=4, mb=1)  # 1024 tokens a rank, 2 experts of each layer a rank
N_MICRO, LAYERS = 2, 2  # global batch 16 over dp 8; both layers MoE


def _setup(imbalance: float = 1.0, overlap: str = "megatron") -> TrainSetup:
    return TrainSetup(global_batch=16, seq_len=1024, overlap=overlap, moe_imbalance=imbalance)


def _all_to_all_by_hand(cluster, factor: float) -> float:
    """n_micro x layers x one layer's 4 all-to-alls: 1024 tokens x top-2 x 128 values x
    2 bytes x 3/4 remote, `factor` times on the busiest rank, plus the latency term."""
    bw, lat = cluster.link(4)
    volume = factor * 4 * 1024 * 2 * 128 * 2 * 3 / 4
    return N_MICRO * LAYERS * (volume / bw + 4 * lat * 2 * math.ceil(math.log2(4)))


def test_balanced_is_the_uniform_routing_plan() -> None:
    cluster = make_cluster("h100-sxm", 1)
    step = estimate_step(TINY, cluster, _setup(1.0), LAYOUT)
    assert step.ep_comm_s == pytest.approx(_all_to_all_by_hand(cluster, 1.0))
    # the expert GEMMs at tokens x k x ep / E = 1024 rows, as without a factor
    rates = BuiltinRates(1e12, 1e12, 0.5, 0.5, 1e11)
    assert moe_gemm_delta_s(rates, TINY, 1024, 1, 4, 1.0) == moe_gemm_delta_s(
        rates, TINY, 1024, 1, 4)
    assert busiest_rank_factor(TINY, 4, 1.0) == 1.0


def test_factor_two_adds_the_busiest_ranks_expert_gemms_by_hand() -> None:
    rates = BuiltinRates(1e12, 1e12, 0.5, 0.5, 1e11)

    def g(m: int, k: int, n: int) -> float:  # one product: fixed cost + FLOPs at 0.5 x 1e12
        return GEMM_FIXED_S + 2 * m * k * n / 0.5e12

    def expert(rows: int) -> float:  # SwiGLU of width 128: [gate|up] 128 -> 256, down -> 128
        return g(rows, 128, 256) + g(rows, 128, 128)

    # ep=4: 2 local experts, 1024 rows each balanced, 2048 on the busiest rank at 2.0
    extra = 2 * (expert(2048) - expert(1024))
    (f1, b1), (f2, b2) = (moe_gemm_delta_s(rates, TINY, 1024, 1, 4, x) for x in (1.0, 2.0))
    assert f2 - f1 == pytest.approx(extra)
    assert b2 - b1 == pytest.approx(2 * extra)  # input and weight gradients, same FLOPs each


def test_factor_two_in_the_step_by_hand() -> None:
    cluster = make_cluster("h100-sxm", 1)
    one, two = (estimate_step(TINY, cluster, _setup(x), LAYOUT) for x in (1.0, 2.0))
    assert two.ep_comm_s == pytest.approx(_all_to_all_by_hand(cluster, 2.0))
    rates = layer_rates(cluster, "bf16")
    flops = 2 * 1024 * 128 * (256 + 128)  # one expert's forward GEMMs on 1024 more rows
    per_layer = 2 * 3 * flops / (rates.gemm_top * rates.gemm_peak)  # 2 experts, fwd + bwd
    assert two.compute_s - one.compute_s == pytest.approx(N_MICRO * LAYERS * per_layer)
    assert (two.dp_comm_exposed_s, two.optimizer_s) == (one.dp_comm_exposed_s, one.optimizer_s)


def test_where_the_factor_does_not_apply() -> None:
    # capped at ep: a rank cannot receive more than every rank's assignments
    assert busiest_rank_factor(TINY, 4, 8.0) == 4.0
    assert all_to_all_bytes_per_layer(TINY, 1024, 4, "bf16", imbalance=8.0) == \
        4 * all_to_all_bytes_per_layer(TINY, 1024, 4, "bf16")
    # one rank holds every expert; a capacity factor pads and drops each expert to capacity
    assert busiest_rank_factor(TINY, 1, 3.0) == 1.0
    padded = replace(TINY, capacity_factor=1.25)
    assert busiest_rank_factor(padded, 4, 3.0) == 1.0
    cluster = make_cluster("h100-sxm", 1)
    assert estimate_step(padded, cluster, _setup(3.0), LAYOUT) == \
        estimate_step(padded, cluster, _setup(1.0), LAYOUT)
    assert estimate_step(TINY, cluster, _setup(3.0), Layout(dp=8, ep=1, mb=1)) == \
        estimate_step(TINY, cluster, _setup(1.0), Layout(dp=8, ep=1, mb=1))


def test_overlap_modes_state_and_hide_the_all_to_all() -> None:
    assert A2A_OVERLAP_MODES == {"megatron-a2a", "megascale"} <= set(OVERLAP_MODES)
    assert "all-to-all" in OVERLAP_MODES["megatron-a2a"]
    assert "all-to-all" in OVERLAP_MODES["megascale"]
    assert "all-to-all" not in OVERLAP_MODES["megatron"]
    # a slow link (0.05 GB/s) makes the all-to-all longer than the layer it hides behind
    slow = make_cluster("h100-sxm", 1, intra_gb_per_s=0.05)
    steps = {mode: estimate_step(TINY, slow, _setup(2.0, mode), LAYOUT)
             for mode in OVERLAP_MODES}
    exposed = _all_to_all_by_hand(slow, 2.0)
    assert steps["none"].ep_comm_s == steps["megatron"].ep_comm_s == pytest.approx(exposed)
    per = _layer_seconds(TINY, slow, _setup(2.0, "megatron"), LAYOUT, None)
    hidden = N_MICRO * LAYERS * (per.model + per.rerun)
    assert 0 < hidden < exposed
    assert steps["megatron-a2a"].ep_comm_s == pytest.approx(exposed - hidden)
    assert steps["megascale"].ep_comm_s == pytest.approx(exposed - hidden)
    # megatron-a2a changes nothing else of megatron's
    assert replace(steps["megatron-a2a"], ep_comm_s=0.0, tokens_per_s=0.0, mfu=0.0,
                   hfu=0.0) == replace(steps["megatron"], ep_comm_s=0.0, tokens_per_s=0.0,
                                       mfu=0.0, hfu=0.0)
    # on a fast link the layer's compute hides it all
    fast = make_cluster("h100-sxm", 1)
    assert estimate_step(TINY, fast, _setup(1.0, "megatron-a2a"), LAYOUT).ep_comm_s == 0.0


def test_the_plan_records_the_imbalance() -> None:
    request = resolve_plan_input(PlanOptions(model="mixtral-8x7b", device="h100-sxm", nodes=8,
                                           global_batch=256, seq=4096, moe_imbalance=1.5,
                                           overlap="megatron-a2a"))
    assert request.setup.moe_imbalance == 1.5 and request.setup.overlap == "megatron-a2a"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with mock.patch.object(sys, "argv", ["accelbench", *argv]), \
            pytest.raises(SystemExit) as stop:
        main()
    out = capsys.readouterr()
    return int(stop.value.code or 0), out.out, out.err


@pytest.mark.parametrize(("args", "expected"), [
    (["--model", "mixtral-8x7b", "--moe-imbalance", "0.5"],
     "error: moe-imbalance: must be at least 1"),
    (["--model", "mixtral-8x7b", "--moe-imbalance", "inf"],
     "error: moe-imbalance: must be a finite number"),
    (["--model", "gpt3-175b", "--moe-imbalance", "2"],
     "error: moe-imbalance: gpt3-175b has no experts"),
    (["--validate", "--moe-imbalance", "2"],
     "error: validate: --validate does not use --moe-imbalance"),
])
def test_bad_imbalance_is_one_line_and_exit_2(args: list[str], expected: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["plan", *args], capsys)
    assert code == 2 and out == ""
    assert err.startswith(expected) and err.count("\n") == 1, err


@pytest.mark.slow
def test_plan_json_states_the_imbalance(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    code, out, _ = _run(["plan", "--model", "mixtral-8x7b", "--device", "h100-sxm", "--nodes",
                         "8", "--global-batch", "256", "--seq", "4096", "--top", "1",
                         "--moe-imbalance", "1.5", "--json"], capsys)
    assert code == 0
    plan = json.loads(out)
    assert plan["setup"]["moe_imbalance"] == 1.5
    assert "min(1.5, ep)" in plan["assumptions"]["moe imbalance 1.5"]
