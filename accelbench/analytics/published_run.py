"""What a published training run states, and what the planner assumes of its framework; no torch."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.analytics.activations import EAGER, Kernels
from accelbench.analytics.flops import hardware_flops_per_token, model_flops_per_token
from accelbench.analytics.training_widths import training_widths
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig
from accelbench.config.records.train import TrainFigure
from accelbench.hardware.specs import DeviceSpec

# The framework each run used, and what the planner assumes of it: the overlap of
# communication with compute (steptime.OVERLAP_MODES) and what its kernels save for backward
# (activations.Kernels: fused SwiGLU/RoPE, dropout masks, fused loss). Stated, not fitted: the
# GPT-3-era runs trained with dropout 0.1; Llama and MPT without; llm-foundry's MPT yamls use
# flash-attn's fused cross-entropy; Llama 3's stack is assumed Megatron-style (fused SwiGLU).
FRAMEWORKS: dict[str, tuple[str, Kernels]] = {
    "Megatron-LM": ("megatron", EAGER),
    "Megatron-DeepSpeed": ("megatron", EAGER),
    "MegaScale": ("megascale", EAGER),
    "Meta Llama 3 (Megatron-style)": ("megatron", Kernels(fused_mlp=True, dropout=False)),
    "PaLM (JAX/XLA on TPU)": ("megatron", Kernels(dropout=False)),
    "PyTorch FSDP": ("megatron", Kernels(dropout=False)),  # prefetched gathers
    # torchtitan: FSDP2, and its "selective op" recompute keeps every other matmul's output
    "torchtitan": ("megatron", Kernels(dropout=False, selective="every_other_mm")),
    "llm-foundry (Composer FSDP)": ("megatron", Kernels(dropout=False, fused_loss=True)),
    "NeMo (Megatron-Core)": ("megatron", EAGER),  # NeMo 2.0's performance scripts
}
# The software stack of each framework, as `plan --stack` names it: the level the intervals'
# errors are shared within (source_model). Megatron-LM's two papers (S1, S2) are one stack.
STACKS = {"Megatron-LM": "megatron-lm", "Megatron-DeepSpeed": "megatron-deepspeed",
          "MegaScale": "megascale", "Meta Llama 3 (Megatron-style)": "meta-llama3",
          "PaLM (JAX/XLA on TPU)": "jax-xla", "PyTorch FSDP": "pytorch-fsdp",
          "torchtitan": "torchtitan", "llm-foundry (Composer FSDP)": "llm-foundry",
          "NeMo (Megatron-Core)": "nemo"}


OWN_STACK = "accelbench"  # this project's own runtime: its measured cells

# The bytes each gradient value of a bf16 (and fp8: bf16 weights) run moves in a framework's
# data-parallel reduction, and why (fp32 cells reduce 4 bytes and fp16 cells 2 in every stack:
# Megatron-LM's fp16 default, the FSDP fp16 policies). "Stated" where the stack's code or paper
# sets it; else assumed. FP8_REDUCE_BYTES overrides it for fp8 runs.
BF16_REDUCE_BYTES: dict[str, tuple[int, str]] = {
    "Megatron-LM": (4, "stated: bf16 forces accumulate_allreduce_grads_in_fp32 "
                       "(megatron/training/arguments.py)"),
    "Megatron-DeepSpeed": (4, "stated: Megatron's arguments force fp32 reduction under bf16; "
                              "DeepSpeed's BF16_Optimizer accumulates gradients in fp32"),
    "MegaScale": (4, "assumed: Megatron-LM's default (the paper does not say)"),
    "Meta Llama 3 (Megatron-style)": (4, "stated: the Llama 3 paper reduce-scatters gradients "
                                         "in FP32"),
    "PaLM (JAX/XLA on TPU)": (4, "assumed: fp32 weights, so fp32 gradients (not stated)"),
    "PyTorch FSDP": (2, "stated: the IBM blog's fms-fsdp bfSixteen policy reduces in bf16"),
    "torchtitan": (4, "stated: training.mixed_precision_reduce defaults to float32"),
    "llm-foundry (Composer FSDP)": (2, "stated: the MPT yamls' mixed_precision PURE reduces "
                                       "in bf16"),
    "NeMo (Megatron-Core)": (4, "stated: NeMo's bf16_mixed plugin sets grad_reduce_in_fp32"),
}
FP8_REDUCE_BYTES: dict[str, tuple[int, str]] = {
    "NeMo (Megatron-Core)": (2, "stated: NeMo's scripts/performance/helpers.py sets "
                                "grad_reduce_in_fp32=False for fp8"),
}


def reduce_source(framework: str, dtype: str) -> tuple[int, str]:
    """(bytes, why) of a 16-bit run's data-parallel reduction under `framework`."""
    if dtype == "fp8" and framework in FP8_REDUCE_BYTES:
        return FP8_REDUCE_BYTES[framework]
    return BF16_REDUCE_BYTES[framework]


def reduce_bytes(framework: str | None, dtype: str) -> int:
    """Bytes a gradient value moves in the data-parallel reduction under `framework` (None:
    the precision's default, training_widths' reduce: Megatron-LM's and accelbench's runtime's,
    4 under bf16)."""
    default = training_widths(dtype).reduce
    if framework is None or default != 4 or training_widths(dtype).grads == 4:
        return default  # fp16: 2; fp32: 4, whatever the stack
    return reduce_source(framework, dtype)[0]


def stack_framework(stack: str) -> str | None:
    """The framework of a stack as `plan --stack` names it (None: unknown or accelbench's)."""
    return next((f for f, s in STACKS.items() if s == stack), None)


@dataclass(frozen=True)
class PublishedRun:
    """One published training run: set-up, the oracle figure and where each comes from.

    oracle_kind: one of config.records.train.ORACLE_KINDS: MFU (a fraction), tokens/s per device, or
    TFLOP/s per device (hardware FLOP/s counting recompute, as Megatron-LM reports).
    fused_attention: the run used flash-style attention (scores never stored); runs before
    FlashAttention (2022) and PaLM's XLA attention stored them. source_key groups runs for
    the per-source errors (the csv's section, S1...S14, or the source's name); run_id is the
    csv id.
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
    fused_attention: bool = False
    run_id: str = ""
    source_key: str = ""
    dtype: str = "bf16"
    framework: str = "Megatron-LM"  # a FRAMEWORKS key
    # the peak memory per device the source reports (torchtitan: the allocator's reserved
    # peak, GiB), set against the planner's estimate in validation
    published_memory_gib: float | None = None

    @property
    def stack(self) -> str:
        """The software stack of the run's framework (STACKS)."""
        return STACKS[self.framework]

    @property
    def reduce_bytes(self) -> int:
        """Bytes a gradient value moves in its framework's data-parallel reduction."""
        return reduce_bytes(self.framework, self.dtype)

    @property
    def overlap(self) -> str:
        """The overlap assumption of the run's framework."""
        return FRAMEWORKS[self.framework][0]

    @property
    def kernels(self) -> Kernels:
        """What the run's framework's kernels save for backward."""
        return FRAMEWORKS[self.framework][1]

    def published_mfu(self) -> float:
        """The oracle as MFU (against the dense BF16/FP16 peak)."""
        if self.oracle_kind == TrainFigure.MFU:
            return self.oracle_value
        tokens = self.published_tokens_per_s_per_device()
        peak = self.device.peak_flops_per_s("bf16") or 0.0
        return tokens * model_flops_per_token(self.model, self.seq_len).total / peak

    def published_tokens_per_s_per_device(self) -> float:
        """Tokens/s per device implied by the oracle."""
        if self.oracle_kind == TrainFigure.TOKENS_PER_S_PER_DEVICE:
            return self.oracle_value
        if self.oracle_kind == TrainFigure.TFLOPS_PER_DEVICE:
            hw = hardware_flops_per_token(self.model, self.seq_len, self.layout.recompute,
                                          selective=self.kernels.selective)
            return self.oracle_value * 1e12 / hw
        peak = self.device.peak_flops_per_s("bf16") or 0.0
        return self.oracle_value * peak / model_flops_per_token(self.model, self.seq_len).total


@dataclass(frozen=True)
class UnmodelledRun:
    """A published run the planner does not score, and why."""

    run_id: str
    name: str
    source_key: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        """Plain dict for JSON."""
        return dict(self.__dict__)
