"""The commands that need no torch run without it: `--help` of every command, plan (and its
validation), hw --no-detect, results, report, study list/show and sbatch, each in a process
where importing torch or torchao fails; and `python -m accelbench` is the accelbench command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

OLD_DB = Path(__file__).parents[1] / "data" / "results_v1.db"

pytestmark = pytest.mark.slow  # each test starts Python processes

# Runs each command line in one process with torch and torchao made unimportable, and prints
# one JSON line: per command, its exit code; then the heavy modules that got loaded (those
# named by the optional second argument, a JSON list, else torch, torchao and matplotlib).
_DRIVER = r"""
import contextlib, io, json, sys
sys.modules["torch"] = None  # `import torch` now raises ImportError
sys.modules["torchao"] = None
from accelbench.cli.main import main
watched = json.loads(sys.argv[2]) if len(sys.argv) > 2 else ["torch", "torchao", "matplotlib"]
codes = {}
for line in json.loads(sys.argv[1]):
    sys.argv = ["accelbench", *line]
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            main()
        except SystemExit as stop:
            codes[" ".join(line)] = [stop.code, err.getvalue()[-300:]]
print(json.dumps({"codes": codes, "loaded": [m for m in watched
                                              if sys.modules.get(m) is not None]}))
"""

_COMMANDS = ("hw", "block", "results", "train", "scale", "sbatch", "plan", "genslm", "report",
             "study", "calibrate", "data", "run", "check")


def _lines(tmp_path: Path) -> list[list[str]]:
    """The torch-free command lines, over a copy of an old results file."""
    db = tmp_path / "old.db"
    shutil.copy(OLD_DB, db)
    helps = [["--help"], *([c, "--help"] for c in _COMMANDS), ["study", "run", "--help"],
             ["data", "prepare", "--help"], ["results", "list", "--help"]]
    return [*helps,
            ["plan", "--model", "gpt2", "--device", "a100-80gb", "--nodes", "1",
             "--gpus-per-node", "8", "--global-batch", "64", "--seq", "1024"],
            ["plan", "--validate"], ["hw", "--no-detect"], ["hw", "--no-detect", "--json"],
            ["results", "list", "--db", str(db)], ["results", "show", "1", "--db", str(db)],
            ["results", "export", "--db", str(db), "--format", "json"],
            ["study", "list"], ["study", "show", "emani2023"],
            ["sbatch", "--nodes", "2", "--gpus-per-node", "4", "--", "train", "--model", "gpt2"]]


def test_commands_that_need_no_torch_run_where_torch_cannot_be_imported(tmp_path):
    lines = _lines(tmp_path)
    done = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(lines)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ACCELBENCH_DB": str(tmp_path / "r.db")})
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    failed = {k: v for k, v in result["codes"].items() if v[0] not in (0, None)}
    assert not failed
    assert len(result["codes"]) == len(lines)
    assert result["loaded"] == []


def test_report_draws_without_torch(tmp_path):
    """The report imports matplotlib (it draws) but never torch."""
    shutil.copy(OLD_DB, tmp_path / "old.db")
    lines = [["report", "--db", str(tmp_path / "old.db"), "--out", str(tmp_path / "rep")]]
    done = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(lines)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert [v[0] for v in result["codes"].values()] in ([0], [None])
    assert result["loaded"] == ["matplotlib"]
    assert (tmp_path / "rep" / "report.html").is_file()


def test_help_and_plan_import_no_numpy(tmp_path):
    """`--help` and `plan` (issue 24: each within half a second, benchmarks/cli_startup.py)
    import no numpy, though `--help` imports every command module: the data modules import it
    where they make arrays."""
    lines = [["--help"], ["plan", "--model", "gpt2-xl", "--device", "a100-80gb", "--nodes", "1",
                          "--gpus-per-node", "8", "--global-batch", "64", "--seq", "1024"]]
    done = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(lines), '["numpy"]'],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert [v[0] for v in result["codes"].values()] == [0, 0]
    assert result["loaded"] == []


@pytest.mark.parametrize("args", [["--help"], ["plan", "--help"]])
def test_python_dash_m_accelbench_is_the_command(args):
    done = subprocess.run([sys.executable, "-m", "accelbench", *args], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Usage: python -m accelbench" in done.stdout


def test_python_dash_m_accelbench_refuses_bad_input_in_one_line():
    done = subprocess.run([sys.executable, "-m", "accelbench", "plan", "--model", "nope"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: model")
