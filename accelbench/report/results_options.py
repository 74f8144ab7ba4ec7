"""The options of `accelbench results list | show | export | import | merge`, declared once
(config/option_fields.py `option`: the commands are generated from them), each command's checks
(ConfigError naming the option, before the store is opened) and what it does with the store."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from accelbench.config.errors import ConfigError, require_choice
from accelbench.config.option_fields import DB_HELP, REQUIRED, WIDE_TABLE_HELP, argument, option
from accelbench.config.paths import default_db_path
from accelbench.report.bundle import bundle_records, is_bundle
from accelbench.report.export import OUTPUT_ALLOWED, check_output
from accelbench.report.listing import select
from accelbench.store.merge import Merged, merge
from accelbench.store.record import STATUSES, Record
from accelbench.store.store import ResultStore
from accelbench.store.unsaved import read_records

EXPORT_FORMATS = ("csv", "json", "flat-json", "parquet")


@dataclass(frozen=True)
class ListOptions:
    """`results list`: which records, how many."""

    db: Path | None = option(None, DB_HELP)
    kind: str | None = option(None, "Only this kind (block, train, ...).")
    machine: str | None = option(None, "Only this machine: a piece of its name or a prefix of "
                                 "its machine id.")
    model: str | None = option(None, "Only this model (its name, exactly).")
    status: str | None = option(None, "Only this status (ok, oom, ...).")
    run_id: str | None = option(None, "Only this sweep.")
    limit: int = option(50, "At most this many, newest (at least 1).")
    wide: bool = option(False, WIDE_TABLE_HELP, "--wide")


@dataclass(frozen=True)
class ShowOptions:
    """`results show ID`."""

    record_id: int = argument(REQUIRED, "Record id.")
    db: Path | None = option(None, DB_HELP)


@dataclass(frozen=True)
class ExportOptions:
    """`results export`: which records, in which format, where."""

    fmt: str = option("csv", "csv, flat-json or parquet: the flat table, one row per record; "
                      "json: whole records (raw times included; what 'results import' reads).",
                      "--format")
    db: Path | None = option(None, DB_HELP)
    kind: str | None = option(None, "Only this kind.")
    status: str | None = option(None, "Only this status (ok, oom, ...).")
    run_id: str | None = option(None, "Only this sweep.")
    output: Path | None = option(None, "File to write (default stdout; parquet needs a file).")


@dataclass(frozen=True)
class ImportOptions:
    """`results import FILE`."""

    file: Path = argument(REQUIRED, "<db>.unsaved.jsonl, a JSON export, or a bundle "
                          "('accelbench publish'); checked whole before anything is stored.")
    db: Path | None = option(None, DB_HELP)


@dataclass(frozen=True)
class MergeOptions:
    """`results merge DB... --into DB`."""

    dbs: list[Path] = argument(REQUIRED, "Databases to merge (read, never changed).", "DB")
    into: Path = option(REQUIRED, "The database to merge into (made if missing; checked like "
                        "any --db).", "--into")


def listed(given: ListOptions) -> list[Record]:
    """The records `results list` shows: the newest `limit` of those that match."""
    if given.limit < 1:
        raise ConfigError("limit", f"must be at least 1, got {given.limit}", ">= 1")
    if given.status is not None:
        require_choice("status", given.status, STATUSES)
    store = ResultStore(given.db, write=False)
    if given.machine is None and given.model is None:
        return store.query(kind=given.kind, run_id=given.run_id, status=given.status,
                           limit=given.limit)
    return select(store.query(kind=given.kind, run_id=given.run_id, status=given.status),
                  given.machine, given.model)[-given.limit:]


def shown(given: ShowOptions) -> Record:
    """The record `results show` prints."""
    record = ResultStore(given.db, write=False).get(given.record_id)
    if record is None:
        raise ConfigError("ID", f"no record {given.record_id} in the store",
                          "an id from results list")
    return record


def exported(given: ExportOptions) -> list[Record]:
    """The records `results export` writes, its format and file checked first."""
    require_choice("format", given.fmt, EXPORT_FORMATS)
    if given.status is not None:
        require_choice("status", given.status, STATUSES)
    if given.output is not None:
        check_output(given.output)
    elif given.fmt == "parquet":
        raise ConfigError("output", "parquet is binary: give a file", OUTPUT_ALLOWED)
    return ResultStore(given.db, write=False).query(kind=given.kind, run_id=given.run_id,
                                                    status=given.status)


def imported(given: ImportOptions) -> tuple[int, int, Path]:
    """Store the file's records: (how many were added, how many read, the store's path); a
    store that does not take them is one ConfigError line (nothing was stored)."""
    records = (bundle_records(given.file) if is_bundle(given.file)
               else read_records(given.file))
    target = Path(given.db if given.db is not None else default_db_path()).expanduser()
    made = not target.exists()  # a database this import makes is removed if it takes nothing
    try:
        store = ResultStore(target)
        added = sum(new for _, new in store.add_many(records))
    except (sqlite3.Error, OSError, ConfigError) as err:  # one transaction: nothing was stored
        if made:
            _remove_database(target)
        if isinstance(err, ConfigError):
            raise
        raise ConfigError("db", f"'{target}' did not take the records ({err}); nothing "
                          "was imported" + ("; the file this import made is removed" if made
                                            else ""), "a database that can be written") from err
    store.close()
    return added, len(records), store.path


def _remove_database(path: Path) -> None:
    """A database file an import made and could not fill, with SQLite's side files: an empty
    database left behind would read as a machine with no records. Kept where it holds a record
    (another process wrote to it meanwhile) or cannot be read to say."""
    if path.exists():
        try:
            if ResultStore(path, write=False).query(limit=1):
                return
        except (sqlite3.Error, OSError, ConfigError):
            return
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def merged(given: MergeOptions) -> list[Merged]:
    """Every record of the databases copied into one; a target that does not take them is
    one ConfigError line (it is unchanged)."""
    try:
        return merge(given.dbs, given.into)
    except (sqlite3.Error, OSError) as err:  # one transaction: the target is unchanged
        raise ConfigError("db", f"'{given.into}' did not take the records ({err}); nothing was "
                          "merged", "a database that can be written") from err
