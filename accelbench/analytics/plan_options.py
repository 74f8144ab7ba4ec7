"""The options of `accelbench plan`, declared once (config/option_fields.py `option`: the command's
options are generated from them), and the guards between them: which options --validate,
--profile and --db take together. No torch; the checks of each input's value are in
plan_input.py (`resolve_plan_input`)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from accelbench.analytics.envelope import HEADROOM
from accelbench.config.errors import ConfigError
from accelbench.config.option_fields import flag_name, option

LAYOUT_HELP = ("Evaluate one layout: dp=..,tp=..,pp=..,vp=..,mb=..,zero=..,recompute=..[,"
               "sp=on|off,cp=..,ep=..,pp_first=..,pp_last=..] (missing fields are searched; sp "
               "defaults to on when tp > 1 in a full layout).")
OVERLAP_HELP = ("What communication hides behind compute: none, megatron (DP behind backward, "
                "TP/PP/EP exposed), megatron-a2a (also the MoE all-to-all behind the paired "
                "micro-batch's compute) or megascale (also TP, PP and the all-to-all behind "
                "compute); docs/planner.md.")


@dataclass(frozen=True)
class PlanOptions:
    """What `accelbench plan` is asked, as given (names, sizes and the --layout text,
    unchecked): the model and cluster planned, how, and how the plan is shown."""

    model: str = option("gpt3-175b", "Preset, preset:overrides, or a planner shape (gpt3-175b, "
                        "megatron-530b, megatron-1t, palm-540b, llama3-8b, llama3-70b).")
    device: str = option("a100-80gb", "Device key from `accelbench hw`, or a variant of one: "
                         "KEY:memory_gb=96,bw_gb_s=2400,peak_scale=0.8 (labelled as derived "
                         "from that datasheet row).")
    nodes: int = option(1, "Number of nodes.")
    gpus_per_node: int | None = option(None, "Devices per node (default: the system's).")
    global_batch: int = option(1536, "Global batch in sequences.")
    seq: int = option(2048, "Sequence length.")
    dtype: str = option("bf16", "Training precision (mixed-precision Adam); fp8: block GEMMs at "
                        "the FP8 peak, the rest BF16, MFU against BF16.")
    optimizer: str = option("adam", "adam or sgd.")
    top: int = option(10, "How many layouts to show.")
    layout: str = option("", LAYOUT_HELP)
    intra_bw: float | None = option(None, "Intra-node GB/s per device per direction.")
    inter_bw: float | None = option(None, "Inter-node GB/s per device per direction.")
    intra_latency_us: float | None = option(None, "Intra-node latency, microseconds.")
    inter_latency_us: float | None = option(None, "Inter-node latency, microseconds.")
    efficiency: float | None = option(None, "Large-GEMM efficiency of the built-in curves "
                                      "(default: fitted per device class).")
    train_tokens: float = option(300e9, "Tokens for the time-to-train column.")
    fused_attention: bool = option(True, "Flash/SDPA attention that never stores the scores "
                                   "(default); off: scores kept (5as/h term).",
                                   "--fused-attention/--no-fused-attention")
    sparsity: float = option(0.0, "Weight sparsity of the block matrices, in [0, 1) "
                             "(docs/sparsity.md): masks in memory; 2:4 also its kernels.")
    sparsity_pattern: str = option("unstructured", "unstructured, or 2:4 (level 0.5 only).")
    overlap: str = option("megatron", OVERLAP_HELP)
    stack: str = option("unknown", "The software stack that will train, where a shipped "
                        "source ran it: megatron-lm, megatron-deepspeed, meta-llama3, "
                        "pytorch-fsdp, llm-foundry, jax-xla; its fitted error narrows the "
                        "interval (docs/planner.md). unknown (default): an unseen stack's "
                        "wider interval.")
    moe_imbalance: float = option(1.0, "Mixture of experts: the busiest expert's routed tokens "
                                  "over the mean, >= 1 (1.0 balanced, as force-balanced "
                                  "benchmarks run; a train record's moe_load_imbalance is a "
                                  "measured one).")
    profile: str | None = option(None, "Time compute (and collectives inside a node) from a "
                                 "measured machine profile: a profile record id of --db, "
                                 "'latest', or a JSON file of `accelbench calibrate --json`.")
    memory_headroom: float = option(HEADROOM, "Fraction of usable memory a layout may use "
                                    "before it is flagged and ranked after those within it, "
                                    "in (0, 1].")
    json_out: bool = option(False, "Print JSON on stdout.", "--json")
    db: Path | None = option(None, "Results store whose training runs --validate uses, and "
                             "where --profile ID|latest is read.")
    validate: bool = option(False, "Compare predictions with published and measured runs.",
                            "--validate")
    wide: bool = option(False, "Every column of the tables, wider than the terminal if need "
                        "be.", "--wide")


# what --validate reads of the options besides itself (--profile has its own line)
VALIDATE_READS = ("efficiency", "profile", "json_out", "db", "validate", "wide")


def check_efficiency(efficiency: float | None) -> float | None:
    """A compute efficiency in (0, 1], or None for the device's default."""
    if efficiency is not None and not 0 < efficiency <= 1:
        raise ConfigError("efficiency", f"must be in (0, 1], got {efficiency}", "(0, 1]")
    return efficiency


def check_compute_source(efficiency: float | None, with_profile: bool) -> None:
    """One source of compute rates: --efficiency (the built-in curves' top) or --profile."""
    if with_profile and efficiency is not None:
        raise ConfigError("efficiency", "--efficiency replaces the built-in curves' top; with "
                          "--profile the measured curves apply", "--profile or --efficiency")


def check_validate(given: PlanOptions) -> None:
    """--validate compares the planner with published and measured runs and reads only
    --efficiency of the plan's options: any other one given with it would be ignored."""
    default = PlanOptions()
    for f in fields(PlanOptions):
        if f.name not in VALIDATE_READS and getattr(given, f.name) != getattr(default, f.name):
            flag = "no-fused-attention" if f.name == "fused_attention" else flag_name(f)
            raise ConfigError("validate", f"--validate does not use --{flag}",
                              "--validate with --efficiency, --db and --json")


def check_plan_options(given: PlanOptions) -> None:
    """The options that go together, before anything is read: --validate with only what it
    reads (and no --profile: it reads every profile of --db itself); a plan reads --db only
    for --profile, and takes --efficiency or --profile, not both."""
    if given.validate:
        check_validate(given)
        if given.profile is not None:
            raise ConfigError("profile", "--validate reads every profile of --db itself",
                              "--validate --db FILE")
        check_efficiency(given.efficiency)
        return
    if given.db is not None and given.profile is None:
        raise ConfigError("db", "a plan reads no results; --db is for --validate or --profile",
                          "--validate --db FILE, --profile ID|latest --db FILE")
    check_compute_source(given.efficiency, given.profile is not None)
