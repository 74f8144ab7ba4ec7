"""The timer: warm-up excluded, a known sleep measured, spread computed correctly."""

import time

import pytest
import torch

from accelbench.bench.timing import run_timed, summarize, timer_overhead_s

CPU = torch.device("cpu")


def test_known_sleep_is_measured():
    def step(timer):
        with timer.phase("sleep"):
            time.sleep(0.02)

    stats = run_timed(step, CPU, warmup=1, repeats=5)["sleep"]
    assert stats.count == 5
    assert 0.020 <= stats.min_s
    assert stats.median_s < 0.030


def test_warmup_is_excluded_and_phases_kept_apart():
    calls = []

    def step(timer):
        calls.append(1)
        slow = len(calls) <= 2  # the first two calls are the warm-up and are slow
        with timer.phase("a"):
            time.sleep(0.1 if slow else 0.001)
        with timer.phase("b"):
            time.sleep(0.005)

    stats = run_timed(step, CPU, warmup=2, repeats=4)
    assert len(calls) == 6
    # a warm-up call takes at least 0.1 s; the timed ones 1 ms (with room for a loaded machine)
    assert stats["a"].max_s < 0.1
    assert stats["b"].min_s >= 0.005 and stats["b"].count == 4


def test_summary_statistics():
    stats = summarize([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (stats.median_s, stats.min_s, stats.max_s) == (3.0, 1.0, 5.0)
    assert (stats.q1_s, stats.q3_s, stats.iqr_s) == (2.0, 4.0, 2.0)
    assert not stats.few_samples and summarize([1.0]).few_samples


def test_overhead_is_small_and_positive():
    overhead = timer_overhead_s(CPU, repeats=50)
    assert 0 <= overhead.median_s < 1e-3


def test_rejects_no_repeats():
    with pytest.raises(ValueError):
        run_timed(lambda t: None, CPU, warmup=0, repeats=0)
