"""The scaling study's layouts and arithmetic (table II's speedup and efficiency)."""

import pytest

from accelbench.bench.outcome import Outcome
from accelbench.bench.scale import (
    ScaleSpec,
    scaling_rows,
    spec_at,
    summary_outcome,
    validate_scale,
)
from accelbench.bench.train.spec import TrainSpec
from accelbench.config.errors import ConfigError
from accelbench.config.presets import get_preset

BASE = TrainSpec(get_preset("gpt2-tiny"), seq_lens=(64,), micro_batches=(8,), gas=(2,),
                 dtypes=("fp32",), device="cpu")


def test_weak_keeps_the_micro_batch_strong_splits_it():
    assert spec_at(ScaleSpec(BASE, (1, 4), "weak"), 4).micro_batches == (8,)
    strong = spec_at(ScaleSpec(BASE, (1, 4), "strong", zero=1), 4)
    assert strong.micro_batches == (2,) and strong.nproc == 4 and strong.layout == "dp=4,zero=1"
    with pytest.raises(ConfigError, match="devices"):
        validate_scale(ScaleSpec(BASE, (1, 3), "strong"))
    with pytest.raises(ConfigError, match="mode"):
        validate_scale(ScaleSpec(BASE, (1, 2), "diagonal"))


def _cell(n, tokens_per_s, status="ok"):
    spec = {"scale_devices": n, "micro_batch": 8, "gas": 2}
    metrics = {"tokens_per_s_global": tokens_per_s, "mfu": 0.4} if status == "ok" else {}
    return Outcome("train", status, spec, metrics, reason="" if status == "ok" else "oom")


def test_speedup_and_efficiency_by_hand():
    """The study's A100 row: 64 devices at 75.8% efficiency is 48.5x the one-device rate."""
    rows = scaling_rows([_cell(1, 1000.0), _cell(8, 7000.0), _cell(64, 48512.0),
                         _cell(128, 0, status="oom")])
    assert rows[1]["speedup"] == 7.0 and rows[1]["scaling_efficiency"] == 0.875
    assert rows[2]["scaling_efficiency"] == pytest.approx(0.758)
    assert rows[2]["tokens_per_s_per_device"] == 758.0 and rows[2]["global_batch"] == 1024
    assert rows[3]["status"] == "oom" and "speedup" not in rows[3]


def test_the_baseline_is_the_smallest_count_whatever_the_order():
    """--devices 4,1,2: the 1-device cell is the baseline, not the first one run."""
    rows = scaling_rows([_cell(4, 3000.0), _cell(1, 1000.0), _cell(2, 1800.0)])
    assert [r["devices"] for r in rows] == [1, 2, 4]
    assert [r["speedup"] for r in rows] == [1.0, 1.8, 3.0]
    assert rows[2]["scaling_efficiency"] == 0.75
    assert all(r["baseline_devices"] == 1 and r["reason"] == "speedup over 1 device"
               for r in rows)


def test_a_missing_or_failed_one_device_run_is_said():
    rows = scaling_rows([_cell(4, 3000.0), _cell(2, 2000.0)])
    assert rows[0]["speedup"] == 1.0 and rows[1]["scaling_efficiency"] == 0.75
    assert rows[0]["baseline_devices"] == 2 and "no 1-device run" in rows[1]["reason"]
    rows = scaling_rows([_cell(1, 0, status="oom"), _cell(2, 2000.0), _cell(4, 3000.0)])
    assert rows[0]["status"] == "oom" and rows[0]["reason"] == "oom"
    assert rows[1]["speedup"] == 1.0 and rows[2]["speedup"] == 1.5
    assert "over 2 devices (the 1-device run ended oom)" in rows[2]["reason"]
    summary = summary_outcome(ScaleSpec(BASE, (1, 2, 4)), [_cell(1, 0, "oom"), _cell(2, 1.0)])
    assert summary.metrics["baseline_devices"] == 2 and "1-device run ended oom" in summary.reason
