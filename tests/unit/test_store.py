"""The SQLite store: round trip, immutability, filters, export."""

import csv
import io
import json
import sqlite3
from contextlib import closing

import pytest

from accelbench.report.export import to_csv, to_json
from accelbench.store.dbfile import connect_write, write_transaction
from accelbench.store.record import Record
from accelbench.store.store import ResultStore, default_db_path


def _record(status="ok", run_id="r1", **metrics):
    return Record(kind="block", status=status, spec={"batch": 8, "model_name": "gpt2"},
                  environment={"device_name": "cpu"}, metrics=metrics or {"x": 1.5},
                  raw={"forward": [0.1, 0.2]}, run_id=run_id)


def test_round_trip(tmp_path):
    store = ResultStore(tmp_path / "s.db")
    original = _record()
    rid = store.add(original)
    back = store.get(rid)
    assert back.id == rid
    assert back.to_json() == original.to_json()
    assert ResultStore(tmp_path / "s.db").get(rid).raw == {"forward": [0.1, 0.2]}


def test_records_are_immutable(tmp_path):
    store = ResultStore(tmp_path / "s.db")
    store.add(_record())
    conn = sqlite3.connect(tmp_path / "s.db")
    with pytest.raises(sqlite3.DatabaseError, match="immutable"):
        conn.execute("UPDATE results SET status = 'error'")
    with pytest.raises(sqlite3.DatabaseError, match="not deleted"):
        conn.execute("DELETE FROM results")


def test_filters_and_exports(tmp_path):
    store = ResultStore(tmp_path / "s.db")
    store.add(_record(run_id="a"))
    store.add(_record(status="oom", run_id="b"))
    assert [r.status for r in store.query(run_id="b")] == ["oom"]
    assert len(store.query(status="ok")) == 1 and len(store.query(limit=1)) == 1
    rows = list(csv.DictReader(io.StringIO(to_csv(store.query()))))
    assert rows[1]["status"] == "oom" and rows[0]["metrics.x"] == "1.5"
    assert json.loads(to_json(store.query()))[0]["raw"]["forward"] == [0.1, 0.2]


def test_csv_rows_keep_lists_as_json_text(tmp_path):
    """Per-rank lists (and the spec's dicts) are one cell of JSON, not left out of the CSV."""
    store = ResultStore(tmp_path / "s.db")
    store.add(_record(mem_peak_bytes_per_rank=[10, None], mem_added_bytes_per_rank_max=6))
    row = next(csv.DictReader(io.StringIO(to_csv(store.query()))))
    assert json.loads(row["metrics.mem_peak_bytes_per_rank"]) == [10, None]
    assert row["metrics.mem_added_bytes_per_rank_max"] == "6" and "raw.forward" not in row


def test_bad_status_is_rejected():
    with pytest.raises(ValueError):
        _record(status="fine")


def test_default_path_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("ACCELBENCH_DB", str(tmp_path / "x.db"))
    assert default_db_path() == tmp_path / "x.db"
    monkeypatch.delenv("ACCELBENCH_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_db_path() == tmp_path / "accelbench" / "results.db"


def test_write_transaction_commits_whole_or_rolls_back_whole(tmp_path):
    """The one write transaction: a block that ends commits all its rows; one that raises
    leaves none of them, and the exception reaches the caller unchanged."""
    path = tmp_path / "t.db"
    with closing(connect_write(path)) as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
        with write_transaction(conn):
            conn.execute("INSERT INTO t VALUES (1)")
            conn.execute("INSERT INTO t VALUES (2)")
        assert not conn.in_transaction
        with pytest.raises(KeyError, match="half"), write_transaction(conn):
            conn.execute("INSERT INTO t VALUES (3)")
            raise KeyError("half")
        assert not conn.in_transaction
    with closing(sqlite3.connect(path)) as other:
        assert other.execute("SELECT x FROM t ORDER BY x").fetchall() == [(1,), (2,)]
