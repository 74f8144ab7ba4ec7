"""The results database file, checked before anything is measured and never changed unless ours.

Opening checks, in order, each a one-line `ConfigError` on field `db`: the path is not empty and
not a folder; an existing file can be read, starts with SQLite's header, passes
`PRAGMA quick_check` and holds only accelbench's tables (looked at through a read-only
connection, so another program's database is refused without a byte of it changing); to write,
the file opens for writing and its folder can be created and written (SQLite keeps its `-wal`
and `-shm` files there). SQLite's busy and locked answers are retried with a bounded backoff
(`BUSY_BUDGET_S`), and the schema is created in one immediate transaction with
`IF NOT EXISTS`, so several processes may open a new file at the same instant.
"""

from __future__ import annotations

import random
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, suppress
from pathlib import Path
from typing import TypeVar

from accelbench.config.errors import ConfigError

T = TypeVar("T")

BUSY_BUDGET_S = 30.0  # how long busy/locked answers are retried, in all, per operation
_TIMEOUT_S = 2.0  # SQLite's own busy wait inside one attempt
SQLITE_HEADER = b"SQLite format 3\x00"
OUR_TABLES = frozenset({"results", "trials", "sqlite_sequence"})
OUR_COLUMNS = frozenset({"id", "run_id", "kind", "status", "created_utc", "schema_version",
                         "record_json"})
ALLOWED = "a new file, or an accelbench results database that can be read and written"
ALLOWED_READ = "a missing file, or an accelbench results database that can be read"

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    created_utc TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    record_json TEXT NOT NULL,
    uid TEXT
)""",
    "CREATE INDEX IF NOT EXISTS results_run ON results(run_id)",
    """CREATE TRIGGER IF NOT EXISTS results_immutable BEFORE UPDATE ON results
BEGIN SELECT RAISE(ABORT, 'result records are immutable'); END""",
    """CREATE TRIGGER IF NOT EXISTS results_undeletable BEFORE DELETE ON results
BEGIN SELECT RAISE(ABORT, 'result records are immutable: not deleted'); END""",
)
# Each finished trial of a cell, stored as it ends (store/trial_rows.py): part of its cell's record
# once that is made, never a result of its own. Made with the first trial kept (ensure_trials),
# so that opening a store changes nothing until something is written.
TRIALS_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    trial INTEGER NOT NULL,
    created_utc TEXT NOT NULL,
    trial_json TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS trials_cell ON trials(fingerprint)",
    """CREATE TRIGGER IF NOT EXISTS trials_immutable BEFORE UPDATE ON trials
BEGIN SELECT RAISE(ABORT, 'kept trials are immutable'); END""",
    """CREATE TRIGGER IF NOT EXISTS trials_undeletable BEFORE DELETE ON trials
BEGIN SELECT RAISE(ABORT, 'kept trials are immutable: not deleted'); END""",
)
UID_INDEX = "CREATE UNIQUE INDEX IF NOT EXISTS results_uid ON results(uid)"


def db_error(path: Path | str, problem: str, write: bool = True) -> ConfigError:
    """The one-line refusal of a database path."""
    return ConfigError("db", f"'{path}' {problem}", ALLOWED if write else ALLOWED_READ)


def is_busy(err: sqlite3.Error) -> bool:
    """SQLite said busy or locked: another connection holds the lock, try again later."""
    code = getattr(err, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(err).lower()
    return "locked" in text or "busy" in text


def retry_busy(action: Callable[[], T], budget_s: float = BUSY_BUDGET_S) -> T:
    """`action()`, run again with a growing, jittered pause while SQLite answers busy or locked,
    for at most `budget_s` seconds in all; then the last error is raised."""
    deadline = time.monotonic() + budget_s
    delay = 0.01
    while True:
        try:
            return action()
        except sqlite3.OperationalError as err:
            left = deadline - time.monotonic()
            if not is_busy(err) or left <= 0:
                raise
        time.sleep(min(delay * (0.5 + random.random()), left))
        delay = min(2 * delay, 1.0)


def check_path(path: Path | str, write: bool = True) -> Path:
    """The path as a Path, refused when it cannot name a database file."""
    if str(path).strip() in ("", "."):
        raise ConfigError("db", "empty path", "a path to an SQLite file, e.g. results.db")
    path = Path(path).expanduser()
    if path.is_dir():
        raise db_error(path, "is a directory", write)
    if path.exists() and not path.is_file():
        raise db_error(path, "is not a regular file", write)
    return path


def connect_write(path: Path, timeout: float = _TIMEOUT_S) -> sqlite3.Connection:
    """A connection that writes, committing only when told (isolation_level None), every
    commit synced to disk (synchronous=FULL)."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    conn.execute("PRAGMA synchronous=FULL")
    return conn


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One immediate write transaction on a `connect_write` connection: the write lock taken at
    the start (so busy is answered before anything is done), committed when the block ends,
    rolled back on any exception (which is raised again), so nothing is ever half-written."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


def connect_read(path: Path, timeout: float = _TIMEOUT_S) -> sqlite3.Connection:
    """A read-only connection: it cannot change the file. In a folder we may not write, where
    SQLite cannot make the `-shm` file a WAL database needs, the file is opened as immutable."""
    from urllib.request import pathname2url  # here: urllib.request loads http, email and ssl

    uri = "file:" + pathname2url(str(path.resolve()))
    conn = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=timeout)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as err:
        conn.close()
        if "unable to open" not in str(err):
            raise
        conn = sqlite3.connect(uri + "?immutable=1", uri=True, timeout=timeout)
    return conn


def _read_head(path: Path, write: bool) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(100)
    except OSError as err:
        raise db_error(path, f"cannot be read ({err.strerror or err})", write) from err


def _inspect(path: Path, write: bool) -> None:
    """Refuse a corrupt file or another program's database (read-only connection)."""
    with closing(connect_read(path)) as conn:
        rows = conn.execute("PRAGMA quick_check").fetchall()
        if [tuple(r) for r in rows] != [("ok",)]:
            first = " ".join(str(rows[0][0]).replace("*** in database main ***", "").split())
            more = f"; {len(rows)} problems" if len(rows) > 1 else ""
            first = first if len(first) <= 100 else first[:100] + "..."
            raise db_error(path, f"is corrupt (quick_check: {first}{more})", write)
        tables = {name for name, in conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        if not tables:
            return  # an empty database: ours to fill
        columns = {row[1] for row in conn.execute("PRAGMA table_info(results)")}
        if tables - OUR_TABLES or not OUR_COLUMNS <= columns:
            names = ", ".join(sorted(tables))
            raise db_error(path, f"is an SQLite database of another program (tables: {names});"
                           " it was not changed", write)


def check_existing(path: Path, write: bool, budget_s: float = BUSY_BUDGET_S) -> None:
    """Refuse an existing file that cannot be read, is not SQLite, is corrupt or not ours."""
    head = _read_head(path, write)
    if len(head) < len(SQLITE_HEADER) and SQLITE_HEADER.startswith(head):
        return  # empty (or another process is this instant writing its first page)
    if not head.startswith(SQLITE_HEADER):
        raise db_error(path, "is not an SQLite file", write)
    try:
        retry_busy(lambda: _inspect(path, write), budget_s)
    except sqlite3.OperationalError as err:
        if is_busy(err):
            raise db_error(path, f"stayed locked by another process for {budget_s:g} s",
                           write) from err
        raise db_error(path, f"cannot be opened ({err})", write) from err
    except sqlite3.DatabaseError as err:
        raise db_error(path, f"is corrupt ({err})", write) from err


def check_writable(path: Path) -> None:
    """Refuse a file or folder we could not write, without changing either."""
    if path.exists():
        try:
            with path.open("r+b"):
                pass
        except OSError as err:
            raise db_error(path, f"cannot be written ({err.strerror or err}); results are "
                           "written the moment they are measured") from err
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise db_error(path, f"cannot be made: its folder '{folder}' cannot be created "
                       f"({err.strerror or err})") from err
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
        raise db_error(path, f"cannot be written: its folder '{folder}' is not writable "
                       f"({err.strerror or err}); SQLite keeps its journal there") from err


def _has_uid(conn: sqlite3.Connection) -> bool:
    return "uid" in {row[1] for row in conn.execute("PRAGMA table_info(results)")}


def ensure_uid(conn: sqlite3.Connection) -> None:
    """Give a store made before records had uids its uid column and unique index (inside the
    caller's write transaction, so opening an old store to read or to write changes nothing
    until a record is added; its rows are not touched, their uid is NULL)."""
    if not _has_uid(conn):
        conn.execute("ALTER TABLE results ADD COLUMN uid TEXT")
        conn.execute(UID_INDEX)


def ensure_trials(conn: sqlite3.Connection) -> None:
    """The trials table, its index and triggers (inside the caller's write transaction)."""
    for statement in TRIALS_SCHEMA:
        conn.execute(statement)


def _create_schema(path: Path) -> None:
    with closing(connect_write(path)) as conn:
        if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            conn.execute("PRAGMA journal_mode=WAL")
        with write_transaction(conn):
            for statement in SCHEMA:
                conn.execute(statement)
            if _has_uid(conn):  # an older store gets it with its next record (ensure_uid)
                conn.execute(UID_INDEX)


def create_schema(path: Path, budget_s: float = BUSY_BUDGET_S) -> None:
    """Make the file ours (WAL journal, the results table, its indexes and triggers); safe to
    run from several processes at once, and on a file that already has them."""
    try:
        retry_busy(lambda: _create_schema(path), budget_s)
    except sqlite3.OperationalError as err:
        if is_busy(err):
            raise db_error(path, f"stayed locked by another process for {budget_s:g} s") from err
        raise db_error(path, f"cannot be written ({err})") from err
    except sqlite3.DatabaseError as err:
        raise db_error(path, f"is not a usable SQLite database ({err})") from err


def open_database(path: Path, write: bool, budget_s: float = BUSY_BUDGET_S) -> None:
    """Every opening check, then (to write) the schema: raises ConfigError, or returns with the
    file ready. Reading a missing file checks nothing and creates nothing."""
    if path.exists():
        check_existing(path, write, budget_s)
    if write:
        check_writable(path)
        create_schema(path, budget_s)
