"""Records the database would not take, kept beside it so that no measurement is lost.

When a record cannot be written (the disk is full, the file became read-only, the database
stayed locked past the retries), it is appended to `<db>.unsaved.jsonl`: one record per line,
in the store's JSON (`Record.to_json`), flushed and fsynced before the sweep goes on. If even
that file cannot be written, the record is printed on stderr as one JSON line, the last resort.
`accelbench results import FILE` brings either back (`read_records`), and also takes the JSON
array of `results export --format json`.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from accelbench.config.errors import ConfigError
from accelbench.store.record import Record, content_uid
from accelbench.store.validate import MAX_DEPTH, RecordProblem, check_record, parse_json

SUFFIX = ".unsaved.jsonl"
IMPORTABLE = "a file of records: <db>.unsaved.jsonl, or results export --format json"
MAX_FILE_BYTES = 2**30  # a file read whole: larger is refused before it is read


def unsaved_path(db: Path) -> Path:
    """Where the records `db` would not take are kept: beside it, `<db>.unsaved.jsonl`."""
    return db.with_name(db.name + SUFFIX)


def keep(path: Path, record: Record) -> None:
    """Append one record as a JSON line, synced to disk before returning; raises OSError."""
    new = not path.exists()
    with path.open("a", encoding="utf-8") as f:
        f.write(record.to_json() + "\n")
        f.flush()
        os.fsync(f.fileno())
    if new:  # the new name itself survives a crash too
        try:
            fd = os.open(path.parent, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)


def print_last_resort(record: Record, why: str, stream: TextIO | None = None) -> None:
    """The record on stderr as one JSON line, after a line saying why it is there."""
    stream = stream or sys.stderr
    stream.write(f"accelbench: a {record.kind} record could not be saved anywhere ({why}); "
                 "here it is as JSON, to keep and bring back with 'accelbench results import':\n")
    stream.write(record.to_json() + "\n")
    stream.flush()


def _entries(path: Path, text: str) -> list[tuple[int, Any]]:
    """(line number, decoded JSON) of each record in a JSONL file or a JSON array."""
    if text.lstrip().startswith("["):
        try:
            items = parse_json(text, MAX_DEPTH + 1)  # the array, then each record
        except RecordProblem as err:
            raise ConfigError("FILE", f"'{path}' is {err}", IMPORTABLE) from err
        return [(n, item) for n, item in enumerate(items, 1)]
    entries = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entries.append((n, parse_json(line)))
        except RecordProblem as err:
            raise ConfigError("FILE", f"'{path}' line {n} is {err}", IMPORTABLE) from err
    return entries


def with_uid(record: Record) -> Record:
    """A record from before uids existed gets one from its content, so importing it twice
    stores it once."""
    if record.uid:
        return record
    return replace(record, uid=content_uid(record))


def read_records(path: Path) -> list[Record]:
    """Every record of an unsaved file or a JSON export; ConfigError (field FILE) on a file that
    cannot be read or a line that is not a record, before anything is imported."""
    return records_of(path, _entries(path, read_text(path, IMPORTABLE)))


def read_text(path: Path, allowed: str) -> str:
    """A whole file of UTF-8 text; ConfigError (field FILE) for a folder, a file that cannot be
    read or one over MAX_FILE_BYTES."""
    if path.is_dir():
        raise ConfigError("FILE", f"'{path}' is a directory", allowed)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ConfigError("FILE", f"'{path}' is {size:,} bytes; at most {MAX_FILE_BYTES:,} "
                              "are read", allowed)
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError("FILE", f"'{path}' cannot be read ({err})", allowed) from err


def records_of(path: Path, entries: list[tuple[int, Any]]) -> list[Record]:
    """Each decoded entry checked whole (store/validate.py) and made a record; ConfigError
    naming the first that is not one, before anything is written."""
    records = []
    for n, data in entries:
        try:
            check_record(data)
            records.append(with_uid(Record.from_dict(data)))
        except (RecordProblem, TypeError, ValueError, KeyError) as err:
            raise ConfigError("FILE", f"'{path}' record {n} is not a record: {err}",
                              IMPORTABLE) from err
    return records
