"""Records to CSV and JSON for people and other tools."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict

from accelbench.results.record import Record


def to_json(records: list[Record]) -> str:
    """A JSON array of whole records (raw times included)."""
    return json.dumps([asdict(r) for r in records], indent=2, default=str)


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
