"""The built-in workloads, one folder each, registered on import in this order: the order of
the workloads' commands in `accelbench --help` and of the names a study's error lists. Whatever
runs workloads (the CLI, a script, the tests) imports this package; the kits below it (bench,
report) find them only through the registry (config/workload.py).

The longest-sequence search is not a workload of its own: it is genslm's `--longest-seq`, and
its probes are genslm's `seq-search` records.
"""

from __future__ import annotations

from accelbench.config.workload import get_workload, register
from accelbench.workloads import block, calibrate, genslm, noise, scale, train

BUILT_IN = (block.WORKLOAD, train.WORKLOAD, genslm.WORKLOAD, scale.WORKLOAD, calibrate.WORKLOAD,
            noise.WORKLOAD)

for _workload in BUILT_IN:
    if get_workload(_workload.name) is None:  # a reload (tests) registers nothing twice
        register(_workload)
