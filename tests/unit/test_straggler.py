"""Naming the slow rank (analytics/slow_rank.py) from each rank's compute a step: one whose
paired excess over its peers stands out beyond the steps' noise and the peers' own spread is
named with the evidence; equal ranks, noisy ranks and too few steps are not; the test-only
delay's variable is read as RANK:FRACTION and its spin counts as compute."""

import pytest

from accelbench.analytics.slow_rank import (
    MIN_STRAGGLER_STEPS,
    STRAGGLER_FLOOR,
    find_straggler,
    peers_spread,
)
from accelbench.bench.train.straggler import test_delay_fraction as delay_fraction

STEPS = 8


def _noisy(level: float, seed: int, spread: float = 0.05) -> list[float]:
    """STEPS compute times around `level`, each off by up to +-spread (a fixed pattern)."""
    pattern = [0.2, -0.9, 0.5, -0.3, 1.0, -0.6, 0.1, -0.1]
    return [level * (1 + spread * pattern[(i + seed) % STEPS]) for i in range(STEPS)]


def test_a_rank_30_percent_slower_is_named_with_its_evidence():
    found = find_straggler({0: _noisy(1.0, 0), 1: _noisy(1.3, 3), 2: _noisy(1.0, 5),
                            3: _noisy(1.0, 6)})
    assert found.rank == 1
    assert found.excess == pytest.approx(0.30, abs=0.03)
    assert found.excess_low > STRAGGLER_FLOOR and found.steps == STEPS
    assert "rank 1 is slow" in found.evidence() and "+30%" in found.evidence()


def test_equal_ranks_name_none():
    found = find_straggler({0: _noisy(1.0, 0), 1: _noisy(1.0, 4)})
    assert found.rank is None and found.excess < STRAGGLER_FLOOR
    assert found.evidence().startswith("no rank stands out")


def test_an_excess_whose_interval_reaches_below_the_floor_names_none():
    """+20% at the median, but the steps vary by 30%: the interval's low end is under 10%."""
    found = find_straggler({0: _noisy(1.0, 0, 0.3), 1: _noisy(1.2, 4, 0.3)})
    assert found.excess > STRAGGLER_FLOOR and found.excess_low < STRAGGLER_FLOOR
    assert found.rank is None


def test_pairing_by_step_takes_out_what_every_rank_shares():
    """The machine's load doubles some steps of every rank alike: a rank 25% slower at every
    step is still named, though its steps overlap its peer's."""
    load = [1.0, 2.0, 1.0, 2.2, 1.0, 1.8, 1.0, 2.0]
    found = find_straggler({0: load, 1: [1.25 * x for x in load]})
    assert min(1.25 * x for x in load) < max(load)
    assert found.rank == 1 and found.excess_low == pytest.approx(0.25)


def test_the_peers_own_spread_raises_the_threshold():
    """Three peers that differ by 30% among themselves: a rank 20% above their median is
    within what ranks not named already show."""
    computes = {0: _noisy(0.85, 0, 0.01), 1: _noisy(1.0, 1, 0.01), 2: _noisy(1.15, 2, 0.01),
                3: _noisy(1.2 * 1.0, 3, 0.01)}
    found = find_straggler(computes)
    assert found.threshold == pytest.approx(0.30, abs=0.01) and found.rank is None
    assert peers_spread({0: 1.0, 1: 1.0}, 1) == 0.0  # one peer: no spread to take


def test_one_rank_or_too_few_steps_compares_nothing():
    assert find_straggler({0: [1.0] * STEPS}).rank is None
    assert find_straggler({0: [1.0], 1: []}).evidence() == ""
    short = find_straggler({0: [1.0] * 4, 1: [2.0] * 4})
    assert short.rank is None
    assert short.evidence() == (f"not compared: 4 timed steps, {MIN_STRAGGLER_STEPS} needed "
                                "for an interval")


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
    from accelbench.bench.train.cell_metrics import straggler_fields

    stages = straggler_fields(_ranks([[0.01] * STEPS, [0.29] * STEPS], pp=[0, 1]), 0)
    assert stages["slow_rank"] is None
    assert stages["slow_rank_evidence"].startswith("not compared")
    assert stages["wait_time_s_median_per_rank"] == pytest.approx([0.99, 0.71])
    dp_pp = [_noisy(0.01, 0), _noisy(0.013, 3), _noisy(0.29, 5), _noisy(0.29, 1)]  # stages 0, 1
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


def test_compute_counts_a_spin_and_not_the_kernels_time():
    """A rank's compute is its user CPU time: the test delay's spin counts in full; kernel time
    (in a rank, the page faults of memory mapped afresh, which differ between identical ranks:
    0.02-0.04 s of 0.32 s for ten 64 MiB arrays) does not. The kernel's time here is its
    writing /dev/zero's bytes into a buffer, for at least 0.15 s of this thread's CPU (page
    faults alone are too few to time where the kernel backs memory with huge pages)."""
    import time

    from accelbench.bench.train.straggler import compute_clock, spin

    started = compute_clock()
    spin(0.05)
    assert compute_clock() - started >= 0.05
    compute, cpu = compute_clock(), time.thread_time()
    buffer = bytearray(2**20)
    with open("/dev/zero", "rb", buffering=0) as zero:
        while time.thread_time() - cpu < 0.15:
            zero.readinto(buffer)
    compute, cpu = compute_clock() - compute, time.thread_time() - cpu
    assert cpu >= 0.15 and compute < 0.5 * cpu, (compute, cpu)


def test_the_wait_is_time_blocked_not_time_computing():
    """A rank's wait is the time its thread was blocked (a collective's wait sleeps): a sleep
    counts in full, a spin not at all (the time the load keeps it off a processor neither)."""
    import time

    from accelbench.bench.train.straggler import blocked_clock, spin

    started = blocked_clock()
    if started is None:
        pytest.skip("the kernel gives no /proc/thread-self/schedstat here")
    time.sleep(0.1)
    slept = blocked_clock() - started
    started = blocked_clock()
    spin(0.05)
    spun = blocked_clock() - started
    assert 0.09 < slept < 0.5 and spun < 0.03, (slept, spun)


def test_the_recorded_wait_is_the_time_blocked_where_the_kernel_says():
    """The record's wait is each rank's median blocked time (not the step less its compute,
    which counts the time the machine's load kept it off a processor), else the step less it."""
    from accelbench.bench.train.cell_metrics import straggler_fields

    ranks = _ranks([_noisy(0.2, 0), _noisy(0.2, 3)], pp=[0, 0])
    ranks[0].wait_s = [0.05] * STEPS
    fields = straggler_fields(ranks, 0)
    assert fields["wait_time_s_median_per_rank"][0] == pytest.approx(0.05)
    assert fields["wait_time_s_median_per_rank"][1] == pytest.approx(0.8, abs=0.02)
