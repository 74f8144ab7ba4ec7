"""What a plan trains and what its set-up assumes: the global batch, sequence, precision and
optimizer, whether attention is fused, the sparsity, what communication hides behind compute
(OVERLAP_MODES, a stated per-framework choice), the kernels, the MoE imbalance and the width of
the data-parallel reduction; pure arithmetic, no torch."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.analytics.activations import EAGER, Kernels
from accelbench.analytics.training_widths import training_widths

# What each overlap assumption hides behind compute (a stated, per-framework choice:
# `plan --overlap`; published runs take their framework's, published_run.py).
OVERLAP_MODES = {
    "none": "nothing: every TP/CP/PP/DP collective waits for compute and compute for it",
    "megatron": "Megatron-LM and PyTorch FSDP defaults: DP gradient reduction behind the "
                "backward (ZeRO-3/FSDP gathers also behind the forward), CP ring passes behind "
                "the attention core; TP collectives and PP sends exposed",
    "megatron-a2a": "Megatron-Core with MoE all-to-all overlap (1F1B A2A overlap, "
                    "--overlap-moe-expert-parallel-comm; DeepSeek-V3's DualPipe): as megatron, "
                    "plus each expert-parallel all-to-all behind the paired micro-batch's "
                    "compute of the same layer",
    "megascale": "MegaScale (Jiang et al. 2024): as megatron, plus TP all-gathers and "
                 "reduce-scatters behind the GEMMs beside them, PP sends behind compute, "
                 "DP's first gather behind the forward, and EP all-to-alls as megatron-a2a",
}
# The modes that hide the expert-parallel all-to-all (megatron's alltoall dispatcher waits).
A2A_OVERLAP_MODES = frozenset({"megatron-a2a", "megascale"})


@dataclass(frozen=True)
class TrainSetup:
    """What is trained: global batch in sequences, sequence length, precision, optimizer, and
    whether attention is fused (flash / SDPA: the scores are never stored, the usual case)."""

    global_batch: int
    seq_len: int
    dtype: str = "bf16"
    optimizer: str = "adam"
    fused_attention: bool = True
    sparsity: float = 0.0  # weight sparsity of the block matrices (docs/sparsity.md)
    sparsity_pattern: str = "unstructured"  # or 2:4 (level 0.5)
    overlap: str = "megatron"  # what communication hides behind compute: OVERLAP_MODES
    kernels: Kernels = EAGER  # what the framework's kernels save for backward (activations.py)
    # the busiest expert's routed assignments over the mean (1.0 balanced, as benchmarks that
    # force-balance routing run; the runtime records moe_load_imbalance): moe_cost.py
    moe_imbalance: float = 1.0
    # bytes a gradient value moves in the data-parallel reduction (None: the precision's,
    # training_widths' reduce: 4 under bf16, as Megatron-LM and accelbench's runtime reduce;
    # a published run's framework sets its own: published_run.BF16_REDUCE_BYTES)
    reduce_bytes: int | None = None

    @property
    def dp_reduce_bytes(self) -> int:
        """Bytes a gradient value moves in the data-parallel reduction."""
        return self.reduce_bytes or training_widths(self.dtype).reduce

    @property
    def tokens_per_step(self) -> int:
        """Tokens in one optimizer step."""
        return self.global_batch * self.seq_len
