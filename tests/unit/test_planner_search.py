"""Planner search and validation: every returned layout divides and fits; --validate runs."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from accelbench.analytics.cluster import make_cluster
from accelbench.analytics.memory import memory_per_device
from accelbench.analytics.planner import layout_problem, plan_fixed, search
from accelbench.analytics.published import (
    PUBLISHED_RUNS,
    SHAPES,
    needed_efficiency,
    validate_measured_runs,
    validate_published,
)
from accelbench.analytics.steptime import CALIBRATED_EFFICIENCY, TrainSetup
from accelbench.config.errors import ConfigError

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
                                cluster.memory_bytes_per_device)
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


def test_calibrated_efficiency_is_the_median_needed() -> None:
    needed = [needed_efficiency(run) for run in PUBLISHED_RUNS]
    assert CALIBRATED_EFFICIENCY == pytest.approx(statistics.median(needed), abs=0.005)


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
    out = runner.invoke(app, ["plan", "--model", "gpt3-175b", "--device", "a100-80gb",
                              "--nodes", "16", "--global-batch", "512", "--top", "3", "--json"])
    assert out.exit_code == 0, out.output
    assert len(json.loads(out.stdout)["best"]) == 3


def test_analytics_never_imports_torch() -> None:
    code = ("import sys; import accelbench.analytics.planner, accelbench.analytics.published; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
