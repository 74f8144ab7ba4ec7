"""Machines in a report: records from one or several databases told apart by the machine
fingerprint resume uses (results.fingerprint: device, count, drivers, torch, CPU, threads,
host) and named by device, count and software version; each machine's measured peaks settled
to one per precision (report/machine_peak.py), its cells' MFUs over it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.config.errors import ConfigError
from accelbench.report.machine_peak import Settled, rescaled, settle
from accelbench.store.fingerprint import machine_fingerprint
from accelbench.store.record import Record
from accelbench.store.store import ResultStore


def fingerprint(environment: dict[str, Any]) -> str:
    """What tells two machines apart in a report: the one machine fingerprint resume and
    `results list --machine` use (results.fingerprint)."""
    return machine_fingerprint(environment)


def short_version(version: Any) -> str:
    """'2.13.0+cpu' -> '2.13.0' (the build tag says what the device type already says)."""
    return str(version).split("+", 1)[0] if version else "unknown"


def machine_name(environment: dict[str, Any]) -> str:
    """'AMD EPYC (2 cores) cpu, torch 2.13.0' or 'NVIDIA H100 80GB HBM3 x1, torch 2.11.0'."""
    torch = short_version(environment.get("torch"))
    if environment.get("device_type", "cpu") == "cpu":
        cpu = environment.get("cpu") or environment.get("device_name") or "CPU"
        cores = environment.get("cpu_count")
        return f"{cpu} ({cores} cores) cpu, torch {torch}" if cores else f"{cpu} cpu, torch {torch}"
    name = environment.get("device_name") or environment.get("device_type")
    return f"{name} x{environment.get('device_count') or 1}, torch {torch}"


@dataclass(frozen=True)
class Machine:
    """One fingerprint's records, with its name and number in the report (from 1)."""

    index: int
    name: str
    key: str  # the machine fingerprint
    environment: dict[str, Any]
    records: tuple[Record, ...]
    sources: tuple[str, ...]
    peaks: tuple[Settled, ...] = ()  # measured peaks, one per precision (report/machine_peak.py)

    @property
    def label(self) -> str:
        """'M1': the machine's key in legends and tables (the Machines table names it once)."""
        return f"M{self.index}"


def load_records(paths: Sequence[Path]) -> list[tuple[str, Record]]:
    """Every record of every database, with the file it came from; a record present in two
    files (a merged copy) is kept once (by its uid; by run, time and kind where it has none)."""
    seen: set[Any] = set()
    loaded = []
    for path in paths:
        if not Path(path).is_file():
            raise ConfigError("db", f"no results database at {path}", "an existing .db file")
        store = ResultStore(path, write=False)  # read-only: a report changes no database
        try:
            records = store.query()
        finally:
            store.close()
        for record in records:
            key = getattr(record, "uid", "") or (record.run_id, record.created_utc, record.kind)
            if key not in seen:
                seen.add(key)
                loaded.append((Path(path).name, record))
    return loaded


def _unique_names(envs: list[dict[str, Any]]) -> list[str]:
    """Machine names, with the host added where two machines would share one, then a number."""
    plain = [machine_name(env) for env in envs]
    names = [f"{n}, host {env.get('host')}" if plain.count(n) > 1 else n
             for n, env in zip(plain, envs, strict=True)]
    return [f"{n} ({i + 1})" if names.count(n) > 1 else n for i, n in enumerate(names)]


def group_machines(loaded: list[tuple[str, Record]]) -> list[Machine]:
    """Records grouped by fingerprint, machines in the order they first appear."""
    groups: dict[tuple[str, ...], list[tuple[str, Record]]] = {}
    for source, record in loaded:
        groups.setdefault(fingerprint(record.environment), []).append((source, record))
    envs = [items[0][1].environment for items in groups.values()]
    names = _unique_names(envs)
    machines = []
    for i, (key, items) in enumerate(groups.items()):
        peaks = tuple(settle(items))  # one peak per precision: MFUs rescaled to it
        machines.append(Machine(i + 1, names[i], key, envs[i],
                                tuple(rescaled(r, list(peaks)) for _, r in items),
                                tuple(dict.fromkeys(s for s, _ in items)), peaks))
    return machines


def pick_baseline(machines: list[Machine], choice: str | None) -> Machine:
    """The machine speedups are measured against: by number (1 = the first, as the report
    numbers them, 'M1' too; a number is only ever a number, never a piece of a name), by exact
    name, or by a piece of the name that only one has."""
    if not machines:
        raise ConfigError("db", "no records in the databases given", "a database with records")
    if choice is None or not str(choice).strip():
        return machines[0]
    text = str(choice).strip()
    allowed = ", ".join(f"{m.index} ({m.name})" for m in machines)
    number = text[1:] if text[:1] in "mM" else text
    if number.isdigit():
        if 1 <= int(number) <= len(machines):
            return machines[int(number) - 1]
        raise ConfigError("baseline", f"{text!r} matches no machine: machines are numbered "
                          f"1 to {len(machines)}", allowed)
    exact = [m for m in machines if m.name == text]
    partial = [m for m in machines if text.lower() in m.name.lower()]
    if exact or len(partial) == 1:
        return (exact or partial)[0]
    problem = "matches several machines" if partial else "matches no machine"
    raise ConfigError("baseline", f"{text!r} {problem}", allowed)
