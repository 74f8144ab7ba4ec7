"""How often the slow rank is named: issue 37's target, on CPU gloo ranks under torchrun.

For each layout, TRIALS trials with rank 1 slowed by the test-only delay
(ACCELBENCH_TEST_SLOW_RANK=1:FRACTION, 30% by default) and TRIALS without it, through the
runtime's own step loop (tests/dist/straggler_worker.py: gpt2-tiny, sequence 128,
micro-batch 2, fp32, 9 steps of which 8 timed); a launch per world size, every layout of that
size in it. Prints, per layout, how many trials named rank 1 when slowed and any rank when
not, the named excess and its interval's low end (median and range), and the load average
before and after each launch (the machine is shared: every figure says what it ran beside).
Target: named in at least 9 of 10, a rank named without the delay in at most 1 of 10.

    python benchmarks/straggler.py [--trials 10] [--fraction 0.3] [--layouts dp,zero3,tp,dp_pp]
                                   [--steps 9] [--json RAW.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from statistics import median

from accelbench.parallel.torchrun_launch import launch_torchrun

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = ROOT / "tests" / "dist" / "shared_launch.py"
LAYOUTS = {"dp": (2, "dp=2"), "zero3": (2, "dp=2,zero=3"), "tp": (2, "tp=2"),
           "dp_pp": (4, "dp=2,pp=2"), "pp": (2, "pp=2")}
PERCENT = r"([+-]\d+)%"


def _load() -> str:
    """The 1-minute load average, as the machine reports it."""
    return f"{os.getloadavg()[0]:.1f}"


def _launch(nproc: int, cases: dict[str, str], timeout_s: float) -> tuple[dict, str]:
    """Every case in one launch of nproc ranks: results by case, and the load before/after."""
    out = Path(tempfile.mkdtemp()) / "out.json"
    argv = [str(LAUNCHER), str(out), *(f"straggler_worker.py/{k}:{v}" for k, v in cases.items())]
    before = _load()
    result = launch_torchrun(nproc, argv, timeout_s=timeout_s, cwd=str(ROOT))
    if not result.ok:
        raise SystemExit(f"launch of {nproc} ranks failed: {result.error or result.output}")
    return json.loads(out.read_text())["straggler_worker.py"], f"{before} -> {_load()}"


def _excess(trials: list[dict]) -> str:
    """The evidence's median excess and interval low end: median (min to max) of the trials."""
    found = [re.findall(PERCENT, t["evidence"] or "")[:3] for t in trials]
    rows = [(int(f[0]), int(f[1])) for f in found if len(f) >= 3]
    if not rows:
        return "not compared"
    ex, low = [r[0] for r in rows], [r[1] for r in rows]
    return (f"{median(ex):+.0f}% ({min(ex):+d} to {max(ex):+d}); low end {median(low):+.0f}% "
            f"({min(low):+d} to {max(low):+d})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--fraction", type=float, default=0.3)
    parser.add_argument("--layouts", default="dp,zero3,tp,dp_pp")
    parser.add_argument("--steps", type=int, default=9, help="steps a trial, 1 of them warm-up")
    parser.add_argument("--json", help="write every trial's named rank and evidence here")
    args = parser.parse_args()
    names = args.layouts.split(",")
    unknown = [n for n in names if n not in LAYOUTS]
    if unknown or args.trials < 1 or not 0 < args.fraction <= 10 or not 6 <= args.steps <= 100:
        sys.exit(f"--layouts: each of {', '.join(LAYOUTS)}; --trials >= 1; --fraction in "
                 f"(0, 10]; --steps 6-100; got {args.layouts}, {args.trials}, {args.fraction}, "
                 f"{args.steps}")
    raw: dict[str, list] = {}
    print("| layout | ranks | slowed: rank 1 named | no delay: a rank named | slowed: excess; "
          "interval low end | no delay: excess | load average (1 min) |")
    print("|---|---:|---:|---:|---|---|---|")
    for nproc in sorted({LAYOUTS[n][0] for n in names}):
        mine = [n for n in names if LAYOUTS[n][0] == nproc]
        cases = {f"{n}_{kind}": f"{LAYOUTS[n][1]}:{fraction}:{args.trials}:{args.steps}"
                 for n in mine for kind, fraction in (("slowed", args.fraction), ("even", 0))}
        print(f"launching {nproc} ranks: {', '.join(mine)}", file=sys.stderr)
        results, load = _launch(nproc, cases, 120 + 12 * args.steps * args.trials * len(mine))
        raw.update(results)
        for n in mine:
            slowed, even = results[f"{n}_slowed"], results[f"{n}_even"]
            hits = sum(t["named"] == 1 for t in slowed)
            false = sum(t["named"] is not None for t in even)
            print(f"| {LAYOUTS[n][1]} | {nproc} | {hits} of {len(slowed)} | {false} of "
                  f"{len(even)} | {_excess(slowed)} | {_excess(even)} | {load} |")
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
