"""What a training benchmark runs: a sweep over sequence, micro-batch, GAS, dtype and recompute,
on a layout of one or more processes (one process is the layout dp=tp=pp=1)."""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import torch

from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.train.bf16_weights import validate_compute_weights
from accelbench.bench.train.compile_scope import validate_compile_scope
from accelbench.bench.train.loss_impl import validate_loss_impl
from accelbench.config.errors import (
    ConfigError,
    require_choice,
    require_count,
    require_finite,
    require_positive,
)
from accelbench.config.layout import Layout
from accelbench.config.layout_parse import RUNTIME_KEYS, parse_layout
from accelbench.config.layout_rules import validate_layout
from accelbench.config.model import ModelConfig
from accelbench.config.precision import Precision, resolve
from accelbench.config.presets import resolve_model
from accelbench.config.presets_genslm import model_from_neox_config
from accelbench.config.records.train import TRAIN_SWEPT
from accelbench.config.runtime_settings import RuntimeSettings, parse_runtime
from accelbench.config.sparsity import validate_sparsity
from accelbench.config.trial_count import require_trials
from accelbench.config.units import MAX_STEPS
from accelbench.config.vocab import FP8_RECIPES, RECOMPUTE_KINDS, TRAIN_DTYPES
from accelbench.hardware.detect import resolve_device
from accelbench.hardware.device import device_count
from accelbench.hardware.disturbance import OTHER_CPU_THRESHOLD, check_threshold
from accelbench.models.convert_hf import model_config_from_hf
from accelbench.models.float8 import torchao_float8

BENCHMARKS = ("train", "genslm")  # what the cells are reported as; genslm counts codons


@dataclass(frozen=True)
class TrainCell:
    """One point of a training sweep (the values of TRAIN_SWEPT's cell fields)."""

    seq_len: int
    micro_batch: int
    gas: int
    dtype: str
    recompute: str
    sparsity: float = 0.0  # fraction of zeros in the blocks' matrices (models/weight_masks.py)

    @property
    def label(self) -> str:
        """Short text for progress lines."""
        sparse = f" sparsity {self.sparsity:g}" if self.sparsity else ""
        return (f"seq {self.seq_len} mb {self.micro_batch} gas {self.gas} {self.dtype} "
                f"recompute {self.recompute}{sparse}")


@dataclass(frozen=True)
class TrainSpec:
    """A training sweep; every TRAIN_SWEPT list field is swept, the rest are shared by all cells."""

    model: ModelConfig
    data: str = "synthetic"  # synthetic, default, or a shard folder
    tokenizer: str = "gpt2"  # what the shards were made with (codon for genomes)
    benchmark: str = "train"  # train or genslm: the name and token unit of the records
    seq_lens: tuple[int, ...] = (1024,)
    micro_batches: tuple[int, ...] = (8,)
    gas: tuple[int, ...] = (1,)
    dtypes: tuple[str, ...] = ("bf16",)
    fp8_recipe: str | None = None  # torchao's float8 scaling recipe of the fp8 cells
    loss_impl: str = "torch"  # torch, or chunked (models/chunked_loss.py)
    compute_weights: str = "fp32"  # bf16: kept between steps (bench/train/bf16_weights.py)
    compile_scope: str = "blocks"  # model: --compile compiles the whole model (compile_scope.py)
    recomputes: tuple[str, ...] = ("none",)
    sparsities: tuple[float, ...] = (0.0,)  # weight sparsity levels of the blocks' matrices
    sparsity_pattern: str = "unstructured"  # or 2:4 (level 0.5)
    sparsity_mask: str = "magnitude"  # magnitude at initialisation, or random (spec.seed)
    steps: int = 20
    tokens: int | None = None  # a token budget per cell: steps = ceil(tokens / tokens per step)
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
    verify_fit: bool = False  # run the first estimate-refused cell of each series (sweep.py)
    init_checkpoint: str | None = None  # a Hugging Face GPT-2 folder whose weights start the run
    layout: str = ""  # dp=..,tp=..,pp=..,zero=.. (empty: data parallel over every process)
    runtime: str = ""  # lean data-parallel settings turned off, e.g. ddp_views=off (issue 37)
    nproc: int = 1  # processes to launch with torchrun (1: this process, or the launcher's)
    cell_timeout_s: float = 3600.0  # a launched cell that runs longer is killed and recorded
    # a launched cell whose ranks all stop progressing this long is killed and recorded as a
    # timeout naming the stopped rank; also the process group's collective timeout
    hang_timeout_s: float = 300.0
    peaks: tuple[SweepPeak, ...] = ()  # decided once per sweep, handed to launched ranks
    # independent trials of every cell, interleaved (bench/trials.py); None: auto, decided
    # per device when the sweep runs (a launched cell, scale and --longest-seq run one)
    trials: int | None = None
    disturbance_threshold: float = OTHER_CPU_THRESHOLD  # others' CPU share that flags a window

    @property
    def token_unit(self) -> str:
        """What one token is: a codon for GenSLM, a BPE token otherwise."""
        return "codon" if self.benchmark == "genslm" else "token"

    def cells(self) -> list[TrainCell]:
        """The sweep's cells in a stable order (TRAIN_SWEPT's order, outermost first)."""
        names = list(TRAIN_SWEPT)
        return [TrainCell(**{TRAIN_SWEPT[n]: v for n, v in zip(names, values, strict=True)})
                for values in itertools.product(*(getattr(self, n) for n in names))]

    @property
    def runtime_settings(self) -> RuntimeSettings:
        """The data-parallel settings of every cell (config/runtime_settings.py)."""
        return parse_runtime(self.runtime)

    def precision(self, cell: TrainCell, device_type: str | None = None) -> Precision:
        """A cell's precision (compute dtype, peak column, fp8 recipe), resolved in one place
        from its dtype and the sweep's tf32 and fp8 recipe; `device_type` decides TF32."""
        return resolve(cell.dtype, self.tf32, device_type, self.fp8_recipe)

    def layout_for(self, world_size: int) -> Layout:
        """The --layout (runtime keys only), or data parallel over every process."""
        return parse_layout(self.layout, RUNTIME_KEYS) if self.layout else Layout(dp=world_size)

    def to_dict(self) -> dict:
        """Plain dict with the model expanded."""
        data = asdict(self)
        data["model"] = self.model.to_dict()
        return data


def cell_steps(spec: TrainSpec, cell: TrainCell, dp: int) -> int:
    """Steps of one cell: --steps, or with a --tokens budget ceil(tokens / tokens per step),
    so that every cell of a sweep (each sparsity level) trains on the same tokens."""
    if spec.tokens is None:
        return spec.steps
    return math.ceil(spec.tokens / (cell.seq_len * cell.micro_batch * cell.gas * dp))


def spec_for_cell(spec: TrainSpec, cell: TrainCell, dp: int) -> TrainSpec:
    """The spec with the cell's own number of steps (only a --tokens budget changes it)."""
    return spec if spec.tokens is None else replace(spec, steps=cell_steps(spec, cell, dp))


def spec_from_dict(data: dict) -> TrainSpec:
    """Rebuild a TrainSpec from to_dict() output (how a launched worker receives its cell)."""
    values = dict(data)
    values["model"] = ModelConfig(**values["model"])
    for key in TRAIN_SWEPT:
        values[key] = tuple(values[key])
    values["peaks"] = tuple(SweepPeak(**p) for p in values.get("peaks", ()))
    known = {f.name for f in fields(TrainSpec)}
    return TrainSpec(**{k: v for k, v in values.items() if k in known})


SEED_MAX = 2**63 - 1  # torch.manual_seed takes a signed 64-bit integer; seed + rank must fit


def _check_sweep_lists(spec: TrainSpec) -> None:
    """Swept values: positive sizes, known names, sequences the model can position."""
    for key, name in TRAIN_SWEPT.items():
        values = getattr(spec, key)
        if not values:
            raise ConfigError(name.replace("_", "-"), "needs at least one value")
        if len(set(values)) != len(values):  # the same cell twice (a TrainSpec built in Python)
            twice = next(v for v in values if values.count(v) > 1)
            raise ConfigError(name.replace("_", "-"), f"{twice} given twice", "each value once")
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
        require_choice("dtype", dtype, TRAIN_DTYPES)
    for rc in spec.recomputes:
        require_choice("recompute", rc, RECOMPUTE_KINDS)
    validate_sparsity(spec.sparsities, spec.sparsity_pattern, spec.sparsity_mask,
                      spec.model.d_model)
    if any(spec.sparsities) and spec.model.is_moe:
        raise ConfigError("sparsity", f"weight sparsity of a mixture of experts is not built "
                          f"({spec.model.name}'s experts would stay dense)",
                          "--sparsity 0 with an MoE model")


def _check_fp8(spec: TrainSpec) -> None:
    """An fp8 sweep: a known recipe, torchao importable, no weight sparsity; a recipe only
    with fp8 cells to use it."""
    if spec.fp8_recipe is not None:
        require_choice("fp8-recipe", spec.fp8_recipe, FP8_RECIPES)
        if "fp8" not in spec.dtypes:
            raise ConfigError("fp8-recipe", f"{spec.fp8_recipe!r} given without fp8 in --dtype",
                              "only with --dtype fp8")
    if "fp8" not in spec.dtypes:
        return
    if any(spec.sparsities):
        raise ConfigError("dtype", "fp8 with --sparsity: masked weights in float8 GEMMs are "
                          "not built (neither the sparse nor the FP8 speed would be measured)",
                          "fp8 with --sparsity 0, or sparsity with fp32, fp16, bf16")
    if spec.model.is_moe:
        raise ConfigError("dtype", f"fp8 with a mixture of experts: {spec.model.name}'s experts "
                          "are not converted to float8 (their GEMMs would run in bf16)",
                          "fp32, fp16 or bf16 with an MoE model")
    torchao_float8()  # one line and exit 2 where torchao is missing


def _check_step_options(spec: TrainSpec) -> None:
    """--loss-impl and --compute-weights against the sweep's layout, dtypes and processes."""
    layout = parse_layout(spec.layout, RUNTIME_KEYS) if spec.layout else None
    validate_loss_impl(spec.loss_impl, layout)
    validate_compute_weights(spec.compute_weights, spec.dtypes, spec.sparsities, layout,
                             spec.nproc)
    validate_compile_scope(spec.compile_scope, spec.compile, layout, spec.nproc)


def validate_train_spec(spec: TrainSpec) -> TrainSpec:
    """Raise ConfigError on the first bad field, before anything runs."""
    _check_sweep_lists(spec)
    _check_fp8(spec)
    _check_step_options(spec)
    parse_runtime(spec.runtime)  # one line naming the setting and its values
    require_choice("benchmark", spec.benchmark, BENCHMARKS)
    require_positive("steps", spec.steps)
    require_count("steps", spec.steps, MAX_STEPS)
    if not 0 <= spec.warmup_steps < spec.steps:
        raise ConfigError("warmup-steps", f"must be in [0, steps), got {spec.warmup_steps}",
                          f"0 to {spec.steps - 1}")
    if spec.compile and spec.warmup_steps < 1:  # else compilation lands in a timed step
        raise ConfigError("warmup-steps", "--compile needs at least 1 warm-up step", ">= 1")
    for name, value in (("lr", spec.lr), ("weight-decay", spec.weight_decay),
                        ("grad-clip", spec.grad_clip), ("cell-timeout", spec.cell_timeout_s),
                        ("hang-timeout", spec.hang_timeout_s)):
        require_finite(name, value)
    if spec.compile and spec.layout and parse_layout(spec.layout, RUNTIME_KEYS).sp:
        raise ConfigError("compile", "sequence-parallel blocks do not compile here (torch "
                          "2.13: DTensor's sharding of a sequence-sharded layer norm fails "
                          "under Dynamo; tests/dist/test_compile_dist.py)",
                          "--compile without sp=1, or sp=1 without --compile")
    require_positive("lr", spec.lr)
    for name, value in (("lr-warmup-steps", spec.lr_warmup_steps),
                        ("weight-decay", spec.weight_decay), ("grad-clip", spec.grad_clip)):
        if value < 0:
            raise ConfigError(name, f"must be 0 or more, got {value}", ">= 0 (0: off)")
    if spec.time_budget_s is not None:
        require_positive("time-budget", spec.time_budget_s)
    if spec.tokens is not None:
        require_positive("tokens", spec.tokens)
    if spec.mem_limit_bytes is not None:
        require_positive("mem-limit", spec.mem_limit_bytes)
    if not 0 <= spec.seed <= SEED_MAX:
        raise ConfigError("seed", f"must be in [0, 2**63 - 1], got {spec.seed}",
                          f"0 to {SEED_MAX}")
    require_positive("cell-timeout", spec.cell_timeout_s)
    require_positive("hang-timeout", spec.hang_timeout_s)
    require_positive("nproc", spec.nproc)
    if spec.trials is not None:
        require_trials(spec.trials)
    check_threshold("disturbance-threshold", spec.disturbance_threshold)
    _check_ranks(spec, resolve_device(spec.device))  # before a results file is made
    return spec


CPU_RANKS_PER_CORE = 4  # gloo ranks beyond this many a core only queue for the cores


def _check_ranks(spec: TrainSpec, device: torch.device) -> None:
    """--nproc ranks this machine can hold: one accelerator each (a rank takes the device of
    its local rank), a few a core on the CPU."""
    if spec.nproc == 1:
        return
    if device.type == "cpu":
        cores = os.cpu_count() or 1
        if spec.nproc > CPU_RANKS_PER_CORE * cores:
            raise ConfigError("nproc", f"{spec.nproc} CPU ranks on {cores} cores",
                              f"1 to {CPU_RANKS_PER_CORE * cores} "
                              f"({CPU_RANKS_PER_CORE} a core at most)")
        return
    count = device_count(device.type)
    if spec.nproc > count:
        raise ConfigError("nproc", f"{spec.nproc} ranks need {spec.nproc} {device.type} "
                          f"devices, this machine has {count}", f"1 to {count}")


def resolve_model_source(text: str) -> tuple[ModelConfig, str | None]:
    """A --model value: a preset spec, 'hf:DIR' (a Hugging Face save_pretrained folder of a
    supported model_type, weights too), 'hf-config:FILE' (its config.json: the shape only,
    random weights) or 'neox:FILE' (a GPT-NeoX config.json such as GenSLM's; the shape only)."""
    if text.startswith("neox:"):
        path = Path(text[5:]).expanduser()
        if not path.is_file():
            raise ConfigError("model", f"no GPT-NeoX config file at {str(path)!r}",
                              "neox:PATH to a GPTNeoXConfig JSON file")
        return model_from_neox_config(path), None
    if text.startswith("hf:"):
        path = text[3:]
        return model_config_from_hf(path), path
    if text.startswith("hf-config:"):
        path = Path(text[10:]).expanduser()
        if not path.is_file():
            raise ConfigError("model", f"no config file at {str(path)!r}",
                              "hf-config:PATH to a Hugging Face config.json")
        return model_config_from_hf(path), None
    return resolve_model(text), None


def cell_layout(spec: TrainSpec, world_size: int, gas: int) -> Layout:
    """The layout a cell runs on (the --layout, or data parallel over the world), checked
    against the model, the world and the micro-batches, with what the runtime cannot honour
    on several processes refused (ConfigError, before anything runs)."""
    layout = validate_layout(spec.layout_for(world_size), spec.model, world_size, gas)
    for seq in spec.seq_lens:  # rules on the sequence: cp's chunks, sp's shards
        validate_layout(layout, spec.model, world_size, gas, seq)
    if world_size > 1 and spec.verify_fit:
        raise ConfigError("verify-fit", "a refused cell is run to confirm it in one process "
                          "only, not with --nproc or under torchrun/srun", "off")
    if world_size > 1 and spec.max_micro_batch:
        raise ConfigError("max-micro-batch", "the largest-micro-batch search runs on one "
                          "process only, not with --nproc or under torchrun/srun",
                          "off; give --micro-batch values")
    if "fp16" in spec.dtypes and (layout.tp > 1 or layout.pp > 1):
        raise ConfigError("dtype", f"fp16 on layout {layout.label()}: its loss scaling is built "
                          "for data-parallel layouts only (the overflow check must agree on "
                          "every rank)", "fp32 or bf16 with tp/pp; fp16 with dp and zero 0-3")
    if "fp8" in spec.dtypes and (layout.tp > 1 or layout.pp > 1):
        raise ConfigError("dtype", f"fp8 on layout {layout.label()}: float8 layers are built "
                          "for data-parallel layouts only (torchao's float8 tensor-parallel "
                          "styles are not wired into this runtime)",
                          "fp32, fp16 or bf16 with tp/pp; fp8 with dp and zero 0-3")
    return layout
