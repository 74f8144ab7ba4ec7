"""The built-in workloads, one folder each: every package in this folder declares its `WORKLOAD`
and is found here (nothing lists them by hand), then registered in its `command_order`: the
order of the workloads' commands in `accelbench --help` and of the names a study's error lists.
Whatever runs workloads (the CLI, a script, the tests) imports this package; the kits below it
(bench, report) find them only through the registry (config/workload.py).

The longest-sequence search is not a workload of its own: it is genslm's `--longest-seq`, and
its probes are genslm's `seq-search` records.
"""

from __future__ import annotations

import importlib
import pkgutil

from accelbench.config.workload import Workload, get_workload, register


def find_workloads() -> tuple[Workload, ...]:
    """The `WORKLOAD` of each folder on this package's path, in command order (then by name);
    ValueError for a folder that declares none, never a workload left out without a word."""
    found = []
    for module in pkgutil.iter_modules(__path__):
        if not module.ispkg:
            continue
        package = importlib.import_module(f"{__name__}.{module.name}")
        if not isinstance(getattr(package, "WORKLOAD", None), Workload):
            raise ValueError(f"{package.__name__} declares no WORKLOAD (a Workload): every "
                             f"folder of {__name__} is a workload")
        found.append(package.WORKLOAD)
    return tuple(sorted(found, key=lambda w: (w.command_order, w.name)))


BUILT_IN = find_workloads()

for _workload in BUILT_IN:
    if get_workload(_workload.name) is None:  # a reload (tests) registers nothing twice
        register(_workload)
