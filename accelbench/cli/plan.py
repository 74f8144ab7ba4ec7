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


_PLAN_COLUMNS = ("#", "dp", "tp", "pp", "vp", "mb", "zero", "recompute", "sp", "mem GB/dev",
                 "tok/s", "MFU", "HFU", "step s", "bubble", "comm", "recomp", "limit", "days")


def _rate_cells(r: PlanResult, train_tokens: float) -> list[str]:
    """Rates and time split of a layout; blank for one that does not fit (it cannot run)."""
    s = r.step
    if not r.memory.fits:
        return ["-"] * 7 + ["does not fit", "-"]
    comm = s.tp_comm_s + s.pp_comm_s + s.dp_comm_exposed_s
    return [f"{s.tokens_per_s:,.0f}", f"{s.mfu:.1%}", f"{s.hfu:.1%}", f"{s.step_s:.2f}",
            _pct(s.bubble_s, s.step_s), _pct(comm, s.step_s), _pct(s.recompute_s, s.step_s),
            r.limiter, f"{s.days_for_tokens(train_tokens):.1f}"]


def _plan_table(results: list[PlanResult], title: str, train_tokens: float) -> Table:
    """The ranked layouts with what limits each."""
    table = Table(title=title)
    for col in _PLAN_COLUMNS:
        table.add_column(col, justify="left" if col in ("recompute", "limit") else "right")
    for i, r in enumerate(results, 1):
        lay = r.layout
        table.add_row(
            str(i), str(lay.dp), str(lay.tp), str(lay.pp), str(lay.vp), str(lay.mb),
            str(lay.zero), lay.recompute, "on" if lay.sp else "off",
            f"{r.memory.total / 1e9:.1f} ({_pct(r.memory.total, r.memory.usable_bytes)})",
            *_rate_cells(r, train_tokens))
    return table


_ORACLE_UNITS = {"mfu": "MFU", "tflops_per_device": "TFLOP/s per GPU",
                 "tokens_per_s_per_device": "tokens/s per device"}


def _published_figure(r: ValidationRow) -> str:
    """The oracle as the source states it, with its kind."""
    if r.oracle_kind == "mfu":
        return f"{r.oracle_value:.1%} MFU"
    return f"{r.oracle_value:,.4g} {_ORACLE_UNITS.get(r.oracle_kind, r.oracle_kind)}"


def _source_numbers(rows: list[ValidationRow]) -> dict[str, int]:
    """Each distinct source a footnote number, in order of first use (keeps the table narrow)."""
    numbers: dict[str, int] = {}
    for r in rows:
        numbers.setdefault(r.source, len(numbers) + 1)
    return numbers


def _validation_table(rows: list[ValidationRow], loo: list[ValidationRow], title: str) -> Table:
    """Predicted against observed MFU per run (leave-one-out column where given), with the
    published figure, its kind and a footnote number for its source (see _source_lines)."""
    table = Table(title=title)
    for col in ("run", "device", "published", "observed MFU", "predicted MFU", "error",
                "leave-one-out", "mem GB", "fits", "limit", "attn", "oracle", "set-up", "src"):
        table.add_column(col, justify="left" if col in ("run", "device", "limit",
                                                        "published") else "right")
    numbers = _source_numbers(rows)
    for i, r in enumerate(rows):
        out = f"{loo[i].error:+.1%}" if i < len(loo) else "-"
        table.add_row(r.name, r.device, _published_figure(r), f"{r.observed_mfu:.1%}",
                      f"{r.predicted_mfu:.1%}", f"{r.error:+.1%}", out, f"{r.memory_gb:.0f}",
                      "yes" if r.fits else "no", r.limiter,
                      "fused" if r.fused_attention else "scores", r.oracle_tag, r.setup_tag,
                      f"[{numbers[r.source]}]")
    return table


def _source_lines(rows: list[ValidationRow]) -> str:
    """The footnotes of _validation_table: '[1] Narayanan et al. SC21 ...', one a line."""
    return "\n".join(f"[{n}] {source}" for source, n in _source_numbers(rows).items())


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
    console.print(_source_lines(published), markup=False, highlight=False)
    if measured:
        console.print(_validation_table(measured, [], "Predicted vs measured MFU"))
        console.print(_source_lines(measured), markup=False, highlight=False)
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
                               "zero=..,recompute=..[,sp=on|off] (missing fields are searched; "
                               "sp defaults to on when tp > 1 in a full layout)."),
    intra_bw: float = typer.Option(None, help="Intra-node GB/s per device per direction."),
    inter_bw: float = typer.Option(None, help="Inter-node GB/s per device per direction."),
    intra_latency_us: float = typer.Option(None, help="Intra-node latency, microseconds."),
    inter_latency_us: float = typer.Option(None, help="Inter-node latency, microseconds."),
    efficiency: float = typer.Option(None, help="Compute efficiency (default per device)."),
    train_tokens: float = typer.Option(300e9, help="Tokens for the time-to-train column."),
    fused_attention: bool = typer.Option(True, "--fused-attention/--no-fused-attention",
                                         help="Flash/SDPA attention that never stores the "
                                         "scores (default); off: scores kept (5as/h term)."),
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
    _check_inputs(dtype, optimizer, global_batch, seq, nodes, top, train_tokens)
    cfg = resolve_shape(model)
    cluster = make_cluster(device, nodes, gpus_per_node, intra_bw, inter_bw,
                           None if intra_latency_us is None else intra_latency_us * 1e-6,
                           None if inter_latency_us is None else inter_latency_us * 1e-6)
    setup = TrainSetup(global_batch, seq, dtype, optimizer, fused_attention)
    fields = parse_layout(layout) if layout else {}
    if _FULL_LAYOUT <= fields.keys():
        result = plan_fixed(cfg, cluster, setup, fields, efficiency)
        _emit([result], cfg.name, cluster, setup, "given layout", train_tokens, json_out)
        if not result.memory.fits:
            console.print(f"does not fit: {result.memory.total / 1e9:.1f} GB per device "
                          f"against {result.memory.usable_bytes / 1e9:.1f} GB usable")
            raise typer.Exit(1)
        return
    found = search(cfg, cluster, setup, fields, top, efficiency)
    header = (f"{found.n_evaluated} layouts, {found.n_fit} divide and fit, "
              f"{found.layouts_per_s:,.0f} layouts/s")
    _emit(found.best, cfg.name, cluster, setup, header, train_tokens, json_out,
          found.rejection_summary())


_FULL_LAYOUT = {"dp", "tp", "pp", "vp", "mb", "zero", "recompute"}


def _check_inputs(dtype: str, optimizer: str, global_batch: int, seq: int, nodes: int,
                  top: int, train_tokens: float) -> None:
    """Reject bad choices and non-positive sizes with ConfigError (exit 2)."""
    require_choice("dtype", dtype, DTYPES)
    require_choice("optimizer", optimizer, ("adam", "sgd"))
    for name, value in (("global-batch", global_batch), ("seq", seq), ("nodes", nodes),
                        ("top", top), ("train-tokens", train_tokens)):
        require_positive(name, value)


def _emit(results: list[PlanResult], model: str, cluster: ClusterSpec, setup: TrainSetup,
          header: str, train_tokens: float, json_out: bool, rejected: str = "") -> None:
    """Table on stderr (or JSON on stdout); exit 1 when nothing fits, saying why."""
    if json_out:
        print(json.dumps({"model": model, "cluster": cluster.to_dict(),
                          "setup": setup.__dict__, "search": header, "rejected": rejected,
                          "best": [r.to_dict() for r in results]}, indent=2))
    if not results:
        console.print(f"no layout divides and fits ({header})")
        if rejected:
            console.print(f"rejected: {rejected}")
        raise typer.Exit(1)
    if not json_out:
        title = (f"{model} on {cluster.n_devices} x {cluster.device.key}: "
                 f"batch {setup.global_batch} x {setup.seq_len}, {setup.dtype}; {header}")
        console.print(_plan_table(results, title, train_tokens))


def register(app: typer.Typer) -> None:
    """Add the plan command."""
    app.command("plan")(plan)
