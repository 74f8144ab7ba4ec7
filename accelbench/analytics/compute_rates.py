"""The compute rates a step's operations are timed at (analytics/steptime.py): each device's
peaks by precision, the large-GEMM efficiency (fitted per device class, or given), the built-in
curves or a machine profile's, and sparse GEMMs' passes; pure arithmetic, no torch."""

from __future__ import annotations

from accelbench.analytics.cluster import ClusterSpec
from accelbench.analytics.efficiency import (
    BuiltinRates,
    ProfileRates,
    Rates,
    builtin_gemm_top,
    builtin_rates,
    device_class,
)
from accelbench.analytics.machine_profile import MachineProfile
from accelbench.analytics.train_setup import TrainSetup
from accelbench.analytics.training_widths import FP8_GEMM_EFFICIENCY, training_widths
from accelbench.config.errors import ConfigError
from accelbench.hardware.specs import DeviceSpec


def compute_efficiency(device: DeviceSpec, override: float | None = None) -> float:
    """The large-GEMM fraction of peak assumed: an override, else the device class's fitted
    top (analytics/efficiency.py)."""
    if override is not None:
        return override
    return builtin_gemm_top(device)[0]


def peak_flops(device: DeviceSpec, dtype: str) -> float:
    """Dense peak FLOP/s for the dtype; a device without one cannot be planned (no guessing)."""
    peak = device.peak_flops_per_s(dtype)
    if not peak:
        raise ConfigError("dtype", f"{device.key} has no {dtype} peak in the device table",
                          ", ".join(device.peak_tflops) or "none known")
    return peak


def compute_rates(device: DeviceSpec, dtype: str, efficiency: float | None = None
                  ) -> tuple[float, float]:
    """Large-GEMM FLOP/s of (block GEMMs, all other FLOPs): the same rate unless the precision
    runs its GEMMs at a peak of its own (fp8: the FP8 peak x FP8_GEMM_EFFICIENCY, the rest at
    the BF16 peak x the compute efficiency); smaller GEMMs reach less (efficiency.py)."""
    widths = training_widths(dtype)
    other = peak_flops(device, widths.peak) * compute_efficiency(device, efficiency)
    if not widths.fp8:
        return other, other
    return peak_flops(device, widths.gemm_peak) * FP8_GEMM_EFFICIENCY, other


def sparse_gemm_passes(setup: TrainSetup, device: DeviceSpec) -> tuple[float, float]:
    """The block GEMMs' time in forward-GEMM units for (forward + backward, one recompute):
    (3, 1) dense and masked dense (unstructured, or a device with no sparse peak); with 2:4
    on a device whose vendor quotes a sparse peak, the forward and input-gradient GEMMs at
    that peak and the weight gradient dense, as accelbench's 2:4 kernel path runs them. An
    ideal: measured 2:4 training speedups are often lower (docs/sparsity.md)."""
    factor = device.sparse_factor
    if setup.sparsity_pattern != "2:4" or not setup.sparsity or not factor:
        return 3.0, 1.0
    return 2.0 / factor + 1.0, 1.0 / factor


def sparse_compute_note(setup: TrainSetup, device: DeviceSpec) -> str:
    """How a sparse plan's GEMMs are timed, for the plan's notes."""
    if sparse_gemm_passes(setup, device)[0] == 3.0:
        return "masked dense: the same GEMM time as dense"
    return (f"forward and input-gradient GEMMs of the block matrices at the {device.key}'s 2:4 "
            f"peak ({device.sparse_factor:g}x dense), weight gradients dense: an ideal, "
            "measured 2:4 training speedups are often lower")


def layer_rates(cluster: ClusterSpec, dtype: str, efficiency: float | None = None) -> Rates:
    """The compute rates of this cluster's devices: its measured profile's curves, else the
    device class's built-in curves (`efficiency` replacing their fitted large-GEMM top)."""
    if cluster.profile is not None:
        return _profile_rates(cluster.profile, dtype)
    key = (cluster.device.key, dtype, efficiency)
    if key not in _BUILTIN_RATES:  # device keys are unique, variants included
        peak = peak_flops(cluster.device, training_widths(dtype).peak)
        _BUILTIN_RATES[key] = builtin_rates(cluster.device, dtype, peak, efficiency)
    return _BUILTIN_RATES[key]


_BUILTIN_RATES: dict[tuple[str, str, float | None], BuiltinRates] = {}


def compute_source(cluster: ClusterSpec, efficiency: float | None = None) -> str:
    """Where a plan's compute rates come from, in words."""
    if cluster.profile is not None:
        return f"machine profile, {cluster.profile.source}"
    if efficiency is not None:
        return f"built-in curves with a large-GEMM efficiency of {efficiency:g} (given)"
    top, source = builtin_gemm_top(cluster.device)
    return (f"built-in {device_class(cluster.device)} curves: large GEMMs at {top:.0%} of peak "
            f"({source})")


_PROFILE_RATES: dict[tuple[int, str], ProfileRates] = {}


def _profile_rates(profile: MachineProfile, dtype: str) -> ProfileRates:
    """One ProfileRates per profile and precision (kept, so that layer_cost's cache hits)."""
    key = (id(profile), dtype)
    if key not in _PROFILE_RATES or _PROFILE_RATES[key].profile is not profile:
        _PROFILE_RATES[key] = ProfileRates(profile, training_widths(dtype).peak)
    return _PROFILE_RATES[key]
