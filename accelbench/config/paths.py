"""Where accelbench keeps its files: the default results database and the pending folder of
launched cells (a cell's spec, its ranks' heartbeats and rank 0's outcome, kept until the cell
is recorded, so that an outcome finished after its `accelbench` process died is recovered).

Pure path logic (no torch, no I/O): the results layer opens the files, the launcher writes them.
"""

from __future__ import annotations

import os
from pathlib import Path

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
