"""The smaller faults of issue 38 (item 6): `report --baseline 0` is a machine's number, never
the '0' in a machine's name; the parser's own errors carry the allowed values; a `results
import` that fails in the database (a real fault: the file-size limit reached, as a full disk
is) leaves no empty database behind, and leaves a database that was there as it was."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.cli.main import main
from accelbench.config.errors import ConfigError
from accelbench.report.machines import Machine, pick_baseline
from accelbench.store.record import Record
from accelbench.store.store import ResultStore

REPO = Path(__file__).resolve().parents[2]


def _machines() -> list[Machine]:
    names = ("AMD EPYC 7B13 (2 cores) cpu, torch 2.10.0", "NVIDIA H100 80GB HBM3 x1, torch 2.9.0")
    return [Machine(i + 1, name, f"k{i}", {}, (), ()) for i, name in enumerate(names)]


@pytest.mark.parametrize("choice", ["0", "M0", "3", "99", "10"])
def test_a_number_is_a_machine_number_never_a_piece_of_a_name(choice):
    machines = _machines()  # both names hold '0'; '10' is in the first's "2.10.0"
    with pytest.raises(ConfigError, match=rf"baseline: '{choice}' matches no machine: machines "
                       r"are numbered 1 to 2 \(allowed: 1 \(AMD EPYC"):
        pick_baseline(machines, choice)


def test_a_baseline_by_number_or_exact_name():
    machines = _machines()
    assert pick_baseline(machines, "2") is machines[1] and pick_baseline(machines, "m1") is \
        machines[0]
    assert pick_baseline(machines, machines[1].name) is machines[1]
    assert pick_baseline(machines, "H100") is machines[1]  # a piece only one name has


@pytest.mark.parametrize("argv,allowed", [
    (["train", "--steps", "abc"], "(allowed: a whole number, default 20; see "),
    (["train", "--lr", "fast"], "(allowed: a number (e.g. 0.5, 1e9), default 0.0003; see "),
    (["plan", "--nodes", "1.5"], "(allowed: a whole number, default 1; see "),
    (["results", "show", "abc"], "(allowed: a whole number; see "),
    (["sbatch", "--", "train"], "Missing option '--nodes' (allowed: a whole number; see "),
    (["train", "--stepz", "3"], "(allowed: the options and values '"),
])
def test_the_parser_s_own_errors_name_what_is_allowed(argv, allowed, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["accelbench", *argv])
    with pytest.raises(SystemExit) as stop:
        main()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and allowed in err, err


def _records(path: Path, count: int) -> None:
    """A file of records `results import` reads, each with a long raw list."""
    with path.open("w") as out:
        for i in range(count):
            out.write(Record(kind="block", status="ok", spec={"batch": i + 1, "model_name":
                                                              "gpt2-tiny"},
                             environment={"device_name": "cpu"}, metrics={"x": 1.5},
                             raw={"t": [0.1] * 2000}, run_id="r1").to_json() + "\n")


_LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
sys.argv = ["accelbench", "results", "import", sys.argv[1], "--db", sys.argv[2]]
from accelbench.cli.main import main
main()
"""


def _import_limited(records: Path, db: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _LIMITED, str(records), str(db)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_an_import_the_database_refuses_leaves_no_empty_database(tmp_path):
    records, db = tmp_path / "r.jsonl", tmp_path / "new.db"
    _records(records, 40)  # 400 KB of records: past the 64 KiB limit, the schema within it
    done = _import_limited(records, db)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"error: db: '{db}' did not take the records"), done.stderr
    assert "the file this import made is removed" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl"]  # no db, -wal or -shm
    kept = tmp_path / "kept.db"  # a database that was there: left as it was
    ResultStore(kept).close()
    before = hashlib.sha256(kept.read_bytes()).hexdigest()
    done = _import_limited(records, kept)
    assert done.returncode == 2 and "removed" not in done.stderr, done.stderr
    assert kept.exists() and hashlib.sha256(kept.read_bytes()).hexdigest() == before
