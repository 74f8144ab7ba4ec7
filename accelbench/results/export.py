"""Records to CSV and JSON for people and other tools.

Both are standard: the JSON export is strict JSON (a non-finite float is written as
`{"__float__": "nan"}`, results/jsontext.py), and so is every list or dict cell of the CSV; a
non-finite scalar in a CSV cell is written `nan`, `inf` or `-inf`.
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict
from pathlib import Path

from accelbench.config.errors import ConfigError
from accelbench.results.jsontext import dumps
from accelbench.results.record import Record

OUTPUT_ALLOWED = "a file path in an existing folder"


def to_json(records: list[Record]) -> str:
    """A JSON array of whole records (raw times included)."""
    return dumps([asdict(r) for r in records], indent=2)


def to_csv(records: list[Record]) -> str:
    """One flat row per record; the union of all columns, in first-seen order."""
    rows = [r.flat() for r in records]
    columns: list[str] = []
    for row in rows:
        columns.extend(key for key in row if key not in columns)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def check_output(path: Path, field: str = "output") -> Path:
    """Refuse, before anything runs, an output path that is a folder or in a missing folder."""
    if str(path).strip() in ("", "."):
        raise ConfigError(field, "empty path", OUTPUT_ALLOWED)
    if path.is_dir():
        raise ConfigError(field, f"'{path}' is a directory", OUTPUT_ALLOWED)
    if not path.parent.is_dir():
        raise ConfigError(field, f"'{path}': folder '{path.parent}' does not exist",
                          OUTPUT_ALLOWED)
    return path


def write_text(path: Path, text: str, field: str = "output") -> None:
    """Write an export; a path that cannot be written is one line naming the field."""
    check_output(path, field)
    try:
        path.write_text(text)
    except OSError as err:
        raise ConfigError(field, f"'{path}' cannot be written ({err.strerror or err})",
                          OUTPUT_ALLOWED) from err
