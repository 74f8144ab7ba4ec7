"""`results list`: stored records filtered by machine and model, as a table with the device and
the machine each ran on.

A machine is what store/fingerprint.py says it is (`machine_fingerprint` of the record's
environment, the one definition resume uses too); `--machine` matches a prefix of that
fingerprint (the table's "machine id") or a piece of the machine's name as the report writes it
(device, count, torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from accelbench.config.errors import ConfigError
from accelbench.report.cells import layout_text
from accelbench.report.compare import workload_of
from accelbench.report.machines import machine_name
from accelbench.report.table import key_figure
from accelbench.report.table_width import KEY, FitTable
from accelbench.store.fingerprint import machine_fingerprint
from accelbench.store.record import Record

WORKLOAD_ID_CHARS = 6  # of the workload identity: cells with equal ones are comparable
MACHINE_ID_CHARS = 8  # of the fingerprint, shown in the table (enough to tell machines apart)
MACHINE_ALLOWED = "a piece of a machine's name, or a prefix of its machine id (results list)"


def device_label(environment: dict[str, Any]) -> str:
    """'NVIDIA H100 80GB HBM3 x4', 'AMD EPYC x1': the device name and count of a record."""
    name = environment.get("device_name") or environment.get("device_type") or "unknown"
    return f"{name} x{environment.get('device_count') or 1}"


def machine_id(environment: dict[str, Any]) -> str:
    """The start of the machine's fingerprint, as shown and as `--machine` takes it."""
    return machine_fingerprint(environment)[:MACHINE_ID_CHARS]


def on_machine(record: Record, machine: str) -> bool:
    """Whether the record ran on the machine named: a prefix of its fingerprint, or a piece of
    its name (case ignored)."""
    text = machine.strip().lower()
    return (machine_fingerprint(record.environment).startswith(text)
            or text in machine_name(record.environment).lower())


def select(records: Sequence[Record], machine: str | None = None,
           model: str | None = None) -> list[Record]:
    """The records on `machine` (see on_machine) of model `model` (the spec's model_name,
    exactly); None keeps all."""
    if machine is not None and not machine.strip():
        raise ConfigError("machine", "empty", MACHINE_ALLOWED)
    return [r for r in records
            if (machine is None or on_machine(r, machine))
            and (model is None or r.setup.model_name == model)]


def ranks(record: Record) -> str:
    """The processes a cell ran on (a 2-rank CPU run is 2, though the host has 1 device)."""
    count = record.setup.world_size
    return str(count) if count else "-"


def list_table(records: Sequence[Record]) -> Table:
    """One row per record: id, time, kind, model, status, device (name and count), ranks,
    layout, workload (its identity's first digits: equal means comparable), machine (its id)
    and key figure; the caption names each machine once (its id, name and host)."""
    table = FitTable(title="Results")
    for column, priority in (("id", KEY), ("created (UTC)", 3), ("kind", KEY), ("model", 1),
                             ("status", KEY), ("device", 2), ("ranks", 1), ("layout", 2),
                             ("workload", 5), ("machine", 4), ("key figure", KEY)):
        table.add_column(column, overflow="fold", priority=priority,
                         whole=column in ("id", "status", "machine"))
    machines: dict[str, str] = {}
    for r in records:
        env = r.environment
        machine = machine_id(env)
        machines.setdefault(machine, f"{machine_name(env)}, host {env.get('host')}")
        table.add_row(*(Text(cell) for cell in (
            str(r.id), r.created_utc[:16].replace("T", " "), r.kind,
            str(r.setup.model_name or ""), r.status, device_label(env), ranks(r),
            layout_text(r), (workload_of(r) or "-")[:WORKLOAD_ID_CHARS], machine,
            key_figure(r))))
    if machines:
        table.caption = Text("machines: " + "; ".join(f"{m} = {name}"
                                                      for m, name in machines.items()))
    return table
