"""What a training benchmark runs: a sweep over sequence, micro-batch, GAS, dtype and recompute."""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from pathlib import Path

from accelbench.analytics.flops import RECOMPUTE_KINDS
from accelbench.bench.dtypes import TORCH_DTYPES
from accelbench.config.errors import ConfigError, require_choice, require_positive
from accelbench.config.model import ModelConfig


@dataclass(frozen=True)
class TrainCell:
    """One point of a training sweep."""

    seq_len: int
    micro_batch: int
    gas: int
    dtype: str
    recompute: str

    @property
    def label(self) -> str:
        """Short text for progress lines."""
        return (f"seq {self.seq_len} mb {self.micro_batch} gas {self.gas} {self.dtype} "
                f"recompute {self.recompute}")


@dataclass(frozen=True)
class TrainSpec:
    """A training sweep; every list field is swept, the rest are shared by all cells."""

    model: ModelConfig
    data: str = "synthetic"  # synthetic, default, or a shard folder
    tokenizer: str = "gpt2"  # what the shards were made with (codon for genomes)
    seq_lens: tuple[int, ...] = (1024,)
    micro_batches: tuple[int, ...] = (8,)
    gas: tuple[int, ...] = (1,)
    dtypes: tuple[str, ...] = ("bf16",)
    recomputes: tuple[str, ...] = ("none",)
    steps: int = 20
    warmup_steps: int = 5
    time_budget_s: float | None = None
    lr: float = 3e-4
    min_lr_ratio: float = 0.1
    lr_warmup_steps: int = 10
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    compile: bool = False
    tf32: bool = False
    device: str = "auto"
    seed: int = 0
    mem_limit_bytes: int | None = None
    max_micro_batch: bool = False
    init_checkpoint: str | None = None  # a Hugging Face GPT-2 folder whose weights start the run
    layout: str = ""  # dp=..,tp=..,pp=..,zero=.. (empty: data parallel over every process)
    nproc: int = 1  # processes to launch with torchrun (1: this process, or the launcher's)
    cell_timeout_s: float = 3600.0  # a launched cell that runs longer is killed and recorded

    def cells(self) -> list[TrainCell]:
        """The sweep's cells in a stable order (outermost: dtype, then recompute, seq, gas, mb)."""
        return [TrainCell(seq, mb, gas, dtype, rc) for dtype, rc, seq, gas, mb in
                itertools.product(self.dtypes, self.recomputes, self.seq_lens, self.gas,
                                  self.micro_batches)]

    def to_dict(self) -> dict:
        """Plain dict with the model expanded."""
        data = asdict(self)
        data["model"] = self.model.to_dict()
        return data


def spec_from_dict(data: dict) -> TrainSpec:
    """Rebuild a TrainSpec from to_dict() output (how a launched worker receives its cell)."""
    fields = dict(data)
    fields["model"] = ModelConfig(**fields["model"])
    for key in ("seq_lens", "micro_batches", "gas", "dtypes", "recomputes"):
        fields[key] = tuple(fields[key])
    return TrainSpec(**fields)


def validate_train_spec(spec: TrainSpec) -> TrainSpec:
    """Raise ConfigError on the first bad field, before anything runs."""
    for seq in spec.seq_lens:
        require_positive("seq", seq)
        if spec.model.position == "learned" and seq > spec.model.n_positions:
            raise ConfigError("seq", f"{seq} is longer than the model's {spec.model.n_positions}"
                              " positions", f"<= {spec.model.n_positions}")
    for mb in spec.micro_batches:
        require_positive("micro-batch", mb)
    for gas in spec.gas:
        if not isinstance(gas, int) or gas < 1:
            raise ConfigError("gas", f"must be at least 1, got {gas}", ">= 1")
    for dtype in spec.dtypes:
        require_choice("dtype", dtype, tuple(TORCH_DTYPES))
    for rc in spec.recomputes:
        require_choice("recompute", rc, RECOMPUTE_KINDS)
    require_positive("steps", spec.steps)
    if not 0 <= spec.warmup_steps < spec.steps:
        raise ConfigError("warmup-steps", f"must be in [0, steps), got {spec.warmup_steps}",
                          f"0 to {spec.steps - 1}")
    if spec.compile and spec.warmup_steps < 1:  # else compilation lands in a timed step
        raise ConfigError("warmup-steps", "--compile needs at least 1 warm-up step", ">= 1")
    require_positive("lr", spec.lr)
    for name, value in (("lr-warmup-steps", spec.lr_warmup_steps),
                        ("weight-decay", spec.weight_decay), ("grad-clip", spec.grad_clip)):
        if value < 0:
            raise ConfigError(name, f"must be 0 or more, got {value}", ">= 0 (0: off)")
    if spec.time_budget_s is not None:
        require_positive("time-budget", spec.time_budget_s)
    require_positive("nproc", spec.nproc)
    return spec


def resolve_model_source(text: str) -> tuple[ModelConfig, str | None]:
    """A --model value: a preset spec, 'hf:DIR' (a Hugging Face GPT-2 folder, weights too) or
    'neox:FILE' (a GPT-NeoX config.json such as GenSLM's; the shape only, random weights)."""
    if text.startswith("neox:"):
        from accelbench.config.genslm import model_from_neox_config

        path = Path(text[5:]).expanduser()
        if not path.is_file():
            raise ConfigError("model", f"no GPT-NeoX config file at {str(path)!r}",
                              "neox:PATH to a GPTNeoXConfig JSON file")
        return model_from_neox_config(path), None
    if text.startswith("hf:"):
        from accelbench.models.convert_hf_gpt2 import model_config_from_hf_gpt2

        path = text[3:]
        return model_config_from_hf_gpt2(path), path
    from accelbench.config.presets import resolve_model

    return resolve_model(text), None
