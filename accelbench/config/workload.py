"""The workload registry: what a benchmark is, declared once, and the list every part iterates.

A `Workload` says what a kind of experiment is (block, train, genslm, scale, calibrate, noise, or
one a test or plug-in adds): its options dataclass (the one source of the command's options, a
study file's keys and their validation), its record kinds and their metrics classes, the axes
one study sweep takes as lists, and its parts as typed callables: the spec builder, the runner,
the study planner, the table a run prints and the report's sections. Each workload's folder
(accelbench/workloads/<name>/) declares them in its `__init__.py` as small functions that import
their torch-heavy module when called, so declaring, listing and `--help` stay instant and an
editor follows every call.

This module is the bottom of it (config: no torch, no other layer): accelbench/workloads/
registers the built-in workloads, the command bodies are in cli/workloads.py; the CLI, the study
planner, the export and the report iterate over `workloads()` and never import a workload.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from accelbench.config.record_kinds import METRICS_BY_KIND

Part = Callable[..., Any]  # a workload's part: a function that imports what it needs when called

OUTPUTS = ("db", "json_out", "csv_out", "output", "quiet", "rerun", "remeasure_peak", "wide")


@dataclass(frozen=True)
class Workload:
    """One kind of experiment, declared once.

    `options`: a dataclass whose fields are the command's options (metadata help, flag,
    choices) and a study experiment's keys; `defaults` override its defaults for this workload,
    `skip` leaves fields out. `kinds`: every record kind its runs write and the metrics class
    each is written from. `build`: options -> spec (ConfigError on bad input, before anything
    runs). `run`: (spec, sink, step, cell, skip) -> outcomes. `plan`: (values, planner) -> a
    study sweep (bench/study_planner.py), None when studies cannot name it. `table`:
    (records, title) -> the table its command prints. `sections`: each (machines) -> a report
    Section, in order; `section_order` places them in the report (the paper's order, then the
    order registered). `command_order` places a built-in workload among the others (its command
    in `accelbench --help`, its name in a study's listing; accelbench/workloads/ sorts its
    folders by it). `axes`: the options one study sweep takes as comma lists. `outputs`: the
    output options its command takes (OUTPUTS)."""

    name: str
    help: str
    options: type
    kinds: Mapping[str, type]
    build: Part
    run: Part
    table: Part
    plan: Part | None = None
    sections: tuple[Part, ...] = ()
    section_order: int = 100
    command_order: int = 100
    axes: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)
    skip: tuple[str, ...] = ()
    outputs: tuple[str, ...] = OUTPUTS

    def __post_init__(self) -> None:
        object.__setattr__(self, "kinds", MappingProxyType(dict(self.kinds)))
        object.__setattr__(self, "defaults", MappingProxyType(dict(self.defaults)))


_REGISTRY: dict[str, Workload] = {}


def register(workload: Workload) -> Workload:
    """Add a workload; ValueError if the name is taken, or if a record kind it writes is not
    declared by a schema module (config/records/) or is declared with another metrics class.
    The kind table is never changed here: a workload's kinds are declared before it runs."""
    if workload.name in _REGISTRY:
        raise ValueError(f"workload {workload.name!r} is registered already")
    for kind, metrics in workload.kinds.items():
        declared = METRICS_BY_KIND.get(kind)
        if declared is None:
            raise ValueError(f"workload {workload.name!r} writes record kind {kind!r}, which no "
                             f"schema module declares (add one to accelbench/config/records/ "
                             f"with KINDS = {{{kind!r}: RecordKind({metrics.__name__})}})")
        if declared is not metrics:
            raise ValueError(f"record kind {kind!r} is declared with {declared.__name__}, "
                             f"not {metrics.__name__}")
    _REGISTRY[workload.name] = workload
    return workload


def unregister(name: str) -> None:
    """Remove a workload (tests register toy workloads); its kinds stay declared."""
    del _REGISTRY[name]


@contextmanager
def registered(workload: Workload) -> Iterator[Workload]:
    """A workload registered for the block's duration."""
    register(workload)
    try:
        yield workload
    finally:
        unregister(workload.name)


def workloads() -> tuple[Workload, ...]:
    """Every registered workload, in the order registered."""
    return tuple(_REGISTRY.values())


def report_sections() -> tuple[Part, ...]:
    """Every registered workload's report sections, in the report's order (section_order, then
    the order registered)."""
    ordered = sorted(workloads(), key=lambda w: w.section_order)  # stable: registration order
    return tuple(section for w in ordered for section in w.sections)


def get_workload(name: str) -> Workload | None:
    """The workload of this name, or None."""
    return _REGISTRY.get(name)
