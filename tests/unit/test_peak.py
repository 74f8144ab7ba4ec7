"""The measured GEMM peak: every matmul layout the model uses, the fastest one's shapes."""

import pytest
import torch

from accelbench.bench import gemm_peak as peak_mod
from accelbench.bench.timed_metrics import peak_warning
from accelbench.config.record_kinds import read_metrics
from accelbench.report.table import peak_captions
from accelbench.store.record import Record


@pytest.mark.parametrize("kernel", peak_mod.GEMM_KERNELS)
def test_each_layout_is_an_m_by_k_by_n_product(kernel):
    out = peak_mod.gemm_call(torch.device("cpu"), torch.float32, kernel, 6, 5, 7)()
    assert out.shape == (6, 7)


def test_peak_is_the_fastest_layout_over_the_shapes(monkeypatch):
    """bf16 on an AVX2 CPU: x @ w.T (nn.Linear's layout) ran 10x a plain a @ b; a peak from
    a @ b alone gave block MFUs of 500%."""
    rates = {"nn": 1.0, "nt": 10.0, "tn": 2.0}
    seen = []

    def fake(device, dtype, kernel, shape, repeats=5, warmup=2):
        seen.append((kernel, shape))
        return rates[kernel] * (1.5 if shape[2] > shape[0] else 1.0)

    monkeypatch.setattr(peak_mod, "gemm_flops_per_s", fake)
    monkeypatch.setattr(peak_mod, "fitting_gemm_size", lambda device, dtype, tf32: 64)
    peak_mod.fastest_layout.cache_clear()
    try:
        metrics, rates_seen = peak_mod.measure_peak(torch.device("cpu"), "fp32", False)
    finally:
        peak_mod.fastest_layout.cache_clear()
    best = metrics.peak_flops_per_s_per_device
    assert metrics.repetitions == len(rates_seen) == peak_mod.PEAK_REPETITIONS
    assert metrics.gemm_layout == "nt" and metrics.gemm_n == 64
    assert best == 15.0
    assert {k for k, shape in seen if shape == (256, 256, 256)} == set(peak_mod.GEMM_KERNELS)
    assert {k for k, shape in seen if shape != (256, 256, 256)} == {"nt"}
    assert {shape for _, shape in seen} >= set(peak_mod.gemm_shapes(64))


def test_utilisation_above_100_percent_is_flagged_not_hidden():
    label = "measured peak (GEMM n=128)"
    block = read_metrics("block", {"forward_mfu": 0.9, "backward_mfu": 0.8, "peak_label": label})
    assert peak_warning(block) == ""
    note = peak_warning(read_metrics("block", {"forward_mfu": 5.48, "forward_backward_mfu": 0.7,
                                               "peak_label": label}))
    assert "548%" in note and label in note
    assert peak_warning(read_metrics("train", {"mfu": None, "hfu": None})) == ""
    train = read_metrics("train", {"mfu": 1.5, "hfu": 1.6, "peak_label": label})
    assert "160%" in peak_warning(train)


def test_caption_names_each_precisions_peak():
    def rec(precision, flops):
        return Record(kind="block", status="ok", spec={}, environment={}, metrics={
            "peak_precision": precision, "peak_flops_per_s_per_device": flops,
            "peak_label": "measured peak (GEMM n=512)"})

    caption = peak_captions([rec("fp32", 2.7e10), rec("fp32", 2.7e10), rec("bf16", 1.4e10)])
    assert caption.count("fp32") == 1 and "bf16 0.014 TFLOPS" in caption
