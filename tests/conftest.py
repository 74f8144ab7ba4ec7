"""Shared test set-up: keep results out of the user's store, torch small on 2 cores, and every
test under tests/dist marked `dist` (scripts/test --quick leaves them out)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

# Two threads on 2 cores; one a process when pytest-xdist runs two test processes at once
# (scripts/test -n 2), so that they do not oversubscribe the cores.
torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else 2)
DIST = Path(__file__).parent / "dist"
# Off a terminal the tables fit COLUMNS when it is set (results/fit.py): every test, and every
# process a test starts, sees none, whatever the shell exported (pytest-xdist's workers get
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


def pytest_collection_modifyitems(config, items):
    """A test under tests/dist launches processes: marked `dist`, whether its module says so,
    and in one xdist group, so that under `-n 2` the launches run one at a time on one test
    process (two at once oversubscribe 2 cores several times over) while the other process
    takes the unit tests; modules that share a torchrun launch (launch_cases.py) so share it."""
    for item in items:
        if DIST in item.path.parents:
            item.add_marker(pytest.mark.dist)
            item.add_marker(pytest.mark.xdist_group("dist"))


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
