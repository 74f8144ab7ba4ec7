"""Throughput and utilisation from a measured time: TFLOPS, tokens/s, MFU, HFU, scaling."""

from __future__ import annotations


def per_second(amount: float, seconds: float) -> float:
    """Rate of `amount` over `seconds`; raises on a non-positive time instead of dividing by it."""
    if seconds <= 0:
        raise ValueError(f"time must be positive, got {seconds}")
    return amount / seconds


def tflops(flops: float, seconds: float) -> float:
    """Achieved TFLOP/s (10^12 FLOPs per second)."""
    return per_second(flops, seconds) / 1e12


def utilisation(flops: float, seconds: float, peak_flops_per_s: float | None) -> float | None:
    """Achieved over peak FLOP/s, a fraction in [0, ...); None when no peak is known.

    With model FLOPs this is MFU; with hardware FLOPs (recompute included) it is HFU.
    """
    if not peak_flops_per_s:
        return None
    return per_second(flops, seconds) / peak_flops_per_s


def at_measured_clock(utilisation_: float | None, peak_clock_mhz: float | None,
                      clock_mhz: float | None) -> float | None:
    """A utilisation against the peak at the clock the device ran (peak x clock /
    peak_clock_mhz, the peak's own clock from the datasheet): a card held at 1,500 MHz by its
    power cap is judged against what 1,500 MHz can do. None without any of the three."""
    if utilisation_ is None or not peak_clock_mhz or not clock_mhz:
        return None
    return utilisation_ * peak_clock_mhz / clock_mhz


def mean_clock(clocks: list[float | None]) -> float | None:
    """The mean of trials' window-mean clocks (MHz); None when a trial read none."""
    if not clocks or any(c is None for c in clocks):
        return None
    return sum(clocks) / len(clocks)  # type: ignore[arg-type]


def speedup(time_base_s: float, time_s: float) -> float:
    """How many times faster than the baseline."""
    return per_second(time_base_s, time_s)


def scaling_efficiency(throughput: float, base_throughput: float, devices: int,
                       base_devices: int = 1) -> float:
    """Throughput gained over the ideal linear gain (weak scaling: same work per device)."""
    ideal = base_throughput * devices / base_devices
    return throughput / ideal
