"""The shipped csvs read into the published runs: training_runs.csv (fitted) and moe_runs.csv.

The 49 rows of accelbench/assets/published/training_runs.csv (its README.md gives every source
and tag) with their real shapes and layouts are the only runs anything is fitted to
(PUBLISHED_RUNS); the mixture-of-experts runs of moe_runs.csv are checked only (MOE_RUNS); no
torch.

Only figures tagged V (read in the source) or D (derived from it) serve as oracles. Set-up fields
a source does not state (a micro-batch, a schedule) are filled with the stated assumption and
the run is tagged setup U: its error says as much about that guess as about the planner. A row
the planner cannot describe (mixture of experts, a precision or device it lacks, a layout that
does not divide, a recompute pattern it does not model) is kept as an UnmodelledRun with the
reason, never scored through a stand-in. The one labelled stand-in is PaLM's shape: its 48
heads of 256 are narrower than d_model 18432, which ModelConfig cannot express; the stand-in
keeps PaLM's FLOPs exactly and says so in its notes.
"""

from __future__ import annotations

import csv
import re
from importlib import resources

from accelbench.analytics.published_run import PublishedRun, UnmodelledRun
from accelbench.analytics.validation_shapes import SHAPES, validated_shape
from accelbench.config.errors import ConfigError
from accelbench.config.layout import Layout, default_schedule
from accelbench.config.layout_rules import ARITHMETIC, Target, first_broken
from accelbench.config.model import ModelConfig
from accelbench.config.presets import get_preset
from accelbench.config.records.train import ORACLE_KINDS, TrainFigure
from accelbench.hardware.specs import DeviceSpec, get_spec

SOURCE_FRAMEWORK = {"S1": "Megatron-LM", "S2": "Megatron-LM", "S5": "Megatron-LM",
                    "S6": "Megatron-DeepSpeed", "S8": "PaLM (JAX/XLA on TPU)",
                    "S10": "Meta Llama 3 (Megatron-style)", "S13": "PyTorch FSDP",
                    "S14": "llm-foundry (Composer FSDP)"}


# --- The csv: one PublishedRun per row, or an UnmodelledRun with the reason ---

CSV_SOURCES = {
    "S1": "Narayanan et al. SC21 (arXiv 2104.04473) Table 1",
    "S2": "Korthikanti et al. 2022 (arXiv 2205.05198) Tables 3-5, abstract",
    "S5": "Zhang et al. 2022, OPT (arXiv 2205.01068) sec. 2.4",
    "S6": "BigScience BLOOM-176B tr11 training log",
    "S8": "Chowdhery et al. 2022, PaLM (arXiv 2204.02311)",
    "S10": "Dubey et al. 2024, Llama 3 (arXiv 2407.21783) Table 4",
    "S13": "IBM/PyTorch FSDP blog 2024 (Llama-2 shapes)",
    "S14": "MosaicML llm-foundry benchmarks (MPT)",
}
# Sources whose attention never stored the s x s scores (FlashAttention or SDPA).
_FUSED_SOURCES = ("S10", "S13", "S14")
_DEVICES = (("A100 40GB", "a100-40gb"), ("A100", "a100-80gb"), ("H100", "h100-sxm"),
            ("TPU v4", "tpu-v4"))


# a layout field the tags column marks unverified: the run's set-up is tagged U
_LAYOUT_U = r"U:[^;]*\b(TP|VP|mbs|GBS|recompute|sharding|architecture)"


class _NotModelled(Exception):
    """A csv row the planner cannot describe; the message is the reason."""


N_DEVICES_COLUMN = TrainFigure.N_DEVICES  # the csvs' device count, named as the record's


def _oracle_kind(row: dict[str, str]) -> TrainFigure:
    """A moe_runs.csv row's oracle kind, one of ORACLE_KINDS."""
    kind = row["oracle_kind"].strip()
    if kind not in ORACLE_KINDS:
        raise ConfigError("oracle_kind", f"{kind!r} in moe_runs.csv row {row['id']}",
                          ", ".join(ORACLE_KINDS))
    return TrainFigure(kind)


def _int(row: dict[str, str], key: str, default: int | None = None) -> int:
    """A whole-number cell; an empty one takes `default` (or the row is not modelled)."""
    text = row[key].strip()
    match = re.match(r"\d+", text)
    if match:
        return int(match.group())
    if default is None:
        raise _NotModelled(f"{key} not given")
    return default


def _device(row: dict[str, str]) -> DeviceSpec:
    """The device table row of the csv's hardware column."""
    for prefix, key in _DEVICES:
        if row["hardware"].startswith(prefix):
            return get_spec(key)
    raise _NotModelled(f"device {row['hardware']!r} is not in the device table")


def _model(row: dict[str, str]) -> tuple[ModelConfig, str]:
    """The row's real shape (Llama-style when its MLP is SwiGLU), and a note on it."""
    if row["source"] == "S8":
        return SHAPES["palm-540b"], "stand-in shape: PaLM's attention width differs from d_model"
    h, ffn = _int(row, "hidden"), row["ffn"]
    llama = "SwiGLU" in ffn or "Llama" in row["model"]
    d_ff = 0 if ffn.startswith("4h") and not llama else _int(row, "ffn")
    seq = _int(row, "seq_len")
    cfg = validated_shape(row["id"], _int(row, "layers"), _int(row, "heads"), h,
                          _int(row, "vocab"), seq, d_ff, llama,
                          _int(row, "kv_heads") if llama else 0)
    return cfg, ""


def _recompute(row: dict[str, str]) -> tuple[str, str]:
    """The planner's recompute kind of the row, and a note when assumed."""
    text = row["recompute"].lower()
    if "every n" in text:
        raise _NotModelled("checkpointing every n-th block (n not given) is not modelled")
    if text.startswith("selective"):
        return "selective", ""
    if text.startswith(("full", "remat")):
        return "full", ""
    if text.startswith("none"):
        return "none", ""
    return "none", "recompute not given: none assumed"


def _zero(row: dict[str, str]) -> int:
    """ZeRO stage of the sharding column: FSDP full shard 3, grads+optimizer 2, ZeRO-1 1."""
    text = row["sharding"]
    if "ZeRO-1" in text:
        return 1
    if "opt.+grads" in text:
        return 2
    return 3 if "FSDP" in text else 0


def _layout(row: dict[str, str], n_layer: int, notes: list[str]) -> Layout:
    """The row's layout; unstated micro-batch, schedule and stage split are assumed (notes)."""
    if _int(row, "EP", 1) > 1:
        raise _NotModelled("expert parallelism (mixture of experts) is not modelled")
    tp, pp, dp, cp = (_int(row, k, 1) for k in ("TP", "PP", "DP", "CP"))
    batch = _int(row, "global_batch_seqs")
    if batch % dp:
        raise _NotModelled(f"global batch {batch} does not divide over dp={dp}")
    if not row["micro_batch"].strip():
        notes.append("micro-batch not given: one micro-batch per rank assumed" if pp == 1
                     else "micro-batch not given: 1 assumed")
    mb = _int(row, "micro_batch", batch // dp if pp == 1 else 1)
    vp = _int(row, "VP", 1) if row["VP"].strip().isdigit() else 1
    first = last = 0
    if pp > 1 and n_layer % (pp * vp):
        first = last = (n_layer - (n_layer // pp + 1) * (pp - 2)) // 2
        notes.append(f"uneven stages {first} + {pp - 2} x {n_layer // pp + 1} + {last} "
                     "(one layer fewer on the first and last)"
                     + (f" in {vp} chunks per rank" if vp > 1 else ", vp=1 assumed"))
    elif row["VP"].strip() and not row["VP"].strip().isdigit():
        notes.append("interleaving degree not given: vp=1 assumed")
    sp = row["SP"].strip().lower().startswith(("yes", "u"))
    return Layout(dp=dp, tp=tp, pp=pp, vp=vp, cp=cp, zero=_zero(row), sp=sp and tp > 1,
                  pp_schedule=default_schedule(vp), mb=mb, recompute=_recompute(row)[0],
                  pp_first=first, pp_last=last)


def _oracle(row: dict[str, str]) -> tuple[str, float, str]:
    """(kind, value, tag) of the row's published figure: its MFU where given, else its
    tokens/s per device; the tag is the one the tags column gives that figure."""
    tags = row["tags"]
    if row["mfu_pct"].strip():
        read = re.search(r"(V\*?):[^;]*MFU", tags)
        return TrainFigure.MFU, float(row["mfu_pct"]) / 100, read.group(1) if read else "D"
    if row["tokens_per_s_per_gpu"].strip():
        return TrainFigure.TOKENS_PER_S_PER_DEVICE, float(row["tokens_per_s_per_gpu"]), "D"
    raise _NotModelled("no MFU or tokens/s published")


def run_from_row(row: dict[str, str], assumed: list[str] | None = None) -> PublishedRun:
    """One csv row as a PublishedRun (raises _NotModelled with the reason); `assumed` notes
    what csv_assumptions filled in."""
    if "fp8" in row["precision"].lower():
        raise _NotModelled("the csv row's FP8 recipe is not stated")
    cfg, shape_note = _model(row)
    notes = list(assumed or []) + ([shape_note] if shape_note else [])
    layout = _layout(row, cfg.n_layer, notes)
    recompute_note = _recompute(row)[1]
    notes += [recompute_note] if recompute_note else []
    kind, value, tag = _oracle(row)
    device = _device(row)
    batch, seq = _int(row, "global_batch_seqs"), _int(row, "seq_len")
    n = _int(row, N_DEVICES_COLUMN)
    target, m = Target(cfg, n, seq, batch), batch // (layout.dp * layout.mb)
    broken = first_broken(layout, target, m, (ARITHMETIC,))
    if broken is not None:
        raise _NotModelled(f"the layout does not divide: {broken.reason(layout, target, m)}")
    setup_u = bool(notes) or bool(re.search(_LAYOUT_U, row["tags"]))
    dtype = "fp16" if row["precision"].startswith("fp16") else "bf16"
    # a TPU "node" is its ICI domain (the pod), not the 4 chips of a host
    per_node = 3072 if device.kind == "tpu" else _int(row, "devices_per_node", 8)
    return PublishedRun(row["model"], cfg, device, _int(row, N_DEVICES_COLUMN),
                        per_node, _int(row, "global_batch_seqs"),
                        _int(row, "seq_len"), layout, kind, value, tag,
                        CSV_SOURCES.get(row["source"], row["source"]),
                        setup_tag="U" if setup_u else "V", notes="; ".join(notes),
                        fused_attention=row["source"] in _FUSED_SOURCES, run_id=row["id"],
                        source_key=row["source"], dtype=dtype,
                        framework=SOURCE_FRAMEWORK.get(row["source"], "Megatron-LM"))


def csv_assumptions(row: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """A row with what its source leaves open filled in, and a note for each assumption.

    Korthikanti's abstract runs (S2-9, S2-10) give no batch: one sequence per pipeline
    (2240) and micro-batch 1 are assumed, as the planner did before the csv. Llama 3 405B
    (S10) names an interleaved schedule without V; its text fixes V (a chunk per layer).
    PaLM's hybrid sharding (256-way FSDP inside a pod, 2-way data parallel over the pods) is
    not a layout the planner models: one pod with half the batch is, and the cross-pod
    gradient exchange is left out.
    """
    if row["id"] in ("S2-9", "S2-10") and not row["global_batch_seqs"].strip():
        return ({**row, "global_batch_seqs": "2240", "micro_batch": "1", "VP": "1"},
                ["global batch 2240 and micro-batch 1 assumed (not given)"])
    if row["source"] == "S10" and not row["VP"].strip().isdigit():
        return ({**row, "VP": str((_int(row, "layers") + 2) // _int(row, "PP"))},
                ["vp derived: with one layer fewer on the first and last ranks 'the first model "
                 "chunk on the first stage has only the embedding', so a chunk holds one "
                 "layer: (126 + 2) / pp 16 = 8"])
    if "pod-level DP" in row["sharding"]:
        pods = 2
        return ({**row, "DP": str(_int(row, "DP") // pods),
                 N_DEVICES_COLUMN: str(_int(row, N_DEVICES_COLUMN) // pods),
                 "global_batch_seqs": str(_int(row, "global_batch_seqs") // pods)},
                ["one of the 2 pods modelled with half the batch: hybrid sharding's cross-pod "
                 "data parallelism is not modelled"])
    return row, []


def load_csv_runs() -> tuple[tuple[PublishedRun, ...], tuple[UnmodelledRun, ...]]:
    """Every row of the packaged csv: scored runs, and the others with their reasons."""
    path = resources.files("accelbench").joinpath("assets", "published", "training_runs.csv")
    runs: list[PublishedRun] = []
    left: list[UnmodelledRun] = []
    with path.open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            try:
                runs.append(run_from_row(*csv_assumptions(row)))
            except (_NotModelled, ConfigError) as why:
                left.append(UnmodelledRun(row["id"], row["model"], row["source"], str(why)))
    return tuple(runs), tuple(left)


CSV_RUNS, NOT_MODELLED = load_csv_runs()
# The runs the built-in curves are fitted to and the intervals' residuals come from: the
# shipped csv's scored rows, nothing else (FOUND_RUNS and MOE_RUNS are validation only).
PUBLISHED_RUNS: tuple[PublishedRun, ...] = CSV_RUNS
# The stacks `plan --stack` may name: those with shipped runs, the only ones fitted.
FITTED_STACKS: tuple[str, ...] = tuple(dict.fromkeys(run.stack for run in PUBLISHED_RUNS))


# --- Mixture-of-experts runs (moe_runs.csv): checked, none fitted ---

_MOE_DEVICES = {"H100 SXM 80GB": "h100-sxm", "B200 180GB": "b200"}
_MOE_FRAMEWORK = {"M5": "NeMo (Megatron-Core)"}  # the NeMo performance summary's runs


def moe_run_from_row(row: dict[str, str]) -> PublishedRun:
    """One moe_runs.csv row as a PublishedRun, or _NotModelled with the row's stated reason
    (a shape ModelConfig cannot express, a device or precision the planner lacks)."""
    if row["not_modelled"].strip():
        raise _NotModelled(row["not_modelled"].strip())
    if row["hardware"] not in _MOE_DEVICES:
        raise _NotModelled(f"device {row['hardware']!r} is not in the device table")
    cfg = get_preset(row["model"])
    tp, pp, vp, ep, cp = (_int(row, k, 1) for k in ("TP", "PP", "VP", "EP", "CP"))
    n, batch = _int(row, N_DEVICES_COLUMN), _int(row, "global_batch_seqs")
    layout = Layout(dp=n // (tp * pp * cp), tp=tp, pp=pp, vp=vp, cp=cp, ep=ep,
                    zero=_int(row, "zero", 0), sp=tp > 1, pp_schedule=default_schedule(vp),
                    mb=_int(row, "micro_batch"), recompute=row["recompute"])
    target, m = Target(cfg, n, _int(row, "seq_len"), batch), batch // (layout.dp * layout.mb)
    broken = first_broken(layout, target, m, (ARITHMETIC,))
    if broken is not None:
        raise _NotModelled(f"the layout does not divide: {broken.reason(layout, target, m)}")
    return PublishedRun(f"{row['model']} {n}x{row['hardware']}", cfg,
                        get_spec(_MOE_DEVICES[row["hardware"]]), n,
                        _int(row, "devices_per_node"), batch, _int(row, "seq_len"), layout,
                        _oracle_kind(row), float(row["oracle_value"]), row["oracle_tag"],
                        row["source"], setup_tag=row["setup_tag"], notes=row["notes"],
                        fused_attention=True, run_id=row["id"], source_key=row["id"][:2],
                        dtype=row["precision"],
                        framework=_MOE_FRAMEWORK.get(row["id"][:2], "Megatron-LM"))


def load_moe_runs() -> tuple[tuple[PublishedRun, ...], tuple[UnmodelledRun, ...]]:
    """Every row of moe_runs.csv: the scored runs (all used to check, none to fit: its
    used_for column says so), and the others with their reasons."""
    path = resources.files("accelbench").joinpath("assets", "published", "moe_runs.csv")
    runs: list[PublishedRun] = []
    left: list[UnmodelledRun] = []
    with path.open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["used_for"] != "check":
                raise ValueError(f"moe_runs.csv row {row['id']}: used_for must be 'check' "
                                 "(nothing in the planner is fitted to MoE runs)")
            try:
                runs.append(moe_run_from_row(row))
            except (_NotModelled, ConfigError) as why:
                left.append(UnmodelledRun(row["id"], row["model"], row["id"][:2], str(why)))
    return tuple(runs), tuple(left)


MOE_RUNS, MOE_NOT_MODELLED = load_moe_runs()
