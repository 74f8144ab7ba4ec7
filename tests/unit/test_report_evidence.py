"""The report's claims rest on trials: a rate's spread is the 95% interval over trials where a
cell has one, and a speedup is stated with its interval and verdict, or says why it has none."""

from accelbench.config.trials import TRIAL_VALUES
from accelbench.report.cells import train_rate
from accelbench.report.evidence import ONE_TRIAL, speedup_text
from accelbench.store.record import Record


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
