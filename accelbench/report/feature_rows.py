"""A 'check' record (accelbench check, bench/feature_check.py) as rows: the command's table and the
report's feature matrix read the same rows."""

from __future__ import annotations

from rich.table import Table

from accelbench.report.table import add_plain_row, plain_table
from accelbench.store.record import Record

CHECK_HEADER = ("feature", "status", "seconds", "detail")


def check_rows(record: Record) -> list[tuple[str, str, str, str]]:
    """(feature, status, seconds, detail) per feature, in the order they ran."""
    return [(str(f.get("name")), str(f.get("status")), f"{f.get('seconds') or 0:.2f}",
             str(f.get("detail") or "")) for f in record.typed.features or []]


def check_summary(record: Record) -> str:
    """'14 ok, 5 unavailable, 0 failed in 20.3 s on cuda:0'."""
    m = record.typed
    return (f"{m.features_ok} ok, {m.features_unavailable} unavailable, "
            f"{m.features_failed} failed in {m.check_time_s or 0:.1f} s on "
            f"{record.setup.device}")


def check_table(record: Record) -> Table:
    """The feature matrix as a plain rich table."""
    table = plain_table(f"accelbench check: {check_summary(record)}")
    for column in CHECK_HEADER:
        table.add_column(column, overflow="fold")
    for row in check_rows(record):
        add_plain_row(table, *row)
    return table
