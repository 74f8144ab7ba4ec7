"""A pipeline's bubble: the (p-1)/m theory and the measured excess over a one-process step."""

from __future__ import annotations


def bubble_fraction_theory(pp: int, n_micro: int, vp: int = 1) -> float:
    """Idle over busy time of a pipeline: (p-1)/m for GPipe and 1F1B, (p-1)/(v m) interleaved
    (Narayanan et al. 2021, sec. 2.2)."""
    return (pp - 1) / (vp * n_micro)


def bubble_fraction_measured(step_time_pp_s: float, step_time_single_s: float, pp: int) -> float:
    """Measured bubble against the ideal: the same step (same micro-batches) on one process
    takes step_time_single_s, so p perfectly busy stages would take step_time_single_s / p; the
    excess over that, relative to it. It also holds stage sends and stage imbalance (the end
    stages carry the embeddings and the head), so it bounds the pure bubble from above."""
    ideal_s = step_time_single_s / pp
    return (step_time_pp_s - ideal_s) / ideal_s
