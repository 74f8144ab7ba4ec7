"""The device table and detection: dense peaks, name matching, no invented peak for a CPU."""

import pytest
import torch

from accelbench.bench.gemm_peak import resolve_peak
from accelbench.config.errors import ConfigError
from accelbench.hardware.detect import detect_spec, match_spec
from accelbench.hardware.specs import SPECS, get_spec

REQUIRED = ["a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "b200", "mi250", "mi250x",
            "mi300x", "gaudi2", "gaudi3", "tpu-v4", "tpu-v5e", "tpu-v5p"]


def test_table_has_the_required_devices_with_sources():
    for key in REQUIRED:
        assert SPECS[key].source and SPECS[key].peak_tflops


@pytest.mark.parametrize("key,dtype,tflops", [("a100-80gb", "bf16", 312), ("h100-sxm", "bf16",
                         989.4), ("h100-sxm", "tf32", 494.7), ("mi250", "fp32", 45.3),
                         ("tpu-v5p", "bf16", 459)])
def test_dense_peaks(key, dtype, tflops):
    assert get_spec(key).peak_flops_per_s(dtype) == tflops * 1e12


@pytest.mark.parametrize("name,mem_gb,key", [
    ("NVIDIA H100 80GB HBM3", 85, "h100-sxm"), ("NVIDIA H100 PCIe", 85, "h100-pcie"),
    ("NVIDIA A100-SXM4-40GB", 42, "a100-40gb"), ("NVIDIA A100 80GB PCIe", 85, "a100-80gb"),
    ("NVIDIA H200", 150, "h200"), ("NVIDIA H200 NVL", 150, None),
    ("AMD Instinct MI250X", 68.7, "mi250x-gcd"), ("AMD Instinct MI250X", 137, "mi250x"),
    ("AMD Instinct MI250", 68.7, "mi250-gcd"), ("AMD Instinct MI250X/MI250", 68.7, None),
    ("NVIDIA GeForce RTX 4090", 24, None), ("NVIDIA GH200 480GB", 100, None)])
def test_name_matching(name, mem_gb, key):
    spec = match_spec(name, int(mem_gb * 1e9))
    assert (spec.key if spec else None) == key


@pytest.mark.slow
def test_cpu_gets_no_datasheet_peak_only_a_labelled_measurement():
    cpu = torch.device("cpu")
    assert detect_spec(cpu) is None
    assert resolve_peak(None, cpu, "fp32", False, measure=False).flops_per_s is None
    peak = resolve_peak(None, cpu, "fp32", False)
    assert peak.label.startswith("measured peak") and peak.flops_per_s > 1e9


def test_fp32_with_tf32_uses_the_tf32_column_only_on_cuda():
    spec = get_spec("a100-80gb")
    assert resolve_peak(spec, torch.device("cuda"), "fp32", True).flops_per_s == 156e12
    assert resolve_peak(spec, torch.device("cuda"), "fp32", False).flops_per_s == 19.5e12


def test_unknown_device_key():
    with pytest.raises(ConfigError, match="allowed"):
        get_spec("a200")


def test_bf16_matmul_support_from_cpu_flags():
    from accelbench.hardware.detect import cpu_has_bf16_matmul

    assert cpu_has_bf16_matmul("processor: 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16\n")
    assert cpu_has_bf16_matmul("flags : fpu avx2 amx_bf16 amx_tile\n")
    assert cpu_has_bf16_matmul("Features\t: fp asimd bf16 i8mm\n")
    assert not cpu_has_bf16_matmul("flags\t\t: fpu sse fma avx avx2\n")
    assert not cpu_has_bf16_matmul("")


def test_a_gcd_row_is_half_its_module():
    for module in ("mi250", "mi250x"):
        whole, gcd = get_spec(module), get_spec(f"{module}-gcd")
        for dtype, tflops in gcd.peak_tflops.items():
            assert tflops == pytest.approx(whole.peak_tflops[dtype] / 2)
        assert gcd.memory_gb == whole.memory_gb / 2


def test_sparse_peak_is_the_vendors_two_four_figure_and_only_where_quoted() -> None:
    """H100 SXM: 1978.9 BF16 TFLOPS with sparsity (datasheet), twice the dense 989.4; none for
    FP32, none where no sparse peak is quoted (TPU)."""
    h100 = get_spec("h100-sxm")
    assert h100.sparse_peak_flops_per_s("bf16") == pytest.approx(1978.8e12)
    assert h100.sparse_peak_flops_per_s("fp32") is None
    assert get_spec("tpu-v5p").sparse_peak_flops_per_s("bf16") is None
