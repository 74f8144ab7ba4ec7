"""Where accelbench keeps its files: the default results database and the pending folder of
launched cells (a cell's spec, its ranks' heartbeats and rank 0's outcome, kept until the cell
is recorded, so that an outcome finished after its `accelbench` process died is recovered).

Pure path logic (no torch): the results layer opens the files, the launcher writes them; the
check of an output folder a user names only looks (stat, access), it makes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from accelbench.config.errors import ConfigError

PENDING_ENV = "ACCELBENCH_PENDING_DIR"
PENDING_NAME = "accelbench-pending"


def default_db_path() -> Path:
    """$ACCELBENCH_DB, else $XDG_DATA_HOME/accelbench/results.db (~/.local/share by default)."""
    if os.environ.get("ACCELBENCH_DB"):
        return Path(os.environ["ACCELBENCH_DB"])
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "accelbench" / "results.db"


def pending_dir(db: Path | str | None = None) -> Path:
    """The pending folder of cells launched to be recorded into `db`: $ACCELBENCH_PENDING_DIR,
    else `accelbench-pending/` beside that database (the default one when `db` is None)."""
    if os.environ.get(PENDING_ENV):
        return Path(os.environ[PENDING_ENV])
    target = Path(db) if db else default_db_path()
    return target.expanduser().absolute().parent / PENDING_NAME


def check_out_dir(out_dir: Path, field: str = "out") -> Path:
    """An output folder that exists, or can be made: not a file, under a folder this process
    can write in (checked before anything is read or written; ConfigError naming `field`)."""
    allowed = "a folder (made if missing) this user can write in"
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(field, f"{out_dir} is a file, not a folder", allowed)
    existing = out_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(field, f"{out_dir} cannot be made: {existing} is a file", allowed)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(field, f"{existing} is not writable by this user", allowed)
    return out_dir
