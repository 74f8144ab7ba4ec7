"""Device specification table: dense peaks per dtype, memory, bandwidth, links, with sources.

No torch import: the planner reads this table on machines that have no accelerator.
Peaks are dense (vendors print tensor-core figures with 2:4 sparsity, twice the dense value).
A value we could not verify is left out, never guessed: MFU then needs a measured peak.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from accelbench.config.errors import ConfigError


@dataclass(frozen=True)
class DeviceSpec:
    """What one accelerator can do; bandwidths in GB/s (10^9 bytes), peaks in TFLOP/s dense."""

    key: str
    name: str
    vendor: str
    kind: str  # "gpu", "tpu", "hpu", "dataflow", "ipu"
    peak_tflops: dict[str, float]
    memory_gb: float | None
    memory_bw_gb_per_s: float | None
    interconnect: str
    link_gb_per_s_per_direction: float | None  # scale-up link, one direction, per device
    source: str
    notes: str = ""
    aliases: tuple[str, ...] = field(default_factory=tuple)
    # The vendor's 2:4 structured-sparsity peak over the dense one for tensor-core precisions
    # (NVIDIA prints exactly 2x from Ampere on); None where the vendor quotes no sparse peak.
    sparse_factor: float | None = None
    # The SM clock (MHz) the dense peaks are quoted at, with its source: a card running at
    # another clock reaches peak x clock / peak_clock_mhz (the clock-scaled MFU, issue 39)
    peak_clock_mhz: float | None = None
    peak_clock_source: str = ""

    def peak_flops_per_s(self, precision: str) -> float | None:
        """Dense peak FLOP/s for the precision that ran, or None if the table has none."""
        tflops = self.peak_tflops.get(precision)
        return tflops * 1e12 if tflops else None

    def sparse_peak_flops_per_s(self, precision: str) -> float | None:
        """The vendor's 2:4 sparse peak FLOP/s (tensor precisions, not FP32), or None: the
        denominator of executed-FLOPs utilisation, never of MFU."""
        dense = self.peak_flops_per_s(precision)
        if dense is None or self.sparse_factor is None or precision == "fp32":
            return None
        return dense * self.sparse_factor


def _one_gcd(module: DeviceSpec) -> DeviceSpec:
    """One of a two-die module's GCDs, which PyTorch shows as a device of its own: half the
    module's peaks, memory and bandwidth (its MFU against the whole module would read half)."""
    return replace(module, key=f"{module.key}-gcd", name=f"{module.name} (one GCD)",
                   peak_tflops={k: v / 2 for k, v in module.peak_tflops.items()},
                   memory_gb=module.memory_gb / 2,
                   memory_bw_gb_per_s=module.memory_bw_gb_per_s / 2,
                   source=f"derived: the {module.key} row / 2 (one of 2 GCDs)",
                   notes=f"what torch.cuda shows as one device on an {module.name}", aliases=())


_MI250 = DeviceSpec("mi250", "AMD Instinct MI250", "amd", "gpu",
                    {"fp32": 45.3, "fp16": 362.1, "bf16": 362.1}, 128, 3276.8,
                    "Infinity Fabric", None, "Emani et al. 2023 sec. II (AMD figures)",
                    notes="one OAM module = 2 GCDs; torch sees each as a device (mi250-gcd)")
_MI250X = DeviceSpec("mi250x", "AMD Instinct MI250X", "amd", "gpu",
                     {"fp16": 383, "bf16": 383}, 128, 3200,
                     "Infinity Fabric", None, "AMD MI250X product page",
                     notes="FP32 left out (vector/matrix figures unverified); 2 GCDs per "
                           "module (mi250x-gcd)")
_NV_DS = "NVIDIA datasheet (dense = half the sparsity figure)"
# the clocks the peaks are at, derived from the peaks: SMs x dense FLOP per SM per clock x clock
_A100_CLOCK = ("derived: 312 TFLOPS bf16 dense = 108 SMs x 2,048 FLOP/clock x 1,410 MHz, the "
               "A100 datasheet's boost clock")
_H100_CLOCK = ("derived: 989.4 TFLOPS bf16 dense = 132 SMs x 4,096 FLOP/clock x 1,830 MHz "
               "(NVIDIA H100 whitepaper: 132 SMs in SXM5, 1,024 dense bf16 FMA per SM a clock)")
_SPECS: tuple[DeviceSpec, ...] = (
    DeviceSpec("a100-40gb", "NVIDIA A100 SXM4 40GB", "nvidia", "gpu",
               {"fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312}, 40, 1555,
               "NVLink 3 (600 GB/s total)", 300, _NV_DS + "", sparse_factor=2.0,
               aliases=("a100",), peak_clock_mhz=1410, peak_clock_source=_A100_CLOCK),
    DeviceSpec("a100-80gb", "NVIDIA A100 SXM4 80GB", "nvidia", "gpu",
               {"fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312}, 80, 2039,
               "NVLink 3 (600 GB/s total)", 300, _NV_DS + "", sparse_factor=2.0,
               peak_clock_mhz=1410, peak_clock_source=_A100_CLOCK),
    DeviceSpec("h100-sxm", "NVIDIA H100 SXM5 80GB", "nvidia", "gpu",
               {"fp32": 67, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9}, 80, 3350,
               "NVLink 4 (900 GB/s total)", 450, _NV_DS + "", sparse_factor=2.0,
               aliases=("h100",), peak_clock_mhz=1830, peak_clock_source=_H100_CLOCK),
    DeviceSpec("h100-pcie", "NVIDIA H100 PCIe 80GB", "nvidia", "gpu",
               {"fp32": 51, "tf32": 378, "fp16": 756, "bf16": 756, "fp8": 1513}, 80, 2000,
               "PCIe Gen5 x16 (64 GB/s per direction)", 64,
               _NV_DS + " (H100 PCIe column), as tabled at archive-lib.hpctech.co.jp/gpuproduct/"
               "nvidia-h100.html (51 FP32; 756/1513/3026 TF32/BF16/FP8 with sparsity; 2000 GB/s)",
               sparse_factor=2.0),
    DeviceSpec("h200", "NVIDIA H200 SXM 141GB", "nvidia", "gpu",
               {"fp32": 67, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9}, 141, 4800,
               "NVLink 4 (900 GB/s total)", 450, _NV_DS + "; same die as H100 SXM",
               sparse_factor=2.0, peak_clock_mhz=1830, peak_clock_source=_H100_CLOCK),
    DeviceSpec("b200", "NVIDIA B200 (HGX) 180GB", "nvidia", "gpu",
               {"tf32": 1100, "fp16": 2250, "bf16": 2250, "fp8": 4500}, 180, 7700,
               "NVLink 5 (1.8 TB/s total)", 900, _NV_DS + "", sparse_factor=2.0,
               notes="FP32 (75-80 TFLOPS in sources) left out: sources disagree"),
    _MI250, _MI250X, _one_gcd(_MI250), _one_gcd(_MI250X),
    DeviceSpec("mi300x", "AMD Instinct MI300X", "amd", "gpu",
               {"fp32": 163.4, "fp16": 1307.4, "bf16": 1307.4, "fp8": 2614.9}, 192, 5300,
               "Infinity Fabric (7 links, 896 GB/s total)", 448,
               "AMD MI300X datasheet", notes="TF32 left out (unverified)",
               sparse_factor=2.0),
    DeviceSpec("gaudi2", "Intel Gaudi2 (HL-225H)", "intel", "hpu",
               {"bf16": 432, "fp16": 432}, 96, 2460,
               "24 x 100 GbE RoCE (300 GB/s total)", 150, "Intel Hot Chips 2024"),
    DeviceSpec("gaudi3", "Intel Gaudi3", "intel", "hpu",
               {"fp16": 1835, "bf16": 1835, "fp8": 1835}, 128, 3670,
               "24 x 200 GbE RoCE (600 GB/s total)", 300, "Intel Hot Chips 2024",
               notes="matrix engines; vector BF16 is 28.7 TFLOPS"),
    DeviceSpec("tpu-v4", "Google TPU v4", "google", "tpu", {"bf16": 275}, 32 * 1.073741824,
               1200, "ICI 3D torus", None, "cloud.google.com/tpu/docs/v4"),
    DeviceSpec("tpu-v5e", "Google TPU v5e", "google", "tpu", {"bf16": 197}, 16, 819,
               "ICI 2D torus", None, "cloud.google.com/tpu/docs/v5e"),
    DeviceSpec("tpu-v5p", "Google TPU v5p", "google", "tpu", {"bf16": 459}, 95, 2765,
               "ICI 3D torus", None, "cloud.google.com/tpu/docs/v5p"),
    DeviceSpec("cs-2", "Cerebras CS-2 (WSE-2)", "cerebras", "dataflow", {}, 40, None,
               "SwarmX / MemoryX (weight streaming)", None, "Emani et al. 2023 sec. II",
               notes="850,000 cores, 48 KB SRAM each; no verified public peak"),
    DeviceSpec("sn30", "SambaNova SN30 RDU", "sambanova", "dataflow", {}, 1000, None,
               "RDU-Connect", None, "Emani et al. 2023 sec. II",
               notes="1280 PCUs, 1 TB off-chip memory per RDU; no verified public peak"),
    DeviceSpec("bow-ipu", "Graphcore Bow IPU", "graphcore", "ipu", {"fp16": 343.75}, 0.9, None,
               "IPU-Links", None, "ALCF AI-testbed guide: Bow Pod64 = 22 PFLOPS FP16 (/64)",
               notes="900 MB on-chip SRAM; FP16 peak derived as 22 PFLOPS / 64 IPUs"),
)

SPECS: dict[str, DeviceSpec] = {s.key: s for s in _SPECS}


def get_spec(key: str) -> DeviceSpec:
    """Look up a device by key or alias, case-sensitive as every name ('H100-SXM' is
    refused); ConfigError names the known keys."""
    for spec in _SPECS:
        if key == spec.key or key in spec.aliases:
            return spec
    raise ConfigError("device", f"unknown device {key!r}", ", ".join(SPECS))
