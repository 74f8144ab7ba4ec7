"""The planner knows weight sparsity: the masks' memory as the runtime keeps them, and the 2:4
kernels' GEMM time where the vendor quotes a sparse peak (masked dense elsewhere)."""

from __future__ import annotations

import pytest
import torch

from accelbench.analytics.cluster import make_cluster
from accelbench.analytics.compute_rates import layer_rates, sparse_gemm_passes
from accelbench.analytics.efficiency import layer_cost
from accelbench.analytics.memory import memory_per_device
from accelbench.analytics.steptime import estimate_step
from accelbench.analytics.train_setup import TrainSetup
from accelbench.bench.train.build import build_trainer
from accelbench.bench.train.hooks import SparsityHook
from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.config.layout import Layout
from accelbench.config.presets import get_preset
from accelbench.hardware.specs import get_spec

TINY = get_preset("gpt2-tiny").with_changes(vocab_size=512, n_positions=64)


@pytest.mark.parametrize("pattern,level", [("unstructured", 0.8), ("2:4", 0.5)])
def test_mask_memory_is_what_the_runtime_holds(pattern, level):
    """One byte per masked weight: the planner's count against the runtime's real masks."""
    spec = TrainSpec(model=TINY, seq_lens=(32,), micro_batches=(2,), dtypes=("fp32",),
                     device="cpu", sparsities=(level,), sparsity_pattern=pattern)
    trainer = build_trainer(spec, TrainCell(32, 2, 1, "fp32", "none", level), Layout(),
                            torch.device("cpu"))
    held = sum(m.numel() * m.element_size() for _, _, m in trainer.hook(SparsityHook).state.params)
    planned = memory_per_device(TINY, 32, Layout(), 1, "fp32", sparsity=level)
    assert planned.masks == held
    assert planned.total == memory_per_device(TINY, 32, Layout(), 1, "fp32").total + held
    sharded = memory_per_device(TINY, 32, Layout(dp=4, tp=2, zero=3), 1, sparsity=level)
    assert sharded.masks == held / 8  # split over tp, and over dp under ZeRO-3


def test_two_four_gemms_at_the_sparse_peak_only_where_the_vendor_quotes_one():
    """Dense: 3 forward-GEMM units per layer; 2:4 on an H100: forward and input gradient at
    2x, the weight gradient dense (1/2 + 1/2 + 1 = 2); unstructured and TPUs unchanged."""
    h100, tpu = get_spec("h100-sxm"), get_spec("tpu-v5p")
    two_four = TrainSetup(64, 512, sparsity=0.5, sparsity_pattern="2:4")
    assert sparse_gemm_passes(two_four, h100) == (2.0, 0.5)
    assert sparse_gemm_passes(two_four, tpu) == (3.0, 1.0)
    assert sparse_gemm_passes(TrainSetup(64, 512, sparsity=0.9), h100) == (3.0, 1.0)
    cfg = get_preset("gpt2-xl")
    cluster = make_cluster("h100-sxm", 1, devices_per_node=1)
    dense = estimate_step(cfg, cluster, TrainSetup(64, 512), Layout(mb=4))
    sparse = estimate_step(cfg, cluster, two_four, Layout(mb=4))
    cost = layer_cost(layer_rates(cluster, "bf16"), cfg, 512, 4, 1, 1, False, "bf16", True)
    gemm_s = cost.gemm_fwd  # one layer's forward GEMMs (each pass costs the same here)
    saved = 16 * cfg.n_layer * gemm_s  # 16 micro-batches, one unit per layer
    assert dense.compute_s - sparse.compute_s == pytest.approx(saved)
    assert sparse.recompute_s == dense.recompute_s == 0.0
