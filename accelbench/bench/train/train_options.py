"""The one option set of every command that trains (train, genslm, scale, noise): declared once
as a dataclass whose fields are the command-line options (name, default, help), and turned into a
validated TrainSpec here, in the library, so the commands only parse and render (genslm's and
scale's own options extend it in their workload folders)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from accelbench.config.errors import ConfigError
from accelbench.config.option_fields import option as _opt
from accelbench.config.sparsity import parse_sparsity_list
from accelbench.config.trial_count import parse_trials
from accelbench.config.units import parse_bytes, parse_choice_list, parse_int_list
from accelbench.config.vocab import FP8_RECIPES, RECOMPUTE_KINDS, TRAIN_DTYPES

if TYPE_CHECKING:  # the spec and the sweep import torch: not needed to list the options
    from accelbench.bench.train.spec import TrainSpec


@dataclass(frozen=True)
class TrainOptions:
    """What a user types; every field is an option of train, genslm and scale."""

    model: str = _opt("gpt2-xl", "Preset, preset:overrides, custom:layers=..., hf:DIR (a Hugging "
                      "Face checkpoint folder: gpt2, gpt_neox, llama, mistral, qwen2), "
                      "hf-config:FILE (its config.json, random weights) or neox:FILE (a "
                      "GPT-NeoX config.json).")
    data: str = _opt("synthetic", "synthetic, default (built-in corpus) or PATH (token shards).")
    seq: str = _opt("1024", "Sequence length(s), comma-separated.")
    micro_batch: str = _opt("8", "Micro-batch size(s), comma-separated.")
    gas: str = _opt("1", "Gradient accumulation steps, comma-separated.")
    dtype: str = _opt("bf16", "fp32, fp16 (loss scaling), bf16, fp8 (bf16 with the blocks' "
                      "linear layers in float8, torchao; emulated where the device has no "
                      "float8 units); comma-separated.")
    fp8_recipe: str = _opt("", f"Float8 scaling of the fp8 cells: {', '.join(FP8_RECIPES)} "
                           f"(default {FP8_RECIPES[0]}).")
    recompute: str = _opt("none", "none, selective, full; comma-separated.")
    loss_impl: str = _opt("torch", "The loss: torch (the head's logits, then cross-entropy in "
                          "fp32) or chunked (head and loss a chunk of tokens at a time, no "
                          "whole logits; docs/train.md).")
    compute_weights: str = _opt("fp32", "Weights a bf16 step computes with: fp32 (cast by "
                                "autocast at each use) or bf16 (kept between steps, fp32 "
                                "masters in the optimizer; one process; docs/train.md).")
    runtime: str = _opt("", "Lean data-parallel settings to turn off, or FSDP2's reduction "
                        "dtype: ddp_views=off, zero_views=off, fsdp_mp=off, reduce=bf16; "
                        "comma-separated (docs/parallel.md).")
    sparsity: str = _opt("0", "Weight sparsity of the blocks' matrices, levels in [0, 1), "
                         "comma-separated, e.g. 0,0.6,0.8,0.9 (docs/sparsity.md).")
    sparsity_pattern: str = _opt("unstructured", "unstructured, or 2:4 (level 0.5 only).")
    sparsity_mask: str = _opt("magnitude", "magnitude (largest weights at initialisation) or "
                              "random (seeded by --seed).")
    steps: int = _opt(20, "Optimizer steps per cell.")
    tokens: str = _opt("", "Token budget per cell, e.g. 2M: steps = ceil(tokens / tokens per "
                       "step), overriding --steps (levels of a --sparsity sweep compare fairly).")
    warmup_steps: int = _opt(5, "Steps run but not timed into the summary.")
    time_budget: float | None = _opt(None, "Seconds per cell before stopping early.")
    max_micro_batch: bool = _opt(False, "Find and run the largest micro-batch that fits.",
                                 "--max-micro-batch")
    verify_fit: bool = _opt(False, "Run the first cell of each series (dtype, recompute, "
                            "micro-batch, GAS, sparsity) that the memory estimate refuses, to "
                            "confirm it does not fit (one process; on a CPU only while the "
                            "estimate is under the host's available memory).", "--verify-fit")
    lr: float = _opt(3e-4, "Peak learning rate (warm-up then cosine).")
    lr_warmup_steps: int = _opt(10, "Steps of linear learning-rate warm-up before the cosine "
                                "decay (to 10% of --lr at the last step).")
    weight_decay: float = _opt(0.1, "AdamW weight decay.")
    grad_clip: float = _opt(1.0, "Gradient clipping norm (0: off).")
    compile: bool = _opt(False, "torch.compile the model's blocks.", "--compile/--no-compile")
    compile_scope: str = _opt("blocks", "What --compile compiles: blocks (each block) or model "
                              "(the whole model as one graph, as torchao advises for fp8; one "
                              "process; docs/train.md).")
    tf32: bool = _opt(False, "Allow TF32 for fp32 matmuls.", "--tf32/--no-tf32")
    device: str = _opt("auto", "auto, cpu, cuda, cuda:N, xpu, mps.")
    seed: int = _opt(0, "Seed for weights and data order (and for the order of the cells "
                     "within each round of trials).")
    trials: str = _opt("auto", "Independent trials per cell (each builds the model anew from "
                       "--seed and runs its own warm-up and timed steps), interleaved across "
                       "the cells: the figure is their median, with a 95% interval from 6 "
                       "trials; auto: 6 on an accelerator, 3 on a CPU. A launched cell "
                       "(--nproc, scale's counts) launches each trial anew; under "
                       "torchrun/srun: one.")
    disturbance_threshold: float = _opt(0.10, "Share of the CPU capacity other processes may "
                                        "use in a timed window before the cell is flagged "
                                        "disturbed, in (0, 1].")
    mem_limit: str = _opt("", "Refuse cells estimated above this a device (a rank), e.g. 8GiB.")
    nproc: int | None = _opt(None, "Processes to start with torchrun (gloo on CPU, NCCL on "
                             "GPUs); default: the ranks --layout asks for (dp x tp x pp x cp, "
                             "dp 1 unless given), else 1; under torchrun or srun the "
                             "launcher's processes are used.")
    layout: str = _opt("", "dp=..,tp=..,pp=..,vp=..,zero=0-3,sp=0|1,schedule=gpipe|1f1b|"
                       "interleaved_1f1b (default: data parallel over all processes).")
    cell_timeout: float = _opt(3600.0, "Seconds before a launched cell is killed.")
    hang_timeout: float = _opt(300.0, "Seconds without progress on every rank (no heartbeat, no "
                               "CPU use) before a launched cell is killed as hung; also the "
                               "collective timeout of the process group.")


def with_defaults(**defaults: Any) -> TrainOptions:
    """The options with a command's own defaults (genslm: its model, data and sequence)."""
    return replace(TrainOptions(), **defaults)


def parse_tokens(text: str) -> int | None:
    """'' -> None; '2M' -> 2_000_000 (k, M, G/B suffixes); ConfigError otherwise."""
    text = text.strip()
    if not text:
        return None
    scale = {"k": 10**3, "m": 10**6, "g": 10**9, "b": 10**9}.get(text[-1].lower(), 1)
    number = text[:-1] if scale > 1 else text
    try:
        value = float(number) * scale
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value >= 1 and value == int(value)):
        raise ConfigError("tokens", f"{text!r} is not a whole number of tokens",
                          "a positive count, e.g. 500000 or 2M")
    return int(value)


def _fp8_recipe(options: TrainOptions) -> str | None:
    """The recipe as given, tensorwise for fp8 cells when none is, None without fp8 cells."""
    if options.fp8_recipe:
        return options.fp8_recipe.strip()
    fp8 = "fp8" in (d.strip() for d in options.dtype.split(","))
    return FP8_RECIPES[0] if fp8 else None


def resolve_nproc(nproc: int | None, layout: str) -> int:
    """--nproc as given, else the ranks the --layout asks for (dp x tp x pp x cp, dp 1 unless
    given: a study sweeps layouts without a matching nproc), else 1; under torchrun or srun
    the launcher's processes (1: the group this process is in)."""
    from accelbench.bench.train.launch import in_process_group
    from accelbench.config.layout_parse import RUNTIME_KEYS, parse_layout

    if nproc is not None:
        return nproc
    if not layout.strip() or in_process_group():
        return 1
    return parse_layout(layout, RUNTIME_KEYS).world_size


def build_spec(options: TrainOptions, benchmark: str = "train",
               tokenizer: str = "gpt2") -> TrainSpec:
    """Command-line values to a checked TrainSpec: fields, data and layouts (ConfigError on the
    first bad one, before a banner is printed or a results file is made)."""
    from accelbench.bench.train.spec import TrainSpec, resolve_model_source
    from accelbench.bench.train.sweep import check_sweep

    model_cfg, checkpoint = resolve_model_source(options.model)
    spec = TrainSpec(
        model=model_cfg, init_checkpoint=checkpoint, data=options.data, tokenizer=tokenizer,
        benchmark=benchmark, seq_lens=parse_int_list("seq", options.seq),
        micro_batches=parse_int_list("micro-batch", options.micro_batch),
        gas=parse_int_list("gas", options.gas),
        dtypes=parse_choice_list("dtype", options.dtype, TRAIN_DTYPES),
        fp8_recipe=_fp8_recipe(options), loss_impl=options.loss_impl,
        compute_weights=options.compute_weights, compile_scope=options.compile_scope,
        recomputes=parse_choice_list("recompute", options.recompute, RECOMPUTE_KINDS),
        sparsities=parse_sparsity_list(options.sparsity),
        sparsity_pattern=options.sparsity_pattern, sparsity_mask=options.sparsity_mask,
        steps=options.steps, tokens=parse_tokens(options.tokens), warmup_steps=options.warmup_steps,
        time_budget_s=options.time_budget, lr=options.lr, weight_decay=options.weight_decay,
        grad_clip=options.grad_clip, compile=options.compile, tf32=options.tf32,
        device=options.device, seed=options.seed,
        mem_limit_bytes=(parse_bytes("mem-limit", options.mem_limit) if options.mem_limit
                         else None),
        max_micro_batch=options.max_micro_batch, verify_fit=options.verify_fit,
        nproc=resolve_nproc(options.nproc, options.layout), layout=options.layout,
        runtime=options.runtime,
        cell_timeout_s=options.cell_timeout, lr_warmup_steps=options.lr_warmup_steps,
        hang_timeout_s=options.hang_timeout, trials=parse_trials(options.trials),
        disturbance_threshold=options.disturbance_threshold)
    return check_sweep(spec)
