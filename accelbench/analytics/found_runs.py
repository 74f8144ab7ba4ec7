"""Runs found outside the shipped csv: predicted and reported apart, never fitted; no torch."""

from __future__ import annotations

from accelbench.analytics.cluster import device_variant
from accelbench.analytics.published_run import PublishedRun
from accelbench.analytics.validation_shapes import SHAPES
from accelbench.config.layout import Layout
from accelbench.config.records.train import TrainFigure
from accelbench.hardware.specs import get_spec

# torchtitan's H100s: 96 GB HBM2e at 500 W, a variant of the SXM row (cluster.device_variant);
# the peak is kept at the SXM figure, as the published MFU is, so predictions for them are
# optimistic by the power cap.
H100_96GB_500W = device_variant("h100-sxm:memory_gb=96,bw_gb_s=2400")

_A100 = get_spec("a100-80gb")
_TITAN_NEW = "pytorch/torchtitan docs/performance.md (H100 version, Table 1)"


# Runs found in sources outside the shipped csv (their layouts partly assumed: setup U).
# Validation only: never fitted, never in the interval residuals or the envelope, so their
# errors are out of sample by construction (validation_rows.validate_found).
FOUND_RUNS: tuple[PublishedRun, ...] = (
    PublishedRun("Megatron-LM GPT-3 175B, 1024 A100", SHAPES["gpt3-175b"], _A100, 1024, 8, 1536,
                 2048, Layout(dp=16, tp=8, pp=8, mb=1, recompute="full", sp=False),
                 TrainFigure.TFLOPS_PER_DEVICE, 140, "V*",
                 "Narayanan et al. SC21 (arXiv 2104.04473) sec. 5.1, via a secondary note",
                 setup_tag="U", source_key="SC21 sec. 5.1",
                 notes="t=8, p=8 assumed as in Table 1; before sequence parallelism and flash "
                       "attention"),
    PublishedRun("MegaScale 175B, 12288 A100", SHAPES["gpt3-175b"], _A100, 12288, 8, 6144, 2048,
                 Layout(dp=192, tp=8, pp=8, mb=1, zero=1, recompute="selective", sp=True),
                 TrainFigure.MFU, 0.552, "V", "Jiang et al. 2024 (arXiv 2402.15627) abstract",
                 setup_tag="U",
                 fused_attention=True, source_key="MegaScale", framework="MegaScale",
                 notes="MegaScale overlaps TP/PP/DP traffic (overlap megascale)"),
    PublishedRun("torchtitan Llama 3 8B, 64 A100, selective op", SHAPES["llama3-8b"], _A100, 64,
                 8, 64, 8192, Layout(dp=64, mb=1, zero=3, recompute="selective"),
                 TrainFigure.TOKENS_PER_S_PER_DEVICE, 2973, "V",
                 "pytorch/torchtitan docs/performance.md (64 A100 version)",
                 mfu_as_published=0.582, fused_attention=True, source_key="torchtitan",
                 framework="torchtitan",
                 notes="torchtitan then counted the input embedding in N (58.2%)"),
    PublishedRun("torchtitan Llama 3 70B, 64 A100, full AC", SHAPES["llama3-70b"], _A100, 64, 8,
                 64, 8192, Layout(dp=64, mb=1, zero=3, recompute="full"),
                 TrainFigure.TOKENS_PER_S_PER_DEVICE, 331, "V",
                 "pytorch/torchtitan docs/performance.md (64 A100 version)",
                 mfu_as_published=0.517, fused_attention=True, source_key="torchtitan",
                 framework="torchtitan"),
    PublishedRun("torchtitan Llama 3.1 8B, 8 H100, FSDP", SHAPES["llama3-8b"], H100_96GB_500W, 8,
                 8, 16, 8192, Layout(dp=8, mb=2, zero=3, recompute="selective"),
                 TrainFigure.TOKENS_PER_S_PER_DEVICE, 5762, "V", _TITAN_NEW,
                 fused_attention=True,
                 source_key="torchtitan", framework="torchtitan",
                 published_memory_gib=82.4,
                 notes="500 W power cap: below the SXM peak of MFU"),
    PublishedRun("torchtitan Llama 3.1 8B, 8 H100, FSDP + Float8", SHAPES["llama3-8b"],
                 H100_96GB_500W, 8, 8, 16, 8192, Layout(dp=8, mb=2, zero=3,
                                                         recompute="selective"),
                 TrainFigure.TOKENS_PER_S_PER_DEVICE, 8532, "V", _TITAN_NEW,
                 fused_attention=True,
                 source_key="torchtitan", framework="torchtitan",
                 published_memory_gib=76.8, dtype="fp8",
                 notes="Float8 linear layers with torch.compile; MFU against the BF16 peak"),
    PublishedRun("torchtitan Llama 3.1 8B, 128 H100, FSDP", SHAPES["llama3-8b"], H100_96GB_500W,
                 128, 8, 256, 8192, Layout(dp=128, mb=2, zero=3, recompute="selective"),
                 TrainFigure.TOKENS_PER_S_PER_DEVICE, 5605, "V", _TITAN_NEW,
                 setup_tag="U",
                 fused_attention=True, source_key="torchtitan", framework="torchtitan",
                 published_memory_gib=67.0,
                 notes="local batch 2 and selective AC assumed as in Table 1"),
)
