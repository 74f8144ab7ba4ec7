"""Print docs/planner.md's validation tables (per run, per source, the 80% intervals'
coverage and left-out error by device generation, precision, limiter and scale, and the found
runs, validation only, apart) from the planner itself, so the page shows what `accelbench
plan --validate` computes rather than figures copied by hand.

Usage: .venv/bin/python scripts/planner_tables.py > /tmp/tables.md
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ORACLE = {"mfu": "{:.1%} MFU", "tokens_per_s_per_device": "{:,.0f} tok/s per device",
          "tflops_per_device": "{:.0f} TFLOP/s per GPU"}


def _validation() -> dict:
    """`accelbench plan --validate --json`, run as a user would run it."""
    out = subprocess.run([sys.executable, "-m", "accelbench", "plan", "--validate", "--json",
                          "--db", str(Path(tempfile.mkdtemp()) / "none.db")],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def run_table(data: dict) -> list[str]:
    """One row per scored published run: in-sample and left-out errors side by side."""
    left = {(r["run_id"], r["name"]): r for r in data["leave_one_source_out"]}
    lines = ["| id | Run | Device | Published | Published MFU | Predicted MFU | Error | Left out "
             "| Mem GB | Fits | Limit | Overlap | Oracle | Set-up |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["published"]:
        out = left[(r["run_id"], r["name"])]
        lines.append(
            f"| {r['run_id'] or '-'} | {r['name']} | {r['device']} | {_figure(r)} "
            f"| {r['observed_mfu']:.1%} | {r['predicted_mfu']:.1%} | {r['error']:+.1%} "
            f"| {out['error']:+.1%} | {r['memory_gb']:.0f} | {'yes' if r['fits'] else 'no'} "
            f"| {r['limiter']} | {r['overlap']} | {r['oracle_tag']} | {r['setup_tag']} |")
    return lines


def source_table(data: dict) -> list[str]:
    """Median and worst |error| per source, in-sample and left out, and overall."""
    frameworks = {r["source_key"]: f"{r['framework']} ({r['overlap']})"
                  for r in data["published"]}
    lines = ["| Source | Framework (overlap) | Runs | Median in-sample | Worst in-sample "
             "| Median left out | Worst left out |", "|---|---|---|---|---|---|---|"]
    for key, inside in data["by_source"].items():
        out = data["by_source_left_out"][key]
        lines.append(f"| {key} | {frameworks.get(key, 'all')} | {inside['n']} "
                     f"| {inside['median_abs_error']:.1%} | {inside['worst_abs_error']:.1%} "
                     f"| {out['median_abs_error']:.1%} | {out['worst_abs_error']:.1%} |")
    return lines


def interval_table(data: dict) -> list[str]:
    """Per group: runs, runs inside their own out-of-sample 80% interval, and the left-out
    |error| (median, worst); overall last."""
    report = data["intervals"]
    lines = ["| By | Group | Runs | Inside their 80% interval | Coverage | Median left-out "
             "|error| | Worst |", "|---|---|---|---|---|---|---|"]
    for by in ("generation", "precision", "limiter", "scale"):
        for group, c in report["coverage"][by].items():
            if group == "overall":
                continue
            e = report["error_left_out"][by][group]
            lines.append(f"| {by} | {group} | {c['n']} | {c['inside']} | {c['coverage']:.0%} "
                         f"| {e['median_abs_error']:.1%} | {e['worst_abs_error']:.1%} |")
    c = report["coverage"]["generation"]["overall"]
    e = report["error_left_out"]["generation"]["overall"]
    lines.append(f"| all | overall | {c['n']} | {c['inside']} | {c['coverage']:.0%} "
                 f"| {e['median_abs_error']:.1%} | {e['worst_abs_error']:.1%} |")
    return lines


def interval_runs(data: dict) -> list[str]:
    """Each run's group, interval (as observed / predicted) and whether it held."""
    lines = ["| Run | Source | Group (runs) | 80% interval of observed / predicted "
             "| Observed / predicted | Inside |", "|---|---|---|---|---|---|"]
    for r in data["intervals"]["runs"]:
        lines.append(f"| {r['name']} | {r['source']} | {r['group']} ({r['n_residuals']}) "
                     f"| {r['low_factor']:.3f}-{r['high_factor']:.3f} "
                     f"| {r['observed_over_predicted']:.3f} | {'yes' if r['inside'] else 'no'} |")
    return lines


def _figure(r: dict) -> str:
    """A row's published figure as its source states it."""
    value = r["oracle_value"] * (100 if r["oracle_kind"] == "mfu" else 1)
    return ORACLE[r["oracle_kind"]].format(r["oracle_value"] if r["oracle_kind"] == "mfu"
                                           else value)


def found_table(data: dict) -> list[str]:
    """The runs found outside the shipped csv (never fitted): each with its error and the 80%
    interval a plan gives it, then |error| by precision and coverage."""
    lines = ["| Run | Device | Precision | Published | Published MFU | Predicted MFU | Error "
             "| 80% interval of MFU | Inside | Set-up |", "|---" * 10 + "|"]
    for r, c in zip(data["found"], data["found_intervals"]["runs"], strict=True):
        low, high = (r["predicted_mfu"] * c[k] for k in ("low_factor", "high_factor"))
        lines.append(f"| {r['name']} | {r['device']} | {r['dtype']} | {_figure(r)} "
                     f"| {r['observed_mfu']:.1%} | {r['predicted_mfu']:.1%} | {r['error']:+.1%} "
                     f"| {low:.1%}-{high:.1%} | {'yes' if c['inside'] else 'no'} "
                     f"| {r['setup_tag']} |")
    lines += ["", "| Precision | Runs | Median |error| | Worst |error| |", "|---|---|---|---|"]
    for key, e in data["by_precision_found"].items():
        lines.append(f"| {key} | {e['n']} | {e['median_abs_error']:.1%} "
                     f"| {e['worst_abs_error']:.1%} |")
    c = data["found_intervals"]["coverage"]["generation"]["overall"]
    return lines + ["", f"Inside their 80% interval: {c['inside']} of {c['n']} "
                        f"({c['coverage']:.0%})."]


def main() -> None:
    """The tables, a blank line between."""
    data = _validation()
    print("\n".join(run_table(data) + [""] + source_table(data) + [""] + interval_table(data)
                    + [""] + interval_runs(data) + [""] + found_table(data)))


if __name__ == "__main__":
    main()
