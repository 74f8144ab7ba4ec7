"""A cell's precision is resolved once (config/precision.py) and read where the runtime, the
peaks and the planner used to re-derive it."""

from __future__ import annotations

import pytest

from accelbench.analytics.training_widths import training_widths
from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.config.precision import Precision, resolve
from accelbench.config.presets import get_preset


@pytest.mark.parametrize(("dtype", "tf32", "device", "compute", "peak", "gemm", "autocast"), [
    ("fp32", False, "cuda", "fp32", "fp32", "fp32", None),
    ("fp32", True, "cuda", "fp32", "tf32", "tf32", None),
    ("fp32", True, "cpu", "fp32", "fp32", "fp32", None),  # TF32 is a CUDA switch
    ("fp16", True, "cuda", "fp16", "fp16", "fp16", "fp16"),
    ("bf16", False, None, "bf16", "bf16", "bf16", "bf16"),
    ("fp8", True, "cuda", "bf16", "bf16", "fp8", "bf16"),  # MFU over the BF16 peak
    ("tf32", False, None, "tf32", "tf32", "tf32", None),  # the planner's name
])
def test_resolve(dtype, tf32, device, compute, peak, gemm, autocast):
    p = resolve(dtype, tf32, device)
    assert (p.compute, p.peak, p.gemm_peak, p.autocast) == (compute, peak, gemm, autocast)
    assert p.loss_scaling == (dtype == "fp16") and p.fp8 == (dtype == "fp8")


def test_the_fp8_recipe_belongs_to_fp8_cells_only():
    assert resolve("fp8", fp8_recipe="rowwise") == Precision("fp8", "bf16", "bf16", "rowwise")
    assert resolve("fp8").fp8_recipe is None and resolve("fp8").fp8_scaling == "tensorwise"
    assert resolve("bf16", fp8_recipe="rowwise").fp8_recipe is None
    assert resolve("bf16", fp8_recipe="rowwise").fp8_scaling is None


def test_a_train_cell_resolves_through_its_spec():
    spec = TrainSpec(get_preset("gpt2-tiny"), dtypes=("fp32", "fp8"), tf32=True,
                     fp8_recipe="rowwise")
    fp32, fp8 = (TrainCell(32, 2, 1, d, "none") for d in ("fp32", "fp8"))
    assert spec.precision(fp32, "cuda").peak == "tf32" and spec.precision(fp32).peak == "fp32"
    assert spec.precision(fp8, "cuda") == Precision("fp8", "bf16", "bf16", "rowwise")


@pytest.mark.parametrize("dtype", ["fp32", "tf32", "fp16", "bf16", "fp8"])
def test_the_planner_widths_take_the_resolved_peaks(dtype):
    widths, p = training_widths(dtype), resolve(dtype)
    assert (widths.peak, widths.gemm_peak, widths.fp8) == (p.peak, p.gemm_peak, p.fp8)
