"""The options of the block micro-benchmark (no torch: the command lists them instantly)."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.config.options import option


@dataclass(frozen=True)
class BlockOptions:
    """What a user types for a block sweep: the options of `accelbench block` and the keys of a
    study's block experiment (lists comma-separated, as on the command line)."""

    model: str = option("gpt2-xl", "Preset, preset:overrides or custom:layers=...")
    seq: int = option(1024, "Sequence length.")
    batch: str = option("8,16,32,64", "Comma-separated batch sizes.")
    dtype: str = option("fp32,fp16,bf16", "Comma-separated: fp32, fp16, bf16.")
    device: str = option("auto", "auto, cpu, cuda, cuda:N, xpu, mps.")
    repeats: int = option(10, "Timed repetitions per cell.")
    warmup: int = option(3, "Untimed warm-up repetitions per cell.")
    compile: bool = option(False, "torch.compile the block.", "--compile/--no-compile")
    tf32: bool = option(False, "Allow TF32 for fp32 matmuls.", "--tf32/--no-tf32")
    mem_limit: str = option("", "Refuse cells estimated above this, e.g. 8GiB.")
