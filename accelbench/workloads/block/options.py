"""The options of the block micro-benchmark (no torch: the command lists them instantly)."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.config.option_fields import option
from accelbench.config.trial_count import AUTO
from accelbench.hardware.disturbance import OTHER_CPU_THRESHOLD


@dataclass(frozen=True)
class BlockOptions:
    """What a user types for a block sweep: the options of `accelbench block` and the keys of a
    study's block experiment (lists comma-separated, as on the command line)."""

    model: str = option("gpt2-xl", "Preset, preset:overrides or custom:layers=...")
    seq: int = option(1024, "Sequence length.")
    batch: str = option("8,16,32,64", "Comma-separated batch sizes.")
    dtype: str = option("fp32,fp16,bf16", "Comma-separated: fp32, fp16, bf16.")
    device: str = option("auto", "auto, cpu, cuda, cuda:N, xpu, mps.")
    repeats: int = option(10, "Timed repetitions per trial.")
    warmup: int = option(3, "Untimed warm-up repetitions per trial.")
    trials: str = option(AUTO, "Independent trials per cell (each its own warm-up and timed "
                         "repetitions), interleaved across the cells: the figure is their "
                         "median, with a 95% interval from 6 trials; auto: 6 on an "
                         "accelerator, 3 on a CPU.")
    disturbance_threshold: float = option(
        OTHER_CPU_THRESHOLD, "Share of the CPU capacity other processes may use in a timed "
        "window before the cell is flagged disturbed, in (0, 1].")
    compile: bool = option(False, "torch.compile the block.", "--compile/--no-compile")
    tf32: bool = option(False, "Allow TF32 for fp32 matmuls.", "--tf32/--no-tf32")
    mem_limit: str = option("", "Refuse cells estimated above this a device (a rank), e.g. 8GiB.")
