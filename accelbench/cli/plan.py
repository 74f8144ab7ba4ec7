"""`accelbench plan`: predicted memory and throughput of parallel layouts; `--validate` checks
the predictions against published and measured runs. Logic lives in accelbench.analytics."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from accelbench.analytics.cluster import ClusterSpec, make_cluster, parse_layout
from accelbench.analytics.planner import PlanResult, plan_fixed, search
from accelbench.analytics.published import (
    ValidationRow,
    error_summary,
    resolve_shape,
    validate_leave_one_out,
    validate_measured_runs,
    validate_published,
)
from accelbench.analytics.steptime import TrainSetup
from accelbench.config.errors import ConfigError, require_choice, require_positive
from accelbench.hardware.specs import DTYPES
from accelbench.results.measured import measured_training_runs
from accelbench.results.store import ResultStore

# Tables on stderr, JSON on stdout (the project's convention); wide enough for the columns.
console = Console(stderr=True, width=None if sys.stderr.isatty() else 170)


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def _plan_table(results: list[PlanResult], title: str, train_tokens: float) -> Table:
    """The ranked layouts with what limits each."""
    table = Table(title=title)
    for col in ("#", "dp", "tp", "pp", "vp", "mb", "zero", "recompute", "mem GB/dev", "tok/s",
                "MFU", "HFU", "step s", "bubble", "comm", "recomp", "limit", "days"):
        table.add_column(col, justify="left" if col in ("recompute", "limit") else "right")
    for i, r in enumerate(results, 1):
        s, lay = r.step, r.layout
        comm = s.tp_comm_s + s.pp_comm_s + s.dp_comm_exposed_s
        table.add_row(
            str(i), str(lay.dp), str(lay.tp), str(lay.pp), str(lay.vp), str(lay.mb),
            str(lay.zero), lay.recompute,
            f"{r.memory.total / 1e9:.1f} ({_pct(r.memory.total, r.memory.usable_bytes)})",
            f"{s.tokens_per_s:,.0f}", f"{s.mfu:.1%}", f"{s.hfu:.1%}", f"{s.step_s:.2f}",
            _pct(s.bubble_s, s.step_s), _pct(comm, s.step_s), _pct(s.recompute_s, s.step_s),
            r.limiter, f"{s.days_for_tokens(train_tokens):.1f}")
    return table


def _validation_table(rows: list[ValidationRow], loo: list[ValidationRow], title: str) -> Table:
    """Predicted against observed MFU per run (leave-one-out column where given)."""
    table = Table(title=title)
    for col in ("run", "device", "observed MFU", "predicted MFU", "error", "leave-one-out",
                "mem GB", "fits", "limit", "oracle", "set-up"):
        table.add_column(col, justify="left" if col in ("run", "device", "limit") else "right")
    for i, r in enumerate(rows):
        out = f"{loo[i].error:+.1%}" if i < len(loo) else "-"
        table.add_row(r.name, r.device, f"{r.observed_mfu:.1%}", f"{r.predicted_mfu:.1%}",
                      f"{r.error:+.1%}", out, f"{r.memory_gb:.0f}", "yes" if r.fits else "no",
                      r.limiter, r.oracle_tag, r.setup_tag)
    return table


def _validate(as_json: bool, efficiency: float | None, db: Path | None) -> None:
    """Print each published and measured run's error, and the summary."""
    published = validate_published(efficiency)
    loo = validate_leave_one_out() if efficiency is None else []
    measured = validate_measured_runs(measured_training_runs(ResultStore(db)), efficiency)
    summary = {"published": error_summary(published), "leave_one_out": error_summary(loo),
               "measured": error_summary(measured)}
    if as_json:
        print(json.dumps({"published": [r.to_dict() for r in published],
                          "leave_one_out": [r.to_dict() for r in loo],
                          "measured": [r.to_dict() for r in measured], "summary": summary},
                         indent=2))
        return
    console.print(_validation_table(published, loo, "Predicted vs published MFU"))
    if measured:
        console.print(_validation_table(measured, [], "Predicted vs measured MFU"))
    else:
        console.print("measured runs: none from the results store yet")
    for name, s in summary.items():
        if s.get("n"):
            console.print(f"{name}: n={s['n']:.0f}, median |error| "
                          f"{s['median_abs_error']:.1%}, worst {s['worst_abs_error']:.1%}")


def plan(
    model: str = typer.Option("gpt3-175b", help="Preset, preset:overrides, or a planner shape "
                              "(gpt3-175b, megatron-530b, megatron-1t, palm-540b, llama3-8b, "
                              "llama3-70b)."),
    device: str = typer.Option("a100-80gb", help="Device key from `accelbench hw`."),
    nodes: int = typer.Option(1, help="Number of nodes."),
    gpus_per_node: int = typer.Option(None, "--gpus-per-node", help="Devices per node "
                                      "(default: the system's)."),
    global_batch: int = typer.Option(1536, help="Global batch in sequences."),
    seq: int = typer.Option(2048, help="Sequence length."),
    dtype: str = typer.Option("bf16", help="Training precision (mixed-precision Adam)."),
    optimizer: str = typer.Option("adam", help="adam or sgd."),
    top: int = typer.Option(10, help="How many layouts to show."),
    layout: str = typer.Option("", help="Evaluate one layout: dp=..,tp=..,pp=..,vp=..,mb=..,"
                               "zero=..,recompute=.. (missing fields are searched)."),
    intra_bw: float = typer.Option(None, help="Intra-node GB/s per device per direction."),
    inter_bw: float = typer.Option(None, help="Inter-node GB/s per device per direction."),
    intra_latency_us: float = typer.Option(None, help="Intra-node latency, microseconds."),
    inter_latency_us: float = typer.Option(None, help="Inter-node latency, microseconds."),
    efficiency: float = typer.Option(None, help="Compute efficiency (default per device)."),
    train_tokens: float = typer.Option(300e9, help="Tokens for the time-to-train column."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON on stdout."),
    db: Path = typer.Option(None, help="Results store whose training runs --validate uses."),
    validate: bool = typer.Option(False, "--validate", help="Compare predictions with "
                                  "published and measured runs."),
) -> None:
    """Predict memory and step time of parallel layouts and rank them (or --validate)."""
    if efficiency is not None and not 0 < efficiency <= 1:
        raise ConfigError("efficiency", f"must be in (0, 1], got {efficiency}", "(0, 1]")
    if validate:
        _validate(json_out, efficiency, db)
        return
    require_choice("dtype", dtype, DTYPES)
    require_choice("optimizer", optimizer, ("adam", "sgd"))
    for name, value in (("global-batch", global_batch), ("seq", seq), ("nodes", nodes),
                        ("top", top)):
        require_positive(name, value)
    cfg = resolve_shape(model)
    cluster = make_cluster(device, nodes, gpus_per_node, intra_bw, inter_bw,
                           None if intra_latency_us is None else intra_latency_us * 1e-6,
                           None if inter_latency_us is None else inter_latency_us * 1e-6)
    setup = TrainSetup(global_batch, seq, dtype, optimizer)
    fields = parse_layout(layout) if layout else {}
    full = {"dp", "tp", "pp", "vp", "mb", "zero", "recompute"} <= fields.keys()
    if full:
        results, header = [plan_fixed(cfg, cluster, setup, fields, efficiency)], "given layout"
    else:
        found = search(cfg, cluster, setup, fields, top, efficiency)
        results = found.best
        header = (f"{found.n_evaluated} layouts, {found.n_fit} divide and fit, "
                  f"{found.layouts_per_s:,.0f} layouts/s")
    _emit(results, cfg.name, cluster, setup, header, train_tokens, json_out)


def _emit(results: list[PlanResult], model: str, cluster: ClusterSpec, setup: TrainSetup,
          header: str, train_tokens: float, json_out: bool) -> None:
    """Table on stderr (or JSON on stdout); exit 1 when nothing fits."""
    if json_out:
        print(json.dumps({"model": model, "cluster": cluster.to_dict(),
                          "setup": setup.__dict__, "search": header,
                          "best": [r.to_dict() for r in results]}, indent=2))
    if not results:
        console.print(f"no layout divides and fits ({header})")
        raise typer.Exit(1)
    if not json_out:
        title = (f"{model} on {cluster.n_devices} x {cluster.device.key}: "
                 f"batch {setup.global_batch} x {setup.seq_len}, {setup.dtype}; {header}")
        console.print(_plan_table(results, title, train_tokens))


def register(app: typer.Typer) -> None:
    """Add the plan command."""
    app.command("plan")(plan)
