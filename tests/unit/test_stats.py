"""The statistics of trials: the median's interval covers at its stated rate, A/A studies say
"no significant difference", a real 1.5x is found, and the texts say what they mean."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelbench.analytics.stats import (
    FASTER,
    MIN_MEDIAN_SAMPLES,
    MIN_RATIO_SAMPLES,
    NO_DIFFERENCE,
    SLOWER,
    TOO_FEW,
    compare,
    median_interval,
    order_statistic_rank,
    ratio_interval,
)
from accelbench.config.errors import ConfigError

SIGMA = 0.1  # log-scale noise of a simulated trial: about 10% run to run


def _trials(rng: np.random.Generator, median: float, n: int, sigma: float = SIGMA) -> list[float]:
    """n lognormal trial times around `median` (the median of a lognormal is exp(mu))."""
    return list(rng.lognormal(math.log(median), sigma, n))


def test_order_statistic_ranks_are_the_binomial_ones():
    # n = 6: [x_(1), x_(6)] covers 1 - 2/64; n = 5 cannot reach 95% (1 - 2/32 = 93.75%)
    assert order_statistic_rank(5) is None
    assert order_statistic_rank(6) == (1, pytest.approx(1 - 2 / 64))
    # n = 10: P(B <= 1) = 11/1024, so ranks 2 and 9 cover 97.9%; ranks 3 and 8 only 89.1%
    assert order_statistic_rank(10) == (2, pytest.approx(1 - 22 / 1024))
    assert MIN_MEDIAN_SAMPLES == 6


def test_median_interval_reads_the_sorted_samples():
    est = median_interval([5.0, 1.0, 4.0, 2.0, 3.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    assert (est.value, est.low, est.high, est.n) == (5.5, 2.0, 9.0, (10,))
    assert "order statistics" in est.method and not est.too_few
    assert est.coverage == pytest.approx(1 - 22 / 1024)


def test_too_few_samples_say_so():
    est = median_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    assert est.too_few and est.low is None and est.high is None and est.value == 3.0
    assert "need 6" in est.method and est.includes(3.0) is None
    few = compare([1.0] * 4, [2.0] * 4)
    assert few.outcome == TOO_FEW and not few.significant
    assert few.text() == "too few samples (n=4, 4): 0.50x"


def test_median_interval_covers_the_true_median_at_its_stated_rate():
    rng = np.random.default_rng(28)
    reps = 1500
    for n in (6, 8, 11):
        stated = median_interval([1.0] * n).coverage
        hits = sum(bool(median_interval(_trials(rng, 2.0, n)).includes(2.0))
                   for _ in range(reps))
        # the coverage is exact: the simulated rate lies within 4 standard errors of it
        tolerance = 4 * math.sqrt(stated * (1 - stated) / reps)
        assert abs(hits / reps - stated) < tolerance, (n, hits / reps, stated)
        assert stated >= 0.95


def test_a_a_studies_report_no_significant_difference():
    rng = np.random.default_rng(1)
    outcomes = []
    for rep in range(200):
        n = 5 + rep % 4  # 5 to 8 trials a condition
        verdict = compare(_trials(rng, 1.0, n), _trials(rng, 1.0, n), seed=rep)
        outcomes.append(verdict.outcome)
    assert outcomes.count(NO_DIFFERENCE) / len(outcomes) >= 0.9, outcomes.count(NO_DIFFERENCE)


def test_a_real_one_and_a_half_times_speedup_is_found():
    rng = np.random.default_rng(2)
    found, within = 0, 0
    for rep in range(200):
        n = 5 + rep % 4
        verdict = compare(_trials(rng, 1.5, n), _trials(rng, 1.0, n), seed=rep)
        found += verdict.outcome == FASTER
        within += bool(verdict.ratio.includes(1.5))
    assert found >= 196  # nearly all
    assert within / 200 >= 0.85  # and the interval mostly holds the true ratio


def test_throughput_comparisons_turn_the_ratio_round():
    slow, fast = [10.0, 11, 9, 10, 10.5, 9.5], [20.0, 21, 19, 20, 20.5, 19.5]
    assert compare(slow, fast, lower_is_better=False).outcome == FASTER
    assert compare(fast, slow, lower_is_better=False).outcome == SLOWER
    assert compare(slow, fast).outcome == SLOWER  # as times, the candidate took twice as long


def test_the_bootstrap_is_deterministic_for_a_seed():
    rng = np.random.default_rng(3)
    a, b = _trials(rng, 1.2, 6), _trials(rng, 1.0, 7)
    assert ratio_interval(a, b, seed=7) == ratio_interval(a, b, seed=7)
    assert ratio_interval(a, b, seed=7).n == (6, 7)
    assert ratio_interval(a, b).value == pytest.approx(np.median(a) / np.median(b))


def test_texts_state_the_interval():
    base = [1.41 * x for x in (1.0, 1.01, 0.99, 1.02, 0.98, 1.0)]
    faster = compare(base, [1.0, 1.01, 0.99, 1.02, 0.98, 1.0])
    assert faster.outcome == FASTER and faster.text().startswith("1.41x [")
    rng = np.random.default_rng(4)
    same = compare(_trials(rng, 1.0, 6, 0.3), _trials(rng, 1.0, 6, 0.3))
    assert same.text().startswith(f"{NO_DIFFERENCE} (") and same.text().endswith("])")
    assert same.to_dict()["ratio"]["n"] == [6, 6]


@pytest.mark.parametrize("confidence", [0, 1, 1.5, -0.1, float("nan")])
def test_bad_confidence_names_the_field(confidence):
    with pytest.raises(ConfigError, match="confidence"):
        median_interval([1.0] * 8, confidence)
    with pytest.raises(ConfigError, match="confidence"):
        ratio_interval([1.0] * 8, [1.0] * 8, confidence)


def test_bad_samples_are_refused():
    with pytest.raises(ValueError, match="non-empty"):
        median_interval([])
    with pytest.raises(ValueError, match="finite"):
        median_interval([1.0, float("nan")])
    with pytest.raises(ValueError, match="> 0"):
        ratio_interval([1.0] * 6, [0.0] * 6)
    with pytest.raises(ConfigError, match="resamples"):
        ratio_interval([1.0] * 6, [1.0] * 6, resamples=10)
    assert MIN_RATIO_SAMPLES == 5
