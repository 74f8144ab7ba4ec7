"""The suite keeps out of the user's store: a module-scoped fixture, set up before a test's own
temporary store, already records into a store of the session's (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.config.paths import default_db_path, pending_dir


@pytest.fixture(scope="module")
def module_paths() -> tuple[Path, Path]:
    return default_db_path(), pending_dir()


def test_a_module_fixture_records_into_the_session_store_not_the_users(module_paths,
                                                                       tmp_path_factory):
    db, pending = module_paths
    base = tmp_path_factory.getbasetemp()
    assert db.is_relative_to(base) and pending.is_relative_to(base), (db, pending)


def test_a_test_records_into_its_own_store(tmp_path):
    assert default_db_path() == tmp_path / "results.db"
