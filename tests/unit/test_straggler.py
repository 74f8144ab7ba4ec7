"""Naming the slow rank (analytics/straggler.py) from each rank's compute a step: one that
stands out beyond its peers' noise is named with the evidence; equal ranks and noisy ranks are
not; the test-only delay's variable is read as RANK:FRACTION."""

import pytest

from accelbench.analytics.straggler import (
    STRAGGLER_FLOOR,
    find_straggler,
    relative_spread,
)
from accelbench.bench.train.straggler import test_delay_fraction as delay_fraction


def test_a_rank_30_percent_slower_is_named_with_its_evidence():
    found = find_straggler({0: [1.0, 1.02, 0.99], 1: [1.31, 1.29, 1.30],
                            2: [1.01, 1.0, 1.0], 3: [0.98, 1.0, 1.01]})
    assert found.rank == 1
    assert found.excess == pytest.approx(0.30, abs=0.01)
    assert "rank 1 is slow" in found.evidence() and "+30%" in found.evidence()


def test_equal_ranks_name_none():
    found = find_straggler({0: [1.0, 1.01, 0.99], 1: [1.02, 1.0, 1.01]})
    assert found.rank is None and found.excess < STRAGGLER_FLOOR
    assert found.evidence().startswith("no rank stands out")


def test_a_difference_within_the_noise_names_none():
    """20% more, but the steps themselves vary by 10% (3 x 10% > 20%)."""
    found = find_straggler({0: [0.8, 1.0, 1.2, 1.0], 1: [0.96, 1.2, 1.44, 1.2]})
    assert relative_spread([0.8, 1.0, 1.2, 1.0]) == pytest.approx(0.1)
    assert found.rank is None and found.threshold > found.excess


def test_one_rank_or_no_timings_compares_nothing():
    assert find_straggler({0: [1.0]}).rank is None
    assert find_straggler({0: [1.0], 1: []}).evidence() == ""


def test_the_delay_variable_names_one_rank_and_a_fraction():
    env = {"ACCELBENCH_TEST_SLOW_RANK": "1:0.3"}
    assert (delay_fraction(1, env), delay_fraction(0, env), delay_fraction(1, {})) == (0.3, 0, 0)
    with pytest.raises(ValueError, match="ACCELBENCH_TEST_SLOW_RANK"):
        delay_fraction(0, {"ACCELBENCH_TEST_SLOW_RANK": "slow"})


def _ranks(computes: list[list[float]], pp: bool) -> list:
    from accelbench.bench.train.rank_result import RankResult
    return [RankResult(rank=i, step_times_s=[1.0] * len(c), loss=[], compute_s=c,
                       coords={"pp": i if pp else 0}) for i, c in enumerate(computes)]


def test_pipeline_stages_are_compared_per_unit_of_their_own_work():
    """The last stage carries the head: 29x the first's work here, so 29x its compute is even
    and 1.3 x 29x is slow; the waits are the steps less the compute."""
    from accelbench.bench.train.metrics import straggler_fields

    work = {0: 1.0, 1: 29.0}
    even = straggler_fields(_ranks([[0.01] * 4, [0.29] * 4], pp=True), 0, work)
    assert even["slow_rank"] is None
    assert even["wait_time_s_median_per_rank"] == pytest.approx([0.99, 0.71])
    slow = straggler_fields(_ranks([[0.01] * 4, [0.377] * 4], pp=True), 0, work)
    assert slow["slow_rank"] == 1
    unweighted = straggler_fields(_ranks([[0.01] * 4, [0.29] * 4], pp=False), 0)
    assert unweighted["slow_rank"] == 1  # without the work shares the head's stage looks slow
