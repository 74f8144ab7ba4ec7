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
    (["--gpus-per-node", "0"], "gpus-per-node"),
    (["--inter-latency-us", "-3"], "inter-latency-us"),
    (["--intra-bw", "-5"], "intra-bw"),
    (["--train-tokens", "-1"], "train-tokens"),
    (["--layout", "dp=1,tp=3,pp=1,vp=1,mb=1,zero=0,recompute=full"], "layout"),
    (["--layout", "dp=1,tp=8,pp=1,vp=1,mb=1,zero=0,recompute=full,sp=off,sp=on"], "layout.sp"),
    (["--layout", "tp=8,schedule=gpipe"], "layout.schedule"),
    (["--layout", "dp=4,tp=1,pp=2,vp=5,mb=1,zero=0,recompute=full"], "layout.pp"),
    (["--efficiency", "1.5"], "efficiency"),
    (["--dtype", "fp64"], "dtype"),
])
def test_bad_inputs_raise_config_error(args: list[str], field: str) -> None:
    out = CliRunner().invoke(app, [*GPT3_ON_8, *args])
    assert isinstance(out.exception, ConfigError), out.output
    assert out.exception.field == field


@pytest.mark.parametrize("args,field,says", [
    (["--layout", "tp=3"], "layout", "--layout tp=3 never divides: tp*pp*cp = 3 does not divide "
     "the 8 devices"),
    (["--nodes", "128", "--layout", "dp=3,tp=7"], "layout", "--layout dp=3,tp=7 never divides: "
     "tp*pp*cp = 7 does not divide the 1024 devices"),
    (["--layout", "pp=4,pp_first=500"], "layout.pp", "--layout pp=4,pp_first=500 never "
     "divides: pp_first=500, pp_last=0 leave -404 layers"),
    (["--nodes", "10000000000"], "nodes", "10,000,000,000 nodes x 8 = 80,000,000,000 devices, "
     "more than any layout of gpt3-175b occupies: 75,497,472 "),
    (["--nodes", "100"], "nodes", "gpt3-175b on 800 devices with global batch 8: no split of "
     "the devices into dp x tp x pp x cp"),
    (["--nodes", "64", "--global-batch", "32"], "nodes", "gpt3-175b on 512 devices with global "
     "batch 32 never divides: m = 1 micro-batches per step cannot fill pp = 16 stages"),
    (["--nodes", "2", "--layout", "pp=16"], "layout", "--layout pp=16 never divides: m = 8 "
     "micro-batches per "
     "step cannot fill pp = 16 stages"),
])
def test_a_search_that_can_never_divide_is_bad_input(args: list[str], field: str,
                                                      says: str) -> None:
    """Fields of --layout (or a cluster size) that no candidate divides are refused in the
    library before a search, as one ConfigError (exit 2, one line, nothing printed first)."""
    out = CliRunner().invoke(app, [*GPT3_ON_8, *args])
    assert isinstance(out.exception, ConfigError), out.output
    assert out.exception.field == field and str(out.exception).startswith(f"{field}: {says}")
    assert out.output == ""


def test_no_layout_that_fits_prints_the_rejection_reasons() -> None:
    """Layouts that divide but none fits: a result (exit 1), with what rejected them."""
    out = CliRunner().invoke(app, GPT3_ON_8)
    assert out.exit_code == 1
    assert out.stderr.startswith("no layout divides and fits")
    assert "rejected:" in out.stderr and "x does not fit" in out.stderr
    assert out.stdout == ""


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


def test_table_on_stdout_marks_what_the_runtime_does_not_build() -> None:
    """The ranked table is the command's result (stdout); a layout accelbench's runtime does not
    build is starred, with the reason under the table."""
    args = ["plan", "--nodes", "16", "--global-batch", "512", "--top", "3",
            "--layout", "tp=8,pp=8,mb=1,vp=1,zero=1,recompute=selective"]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    assert "1*" in out.stdout and out.stderr == ""
    assert ("not built by accelbench's runtime: zero=1 with tp > 1 (ZeroRedundancyOptimizer"
            in out.stdout)
    data = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert all(row["built_by_runtime"] is False and row["zero"] == 1 for row in data["best"])
    assert data["best"][0]["layout"] == "dp=2,tp=8,pp=8,vp=1,zero=1,sp=on,mb=1,recompute=selective"


def test_table_text_is_printed_as_text() -> None:
    """Bracketed text (rich markup syntax) in a title or a cell reaches the output as typed."""
    from accelbench.analytics.cluster import make_cluster
    from accelbench.analytics.planner import plan_fixed
    from accelbench.analytics.train_setup import TrainSetup
    from accelbench.cli import plan as plan_cli
    from accelbench.config.presets import get_preset
    from accelbench.report.plan_table import PlanView, plan_table

    result = plan_fixed(get_preset("gpt2-xl"), make_cluster("a100-80gb", 1), TrainSetup(8, 1024),
                        {"dp": 8, "tp": 1, "pp": 1, "vp": 1, "mb": 1, "zero": 0,
                         "recompute": "none"})
    with plan_cli.out.capture() as captured:
        plan_cli.show(PlanView(shown=[plan_table([result], "model [bold]x[/bold]", 1e9),
                                      "[1] a source [red]"]))
    assert "[bold]x[/bold]" in captured.get() and "[1] a source [red]" in captured.get()


def test_validate_json_is_clean_stdout() -> None:
    out = CliRunner().invoke(app, ["plan", "--validate", "--json"])
    assert out.exit_code == 0 and out.stderr == ""
    assert set(json.loads(out.stdout)) == {"published", "leave_one_source_out", "measured",
                                           "summary", "by_source", "by_source_left_out",
                                           "not_modelled", "measured_steps",
                                           "measured_steps_summary", "moe", "by_source_moe",
                                           "measured_steps_left_out", "intervals",
                                           "found", "by_source_found", "by_precision_found",
                                           "found_intervals"}


def test_validate_reads_the_store_without_making_one(tmp_path, monkeypatch) -> None:
    """--validate reads measured runs read-only: a missing database stays missing."""
    db = tmp_path / "none.db"
    out = CliRunner().invoke(app, ["plan", "--validate", "--json", "--db", str(db)])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["measured"] == [] and not db.exists()


def test_validate_reports_the_found_runs_apart_text_and_json() -> None:
    """The runs found outside the shipped csv come under their own heading, each with its 80%
    interval, and never among the shipped (fitted) runs or their intervals."""
    from accelbench.analytics.found_runs import FOUND_RUNS
    from accelbench.report.plan_validation import FOUND_TITLE

    found, sources = {run.name for run in FOUND_RUNS}, {run.source for run in FOUND_RUNS}
    text = CliRunner().invoke(app, ["plan", "--validate"])
    assert text.exit_code == 0, text.output
    shipped_part, _, found_part = text.stdout.partition(FOUND_TITLE.capitalize())
    assert found_part and all(source in found_part for source in sources)  # the footnotes
    assert not any(source in shipped_part for source in sources)
    assert f"{FOUND_TITLE}: inside their 80% interval" in found_part
    data = json.loads(CliRunner().invoke(app, ["plan", "--validate", "--json"]).stdout)
    assert {r["name"] for r in data["found"]} == found
    shipped = data["published"] + data["leave_one_source_out"] + data["intervals"]["runs"]
    assert not {r["name"] for r in shipped} & found
    assert not any(name in r["name"] for r in data["intervals"]["runs"] for name in found)
    assert len(data["found_intervals"]["runs"]) == len(found) == data["summary"]["found"]["n"]
