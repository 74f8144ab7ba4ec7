"""Shared test set-up: keep results out of the user's store, and torch small on 2 cores."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(2)


@pytest.fixture(autouse=True)
def _isolated_db(tmp_path, monkeypatch):
    """Every test writes results to its own temporary store."""
    monkeypatch.setenv("ACCELBENCH_DB", str(tmp_path / "results.db"))
