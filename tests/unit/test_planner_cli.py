"""`accelbench plan` at the edges: a layout that does not fit, bad input, sources in --validate."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.config.errors import ConfigError

GPT3_ON_8 = ["plan", "--model", "gpt3-175b", "--nodes", "1", "--global-batch", "8"]
NO_FIT = "dp=1,tp=8,pp=1,vp=1,mb=1,zero=0,recompute=none"  # 175B's states alone: ~350 GB/GPU


def test_fixed_layout_that_does_not_fit_says_so_and_exits_1() -> None:
    out = CliRunner().invoke(app, [*GPT3_ON_8, "--layout", NO_FIT])
    assert out.exit_code == 1, out.output
    assert "does not fit" in out.output and "GB per device" in out.output
    assert "communication" not in out.output  # no limiter and no rates for a layout that fails


def test_fixed_layout_that_does_not_fit_in_json_is_labelled() -> None:
    out = CliRunner().invoke(app, [*GPT3_ON_8, "--layout", NO_FIT, "--json"])
    assert out.exit_code == 1
    (row,) = json.loads(out.stdout)["best"]
    assert row["fits"] is False and row["status"] == "does not fit"
    assert "step" not in row and row["step_if_it_fitted"]["tokens_per_s"] > 0


@pytest.mark.parametrize("args,field", [
    (["--gpus-per-node", "0"], "cluster.devices_per_node"),
    (["--inter-latency-us", "-3"], "cluster.inter_latency_s"),
    (["--intra-bw", "-5"], "cluster.intra_gb_per_s"),
    (["--train-tokens", "-1"], "train-tokens"),
    (["--layout", "dp=1,tp=8,pp=1,vp=1,mb=1,zero=3,recompute=full"], "layout"),
])
def test_bad_inputs_raise_config_error(args: list[str], field: str) -> None:
    out = CliRunner().invoke(app, [*GPT3_ON_8, *args])
    assert isinstance(out.exception, ConfigError), out.output
    assert out.exception.field == field


def test_no_layout_prints_the_rejection_reasons() -> None:
    out = CliRunner().invoke(app, [*GPT3_ON_8, "--layout", "tp=3"])
    assert out.exit_code == 1
    assert "rejected:" in out.output and "does not divide the cluster's 8 devices" in out.output


def test_no_fused_attention_flag_reaches_the_memory() -> None:
    base = ["plan", "--model", "genslm-2.5b-10k", "--seq", "10240", "--global-batch", "8",
            "--layout", "dp=8,tp=1,pp=1,vp=1,mb=1,zero=3,recompute=none", "--json"]
    fused = CliRunner().invoke(app, base)
    stored = CliRunner().invoke(app, [*base, "--no-fused-attention"])
    assert fused.exit_code == 0 and stored.exit_code == 1
    assert json.loads(stored.stdout)["setup"]["fused_attention"] is False


def test_validate_shows_sources_and_published_figures() -> None:
    out = CliRunner().invoke(app, ["plan", "--validate"])
    assert out.exit_code == 0, out.output
    assert "TFLOP/s" in out.output and "src" in out.output
    assert "[1] Narayanan et al. SC21 (arXiv 2104.04473)" in out.output
    assert "pytorch/torchtitan docs/performance.md (H100 version" in out.output
