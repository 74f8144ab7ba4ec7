"""Print docs/planner.md's validation tables from the planner itself, so the page shows what
`accelbench plan --validate` computes rather than figures copied by hand: per run, per source,
the 80% intervals judged with each source left out whole (coverage per source, each source
weighing once, by device generation and precision), their widths, each source's runs, the
Hopper and FP8 mechanisms judged with and without them, this project's own H200 cells, and the
found runs (validation only) apart.

Usage: .venv/bin/python scripts/planner_tables.py > /tmp/tables.md
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from accelbench.analytics.published_run import reduce_bytes

ORACLE = {"mfu": "{:.1%} MFU", "tokens_per_s_per_device": "{:,.0f} tok/s per device",
          "tflops_per_device": "{:.0f} TFLOP/s per GPU"}


DOCS = Path(__file__).resolve().parent.parent / "docs"
H200_STORE = DOCS / "gpu-runs/2026-11-27-h200-2/results.db"
CPU_STORE = DOCS / "planner-runs/2026-11-29-cpu-epyc-2core/results.db"
JUDGED = {"unseen": "source left out, unseen stack",
          "named_source": "source left out, stack named (its other source fitted)",
          "named_run": "run left out, stack named",
          "found": "found runs (never fitted), unseen stack",
          "found_named": "found runs, stack named"}
# Each mechanism: the switch that turns it on and the one that turns it off, each run in a
# process of its own before anything is computed ('' = as shipped).
MECHANISMS = {
    "FlashAttention-2 on Hopper at 35% of the dense peak (efficiency.FA2_ON_HOPPER; out "
    "since issue 41)": ("import accelbench.analytics.efficiency as e; "
                        "e.FUSED_ATTENTION_OF_PEAK.update(e.FA2_ON_HOPPER)", ""),
    "FP8 scaling casts (precision.fp8_cast_bytes, torchao's compiled roofline; in)":
        ("", "import accelbench.analytics.efficiency as e; "
             "e.fp8_cast_bytes = lambda m, k, n: (0.0, 0.0)"),
}
_JUDGE = """
import json, sys
from accelbench.analytics.published import validate_all
from accelbench.analytics.source_check import interval_check, interval_report
from accelbench.report.measured import measured_training_runs
from accelbench.store.store import ResultStore
checked = validate_all(measured_training_runs(ResultStore(sys.argv[1], write=False)))
r = interval_report(interval_check(checked))
print(json.dumps({k: r[k] for k in ("unseen", "named_run", "own", "found")}))
"""


def _validation(db: Path | None = None) -> dict:
    """`accelbench plan --validate --json`, run as a user would run it (on a copy of `db`,
    else on an empty store)."""
    return json.loads(_run(["-m", "accelbench", "plan", "--validate", "--json", "--db",
                            _copy(db)]))


def _copy(db: Path | None) -> str:
    """A scratch copy of a store (reading one may leave files beside it), or an empty one."""
    target = Path(tempfile.mkdtemp()) / "store.db"
    if db is not None:
        shutil.copyfile(db, target)
    return str(target)


def _run(args: list[str]) -> str:
    """stdout of the interpreter run with `args`."""
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          check=True).stdout


def _judged(switch: str) -> dict:
    """The intervals' judging with a mechanism switched off ('' for none), on the shipped
    runs, the found runs and the H200 store's cells."""
    return json.loads(_run(["-c", switch + "\n" + _JUDGE, _copy(H200_STORE)]))


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
    """Median and worst |error| per source, in-sample and left out, and overall, with each
    source's framework, its overlap and the width its gradients are reduced at."""
    frameworks = {r["source_key"]: f"{r['framework']} ({r['overlap']}, "
                                   f"{reduce_bytes(r['framework'], r['dtype'])} B)"
                  for r in data["published"]}
    lines = ["| Source | Framework (overlap, bytes a gradient moves in the DP reduction) | Runs "
             "| Median in-sample | Worst in-sample | Median left out | Worst left out |",
             "|---|---|---|---|---|---|---|"]
    for key, inside in data["by_source"].items():
        out = data["by_source_left_out"][key]
        lines.append(f"| {key} | {frameworks.get(key, 'all')} | {inside['n']} "
                     f"| {inside['median_abs_error']:.1%} | {inside['worst_abs_error']:.1%} "
                     f"| {out['median_abs_error']:.1%} | {out['worst_abs_error']:.1%} |")
    return lines


def _pct(s: dict) -> str:
    """'71% (42-99%)': coverage per source with its bootstrap 90% interval over sources."""
    low, high = s["coverage_per_source_90"]
    spread = f" ({low:.0%}-{high:.0%})" if s["sources"] > 1 else ""
    return f"{s['coverage_per_source']:.0%}{spread}"


def _row(judged: str, group: str, s: dict) -> str:
    return (f"| {judged} | {group} | {s['sources']} | {s['runs']} | {s['inside']} | {_pct(s)} "
            f"| {s['coverage_per_run']:.0%} | {s['median_abs_error']:.1%} "
            f"| {s['worst_abs_error']:.1%} | {s['median_width']:.2f} |")


def interval_table(data: dict) -> list[str]:
    """Per way of judging, overall and by generation and precision: sources, runs, runs inside,
    coverage per source (bootstrap 90% over sources) and per run, |error| and median width."""
    report = data["intervals"]
    lines = ["| Judged | Group | Sources | Runs | Inside | Coverage per source (90%) "
             "| Per run | Median |error| | Worst | Median width |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for key, name in JUDGED.items():
        judged = report[key]
        if not judged["overall"].get("runs"):
            continue
        lines.append(_row(name, "all", judged["overall"]))
        for by in ("generation", "precision"):
            lines += [_row(name, f"{by} {g}", s) for g, s in judged[by].items()
                      if g != "overall" and len(judged[by]) > 2]
    return lines


def source_runs(data: dict) -> list[str]:
    """Each shipped source: its stack, runs, generations, mean observed / predicted (left out)
    and how many of its runs each interval held."""
    report = data["intervals"]
    named: dict[str, list[bool]] = {}
    for r in report["named_run"]["runs"]:
        named.setdefault(r["source"], []).append(r["inside"])
    lines = ["| Source | Stack | Runs | Generations | Mean observed / predicted "
             "| Inside, unseen stack | Inside, stack named (run left out) |",
             "|---|---|---|---|---|---|---|"]
    for source, fit in report["fit"]["source_means"].items():
        runs = [r for r in report["runs"] if r["source"] == source]
        gens = ", ".join(dict.fromkeys(r["generation"] for r in runs))
        held = named.get(source, [])
        lines.append(f"| {source} | {fit['stack']} | {fit['runs']} | {gens} "
                     f"| {math.exp(-fit['mean_log_ratio']):.3f} "
                     f"| {sum(r['inside'] for r in runs)} of {len(runs)} "
                     f"| {f'{sum(held)} of {len(held)}' if held else '- (one run)'} |")
    fit = report["fit"]
    return lines + ["", f"Fit on all {fit['runs']} shipped runs ({fit['sources']} sources): "
                        f"between-source sd {fit['between_sd']:.3f}, within-source sd "
                        f"{fit['within_sd']:.3f}, mean log(predicted / observed) "
                        f"{fit['mu']:+.3f} (each source once)."]


def width_table(data: dict) -> list[str]:
    """Median width (high / low) of the intervals by how they were judged and generation."""
    report = data["intervals"]
    gens = [g for g in report["unseen"]["generation"] if g != "overall"]
    lines = ["| Judged | All | " + " | ".join(gens) + " |", "|---" * (len(gens) + 2) + "|"]
    for key in ("unseen", "named_run", "found"):
        judged = report[key]
        cells = [f"{judged['generation'][g]['median_width']:.2f}"
                 if g in judged["generation"] else "-" for g in gens]
        lines.append(f"| {JUDGED[key]} | {judged['overall']['median_width']:.2f} | "
                     + " | ".join(cells) + " |")
    return lines


def own_lines(data: dict) -> list[str]:
    """This project's own cells (a store's), a source of their own, against the interval a
    plan gives them."""
    own = data["intervals"]["own"]
    lines = ["| Cell | Observed / predicted | 80% interval | Inside |", "|---|---|---|---|"]
    lines += [f"| {r['name']} | {r['observed_over_predicted']:.3f} "
              f"| {r['low_factor']:.3f}-{r['high_factor']:.3f} "
              f"| {'yes' if r['inside'] else 'no'} |" for r in own["runs"]]
    s = own["overall"]
    return lines + ["", f"Inside: {s['inside']} of {s['runs']}; median |error| "
                        f"{s['median_abs_error']:.1%}, worst {s['worst_abs_error']:.1%}."]


def _mech(s: dict) -> str:
    if not s.get("runs"):
        return "-"
    return (f"{_pct(s)}, {s['inside']} of {s['runs']}; {s['median_abs_error']:.1%} / "
            f"{s['worst_abs_error']:.1%}")


def mechanism_table() -> list[str]:
    """Each Hopper/FP8 mechanism judged with the intervals: the shipped runs (source left out,
    unseen stack), the found runs and the H200 store's own cells, with it and without it
    (the tops refitted each way, as leaving a source out refits them)."""
    lines = ["| Mechanism | | Shipped: coverage per source, runs inside; median / worst "
             "| Shipped hopper | Found runs | Own H200 cells |", "|---|---|---|---|---|---|"]
    shipped = _judged("")
    for name, (on, off) in MECHANISMS.items():
        for label, switch in (("with", on), ("without", off)):
            judged = _judged(switch) if switch else shipped
            lines.append(f"| {name} | {label} | {_mech(judged['unseen']['overall'])} "
                         f"| {_mech(judged['unseen']['generation'].get('hopper', {}))} "
                         f"| {_mech(judged['found']['overall'])} "
                         f"| {_mech(judged['own']['overall'])} |")
    return lines


def _figure(r: dict) -> str:
    """A row's published figure as its source states it."""
    value = r["oracle_value"] * (100 if r["oracle_kind"] == "mfu" else 1)
    return ORACLE[r["oracle_kind"]].format(r["oracle_value"] if r["oracle_kind"] == "mfu"
                                           else value)


def found_table(data: dict) -> list[str]:
    """The runs found outside the shipped csv (never fitted): each with its error and the 80%
    interval a plan gives it (an unseen stack's), then |error| by precision and coverage."""
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
    c = data["intervals"]["found"]["overall"]
    return lines + ["", f"Inside their 80% interval: {c['inside']} of {c['runs']} "
                        f"({c['coverage_per_run']:.0%})."]


def main() -> None:
    """The tables, each under a comment naming it, a blank line between."""
    data, own, cpu = _validation(), _validation(H200_STORE), _validation(CPU_STORE)
    parts = {"runs": run_table(data), "sources": source_table(data),
             "coverage": interval_table(data), "source runs": source_runs(data),
             "widths": width_table(data), "mechanisms": mechanism_table(),
             "own H200 cells": own_lines(own), "own CPU cells": own_lines(cpu),
             "found": found_table(data)}
    print("\n\n".join(f"<!-- {name} -->\n" + "\n".join(lines)
                      for name, lines in parts.items()))


if __name__ == "__main__":
    main()
