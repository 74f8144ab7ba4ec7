"""A cell's energy from every rank's timed window: joules summed over ranks (a host-wide
counter such as RAPL once per host, since all its ranks read the same counter), joules per
token and tokens per joule over the tokens of the timed steps, and each device's figures
kept. Any rank without a reading leaves the cell's totals empty with the reason: a partial
sum would understate the cell."""

from __future__ import annotations

from typing import Any

UNAVAILABLE = "unavailable"


def _counted(windows: list[dict]) -> list[tuple[int, dict]]:
    """(rank, window) of the windows whose joules count: every device-own one, and one rank's
    per host of a host-wide source."""
    seen: set[tuple[str, str]] = set()
    counted = []
    for rank, w in enumerate(windows):
        key = (w["host"], w["source"])
        if w["host_wide"] and key in seen:
            continue
        seen.add(key)
        counted.append((rank, w))
    return counted


def _note(windows: list[dict], counted: list[tuple[int, dict]]) -> str | None:
    """What a reader must know: a too-short window, a host-wide counter shared by ranks."""
    notes = []
    short = [r for r, w in enumerate(windows) if w["too_short"]]
    if short:
        w = windows[short[0]]
        notes.append(f"window too short: {w['duration_s']:.3g} s is under 10 updates of the "
                     f"{w['source']} counter ({w['interval_s']:g} s), ranks {short}")
    if any(w["host_wide"] for w in windows):
        hosts = len({w["host"] for w in windows})
        notes.append(f"host-wide counter ({windows[0]['source']}: the whole CPU package and "
                     f"DRAM, other processes included), counted once per host ({hosts})")
    return "; ".join(notes) or None


def unavailable_fields(reason: str) -> dict[str, Any]:
    """A cell whose energy could not be measured: the reason, nothing estimated."""
    return {"energy_note": f"{UNAVAILABLE}: {reason}"}


def cell_energy(results: list[dict], tokens: float) -> dict[str, Any]:
    """Record fields from each rank's meter result (in rank order) over `tokens` tokens."""
    missing = [(r, res["unavailable"]) for r, res in enumerate(results) if "unavailable" in res]
    if missing:
        rank, reason = missing[0]
        return unavailable_fields(reason if len(results) == 1 else f"rank {rank}: {reason}")
    counted = _counted(results)
    total = sum(sum(w["energy_j_per_device"]) for _, w in counted)
    labels = [f"rank{r} {d}" for r, w in counted for d in w["devices"]]
    return {
        "energy_source": ",".join(dict.fromkeys(w["source"] for w in results)),
        "energy_interval_s": max(w["interval_s"] for w in results),
        "energy_window_s": max(w["duration_s"] for w in results),
        "energy_window_too_short": any(w["too_short"] for w in results),
        "energy_note": _note(results, counted),
        "energy_j": total,
        "energy_j_per_rank": [sum(w["energy_j_per_device"]) for w in results],
        "energy_devices": labels,
        "energy_j_per_device": [j for _, w in counted for j in w["energy_j_per_device"]],
        "avg_power_w_per_device": [p for _, w in counted for p in w["avg_power_w_per_device"]],
        "peak_power_w_per_device": [p for _, w in counted
                                    for p in w["peak_power_w_per_device"]],
        "energy_per_token_j": total / tokens if tokens and total > 0 else None,
        "tokens_per_j": tokens / total if total > 0 else None,
    }
