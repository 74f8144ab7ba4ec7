"""Linux powercap RAPL: the CPU packages' and their DRAM's cumulative energy, as the kernel
exposes it under /sys/class/powercap (AMD EPYC's counters appear there as intel-rapl too).

What it measures is the host, not one process: every rank on the host reads the same counters,
so a cell counts them once per host. Package energy covers cores and uncore; DRAM is its own
domain where the platform has one. The counters update about every millisecond and wrap at
max_energy_range_uj. Since Linux 5.10 energy_uj is readable by root only (the Platypus
side channel): an unreadable counter makes the source unavailable, with that reason.
"""

from __future__ import annotations

from pathlib import Path

from accelbench.hardware.energy.source import Unavailable, Unwrapped

POWERCAP = Path("/sys/class/powercap")
INTERVAL_S = 0.001  # Intel SDM: the energy status counters update about every 1 ms
_KEPT = ("package", "dram")  # psys (the platform) would count the packages twice


def _zone_label(zone: Path) -> str | None:
    """'package-0' or 'dram-0' for a zone worth reading, None otherwise (core, uncore, psys:
    parts or supersets of a package)."""
    name = (zone / "name").read_text().strip()
    if name.startswith("package"):
        return name
    if name == "dram":
        package = zone.name.split(":")[1]
        return f"dram-{package}"
    return None


def rapl_zones(root: Path = POWERCAP) -> list[tuple[str, Path]]:
    """(label, zone folder) of every package and DRAM zone under `root`, in name order."""
    zones = sorted(root.glob("intel-rapl:*")) if root.is_dir() else []
    found = []
    for zone in zones:
        label = _zone_label(zone) if (zone / "name").is_file() else None
        if label is not None:
            found.append((label, zone))
    return found


class RaplSource:
    """Cumulative joules of each package and DRAM zone, wrap-around undone."""

    name = "rapl"
    interval_s = INTERVAL_S
    host_wide = True

    def __init__(self, zones: list[tuple[str, Path]]) -> None:
        self.devices = tuple(label for label, _ in zones)
        self._files = [zone / "energy_uj" for _, zone in zones]
        self._counters = [Unwrapped(float((zone / "max_energy_range_uj").read_text()))
                          for _, zone in zones]
        self.read_j()  # the first reading is every counter's zero

    def read_j(self) -> tuple[float, ...]:
        """Joules per zone since the source was opened."""
        return tuple(c.update(float(f.read_text())) / 1e6
                     for c, f in zip(self._counters, self._files, strict=True))

    def power_w(self) -> None:
        """RAPL reports energy only: power comes from the counter's differences."""
        return None

    def close(self) -> None:
        """Nothing held open: every reading opens its file."""


def open_rapl(root: Path = POWERCAP) -> RaplSource | Unavailable:
    """The host's RAPL counters, or why they cannot be read."""
    if not root.is_dir():
        return Unavailable(f"no {root} (no powercap driver, or a VM that hides it)")
    zones = rapl_zones(root)
    if not zones:
        return Unavailable(f"no package or dram zone under {root}")
    try:
        return RaplSource(zones)
    except PermissionError:
        return Unavailable(f"{zones[0][1] / 'energy_uj'} is not readable (root only since "
                           "Linux 5.10)")
    except (OSError, ValueError) as err:
        return Unavailable(f"RAPL counters unreadable: {err}")
