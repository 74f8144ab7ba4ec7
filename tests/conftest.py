"""Shared test set-up: keep results out of the user's store, torch small on 2 cores, and every
test under tests/dist marked `dist` (scripts/test --quick leaves them out)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

torch.set_num_threads(2)
DIST = Path(__file__).parent / "dist"


def pytest_collection_modifyitems(config, items):
    """A test under tests/dist launches processes: marked `dist`, whether its module says so."""
    for item in items:
        if DIST in item.path.parents:
            item.add_marker(pytest.mark.dist)


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
