"""The planner prices the data-parallel reduction at the width each stack reduces in (issue 37):
fp32 under bf16 by default (Megatron-LM's and accelbench's runtime's), bf16 where a stack says
so (llm-foundry's PURE, the IBM FSDP blog's policy, NeMo's fp8 performance scripts); ZeRO's
gathered weights at their own width; a plan records the width it used."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from accelbench.analytics import comm
from accelbench.analytics.cluster import make_cluster
from accelbench.analytics.published_csv import MOE_RUNS, PUBLISHED_RUNS
from accelbench.analytics.published_run import BF16_REDUCE_BYTES, FRAMEWORKS, reduce_bytes
from accelbench.analytics.steptime import estimate_step
from accelbench.analytics.train_setup import TrainSetup
from accelbench.analytics.validation_rows import run_setup
from accelbench.cli.main import app
from accelbench.config.layout import Layout
from accelbench.config.presets import get_preset


def test_each_stack_names_its_width_and_precision_sets_the_rest() -> None:
    assert set(BF16_REDUCE_BYTES) == set(FRAMEWORKS)  # every framework says, with its reason
    assert all(why.startswith(("stated", "assumed")) for _, why in BF16_REDUCE_BYTES.values())
    assert [reduce_bytes("llm-foundry (Composer FSDP)", d) for d in ("fp32", "fp16", "bf16")] \
        == [4, 2, 2]
    assert [reduce_bytes(None, d) for d in ("fp32", "fp16", "bf16", "fp8")] == [4, 2, 4, 4]
    assert reduce_bytes("NeMo (Megatron-Core)", "fp8") == 2
    assert reduce_bytes("NeMo (Megatron-Core)", "bf16") == 4


def test_published_runs_carry_their_frameworks_width() -> None:
    widths = {run.source_key: run_setup(run).dp_reduce_bytes for run in PUBLISHED_RUNS}
    assert widths["S1"] == 2  # fp16: Megatron reduces its fp16 gradients
    assert widths["S10"] == 4 and widths["S14"] == 2 and widths["S13"] == 2
    assert {r.source_key: r.reduce_bytes for r in MOE_RUNS} == {"M1": 4, "M5": 2}


def test_zero_gathers_weights_at_their_width_and_reduces_at_the_reduction_width() -> None:
    g, w, n, m = 4e9, 2e9, 8, 4
    reduce, gather = g * (n - 1) / n, w * (n - 1) / n
    assert comm.dp_bytes_per_rank(g, n, 0, m, weight_bytes=w) == pytest.approx(2 * reduce)
    assert comm.dp_bytes_per_rank(g, n, 1, m, weight_bytes=w) == pytest.approx(reduce + gather)
    assert comm.dp_bytes_per_rank(g, n, 2, m, weight_bytes=w) == pytest.approx(
        m * reduce + gather)
    assert comm.dp_bytes_per_rank(g, n, 3, m, weight_bytes=w) == pytest.approx(
        m * (reduce + 2 * gather))
    assert comm.dp_bytes_per_rank(g, n, 3, m, pp=2, weight_bytes=w) == pytest.approx(
        reduce + (m + 1) * gather)


def test_an_fp32_reduction_exposes_twice_the_bf16_one_when_nothing_hides_it() -> None:
    cfg, cluster = get_preset("llama3-8b"), make_cluster("h100-sxm", 4)
    layout = Layout(dp=32, mb=1)
    setup = TrainSetup(32, 4096, "bf16", overlap="none")
    fp32 = estimate_step(cfg, cluster, setup, layout).dp_comm_exposed_s
    bf16 = estimate_step(cfg, cluster, TrainSetup(32, 4096, "bf16", overlap="none",
                                                  reduce_bytes=2), layout).dp_comm_exposed_s
    assert setup.dp_reduce_bytes == 4 and fp32 == pytest.approx(2 * bf16, rel=0.02)


@pytest.mark.parametrize(("stack", "width"), [("unknown", 4), ("llm-foundry", 2),
                                              ("megatron-lm", 4)])
def test_a_plan_records_the_width_it_priced(stack: str, width: int) -> None:
    out = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--device", "h100-sxm",
                                   "--nodes", "2", "--global-batch", "64", "--seq", "4096",
                                   "--top", "1", "--json", "--stack", stack])
    assert out.exit_code == 0, out.output
    plan = json.loads(out.stdout)
    assert plan["setup"]["reduce_bytes"] == width
    assert plan["assumptions"]["data-parallel reduction"].startswith(f"{width} bytes")
