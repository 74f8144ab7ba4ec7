"""How fast the command answers: `accelbench --help`, `plan`, `results list` and `report` on a
small database, each against `python -c pass` (the interpreter's own start-up) in the same run,
alternated so that load on a shared machine hits both alike. Prints the median wall time of
each, its 95% interval over the repeats, and the extra seconds over a bare interpreter.

    python benchmarks/cli_startup.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OLD_DB = Path(__file__).parents[1] / "tests" / "data" / "results_v1.db"
TARGET_S = 0.5  # issue 24: --help and plan answer within half a second on an idle machine


def _commands(work: Path) -> dict[str, list[str]]:
    """The timed command lines (the database is a copy of the shipped version-1 test file)."""
    db = str(work / "small.db")
    shutil.copy(OLD_DB, db)
    ab = [sys.executable, "-m", "accelbench"]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "accelbench --help": [*ab, "--help"],
        # a small search: the start-up, not the planner's search (benchmarks/planner_speed.py)
        "accelbench plan (gpt2-xl, 8 x a100)": [
            *ab, "plan", "--model", "gpt2-xl", "--device", "a100-80gb", "--nodes", "1",
            "--gpus-per-node", "8", "--global-batch", "64", "--seq", "1024"],
        "accelbench results list (small db)": [*ab, "results", "list", "--db", db],
        "accelbench report (small db)": [*ab, "report", "--db", db, "--out",
                                         str(work / "report")],
    }


def _time(cmd: list[str]) -> float:
    """Wall seconds of one run (output discarded; a failure stops the benchmark)."""
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _interval(values: list[float]) -> tuple[float, float]:
    """A distribution-free 95% interval of the median (order statistics; n >= 6)."""
    ordered, n = sorted(values), len(values)
    half = 1.96 * (n ** 0.5) / 2
    lo, hi = max(int(n / 2 - half), 0), min(int(n / 2 + half + 0.5), n - 1)
    return ordered[lo], ordered[hi]


def _cpu() -> str:
    """The CPU's model name (Linux), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        commands = _commands(Path(tmp))
        for cmd in commands.values():  # warm the file cache; not timed
            _time(cmd)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeats):  # round-robin: drift hits every command alike
            for name, cmd in commands.items():
                times[name].append(_time(cmd))
    print(f"machine: {_cpu()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.repeats} runs each, alternated; target {TARGET_S} s")
    base = statistics.median(times["python -c pass"])
    for name, values in times.items():
        median = statistics.median(values)
        lo, hi = _interval(values)
        print(f"{name:44s} median {median:6.3f} s  (95% CI {lo:.3f}-{hi:.3f})  "
              f"+{median - base:.3f} s over python")


if __name__ == "__main__":
    main()
