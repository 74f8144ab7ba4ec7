"""Planner search and validation: every returned layout divides and fits; --validate runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from accelbench.analytics.cluster import make_cluster
from accelbench.analytics.measured_runs import validate_measured_runs
from accelbench.analytics.memory import memory_per_device
from accelbench.analytics.planner import enumerate_layouts, layout_problem, plan_fixed, search
from accelbench.analytics.published_csv import PUBLISHED_RUNS
from accelbench.analytics.published_fit import needed_efficiency
from accelbench.analytics.train_setup import TrainSetup
from accelbench.analytics.validation_rows import validate_found, validate_published
from accelbench.analytics.validation_shapes import SHAPES, resolve_shape
from accelbench.config.errors import ConfigError
from accelbench.config.layout import Layout
from accelbench.config.layout_parse import PLANNER_KEYS, parse_layout

GPT3 = SHAPES["gpt3-175b"]


@pytest.mark.parametrize("device,nodes,batch,seq", [("a100-80gb", 16, 512, 2048),
                                                     ("h100-sxm", 16, 256, 4096),
                                                     ("a100-40gb", 32, 512, 2048)])
def test_every_returned_layout_divides_and_fits(device: str, nodes: int, batch: int,
                                                seq: int) -> None:
    cluster = make_cluster(device, nodes)
    setup = TrainSetup(batch, seq)
    found = search(GPT3, cluster, setup, top=10_000)
    assert found.best, "some layout must fit 175B on 128+ devices"
    for r in found.best:
        lay = r.layout
        assert lay.dp * lay.tp * lay.pp == cluster.n_devices
        assert GPT3.n_head % lay.tp == 0 and GPT3.n_layer % (lay.pp * lay.vp) == 0
        assert batch % (lay.dp * lay.mb) == 0
        assert layout_problem(GPT3, cluster, setup, lay) is None
        n_micro = batch // (lay.dp * lay.mb)
        mem = memory_per_device(GPT3, seq, lay, n_micro, "bf16", "adam",
                                cluster.memory_bytes_per_device,
                                fused_attention=setup.fused_attention)
        assert mem.total <= cluster.memory_bytes_per_device * 0.92
    tokens = [r.step.tokens_per_s for r in found.best]
    assert tokens == sorted(tokens, reverse=True)


def test_search_rejects_what_cannot_fit() -> None:
    # 175B on 8 A100-80GB: 16 bytes x 175e9 / 8 = 350 GB of states per device without ZeRO-3
    found = search(GPT3, make_cluster("a100-80gb", 1), TrainSetup(8, 2048))
    assert found.best == [] and found.rejected.get("does not fit", 0) > 0


def test_fixed_layout_and_bad_layout() -> None:
    cluster = make_cluster("a100-80gb", 128)
    setup = TrainSetup(1536, 2048)
    result = plan_fixed(GPT3, cluster, setup, {"tp": 8, "pp": 8, "mb": 1, "vp": 1, "zero": 1,
                                               "recompute": "selective"})
    assert result.layout.dp == 16 and 0.2 < result.step.mfu < 0.7
    with pytest.raises(ConfigError):
        plan_fixed(GPT3, cluster, setup, {"tp": 7})


def test_palm_formula_reproduces_published_mfu() -> None:
    palm = next(r for r in PUBLISHED_RUNS if r.name.startswith("PaLM"))
    assert palm.published_mfu() == pytest.approx(0.462, abs=0.0005)


def test_needed_efficiency_reproduces_the_published_mfu() -> None:
    """The large-GEMM efficiency needed_efficiency solves for makes the prediction meet the
    published MFU (the fixed point converges)."""
    for run in PUBLISHED_RUNS[::10]:
        eff = needed_efficiency(run)
        if eff < 1.0:
            (row,) = validate_published(eff, (run,))
            assert row.predicted_mfu == pytest.approx(run.published_mfu(), rel=0.01)


def test_validation_rows_and_measured_hook() -> None:
    rows = validate_published()
    assert len(rows) == len(PUBLISHED_RUNS)
    assert all(0.1 < r.predicted_mfu < 0.9 for r in rows)
    run = {"model": "gpt2-xl", "seq_len": 1024, "micro_batch": 8, "gas": 1, "dtype": "bf16",
           "device_key": "a100-80gb", "n_devices": 4, "layout": "zero=1", "mfu": 0.4}
    (row,) = validate_measured_runs([run])
    assert row.observed_mfu == 0.4 and 0.1 < row.predicted_mfu < 0.9
    with pytest.raises(ConfigError):
        validate_measured_runs([{"model": "gpt2-xl"}])


def test_cli_validate_and_plan_json() -> None:
    from accelbench.cli.main import app

    runner = CliRunner()
    out = runner.invoke(app, ["plan", "--validate", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert len(data["published"]) == len(PUBLISHED_RUNS)
    assert all("error" in row for row in data["published"])
    assert all(row["source"] and row["oracle_kind"] in ("mfu", "tflops_per_device",
                                                        "tokens_per_s_per_device")
               for row in data["published"])
    out = runner.invoke(app, ["plan", "--model", "gpt3-175b", "--device", "a100-80gb",
                              "--nodes", "16", "--global-batch", "512", "--top", "3", "--json"])
    assert out.exit_code == 0, out.output
    assert len(json.loads(out.stdout)["best"]) == 3


@pytest.mark.slow
def test_analytics_never_imports_torch() -> None:
    code = ("import sys; import accelbench.analytics.planner, accelbench.analytics.published, "
            "accelbench.analytics.plan_input, accelbench.config.layout; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_planner_assumes_fused_attention_unless_told() -> None:
    """GenSLM-2.5B at 10240 on 8 GPUs, ZeRO-3, no recompute: the 5as/h scores term decides."""
    cfg = resolve_shape("genslm-2.5b-10k")
    cluster = make_cluster("a100-80gb", 1)
    fields = {"dp": 8, "tp": 1, "pp": 1, "vp": 1, "mb": 1, "zero": 3, "recompute": "none"}
    fused = plan_fixed(cfg, cluster, TrainSetup(8, 10240), fields)
    stored = plan_fixed(cfg, cluster, TrainSetup(8, 10240, fused_attention=False), fields)
    assert fused.memory.fits and not stored.memory.fits
    s, a = 10240, cfg.n_head
    scores = cfg.n_layer * 5 * a * s * s  # bytes the stored scores add over all layers
    assert stored.memory.activations - fused.memory.activations == pytest.approx(scores)
    found = search(cfg, cluster, TrainSetup(8, 10240), {"recompute": "none"})
    assert found.best and all(r.memory.fits for r in found.best)


def test_published_runs_say_whether_attention_was_fused() -> None:
    fused_sources = ("S10", "S13", "S14", "MegaScale", "torchtitan")
    for run in PUBLISHED_RUNS:
        assert run.fused_attention is (run.source_key in fused_sources), run.name
    by_id = {run.run_id: run for run in PUBLISHED_RUNS if run.run_id}
    assert by_id["S1-10"].layout.sp is False  # 2021: before sequence parallelism
    assert by_id["S2-8"].layout.sp is True
    rows = validate_published()
    assert [r.fused_attention for r in rows] == [r.fused_attention for r in PUBLISHED_RUNS]


def test_validation_rows_carry_source_and_published_figure() -> None:
    rows = validate_published()
    for run, row in zip(PUBLISHED_RUNS, rows, strict=True):
        assert row.source == run.source and row.source and row.source_key == run.source_key
        assert (row.oracle_kind, row.oracle_value) == (run.oracle_kind, run.oracle_value)
    megatron = next(r for r in validate_found() if r.source_key == "SC21 sec. 5.1")
    assert megatron.oracle_kind == "tflops_per_device" and megatron.oracle_value == 140
    assert rows[0].run_id == "S1-1" and rows[0].oracle_value == pytest.approx(0.335)


def test_pipeline_needs_at_least_pp_micro_batches() -> None:
    """gpt3-175b on 64 x 8 A100-80GB with global batch 32: d*p >= 64 > 32, so no layout has
    m >= p, and the search says so instead of returning one."""
    cluster, setup = make_cluster("a100-80gb", 64), TrainSetup(32, 2048)
    found = search(GPT3, cluster, setup)
    assert found.best == [] and found.rejected.get("micro-batches", 0) > 0
    assert "cannot fill pp = " in found.rejection_summary()
    with pytest.raises(ConfigError, match="m >= pp"):
        plan_fixed(GPT3, cluster, setup, {"dp": 4, "tp": 8, "pp": 16, "vp": 1, "mb": 1,
                                          "zero": 1, "recompute": "none"})
    found = search(GPT3, cluster, TrainSetup(512, 2048), top=10_000)
    assert found.best
    assert all(512 // (r.layout.dp * r.layout.mb) >= r.layout.pp for r in found.best)


def test_search_tries_tensor_parallel_without_sequence_parallel() -> None:
    cluster, setup = make_cluster("a100-80gb", 16), TrainSetup(512, 2048)
    found = search(GPT3, cluster, setup, {"tp": 8, "pp": 8, "mb": 1, "vp": 1, "zero": 1,
                                          "recompute": "selective"}, top=10)
    assert {r.layout.sp for r in found.best} == {True, False}
    on, off = sorted(found.best, key=lambda r: r.memory.total)
    assert on.layout.sp and not off.layout.sp
    with pytest.raises(ConfigError, match="sequence parallelism needs tp > 1"):
        plan_fixed(GPT3, make_cluster("a100-80gb", 128), TrainSetup(1536, 2048),
                   {"tp": 1, "pp": 8, "mb": 1, "vp": 1, "zero": 1, "recompute": "full",
                    "sp": True})


def test_zero_without_data_parallelism_is_allowed_not_searched() -> None:
    """ZeRO with dp = 1 shards nothing, but divides: the runtime builds it (a scaling study's
    one-device baseline), so the planner evaluates it when asked and only skips it in its own
    enumeration."""
    cluster, setup = make_cluster("a100-80gb", 1), TrainSetup(8, 2048)
    result = plan_fixed(GPT3, cluster, setup, {"dp": 1, "tp": 8, "pp": 1, "vp": 1, "mb": 1,
                                               "zero": 3, "recompute": "full"})
    assert result.layout.zero == 3 and result.built_by_runtime
    found = search(GPT3, cluster, setup, {"dp": 1, "tp": 8, "zero": 3})
    assert found.n_evaluated and "zero without dp" not in found.rejected
    assert set(found.rejected) <= {"does not fit"}
    assert {lay.zero for lay in enumerate_layouts(GPT3, cluster, setup, {"dp": 1})} == {0}


def test_layouts_the_runtime_does_not_build_are_ranked_and_marked() -> None:
    """zero=1 with tp > 1 divides, so the search ranks it, marked; JSON says so."""
    cluster, setup = make_cluster("a100-80gb", 16), TrainSetup(512, 2048)
    found = search(GPT3, cluster, setup, {"tp": 8, "pp": 8, "mb": 1, "vp": 1,
                                          "recompute": "selective"}, top=10_000)
    marked = [r for r in found.best if not r.built_by_runtime]
    assert marked and all(r.layout.zero == 1 and r.layout.tp > 1 for r in marked)
    assert {r.layout.zero for r in found.best if r.built_by_runtime} == {0, 2, 3}
    row = marked[0].to_dict()
    assert row["built_by_runtime"] is False
    assert row["runtime_note"].startswith("not built by accelbench's runtime: zero=1 with tp > 1")
    assert found.best[0].to_dict()["runtime_note"] in ("", row["runtime_note"])
    assert "zero-1 with tp" not in found.rejected


def test_fixed_values_that_do_not_divide_are_rejected_with_a_reason() -> None:
    found = search(GPT3, make_cluster("a100-80gb", 1), TrainSetup(8, 2048), {"tp": 3})
    assert found.best == [] and found.n_evaluated > 0
    assert "tp*pp*cp = 3 does not divide the 8 devices" in found.rejection_summary()


def test_layout_label_round_trips() -> None:
    lay = Layout(dp=16, tp=8, pp=8, vp=2, mb=1, zero=1, recompute="full", sp=False,
                 pp_schedule="interleaved_1f1b")
    assert parse_layout(lay.label(full=True), PLANNER_KEYS) == lay
    assert parse_layout(lay.label()) == lay


def test_make_cluster_keeps_an_explicit_zero_and_rejects_negative_latency() -> None:
    with pytest.raises(ConfigError, match="devices_per_node"):
        make_cluster("a100-80gb", 1, devices_per_node=0)
    with pytest.raises(ConfigError, match="inter_latency_s"):
        make_cluster("a100-80gb", 2, inter_latency_s=-1e-6)


def test_zero_3_with_a_pipeline_is_a_layout_like_any_other() -> None:
    """FSDP x PP runs in accelbench (and torchtitan): the search may return it."""
    cluster, setup = make_cluster("a100-80gb", 8), TrainSetup(512, 2048)
    assert layout_problem(GPT3, cluster, setup, Layout(dp=4, tp=2, pp=8, mb=1, zero=3)) is None
    found = search(GPT3, cluster, setup, {"zero": 3, "pp": 8})
    assert found.best and all(r.layout.zero == 3 and r.layout.pp == 8 for r in found.best)
