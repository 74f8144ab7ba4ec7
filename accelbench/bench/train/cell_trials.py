"""A one-process training cell measured as independent trials (bench/trials.py): each trial
builds the model anew from the sweep's seed and runs the cell's warm-up and timed steps; the
record is made from all of them once the last has run."""

from __future__ import annotations

import statistics
from dataclasses import replace

import torch

from accelbench.analytics.throughput import at_measured_clock, mean_clock
from accelbench.bench.gemm_peak import SweepPeaks
from accelbench.bench.outcome import Outcome
from accelbench.bench.timed_metrics import peak_warning
from accelbench.bench.train.cell import KIND, VERIFIED, run_cell
from accelbench.bench.train.fit_search import find_max_micro_batch
from accelbench.bench.train.spec import TrainCell, TrainSpec, cell_layout
from accelbench.bench.train.steps import StepProgress
from accelbench.bench.trial_record import (
    combine_timed,
    combined_raw,
    disturbance_summary,
    interval_fields,
    spread,
    timed_map,
)
from accelbench.config.record_kinds import partial_metrics_dict, read_metrics
from accelbench.config.records.train import StepTimed, TrainMetrics

# the median step time and every rate computed from it: the figures with an interval
TIMED = timed_map(StepTimed)


class LocalCell:
    """One cell on this process's device, a trial at a time; a --max-micro-batch search runs
    once, before its first trial, and every trial measures the micro-batch it found."""

    def __init__(self, spec: TrainSpec, cell: TrainCell, device: torch.device,
                 peaks: SweepPeaks, progress: StepProgress | None, asked: dict,
                 verify_fit: bool = False) -> None:
        self.spec, self.cell, self.device, self.peaks = spec, cell, device, peaks
        self.progress, self.asked, self.verify_fit = progress, asked, verify_fit
        self.search: dict | None = None
        self.searched = False

    def adopt(self, kept: list[Outcome]) -> None:
        """Trials an earlier run kept: the rest measure their micro-batch (a --max-micro-batch
        search is not run again, so that every trial of the cell measures one micro-batch)."""
        if self.spec.max_micro_batch and kept and not self.searched:
            kept_spec = kept[0].setup
            self.cell = replace(self.cell, micro_batch=int(kept_spec.micro_batch))
            self.search, self.searched = kept_spec.micro_batch_search, True

    def trial(self, trial: int) -> Outcome:
        """Measure one trial (the record keyed by the cell as asked, before the search)."""
        spec = self.spec
        if spec.max_micro_batch and not self.searched:
            mb, self.search = find_max_micro_batch(spec, self.cell, self.device)
            self.cell, self.searched = replace(self.cell, micro_batch=max(mb, 1)), True
        peak = self.peaks.get(self.cell.dtype).peak()
        outcome = run_cell(spec, self.cell, cell_layout(spec, 1, self.cell.gas), self.device,
                           peak, self.progress, verify_fit=self.verify_fit)
        if self.search is not None:
            outcome = replace(outcome, spec={**outcome.spec, "micro_batch_search": self.search},
                              asked_spec=self.asked)
        return outcome


def per_rank_medians(trials: list[TrainMetrics]) -> dict:
    """Each rank's median step time over the trials (a launched cell has one a rank), and the
    rank slowest by it; nothing where a trial lacks them."""
    per_trial = [m.step_time_s_median_per_rank for m in trials]
    if any(not ranks or None in ranks for ranks in per_trial) or \
            len({len(ranks) for ranks in per_trial}) != 1:
        return {}
    ranks = [statistics.median(times) for times in zip(*per_trial, strict=True)]
    return partial_metrics_dict(TrainMetrics, step_time_s_median_per_rank=ranks,
                                step_time_slowest_rank=ranks.index(max(ranks)))


def clock_over_trials(trials: list[TrainMetrics], combined: TrainMetrics) -> dict:
    """The trials' mean SM clock (each its timed window's mean) and the combined MFU against
    the peak at that clock; nothing where a trial read no clock."""
    clock = mean_clock([t.sm_clock_mhz_mean for t in trials])
    if clock is None:
        return {}
    return partial_metrics_dict(TrainMetrics, sm_clock_mhz_mean=clock,
                                mfu_at_measured_clock=at_measured_clock(
                                    combined.mfu, combined.peak_clock_mhz, clock))


def combine_train_trials(trials: list[Outcome]) -> Outcome:
    """A cell's record from its ok trials (one process's, or rank 0's of a launched cell): the
    median of the trials' median step times (each the slowest rank's) and the rates from it,
    with intervals; each rank's median over trials; the step-time spread over every trial;
    disturbance (rank 0's window); the first trial's losses, memory, energy and the rest
    (same seed: same model and data)."""
    metrics = [o.metrics for o in trials]
    timed, values = combine_timed(metrics, TIMED)
    combined = {**metrics[0], **timed, **spread(metrics, "step_time_s"),
                **interval_fields(len(trials)),
                **disturbance_summary([o.raw.get("rank0", {}).get("disturbance")
                                       for o in trials])}
    combined.update(per_rank_medians([read_metrics(KIND, m) for m in metrics]))
    combined.update(clock_over_trials([read_metrics(KIND, m) for m in metrics],
                                      read_metrics(KIND, combined)))
    first = trials[0].reason
    verified = first[first.index(VERIFIED):] if VERIFIED in first else ""  # --verify-fit's note
    reason = "; ".join(r for r in (peak_warning(read_metrics(KIND, combined)), verified) if r)
    return replace(trials[0], metrics=combined, raw=combined_raw(trials, values), reason=reason)
