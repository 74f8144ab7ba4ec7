"""What each training precision keeps at which width, and which peak its work runs at; no torch.

One value of a dtype is BYTES_PER_VALUE bytes. A training *precision* is more than one width:
mixed-precision training keeps fp32 master weights and moments beside 16-bit weights, and FP8
training (Transformer Engine under Megatron/NeMo, torchao Float8 under torchtitan) runs only the
blocks' linear layers (GEMMs) in FP8 while keeping everything else at BF16. `training_widths`
says, per precision, the width of each thing the planner counts, following those frameworks:

- fp8: block GEMMs at the FP8 peak with their own efficiency (FP8_GEMM_EFFICIENCY); attention
  core, output head, norms and activations at BF16; weights, gradients, saved activations and
  every collective at BF16 widths (assumption: FP8 all-gathers of FSDP weights are optional in
  torchtitan and off by default); fp32 master weights and Adam moments; plus one FP8 copy of
  each block GEMM weight kept across micro-batches (Transformer Engine's cached weight; an
  assumption that overstates torchtitan, which recasts each forward, by 1 byte a weight).
  The scaling casts (amax and FP8 copies of each block GEMM's input, weight and grad-output)
  are memory-bound work FP8 adds: fp8_cast_bytes, timed with the other streaming ops.
  MFU is reported against the dense BF16 peak, as NeMo and torchtitan publish it, with the
  utilisation of the FP8 peak beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from accelbench.config.precision import resolve

BYTES_PER_VALUE = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}

# Fraction of the dense FP8 peak that FP8 GEMMs of a transformer block reach. A stated
# assumption, not fitted to the published runs (issue 17 fits): large FP8 GEMMs on H100 reach
# roughly 60-70% of the FP8 peak (torchao's roofline takes 60%), less at a block's smaller
# shapes. It was set when it also stood for the casts around the GEMMs; those are now priced
# apart (FP8_CAST_BYTES_*), and the constant is left as stated rather than re-chosen.
FP8_GEMM_EFFICIENCY = 0.5

# Bytes the dynamic tensorwise scaling casts of one FP8 linear move per element of each GEMM
# operand, as torchao's own roofline counts them for compiled training
# (torchao/float8/roofline_utils.py, get_float8_mem_sympy): an amax reduction reads the BF16
# tensor (2 B) unless torch.compile fuses it into the op that made the tensor, then the cast
# reads it again (2 B) and writes FP8 twice, row- and column-major for the two GEMMs that use
# it (2 x 1 B). The input (forward) and grad-output (backward) are activations whose amax
# fuses (4 B); the weight's amax does not (6 B), and it is cast in every forward (torchao's
# Float8Linear recasts it each micro-batch; FSDP's FP8 all-gather, which casts the shard
# instead, is off by default). The FP8 copies are kept for the backward, not recast.
FP8_CAST_BYTES_ACTIVATION = 2 + 2 * 1
FP8_CAST_BYTES_WEIGHT = 2 + 2 + 2 * 1


@dataclass(frozen=True)
class TrainingWidths:
    """Bytes per value of each thing a training step keeps or moves, and the peaks it uses.

    weights/grads: per parameter; master: the fp32 master copy (0 when the weights are fp32);
    fp8_weight_copy: the FP8 copy of each block GEMM weight (0 when not FP8); activations and
    comm: per saved or sent value; reduce: per gradient value the data-parallel reduction
    moves (Megatron-LM accumulates and reduces bf16 gradients in fp32, forcing
    accumulate_allreduce_grads_in_fp32 for bf16, so bf16 and fp8 reduce 4 bytes; fp16 reduces
    its 2-byte gradients); gemm_peak: the peak column of the block GEMMs; peak: the column of
    every other FLOP and the MFU denominator.
    """

    precision: str
    weights: int
    grads: int
    master: int
    fp8_weight_copy: int
    activations: int
    comm: int
    reduce: int
    gemm_peak: str
    peak: str

    @property
    def fp8(self) -> bool:
        """Whether block GEMMs run at an FP8 peak of their own."""
        return self.gemm_peak != self.peak


@cache
def training_widths(precision: str) -> TrainingWidths:
    """The widths and peaks of training in `precision` (fp32, tf32, fp16, bf16 or fp8): the
    peak columns and the compute width as config.precision resolves them."""
    resolved = resolve(precision)
    width = BYTES_PER_VALUE[resolved.compute]  # fp8: bf16 weights, activations and messages
    master = 4 if width < 4 else 0
    reduce = 4 if resolved.peak == "bf16" or width == 4 else width  # fp16: 2 (Megatron's)
    return TrainingWidths(precision, width, width, master, 1 if resolved.fp8 else 0, width,
                          width, reduce, resolved.gemm_peak, resolved.peak)


def fp8_cast_bytes(m: int, k: int, n: int) -> tuple[float, float]:
    """(forward, backward) bytes of one FP8 linear's scaling casts for its forward (m x k) @
    (k x n): input m x k and weight k x n cast in the forward, grad-output m x n in the
    backward (FP8_CAST_BYTES_*); priced because they are memory-bound work FP8 adds."""
    forward = FP8_CAST_BYTES_ACTIVATION * m * k + FP8_CAST_BYTES_WEIGHT * k * n
    return float(forward), float(FP8_CAST_BYTES_ACTIVATION * m * n)
