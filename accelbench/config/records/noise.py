"""The noise floor's record kind ('noise': an A/A check's difference; its cells are 'noise-cell'
records, declared with train's in train.py)."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.config.records.base import RecordKind
from accelbench.config.records.train import TrainRecordSpec


@dataclass(frozen=True)
class NoiseMetrics:
    """An A/A check (`accelbench noise`, kind 'noise'): one training configuration measured as
    two identical conditions A and B, interleaved over trials (their cells are 'noise-cell'
    records, TrainMetrics), and B's throughput over A's with its interval. The noise floor is
    the larger distance of that interval's ends from 1 (a fraction): on this machine, today, a
    difference smaller than it cannot be told from run-to-run spread."""

    trials: int | None = None  # trials a condition
    throughput_ratio: float | None = None  # median B tokens/s over median A tokens/s
    throughput_ratio_low: float | None = None  # its 95% interval; None: too few trials
    throughput_ratio_high: float | None = None
    noise_verdict: str | None = None  # analytics/stats.py's word for B against A
    noise_floor: float | None = None  # max(1 - low, high - 1); None without an interval
    interval_confidence: float | None = None  # 0.95
    interval_method: str | None = None  # how the ratio's interval was made, or why none
    step_time_s_median_a: float | None = None  # condition A's median step time (over trials)
    step_time_s_median_b: float | None = None
    tokens_per_s_global_a: float | None = None  # condition A's throughput, all devices
    tokens_per_s_global_b: float | None = None
    disturbed: bool | None = None  # either cell's windows disturbed; None: not judged
    trial_seed: int | None = None  # seed of the order within each round (and the bootstrap)


KINDS = {"noise": RecordKind(NoiseMetrics, spec=TrainRecordSpec, cell=True,  # its configuration
                             machine_context=True)}
