"""The report's claims rest on trials: a rate's spread is the 95% interval over trials where a
cell has one, and a speedup is stated with its interval and verdict, or says why it has none."""

from accelbench.bench.outcome import Outcome
from accelbench.bench.train.spec import TrainSpec
from accelbench.config.presets import get_preset
from accelbench.config.trial_count import TRIAL_VALUES
from accelbench.report.cells import train_rate
from accelbench.report.evidence import ONE_TRIAL, speedup_text
from accelbench.report.machines import Machine
from accelbench.store.record import Record
from accelbench.workloads.scale.report import scaling_section
from accelbench.workloads.scale.runner import ScaleSpec, summary_outcome


def _cell(times, interval=None):
    metrics = {"tokens_per_step_global": 100, "n_devices": 1,
               "step_time_s_median": sorted(times)[len(times) // 2],
               "step_time_s_min": min(times) / 2, "step_time_s_max": max(times) * 2}
    if interval:
        metrics["intervals"] = {"step_time_s_median": interval}
    raw = {TRIAL_VALUES: {"step_time_s_median": list(times)}} if len(times) > 1 else {}
    return Record(kind="train", status="ok", spec={}, environment={}, metrics=metrics, raw=raw)


def test_a_rate_spans_the_trials_interval_where_there_is_one():
    with_trials = train_rate(_cell([1.0, 1.1, 0.9, 1.0, 1.05, 0.95], [0.9, 1.1]))
    assert (with_trials.low, with_trials.high) == (100 / 1.1, 100 / 0.9)
    one = train_rate(_cell([1.0]))
    assert (one.low, one.high) == (100 / 2.0, 100 / 0.5)  # the slowest and fastest step


def test_a_speedup_says_what_the_trials_allow():
    base = _cell([1.0, 1.02, 0.98, 1.01, 0.99, 1.0])
    faster = _cell([0.5, 0.51, 0.49, 0.5, 0.52, 0.48])
    same = _cell([1.01, 0.99, 1.0, 1.02, 0.98, 1.0])
    assert speedup_text(base, faster, 2.0).startswith("2.00x [")  # a real 2x: found
    assert speedup_text(base, same, 1.0).startswith("no significant difference")
    assert speedup_text(base, _cell([0.5]), 2.0) == f"2.00x ({ONE_TRIAL})"
    assert speedup_text(base, _cell([0.5, 0.5, 0.5]), 2.0).startswith("too few samples")


def _count(n, times, run="r1"):
    """A scaling study's count n as the report reads it: tokens a step grow with n (weak)."""
    cell = _cell(times)
    metrics = {**cell.metrics, "tokens_per_step_global": 100 * n, "n_devices": n,
               "tokens_per_s_global": 100 * n / cell.metrics["step_time_s_median"]}
    return Record(kind="train", status="ok", run_id=run, environment={}, raw=cell.raw,
                  spec={"scale_devices": n, "micro_batch": 1, "gas": 1}, metrics=metrics)


def _scaling(counts):
    """The report's scaling section over these per-count cells and their summary."""
    outcomes = [Outcome("train", "ok", c.spec, c.metrics, raw=c.raw) for c in counts]
    summary = summary_outcome(ScaleSpec(TrainSpec(get_preset("gpt2-tiny")), (1, 2)), outcomes)
    record = Record(kind="scale", status=summary.status, spec=summary.spec, environment={},
                    metrics=summary.metrics, run_id="r1")
    machine = Machine(1, "test", "key", {}, (record, *counts), ())
    return scaling_section([machine])


def test_the_scaling_section_states_each_speedup_with_its_evidence():
    """The summary's speedup and efficiency with their intervals, in the words of every claim
    ('no significant difference' where the speedup's interval holds 1), error bars on
    efficiency; one trial a count: none of it."""
    base = [1.0, 1.02, 0.98, 1.01, 0.99, 1.0]
    section = _scaling([_count(1, base), _count(2, [2.0, 2.04, 1.96, 2.02, 1.98, 2.0])])
    [row1, row2] = section.tables[0].rows
    assert row1[5] == "1.00x (baseline)" and row2[5].startswith("no significant difference")
    assert row2[6].startswith("50.0% [")
    efficiency = section.figures[0].panels[0].series[0]
    assert efficiency.low is not None and efficiency.low[1] < 0.5 < efficiency.high[1]
    faster = _scaling([_count(1, base), _count(2, [1.1, 1.12, 1.08, 1.11, 1.09, 1.1])])
    assert faster.tables[0].rows[1][5].startswith("1.82x [")
    one = _scaling([_count(1, [1.0]), _count(2, [1.1])])
    assert one.tables[0].rows[1][5] == f"1.82x ({ONE_TRIAL})"
    assert one.tables[0].rows[1][6] == "90.9%" and one.figures[0].panels[0].series[0].low is None
