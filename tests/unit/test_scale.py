"""The scaling study's layouts and arithmetic (table II's speedup and efficiency)."""

import statistics
from dataclasses import replace

import pytest
from rich.console import Console

from accelbench.bench.outcome import Outcome
from accelbench.bench.train.spec import TrainSpec
from accelbench.config.errors import ConfigError
from accelbench.config.presets import get_preset
from accelbench.config.records.scale import ScaleRow
from accelbench.config.records.train import StepTimed
from accelbench.config.trial_count import TRIAL_VALUES
from accelbench.report.table import scale_table
from accelbench.report.trial_display import scale_speedup_text
from accelbench.workloads.scale.runner import (
    ScaleSpec,
    scaling_rows,
    spec_at,
    summary_outcome,
    validate_scale,
)

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


def _trials(n, times, status="ok"):
    """A count's record measured as trials (weak scaling: 100 tokens a step a device): its
    per-trial step times kept raw (TRIAL_VALUES), its figure their median."""
    step = statistics.median(times)
    cell = _cell(n, 100 * n / step, status)
    metrics = {**cell.metrics, "trials": len(times), "tokens_per_step_global": 100 * n,
               "step_time_s_median": step}
    return replace(cell, metrics=metrics,
                   raw={TRIAL_VALUES: {StepTimed.STEP_TIME_S_MEDIAN: list(times)}})


BASE_TRIALS = [1.0, 1.01, 0.99, 0.995, 1.005, 0.998]


def test_speedup_and_efficiency_intervals_from_the_counts_trials():
    """compare's seeded bootstrap over each count's trials: a clear 1.8x on 2 devices is
    'faster' with an interval holding it; efficiency's interval is the speedup's over 2."""
    fast = [1.111, 1.117, 1.102, 1.108, 1.114, 1.106]  # 2 x 100 tokens a step
    rows = scaling_rows([_trials(1, BASE_TRIALS), _trials(2, fast)])
    base, two = rows
    assert base["trials"] == 6 and "speedup_low" not in base  # the baseline: 1 by definition
    assert two["speedup_verdict"] == "faster" and two["trials"] == 6
    assert two["speedup_low"] < two["speedup"] < two["speedup_high"]
    assert two["speedup"] == pytest.approx(2 * statistics.median(BASE_TRIALS)
                                           / statistics.median(fast))
    assert two["speedup_low"] > 1.7 and two["speedup_high"] < 1.9
    assert two["scaling_efficiency_low"] == pytest.approx(two["speedup_low"] / 2)
    assert two["scaling_efficiency_high"] == pytest.approx(two["speedup_high"] / 2)
    assert scaling_rows([_trials(1, BASE_TRIALS), _trials(2, fast)]) == rows  # seeded


def test_an_interval_holding_one_is_no_significant_difference():
    """Two devices no faster than one (weak scaling gone wrong): the speedup's interval holds 1,
    efficiency's holds 0.5, and the table says n.s."""
    same = [2.0, 2.03, 1.97, 2.01, 1.99, 2.02]  # twice the work in twice the time
    rows = scaling_rows([_trials(1, BASE_TRIALS), _trials(2, same)])
    two = ScaleRow.read(rows[1])
    assert two.speedup_verdict == "no significant difference"
    assert two.speedup_low < 1.0 < two.speedup_high
    assert two.scaling_efficiency_low < 0.5 < two.scaling_efficiency_high
    assert scale_speedup_text(two).startswith("n.s. 1.00x [")
    assert scale_speedup_text(ScaleRow.read(rows[0])) == "1.00x (baseline)"


def test_too_few_trials_give_no_interval_and_one_trial_none_at_all():
    """Under MIN_RATIO_SAMPLES (5) trials a count: the verdict says so and no bounds are kept;
    one trial a count: no evidence fields, the stored rows as before trials."""
    rows = scaling_rows([_trials(1, [1.0, 0.99, 1.01]), _trials(2, [1.1, 1.12, 1.11])])
    assert rows[1]["speedup_verdict"] == "too few samples" and rows[1]["trials"] == 3
    assert not {"speedup_low", "speedup_high", "scaling_efficiency_low"} & set(rows[1])
    assert scale_speedup_text(ScaleRow.read(rows[1])) == "1.80x (too few trials)"
    one = scaling_rows([_cell(1, 1000.0), _cell(2, 1800.0)])
    assert set(one[1]) == {"devices", "status", "reason", "baseline_devices", "global_batch",
                           "tokens_per_s_global", "tokens_per_s_per_device", "speedup",
                           "scaling_efficiency", "mfu"}
    assert scale_speedup_text(ScaleRow.read(one[1])) == "1.80x (1 trial)"


def test_the_scale_table_shows_intervals_and_reads_rows_from_before_them():
    fast = [1.111, 1.117, 1.102, 1.108, 1.114, 1.106]
    rows = [ScaleRow.read(r) for r in scaling_rows([_trials(1, BASE_TRIALS),
                                                    _trials(2, fast)])]
    text = _rendered(scale_table(rows))
    assert "1.80x [1." in text and "90.0% [" in text and "6 trial(s) a count" in text
    old = [ScaleRow.read({"devices": 1, "status": "ok", "baseline_devices": 1, "speedup": 1.0,
                          "scaling_efficiency": 1.0, "tokens_per_s_global": 10.0}),
           ScaleRow.read({"devices": 2, "status": "ok", "baseline_devices": 1, "speedup": 1.5,
                          "scaling_efficiency": 0.75, "tokens_per_s_global": 15.0})]
    text = _rendered(scale_table(old))
    assert "1.50x (1 trial)" in text and "75.0%" in text and "75.0% [" not in text


def _rendered(table) -> str:
    console = Console(width=250, record=True)
    console.print(table)
    return console.export_text()
