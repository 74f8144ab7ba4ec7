"""benchmarks/harness_overhead.py and step_profile.py on this CPU: the paths the GPU study
takes (both sides of the comparison, the profile), and the kernel names of the H200 profile
grouped as docs/gpu.md reads them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
from step_profile import category  # noqa: E402


@pytest.mark.parametrize("name, group", [
    ("nvjet_sm90_tst_192x192_64x3_1x2_h_bz_coopB_NNN", "matmul"),
    ("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align1>", "matmul"),
    ("sm90_xmma_sparse_gemm_bf16bf16_bf16f32_f32_tn_t_tilesize128x256x64", "matmul"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26", "attention"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdam", "optimizer"),
    ("void at::native::unrolled_elementwise_kernel<direct_copy_kernel_cuda", "copy/cast"),
    ("triton_red_fused__to_copy_abs_add_max_native_layer_norm_view_12", "norm"),
    ("vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl", "elementwise/other"),
])
def test_kernels_are_grouped_by_what_they_do(name, group):
    assert category(name) == group


@pytest.mark.slow  # starts benchmarks/harness_overhead.py as a process
def test_the_comparison_and_the_profile_run_on_cpu():
    out = subprocess.run(
        [sys.executable, "harness_overhead.py", "--model", "gpt2-tiny:layers=1",
         "--micro-batch", "1", "--seq", "32", "--steps", "2", "--warmup", "1",
         "--device", "cpu", "--profile"], cwd=BENCH, capture_output=True, text=True,
        timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(ln.startswith("bare loop (wall)") for ln in lines)
    ratio = next(ln for ln in lines if ln.startswith("step time ratio ours/bare"))
    assert float(ratio.split("median ")[1].split()[0]) > 0
    assert any(ln.startswith("profile: 2 step(s)") for ln in lines)
    assert any("matmul" in ln for ln in lines)
