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



def _ranks(computes: list[list[float]], pp: list[int]) -> list:
    from accelbench.bench.train.rank_result import RankResult
    return [RankResult(rank=i, step_times_s=[1.0] * len(c), loss=[], compute_s=c,
                       coords={"pp": p})
            for i, (c, p) in enumerate(zip(computes, pp, strict=True))]


def test_peers_are_the_ranks_of_one_pipeline_position():
    """A stage's work differs from another's (the head's stage: 29x here), so ranks are
    compared only with those of their own pipeline position; a position of one rank is not."""
    from accelbench.bench.train.metrics import straggler_fields

    stages = straggler_fields(_ranks([[0.01] * 4, [0.29] * 4], pp=[0, 1]), 0)
    assert stages["slow_rank"] is None
    assert stages["slow_rank_evidence"].startswith("not compared")
    assert stages["wait_time_s_median_per_rank"] == pytest.approx([0.99, 0.71])
    dp_pp = [[0.01] * 4, [0.013] * 4, [0.29] * 4, [0.29] * 4]  # ranks 0, 1 stage 0; 2, 3 stage 1
    found = straggler_fields(_ranks(dp_pp, pp=[0, 0, 1, 1]), 0)
    assert found["slow_rank"] == 1 and "+30%" in found["slow_rank_evidence"]


def test_the_report_says_which_rank_was_slow():
    from accelbench.report.cells import status_text
    from accelbench.store.record import Record

    evidence = "rank 1 is slow: compute 0.4 s a step against its peers' 0.3 s"
    slow = Record("train", "ok", {}, {}, {"slow_rank": 1, "slow_rank_evidence": evidence},
                  reason=evidence)
    assert status_text(slow) == "ok, rank 1 slow"
    assert status_text(Record("train", "ok", {}, {}, {"slow_rank": None})) == "ok"
