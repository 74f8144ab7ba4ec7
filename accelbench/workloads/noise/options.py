"""The options of `accelbench noise`, the A/A check (no torch: the command lists them
instantly); workloads/noise/runner.py builds and runs the check."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.config.option_fields import DEVICE_HELP, option
from accelbench.config.vocab import TRAIN_DTYPES

DEFAULT_NOISE_TRIALS = 6  # a condition; analytics/stats.py MIN_RATIO_SAMPLES is the fewest


@dataclass(frozen=True)
class NoiseOptions:
    """What a user types for a noise check: one training configuration, measured as two
    identical conditions interleaved over trials."""

    model: str = option("gpt2-tiny", "Preset, preset:overrides or custom:layers=... (as train).")
    seq: int = option(64, "Sequence length.")
    micro_batch: int = option(1, "Micro-batch size.")
    dtype: str = option("fp32", "Training precision.", choices=TRAIN_DTYPES)
    steps: int = option(2, "Timed optimizer steps a trial.")
    warmup_steps: int = option(1, "Untimed steps a trial, before the timed ones.")
    trials: int = option(DEFAULT_NOISE_TRIALS, "Trials a condition (A and B interleaved, each "
                         "trial a model built anew); 5 or more, so the ratio has an interval.")
    device: str = option("auto", DEVICE_HELP)
    seed: int = option(0, "Seed for weights, data and the order within each round.")
