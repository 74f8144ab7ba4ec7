"""Extrapolation flags: where a prediction leaves the envelope of the validated runs; no torch.

The envelope is made of the scored published runs (the runs whose leave-one-source-out
residuals make the intervals, accelbench.analytics.intervals). A prediction is flagged, with
the reason, when:
- its memory is above the headroom (default 0.9) of the device's usable memory;
- no validated run is on its device class, or none in its precision family on that class;
- its model size (active parameters), device count or sequence length lies outside the range
  of the validated runs;
- its MFU is above every validated run on its device class of comparable size (active
  parameters within a factor SIZE_BAND either way; the whole class when none is);
- it is a mixture of experts: the published MoE runs are checked, never fitted, and leave no
  residual in the intervals.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.analytics.intervals import precision_family
from accelbench.config.errors import ConfigError, require_finite
from accelbench.config.records.train import TrainFigure
from accelbench.config.vocab import GB

HEADROOM = 0.9
SIZE_BAND = 4.0


@dataclass(frozen=True)
class ValidatedRun:
    """What the envelope keeps of one scored run."""

    label: str
    device_class: str
    precision: str  # precision_family
    n_params: float  # active parameters
    n_devices: int
    seq_len: int
    mfu: float  # observed


@dataclass(frozen=True)
class Flag:
    """One reason a prediction is outside the validated envelope."""

    kind: str  # memory, device, precision, model size, scale, sequence, mfu, architecture
    reason: str
    value: str = ""  # the layout's own figure ("MFU 62.2%"), kept apart so reasons group

    @property
    def text(self) -> str:
        """The value and the reason in one phrase."""
        return f"{self.value} {self.reason}".strip()

    def to_dict(self) -> dict[str, str]:
        """Plain dict for JSON."""
        return {"kind": self.kind, "value": self.value, "reason": self.reason,
                "text": self.text}


def check_headroom(headroom: float) -> float:
    """A memory headroom in (0, 1] (ConfigError otherwise), as a fraction of usable memory."""
    require_finite("memory-headroom", headroom)
    if not 0 < headroom <= 1:
        raise ConfigError("memory-headroom", f"must be in (0, 1], got {headroom!r}",
                          "(0, 1], a fraction of usable memory; default 0.9")
    return headroom


def over_headroom(total_bytes: float, usable_bytes: float, headroom: float) -> bool:
    """Whether a layout's memory is above `headroom` of the usable memory."""
    return total_bytes > headroom * usable_bytes


def memory_flag(total_bytes: float, usable_bytes: float, headroom: float) -> Flag | None:
    """The memory flag of a layout above the headroom, else None."""
    if not over_headroom(total_bytes, usable_bytes, headroom):
        return None
    return Flag("memory", f"of usable memory, above the {headroom:.0%} headroom",
                f"{total_bytes / GB:.1f} GB, {total_bytes / usable_bytes:.0%}")


def _si(value: float) -> str:
    return f"{value / 1e9:.3g}B" if value >= 1e9 else f"{value / 1e6:.3g}M"


@dataclass(frozen=True)
class Envelope:
    """The validated runs, and the flags of a prediction against them."""

    runs: tuple[ValidatedRun, ...]

    def has_class(self, device_class: str) -> bool:
        """Whether any validated run is on this device class."""
        return any(r.device_class == device_class for r in self.runs)

    def _range_flags(self, n_params: float, n_devices: int, seq_len: int) -> list[Flag]:
        flags = []
        for kind, value, values, shown in (
                ("model size", n_params, [r.n_params for r in self.runs], _si),
                ("scale", n_devices, [r.n_devices for r in self.runs], lambda v: f"{v:,.0f}"),
                ("sequence", seq_len, [r.seq_len for r in self.runs], lambda v: f"{v:,.0f}")):
            low, high = min(values), max(values)
            if not low <= value <= high:
                flags.append(Flag(kind, f"outside the validated runs' {shown(low)}-"
                                        f"{shown(high)}", shown(value)))
        return flags

    def _mfu_flag(self, same: list[ValidatedRun], device_class: str, n_params: float,
                  mfu: float) -> Flag | None:
        near = [r for r in same if 1 / SIZE_BAND <= r.n_params / n_params <= SIZE_BAND]
        pool = near or same
        best = max(pool, key=lambda r: r.mfu)
        if mfu <= best.mfu:
            return None
        where = (f"of comparable size ({1 / SIZE_BAND:g}-{SIZE_BAND:g}x the parameters)"
                 if near else "of any size")
        return Flag(TrainFigure.MFU, f"above every validated {device_class} run {where}: best "
                           f"{best.mfu:.1%} ({best.label})", f"MFU {mfu:.1%}")

    def flags(self, device_class: str, dtype: str, n_params: float, n_devices: int,
              seq_len: int, mfu: float | None, moe: bool = False) -> list[Flag]:
        """Every way a prediction leaves the envelope (memory aside: memory_flag)."""
        flags: list[Flag] = []
        same = [r for r in self.runs if r.device_class == device_class]
        family = precision_family(dtype)
        if not same:
            flags.append(Flag("device", f"no validated run on {device_class}: the pooled fit, "
                                        "and the errors of classes predicted without their "
                                        "own runs"))
        elif not any(r.precision == family for r in same):
            flags.append(Flag("precision", f"no validated {dtype} run on {device_class}"))
        if moe:
            flags.append(Flag("architecture", "mixture of experts: the published MoE runs "
                                              "are checked, not fitted; intervals from dense "
                                              "runs"))
        flags += self._range_flags(n_params, n_devices, seq_len)
        if same and mfu is not None:  # against the same precision where validated (fp8 MFU
            # counts against the 16-bit peak, as published)
            flag = self._mfu_flag([r for r in same if r.precision == family] or same,
                                  device_class, n_params, mfu)
            if flag:
                flags.append(flag)
        return flags
