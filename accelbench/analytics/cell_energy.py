"""A cell's energy from every rank's timed window: joules summed over ranks (a host-wide
counter such as RAPL once per host, since all its ranks read the same counter), joules per
token and tokens per joule over the tokens of the timed steps, and each device's figures
kept. Any rank without a reading leaves the cell's totals empty with the reason: a partial
sum would understate the cell."""

from __future__ import annotations

from accelbench.config.records.fields import EnergyFields
from accelbench.hardware.energy_window import EnergyWindow

UNAVAILABLE = "unavailable"


def _counted(windows: list[EnergyWindow]) -> list[tuple[int, EnergyWindow]]:
    """(rank, window) of the windows whose joules count: every device-own one, and one rank's
    per host of a host-wide source."""
    seen: set[tuple[str, str]] = set()
    counted = []
    for rank, w in enumerate(windows):
        key = (w.host, w.source)
        if w.host_wide and key in seen:
            continue
        seen.add(key)
        counted.append((rank, w))
    return counted


def _note(windows: list[EnergyWindow], counted: list[tuple[int, EnergyWindow]]) -> str | None:
    """What a reader must know: a too-short window, a host-wide counter shared by ranks."""
    notes = []
    short = [r for r, w in enumerate(windows) if w.too_short]
    if short:
        w = windows[short[0]]
        notes.append(f"window too short: {w.duration_s:.3g} s is under 10 updates of the "
                     f"{w.source} counter ({w.interval_s:g} s), ranks {short}")
    if any(w.host_wide for w in windows):
        hosts = len({w.host for w in windows})
        notes.append(f"host-wide counter ({windows[0].source}: the whole CPU package and "
                     f"DRAM, other processes included), counted once per host ({hosts})")
    return "; ".join(notes) or None


def _clocks(counted: list[tuple[int, EnergyWindow]]) -> dict:
    """The mean SM clock of every device over its window, and their mean; none unless every
    window read clocks."""
    per_device = [c for _, w in counted for c in (w.mean_sm_clock_mhz_per_device or ())]
    if not per_device or any(w.mean_sm_clock_mhz_per_device is None for _, w in counted):
        return {}
    return dict(sm_clock_mhz_mean_per_device=per_device,
                sm_clock_mhz_mean=sum(per_device) / len(per_device))


def unavailable_fields(reason: str) -> EnergyFields:
    """A cell whose energy could not be measured: the reason, nothing estimated."""
    return EnergyFields(energy_note=f"{UNAVAILABLE}: {reason}")


def cell_energy(results: list[dict], tokens: float) -> EnergyFields:
    """The record's energy fields from each rank's meter result (in rank order: a window's
    to_dict(), or {'unavailable': reason}) over `tokens` tokens."""
    missing = [(r, res[UNAVAILABLE]) for r, res in enumerate(results) if UNAVAILABLE in res]
    if missing:
        rank, reason = missing[0]
        return unavailable_fields(reason if len(results) == 1 else f"rank {rank}: {reason}")
    windows = [EnergyWindow(**res) for res in results]
    counted = _counted(windows)
    total = sum(sum(w.energy_j_per_device) for _, w in counted)
    return EnergyFields(
        energy_source=",".join(dict.fromkeys(w.source for w in windows)),
        energy_interval_s=max(w.interval_s for w in windows),
        energy_window_s=max(w.duration_s for w in windows),
        energy_window_too_short=any(w.too_short for w in windows),
        energy_note=_note(windows, counted),
        energy_j=total,
        energy_j_per_rank=[sum(w.energy_j_per_device) for w in windows],
        energy_devices=[f"rank{r} {d}" for r, w in counted for d in w.devices],
        energy_j_per_device=[j for _, w in counted for j in w.energy_j_per_device],
        avg_power_w_per_device=[p for _, w in counted for p in w.avg_power_w_per_device],
        peak_power_w_per_device=[p for _, w in counted for p in w.peak_power_w_per_device],
        **_clocks(counted),
        energy_per_token_j=total / tokens if tokens and total > 0 else None,
        tokens_per_j=tokens / total if total > 0 else None,
    )
