"""What one rank's energy meter measured over one timed window, as it hands it to rank 0 (a
plain dict across processes) and as the arithmetic reads it (analytics/cell_energy.py); no torch,
outside the energy package so that the torch-free layers may import it."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class EnergyWindow:
    """What one rank's source measured over one timed window."""

    source: str
    interval_s: float
    host: str
    host_wide: bool
    devices: tuple[str, ...]
    duration_s: float
    energy_j_per_device: tuple[float, ...]
    avg_power_w_per_device: tuple[float, ...]
    peak_power_w_per_device: tuple[float, ...]
    samples: int
    too_short: bool
    # the SM clock's mean over the window's samples, where the source reads clocks (NVML)
    mean_sm_clock_mhz_per_device: tuple[float, ...] | None = None

    def to_dict(self) -> dict:
        """Plain data, as a rank hands it to rank 0."""
        return asdict(self)

