"""What a published training run states, and what the planner assumes of its framework; no torch."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.analytics.activations import EAGER, Kernels
from accelbench.analytics.flops import hardware_flops_per_token, model_flops_per_token
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig
from accelbench.config.schema import TrainFigure
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
}
# The software stack of each framework, as `plan --stack` names it: the level the intervals'
# errors are shared within (source_model). Megatron-LM's two papers (S1, S2) are one stack.
STACKS = {"Megatron-LM": "megatron-lm", "Megatron-DeepSpeed": "megatron-deepspeed",
          "MegaScale": "megascale", "Meta Llama 3 (Megatron-style)": "meta-llama3",
          "PaLM (JAX/XLA on TPU)": "jax-xla", "PyTorch FSDP": "pytorch-fsdp",
          "torchtitan": "torchtitan", "llm-foundry (Composer FSDP)": "llm-foundry"}


OWN_STACK = "accelbench"  # this project's own runtime: its measured cells


@dataclass(frozen=True)
class PublishedRun:
    """One published training run: set-up, the oracle figure and where each comes from.

    oracle_kind: one of config.schema.ORACLE_KINDS: MFU (a fraction), tokens/s per device, or
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
