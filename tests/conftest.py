"""Shared test set-up: keep results out of the user's store, torch small on 2 cores, and every
test under tests/dist marked `dist` (scripts/test --quick leaves them out)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import accelbench.workloads  # noqa: F401 - registers the built-in workloads, as the CLI does
from accelbench.config.trial_count import AUTO_TRIALS

# Two threads on 2 cores; one a process when pytest-xdist runs two test processes at once
# (scripts/test -n 2), so that they do not oversubscribe the cores: the test process, and every
# process a test starts (a CLI, a study; launched ranks run one thread each anyway).
torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else 2)
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
# The test suite's quick peak (bench/gemm_peak.py quick_test_peak), in this process and every
# process a test starts: a peak measured beside the other test process is always disturbed, so it
# is measured once, not again after pauses; and at GEMM sizes up to 512 (a 1024 fp32 peak is ~7 s
# of CPU: 37 of them were ~190 s of the suite's 19 min).
os.environ["ACCELBENCH_TEST_PEAK"] = "quick"
# glibc gives a freed block of 128 KiB or more (a tensor) back to the kernel and maps it afresh
# at the next allocation, so a CPU training step faults its activations in again every time: in
# a 2-rank launch of the straggler and ZeRO cases the kernel took 6.8 s of 21 s of CPU, against
# 1.8 s with these two settings (docs/design.md). Every process the suite starts keeps such
# blocks (test processes too: xdist starts them after this runs); settings of the user's own
# win. What tests measure of CPU memory is malloc's bytes in use (hardware/device.py
# heap_in_use_bytes), which they do not change.
for _name, _bytes in (("MALLOC_MMAP_THRESHOLD_", 1 << 30), ("MALLOC_TRIM_THRESHOLD_", 1 << 32)):
    os.environ.setdefault(_name, str(_bytes))
DIST = Path(__file__).parent / "dist"
# Off a terminal the tables fit COLUMNS when it is set (report/table_width.py): every test, and
# every process a test starts, sees none, whatever the shell exported (pytest-xdist's workers get
# COLUMNS=80); a test of the fitting sets it itself. GNU readline, once imported (pytest imports
# it), has put LINES and COLUMNS of the terminal it found (80x24 without one) into the C
# environment that subprocesses inherit, not into os.environ: both are unset there too.
try:
    import readline  # noqa: F401 - its import sets them; imported first, so that they stay unset
except ImportError:
    pass
for _size in ("COLUMNS", "LINES"):
    os.environ.pop(_size, None)
    os.unsetenv(_size)


@pytest.fixture(autouse=True)
def _one_trial_when_auto(monkeypatch):
    """`--trials auto` gives a cell 3 trials on a CPU (config/trial_count.py): in this process the
    tests' sweeps run one unless they ask for more, so the suite's time does not triple
    (tests/unit/test_trials.py runs trials; a CLI a test starts as a process keeps auto's 3)."""
    monkeypatch.setitem(AUTO_TRIALS, "cpu", 1)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """A test under tests/dist launches processes: marked `dist`, whether its module says so.
    Under `-n 2 --dist loadgroup` an xdist group's tests run one after the other on one test
    process. A dist test is in the group "dist" unless its module names another: the modules
    that share a torchrun launch (launch_cases.py), launch 3 to 8 ranks, or time a signal or a
    fault. Modules that launch one 2-rank job at a time are in "dist-2ranks" (their own
    pytestmark), which the other test process runs beside "dist": at most two launches at once
    (more oversubscribe 2 cores several times over), and the unit tests fill both processes
    around them. A unit module whose tests share a costly module fixture names a group of its
    own, so that one process builds it. The marks are set before pytest-xdist reads them (its
    own hook runs inside this wrapper); _keep_group_ids then makes its grouping take effect.
    On a test process of xdist the tests marked `slow` come first (xdist hands out the groups,
    largest first, then the other tests in this order): the long ones start early and the short
    ones even out the end, where one process would otherwise wait for the other's last."""
    for item in items:
        if DIST in item.path.parents:
            item.add_marker(pytest.mark.dist)
            if item.get_closest_marker("xdist_group") is None:
                item.add_marker(pytest.mark.xdist_group("dist"))
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every test process sorts the same way
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    result = yield
    _keep_group_ids(config, items)
    return result


def _keep_group_ids(config, items) -> None:
    """pytest-xdist 3.8 groups a test by appending '@group' to its node id in the legacy field
    `_nodeid`, which pytest 9.2 no longer reads (node ids are structured, `_id`): every group
    was silently spread over both test processes, and a launch shared by a group's modules ran
    once on each (pytest-dev/pytest-xdist#1386). Where xdist wrote a suffixed id that pytest
    does not show, the structured id takes it; a no-op on older pytest and on a fixed xdist."""
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # pytest before 9.2: `_nodeid` is the node id itself
        return
    for item in items:
        legacy = item.__dict__.get("_nodeid")
        if isinstance(legacy, str) and legacy != item.nodeid and hasattr(item, "_id"):
            item._id = NodeId.parse(legacy)


@pytest.fixture(scope="session", autouse=True)
def _session_db(tmp_path_factory):
    """Module- and session-scoped fixtures are set up before a test's own store: what they
    record (and the launched cells' pending folder beside it) goes to a store of the
    session's, never the user's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ACCELBENCH_DB", str(tmp_path_factory.mktemp("session") / "results.db"))
        yield


@pytest.fixture(autouse=True)
def _isolated_db(tmp_path, monkeypatch):
    """Every test writes results to its own temporary store."""
    monkeypatch.setenv("ACCELBENCH_DB", str(tmp_path / "results.db"))


@pytest.fixture
def one_rank_group():
    """A real gloo process group of one rank (code that needs a group, with no peers)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()
