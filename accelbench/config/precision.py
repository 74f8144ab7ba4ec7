"""A cell's precision, resolved once: the dtype asked, the dtype its autocast, activations and
collectives run in, the peak column its MFU divides by, and an fp8 cell's float8 recipe. The
runtime, the planner and the peaks read these fields instead of re-deriving them; no torch.

An fp8 cell runs bf16 (FP8_COMPUTE_DTYPE) but for the float8 GEMMs of its blocks' linear
layers, and its MFU is over the dense BF16 peak as NeMo and torchtitan publish it (the FP8
column, `gemm_peak`, is reported beside it). An fp32 cell whose matmuls TF32 may run (CUDA
with --tf32) is held to the TF32 peak.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.config.vocab import FP8_COMPUTE_DTYPE, FP8_RECIPES

FULL_WIDTH = ("fp32", "tf32")  # no autocast: the weights' own width


@dataclass(frozen=True)
class Precision:
    """What one cell runs in: `dtype` as asked (fp32, fp16, bf16, fp8; the planner also names
    tf32), `compute` the autocast/activation/communication dtype, `peak` the peak column of
    its MFU, `fp8_recipe` the float8 recipe an fp8 cell was given (None: torchao's default)."""

    dtype: str
    compute: str
    peak: str
    fp8_recipe: str | None = None

    @property
    def fp8(self) -> bool:
        """Whether the blocks' linear layers run their GEMMs in float8."""
        return self.dtype == "fp8"

    @property
    def gemm_peak(self) -> str:
        """The peak column of the block GEMMs: fp8's own for an fp8 cell, else `peak`."""
        return "fp8" if self.fp8 else self.peak

    @property
    def fp8_scaling(self) -> str | None:
        """The float8 recipe an fp8 cell runs (the given one, else tensorwise); None otherwise."""
        return (self.fp8_recipe or FP8_RECIPES[0]) if self.fp8 else None

    @property
    def autocast(self) -> str | None:
        """The dtype of the autocast region, or None where the cell runs at full width."""
        return None if self.compute in FULL_WIDTH else self.compute

    @property
    def loss_scaling(self) -> bool:
        """Whether gradients need a loss scaler (fp16's narrow exponent)."""
        return self.compute == "fp16"


def resolve(dtype: str, tf32: bool = False, device_type: str | None = None,
            fp8_recipe: str | None = None) -> Precision:
    """The precision of a cell asked to run `dtype`: TF32 counts only on CUDA (where --tf32
    switches it on), the recipe only for an fp8 cell."""
    compute = FP8_COMPUTE_DTYPE if dtype == "fp8" else dtype
    peak = "tf32" if compute == "fp32" and tf32 and device_type == "cuda" else compute
    return Precision(dtype, compute, peak, fp8_recipe if dtype == "fp8" else None)
