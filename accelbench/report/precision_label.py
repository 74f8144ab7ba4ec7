"""How tables name a training cell's precision: an fp8 cell with its float8 recipe and how its
float8 GEMMs ran, so an FP8 MFU is never read where there was none (docs/train.md, FP8)."""

from __future__ import annotations

from accelbench.config.precision import resolve
from accelbench.config.records.fields import RecordSpec
from accelbench.config.records.train import TrainMetrics

FP8_CAPTION = ("fp8 cells: MFU over the dense BF16 peak, as FP8 results are published; in "
               "brackets the FP8 peak's utilisation where float8 units ran, or 'emulated' where "
               "none did (torchao's emulation: FP8 numerics, no FP8 speed, no FP8 peak)")


def precision_text(spec: RecordSpec, metrics: TrainMetrics) -> str:
    """'bf16'; 'fp8 rowwise (emulated)'; 'fp8 tensorwise (41.0% of FP8 peak)'."""
    dtype = str(spec.dtype or "")
    if dtype != "fp8":
        return dtype
    text = f"fp8 {resolve(dtype, fp8_recipe=spec.fp8_recipe).fp8_scaling}"
    mode, used = metrics.fp8_mode, metrics.fp8_peak_utilisation
    if mode == "native" and used is not None:
        return f"{text} ({used:.1%} of FP8 peak)"
    return f"{text} ({mode})" if mode else text


def has_fp8(records: list) -> bool:
    """Whether any of these records is an fp8 cell (its caption then explains the column)."""
    return any(r.setup.dtype == "fp8" for r in records)
