"""Published training runs the planner is validated against, with their sources and shapes.

Only figures tagged V (read in the source) or D (derived from it) serve as oracles. The run
set-ups (layout, batch) are inputs, not oracles; where the source that gave
the oracle does not state them, they are marked `setup_tag="U"` (recalled from the papers, not
verified here) and the error of such a run says as much about that guess as about the model.

Model shapes: these models are not all GPT-2 shaped. ModelConfig cannot express SwiGLU,
grouped/multi-query attention or an attention width different from d_model, so PaLM and Llama
get stand-in shapes that reproduce their FLOPs exactly under accelbench.analytics.flops:
d_model = heads x head_dim (the attention width, so 12*L*H*Q*T matches) and d_ff chosen so
that every block's matmul weights equal the real model's (so 6N matches). Activation memory and
tensor-parallel traffic of the stand-ins use that width, which understates PaLM's (real hidden
18432, stand-in 12288) and ignores SwiGLU/GQA; their memory estimates are therefore rough.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from accelbench.analytics.cluster import make_cluster
from accelbench.analytics.flops import hardware_flops_per_token, model_flops_per_token
from accelbench.analytics.planner import PlanResult, evaluate
from accelbench.analytics.steptime import TrainSetup, compute_efficiency
from accelbench.config.errors import ConfigError
from accelbench.config.layout import Layout, layout_from_fields, parse_layout_fields
from accelbench.config.model import ModelConfig, validate_model
from accelbench.config.presets import resolve_model
from accelbench.config.vocab import GB
from accelbench.hardware.specs import DeviceSpec, get_spec

MEGATRON_VOCAB = 51200  # GPT-2 BPE padded to a multiple of 8 x 128 (Megatron-LM)


def _shape(name: str, layers: int, heads: int, hidden: int, vocab: int, positions: int,
           d_ff: int = 0, llama: bool = False) -> ModelConfig:
    """A validated shape; llama=True: rotary positions and an untied output head."""
    extra = {"position": "rotary", "tie_embeddings": False} if llama else {}
    return validate_model(ModelConfig(name, layers, heads, hidden, vocab, positions, d_ff,
                                      **extra))


SHAPES: dict[str, ModelConfig] = {c.name: c for c in (
    _shape("gpt3-175b", 96, 96, 12288, MEGATRON_VOCAB, 2048),
    _shape("megatron-530b", 105, 128, 20480, MEGATRON_VOCAB, 2048),
    _shape("megatron-1t", 128, 160, 25600, MEGATRON_VOCAB, 2048),
    # PaLM 540B: L=118, 48 heads of 256 (attention width 12288), N = 540.35e9, vocab 256k,
    # shared input/output embedding. d_ff = 160668 gives 6N within 0.001% (divisible by tp=12).
    _shape("palm-540b", 118, 48, 12288, 256000, 2048, d_ff=160668, llama=False),
    # Llama 3 8B / 70B: q,o of h x h, k,v of h x 1024 (8 KV heads), SwiGLU of 3 x h x ffn.
    # d_ff 18432 / 35840 make 4h^2 + 2h*d_ff equal those weights exactly.
    _shape("llama3-8b", 32, 32, 4096, 128256, 8192, d_ff=18432, llama=True),
    _shape("llama3-70b", 80, 64, 8192, 128256, 8192, d_ff=35840, llama=True),
)}

# torchtitan's H100s: 96 GB HBM2e at 500 W; the dense peak is kept at the SXM figure as
# the derived (D) figure does, so predictions for them are optimistic by the power cap.
H100_96GB_500W = replace(get_spec("h100-sxm"), key="h100-96gb-500w", memory_gb=96,
                         memory_bw_gb_per_s=2400, name="NVIDIA H100 96GB HBM2e (500 W)")
# Devices defined here take the link defaults of a table device (torchtitan: NVLink inside the
# host, 400 Gb/s RDMA per GPU between hosts, as its performance.md states).
LINKS_LIKE = {"h100-96gb-500w": "h100-sxm"}


@dataclass(frozen=True)
class PublishedRun:
    """One published training run: set-up, the oracle figure and where each comes from.

    oracle_kind: "mfu" (fraction), "tokens_per_s_per_device", or "tflops_per_device" (hardware
    FLOP/s counting recompute, as Megatron-LM reports; identical to accelbench's hardware FLOPs
    with full recompute: 96*l*h^2*(1 + s/(6h) + V/(16*l*h)) per token).
    fused_attention: the run used flash-style attention (scores never stored); runs before
    FlashAttention (2022) and PaLM's XLA attention stored them.
    """

    name: str
    model: ModelConfig
    device: DeviceSpec
    n_devices: int
    devices_per_node: int
    global_batch: int
    seq_len: int
    layout: Layout
    oracle_kind: str
    oracle_value: float
    oracle_tag: str
    source: str
    setup_tag: str = "V"
    mfu_as_published: float | None = None
    notes: str = ""
    fused_attention: bool = False  # whether the run's attention kernel never stored the scores

    def published_mfu(self) -> float:
        """The oracle as MFU under accelbench's FLOPs formula (so errors compare tokens/s)."""
        if self.oracle_kind == "mfu":
            return self.oracle_value
        tokens = self.published_tokens_per_s_per_device()
        peak = self.device.peak_flops_per_s("bf16") or 0.0
        return tokens * model_flops_per_token(self.model, self.seq_len).total / peak

    def published_tokens_per_s_per_device(self) -> float:
        """Tokens/s per device implied by the oracle."""
        if self.oracle_kind == "tokens_per_s_per_device":
            return self.oracle_value
        if self.oracle_kind == "tflops_per_device":
            hw = hardware_flops_per_token(self.model, self.seq_len, self.layout.recompute)
            return self.oracle_value * 1e12 / hw
        peak = self.device.peak_flops_per_s("bf16") or 0.0
        return self.oracle_value * peak / model_flops_per_token(self.model, self.seq_len).total


_A100 = get_spec("a100-80gb")
_NARAYANAN = "Narayanan et al. SC21 (arXiv 2104.04473)"
_KORTHIKANTI = "Korthikanti et al. 2022 (arXiv 2205.05198)"
_TITAN_OLD = "pytorch/torchtitan docs/performance.md (64 A100 version)"
_TITAN_NEW = "pytorch/torchtitan docs/performance.md (H100 version, Table 1)"

# Sequence parallelism is stated per run: on for the tensor-parallel runs from 2022 on (the
# planner's long-standing assumption, Megatron's usual choice), off for the 2021 ones.
PUBLISHED_RUNS: tuple[PublishedRun, ...] = (
    PublishedRun("Megatron-LM 1T, 3072 A100", SHAPES["megatron-1t"], _A100, 3072, 8, 3072, 2048,
                 Layout(dp=6, tp=8, pp=64, mb=1, recompute="full", sp=False),
                 "tflops_per_device", 163, "V", _NARAYANAN, setup_tag="U",
                 notes="layout and batch from Table 1 (recalled); predates sequence parallelism "
                       "and flash attention"),
    PublishedRun("Megatron-LM GPT-3 175B, 1024 A100", SHAPES["gpt3-175b"], _A100, 1024, 8, 1536,
                 2048, Layout(dp=16, tp=8, pp=8, mb=1, recompute="full", sp=False),
                 "tflops_per_device", 140, "V",
                 "Narayanan et al. SC21 (arXiv 2104.04473) sec. 5.1, via a secondary "
                 "note", setup_tag="U",
                 notes="batch 1536 from sec. 5.1; t=8, p=8 assumed as in Table 1; predates "
                       "sequence parallelism and flash attention"),
    PublishedRun("PaLM 540B, 6144 TPU v4 (one pod modelled)", SHAPES["palm-540b"],
                 get_spec("tpu-v4"), 3072, 3072, 1024, 2048,
                 Layout(dp=256, tp=12, pp=1, mb=4, zero=3, recompute="full", sp=True),
                 "tokens_per_s_per_device", 238.3e3 / 6144, "V",
                 "Chowdhery et al. 2022 (arXiv 2204.02311) Table 3",
                 setup_tag="U", mfu_as_published=0.462,
                 notes="2 pods x (12-way model x 256-way sharded data); one pod with half the "
                       "batch is modelled, the cross-pod gradient exchange is not; attention "
                       "scores assumed stored (XLA on TPU v4 in 2022: no flash attention), which "
                       "with full rematerialisation only sizes the recomputed block's buffer"),
    PublishedRun("MegaScale 175B, 12288 A100", SHAPES["gpt3-175b"], _A100, 12288, 8, 6144, 2048,
                 Layout(dp=192, tp=8, pp=8, mb=1, zero=1, recompute="selective", sp=True), "mfu",
                 0.552, "V", "Jiang et al. 2024 (arXiv 2402.15627) abstract",
                 setup_tag="U", fused_attention=True,
                 notes="MegaScale overlaps TP/PP/DP traffic; the model does not. Its use of "
                       "FlashAttention-2 is recalled from the paper (sec. 3), not verified"),
    PublishedRun("Korthikanti 530B, selective, 2240 A100", SHAPES["megatron-530b"], _A100, 2240,
                 8, 2240, 2048, Layout(dp=8, tp=8, pp=35, mb=1, recompute="selective", sp=True),
                 "mfu", 0.542, "V", _KORTHIKANTI, setup_tag="U"),
    PublishedRun("Korthikanti 530B, full recompute, 2240 A100", SHAPES["megatron-530b"], _A100,
                 2240, 8, 2240, 2048, Layout(dp=8, tp=8, pp=35, mb=1, recompute="full", sp=True),
                 "mfu", 0.421, "V", _KORTHIKANTI, setup_tag="U"),
    PublishedRun("Korthikanti 1T, selective, 512 A100", SHAPES["megatron-1t"], _A100, 512, 8,
                 512, 2048, Layout(dp=1, tp=8, pp=64, mb=1, recompute="selective", sp=True), "mfu",
                 0.563, "V", "Korthikanti et al. 2022 (arXiv 2205.05198), 1T via a secondary "
                 "note", setup_tag="U"),
    PublishedRun("torchtitan Llama 3 8B, 64 A100, selective op", SHAPES["llama3-8b"], _A100, 64,
                 8, 64, 8192, Layout(dp=64, mb=1, zero=3, recompute="selective"),
                 "tokens_per_s_per_device", 2973, "V", _TITAN_OLD, mfu_as_published=0.582,
                 fused_attention=True,
                 notes="torchtitan then counted the input embedding in N (58.2%)"),
    PublishedRun("torchtitan Llama 3 70B, 64 A100, full AC", SHAPES["llama3-70b"], _A100, 64, 8,
                 64, 8192, Layout(dp=64, mb=1, zero=3, recompute="full"),
                 "tokens_per_s_per_device", 331, "V", _TITAN_OLD, mfu_as_published=0.517,
                 fused_attention=True),
    PublishedRun("torchtitan Llama 3.1 8B, 8 H100, FSDP", SHAPES["llama3-8b"], H100_96GB_500W, 8,
                 8, 16, 8192, Layout(dp=8, mb=2, zero=3, recompute="selective"),
                 "tokens_per_s_per_device", 5762, "V", _TITAN_NEW, fused_attention=True,
                 notes="500 W power cap: below the SXM peak used for MFU"),
    PublishedRun("torchtitan Llama 3.1 8B, 128 H100, FSDP", SHAPES["llama3-8b"], H100_96GB_500W,
                 128, 8, 256, 8192, Layout(dp=128, mb=2, zero=3, recompute="selective"),
                 "tokens_per_s_per_device", 5605, "V", _TITAN_NEW, setup_tag="U",
                 fused_attention=True,
                 notes="local batch 2 and selective AC assumed as in Table 1"),
)


def shape(name: str) -> ModelConfig:
    """A validation shape by name (KeyError if absent)."""
    return SHAPES[name]


# --- Validation: predictions against the published runs and against measured runs ---

MEASURED_RUN_KEYS = ("model", "seq_len", "micro_batch", "gas", "dtype", "device_key",
                     "n_devices", "layout", "mfu")


@dataclass(frozen=True)
class ValidationRow:
    """Predicted against observed MFU of one run; error is relative to the observed value."""

    name: str
    device: str
    observed_mfu: float
    predicted_mfu: float
    predicted_tokens_per_s_per_device: float
    memory_gb: float
    fits: bool
    limiter: str
    oracle_tag: str
    setup_tag: str
    source: str = ""
    oracle_kind: str = "mfu"
    oracle_value: float = 0.0
    fused_attention: bool = True

    @property
    def error(self) -> float:
        """(predicted - observed) / observed."""
        return (self.predicted_mfu - self.observed_mfu) / self.observed_mfu

    def to_dict(self) -> dict[str, object]:
        """Plain dict for JSON."""
        return {**self.__dict__, "error": self.error}


def _predict(cfg: ModelConfig, device: DeviceSpec, n_devices: int, devices_per_node: int,
             setup: TrainSetup, layout: Layout, efficiency: float | None) -> PlanResult:
    """The planner's prediction for a run as it was laid out (its own divisibility unchecked:
    published runs used tricks, such as uneven stages, the planner does not enumerate)."""
    nodes = max(1, n_devices // devices_per_node)
    links_of = get_spec(LINKS_LIKE.get(device.key, device.key)) if device.key in LINKS_LIKE \
        else device
    cluster = replace(make_cluster(links_of, nodes, min(devices_per_node, n_devices)),
                      device=device)
    return evaluate(cfg, cluster, setup, layout, efficiency)


def validate_published(efficiency: float | None = None,
                       runs: tuple[PublishedRun, ...] = PUBLISHED_RUNS) -> list[ValidationRow]:
    """Each published run's predicted MFU against its published one (accelbench's formula)."""
    rows = []
    for run in runs:
        setup = TrainSetup(run.global_batch, run.seq_len, "bf16",
                           fused_attention=run.fused_attention)
        result = _predict(run.model, run.device, run.n_devices, run.devices_per_node, setup,
                          run.layout, efficiency)
        rows.append(ValidationRow(
            run.name, run.device.key, run.published_mfu(), result.step.mfu,
            result.step.tokens_per_s / run.n_devices, result.memory.total / GB,
            result.memory.fits, result.limiter, run.oracle_tag, run.setup_tag, run.source,
            run.oracle_kind, run.oracle_value, run.fused_attention))
    return rows


def resolve_shape(name: str) -> ModelConfig:
    """A model by preset name (accelbench.config.presets) or else by validation shape name."""
    try:
        return resolve_model(name)
    except ConfigError:
        if name in SHAPES:
            return SHAPES[name]
        raise


def _measured_layout(run: dict[str, Any]) -> Layout:
    """A measured run's layout: a --layout string, a dict (a record's), or None (pure data
    parallel); fields left out take the runtime's defaults (sp off), as the run did."""
    given = run.get("layout") or {}
    fields = parse_layout_fields(given) if isinstance(given, str) else dict(given)
    tp, pp = int(fields.get("tp", 1)), int(fields.get("pp", 1))
    fields.setdefault("dp", max(1, int(run["n_devices"]) // (tp * pp)))
    fields["mb"] = int(run["micro_batch"])
    return layout_from_fields({k: v for k, v in fields.items()
                               if k in Layout.__dataclass_fields__})


def validate_measured_runs(runs: list[dict[str, Any]],
                           efficiency: float | None = None) -> list[ValidationRow]:
    """Measured runs (dicts with MEASURED_RUN_KEYS; "model" a name or a ModelConfig) against
    the planner's prediction.

    One node is assumed when n_devices fits the device's default node size; accelbench's model
    runs SDPA, so attention is fused.
    """
    rows = []
    for run in runs:
        missing = [k for k in MEASURED_RUN_KEYS if k not in run]
        if missing:
            raise ConfigError("measured run", f"missing keys {missing}", ", ".join(
                MEASURED_RUN_KEYS))
        model = run["model"]  # a name, or the ModelConfig a record carries (exact shape)
        cfg = model if isinstance(model, ModelConfig) else resolve_shape(str(model))
        layout = _measured_layout(run)
        device = get_spec(str(run["device_key"]))
        n = int(run["n_devices"])
        gpn = min(n, make_cluster(device, 1).devices_per_node)
        setup = TrainSetup(layout.dp * layout.mb * int(run["gas"]), int(run["seq_len"]),
                           str(run["dtype"]), fused_attention=True)
        result = _predict(cfg, device, n, gpn, setup, layout, efficiency)
        rows.append(ValidationRow(
            f"{getattr(model, 'name', model)} {n}x{device.key} {layout.label()}", device.key,
            float(run["mfu"]),
            result.step.mfu, result.step.tokens_per_s / n, result.memory.total / GB,
            result.memory.fits, result.limiter, "measured", "V", "accelbench results store",
            "mfu", float(run["mfu"]), True))
    return rows


def _solve_efficiency(predict_mfu: Callable[[float], float], observed_mfu: float,
                      start: float) -> float:
    """The compute efficiency at which a prediction meets the observed MFU (fixed point;
    MFU is close to proportional to efficiency, so a few steps converge)."""
    eff = start
    for _ in range(6):
        eff = min(1.0, eff * observed_mfu / predict_mfu(eff))
    return eff


def needed_efficiency(run: PublishedRun) -> float:
    """The efficiency that would make the planner reproduce this published run exactly."""
    return _solve_efficiency(lambda e: validate_published(e, (run,))[0].predicted_mfu,
                             run.published_mfu(), compute_efficiency(run.device))


def validate_leave_one_out(runs: tuple[PublishedRun, ...] = PUBLISHED_RUNS
                           ) -> list[ValidationRow]:
    """Each run predicted with the median efficiency needed by all the *other* runs: the
    out-of-sample check of the single calibrated default."""
    needed = [needed_efficiency(run) for run in runs]
    rows = []
    for i, run in enumerate(runs):
        eff = statistics.median(needed[:i] + needed[i + 1:])
        rows.append(validate_published(eff, (run,))[0])
    return rows


def calibrate_efficiency(runs: list[dict[str, Any]]) -> dict[str, float]:
    """One compute efficiency per device key from measured runs: the median over its runs of
    the efficiency that makes the prediction match."""
    needed: dict[str, list[float]] = {}
    for run in runs:
        device = get_spec(str(run["device_key"]))
        eff = _solve_efficiency(lambda e, r=run: validate_measured_runs([r], e)[0].predicted_mfu,
                                float(run["mfu"]), compute_efficiency(device))
        needed.setdefault(device.key, []).append(eff)
    return {key: statistics.median(values) for key, values in needed.items()}


def error_summary(rows: list[ValidationRow]) -> dict[str, float]:
    """Median and worst absolute relative error of predicted MFU, and the run count."""
    errors = [abs(r.error) for r in rows]
    if not errors:
        return {"n": 0}
    return {"n": len(errors), "median_abs_error": statistics.median(errors),
            "worst_abs_error": max(errors)}


@dataclass(frozen=True)
class Validation:
    """Every check of the planner: published runs, the same left out one at a time (only with
    the calibrated efficiency), and measured runs; `summary` gives each one's errors."""

    published: list[ValidationRow]
    leave_one_out: list[ValidationRow]
    measured: list[ValidationRow]

    def summary(self) -> dict[str, dict[str, float]]:
        """error_summary of each list, by name."""
        return {"published": error_summary(self.published),
                "leave_one_out": error_summary(self.leave_one_out),
                "measured": error_summary(self.measured)}

    def to_dict(self) -> dict[str, object]:
        """Plain dict for JSON: the rows of each list and the summary."""
        return {"published": [r.to_dict() for r in self.published],
                "leave_one_out": [r.to_dict() for r in self.leave_one_out],
                "measured": [r.to_dict() for r in self.measured], "summary": self.summary()}


def validate_all(measured_runs: list[dict[str, Any]],
                 efficiency: float | None = None) -> Validation:
    """Published runs, leave-one-out (when efficiency is the calibrated default) and the
    measured runs given (dicts with MEASURED_RUN_KEYS)."""
    return Validation(validate_published(efficiency),
                      validate_leave_one_out() if efficiency is None else [],
                      validate_measured_runs(measured_runs, efficiency))
