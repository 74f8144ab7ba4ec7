"""Energy per timed window: one source interface (NVML, amdsmi, HLML, RAPL), a meter that
brackets a window, and 'unavailable: <reason>' where the machine has no counter
(docs/energy.md)."""

from accelbench.hardware.energy.choose import open_meter, open_source, set_source_factory
from accelbench.hardware.energy.meter import EnergyMeter, EnergyWindow
from accelbench.hardware.energy.source import EnergySource, Unavailable

__all__ = ["EnergyMeter", "EnergySource", "EnergyWindow", "Unavailable", "open_meter",
           "open_source", "set_source_factory"]
