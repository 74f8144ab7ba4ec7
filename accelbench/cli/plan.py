"""`accelbench plan`: predicted memory and throughput of parallel layouts; `--validate` checks
the predictions against published and measured runs. Parses, calls accelbench.analytics and
renders: the result (table or JSON) on stdout, what went wrong on stderr."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import typer
from rich.table import Table

from accelbench.analytics.confidence import Confidence
from accelbench.analytics.intervals import Covered
from accelbench.analytics.measured_steps import (
    StepRow,
    missing_precision,
    step_errors,
    step_residual,
    validate_measured_steps,
)
from accelbench.analytics.plan_input import (
    PlanInput,
    PlanOutcome,
    PlanRequest,
    check_compute_source,
    check_efficiency,
    check_validate,
    moe_imbalance_text,
    resolve_plan_input,
    run_plan,
)
from accelbench.analytics.planner import NOT_BUILT, PlanResult
from accelbench.analytics.published import (
    COVERAGE_BY,
    METHOD,
    Validation,
    ValidationRow,
    errors_by_source,
    interval_check,
    interval_report,
    validate_all,
)
from accelbench.analytics.steptime import OVERLAP_MODES, compute_source, sparse_compute_note
from accelbench.cli.common import console
from accelbench.config.errors import ConfigError
from accelbench.config.layout import Layout
from accelbench.config.vocab import GB
from accelbench.report.measured import measured_training_runs
from accelbench.report.measured_steps import measured_step_runs, profiles_by_threads
from accelbench.report.plan_profile import resolve_profile
from accelbench.report.table import add_plain_row, plain_table
from accelbench.store.store import ResultStore

# Tables and their notes on `out` (stdout, never reads markup: cli.common's kind of console, whose
# tables fit its width, report/fit.py); messages on `console` (stderr) as plain text.
out = type(console)(markup=False, highlight=False)


def _say(line: str) -> None:
    """One message on stderr, printed as text."""
    console.print(line, markup=False, highlight=False, soft_wrap=True)


def _show(thing: Table | str, wide: bool = False) -> None:
    """Part of the command's result on stdout, printed as text (`wide`: every column)."""
    out.widened(wide).print(thing)


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


# Each column with its priority (report/fit.py: 0 always shown; 1, 2, ...: left out when
# narrow, the largest first): the layout and the plan's figures with their intervals stay (the
# flags are also the "!" lines below the table).
_PLAN_COLUMNS = {"#": 0, "dp": 0, "tp": 0, "pp": 0, "vp": 2, "cp": 2, "ep": 2, "mb": 0,
                 "zero": 0, "recompute": 1, "sp": 2, "mem GB/dev": 1, "tok/s": 0, "MFU": 0,
                 "HFU": 4, "step s": 1, "bubble": 3, "comm": 3, "recomp": 4, "limit": 1,
                 "days": 1, "flags": 1}


def _rate(value: float, low: float, high: float) -> str:
    """'185k (164-209k)': a rate and its interval, compact."""
    for scale, unit in ((1e6, "M"), (1e3, "k")):
        if value >= 10 * scale:
            digits = 1 if value < 100 * scale and unit == "M" else 0
            return (f"{value / scale:.{digits}f}{unit} ({low / scale:.{digits}f}-"
                    f"{high / scale:.{digits}f}{unit})")
    return f"{value:,.0f} ({low:,.0f}-{high:,.0f})"


def _flag_cell(c: Confidence | None) -> str:
    """The kinds of a layout's flags ('memory, mfu'), '-' when within the envelope."""
    return ", ".join(f.kind for f in c.flags) if c and c.flags else "-"


def _rate_cells(r: PlanResult, c: Confidence | None, train_tokens: float) -> list[str]:
    """Rates with their 80% intervals and the time split of a layout; blank for one that does
    not fit (it cannot run)."""
    s = r.step
    if not r.memory.fits:
        return ["-"] * 7 + ["does not fit", "-", _flag_cell(c)]
    comm = s.comm_exposed_s
    if c is None:
        rates = [f"{s.tokens_per_s:,.0f}", f"{s.mfu:.1%}", f"{s.step_s:.2f}"]
    else:
        iv = c.interval
        low, high = iv.time(s.step_s)
        mfu_low, mfu_high = iv.throughput(s.mfu)
        rates = [_rate(s.tokens_per_s, *iv.throughput(s.tokens_per_s)),
                 f"{s.mfu:.1%} ({100 * mfu_low:.0f}-{100 * mfu_high:.0f})",
                 f"{s.step_s:.2f} ({low:.3g}-{high:.3g})"]
    return [rates[0], rates[1], f"{s.hfu:.1%}", rates[2],
            _pct(s.bubble_s, s.step_s), _pct(comm, s.step_s), _pct(s.recompute_s, s.step_s),
            r.limiter, f"{s.days_for_tokens(train_tokens):.1f}", _flag_cell(c)]


def _plan_table(results: list[PlanResult], title: str, train_tokens: float,
                confidence: list[Confidence] | None = None) -> Table:
    """The ranked layouts with what limits each, their 80% intervals and flags; a '*' on the
    rank of one accelbench's runtime does not build (see _runtime_notes)."""
    table = plain_table(title)
    for col, priority in _PLAN_COLUMNS.items():
        table.add_column(col, justify="left" if col in ("recompute", "limit", "flags")
                         else "right", priority=priority, whole=col != "flags")
    for i, r in enumerate(results, 1):
        lay = r.layout
        add_plain_row(
            table, f"{i}{'' if r.built_by_runtime else '*'}", str(lay.dp), str(lay.tp),
            _stages_cell(lay), str(lay.vp), str(lay.cp), str(lay.ep), str(lay.mb), str(lay.zero),
            lay.recompute, "on" if lay.sp else "off",
            f"{r.memory.total / GB:.1f} ({_pct(r.memory.total, r.memory.usable_bytes)})",
            *_rate_cells(r, confidence[i - 1] if confidence else None, train_tokens))
    return table


def _ranks(at: list[int]) -> str:
    return ", ".join(f"#{i}" for i in at)


def _confidence_notes(outcome: PlanOutcome, request: PlanRequest) -> list[str]:
    """What the intervals are (per residual group, with the ranks using it), each flagged
    layout's reasons, and how many layouts the headroom moved down."""
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(outcome.confidence, 1):
        groups.setdefault(f"{c.interval.group}, {c.interval.n} runs", []).append(i)
    lines = ["(ranges): 80% prediction intervals of tok/s, MFU and step s, estimates from the "
             "shipped runs' leave-one-source-out residuals (docs/planner.md): "
             + "; ".join(f"{_ranks(at)} {group}" for group, at in groups.items())
             + ("; --efficiency given: they are the built-in curves' residuals, not those of "
                "the efficiency chosen" if request.efficiency is not None else "")]
    flagged: dict[tuple[str, str], list[str]] = {}
    for i, c in enumerate(outcome.confidence, 1):
        for flag in c.flags:
            flagged.setdefault((flag.kind, flag.reason), []).append(
                f"#{i}" + (f" {flag.value}" if flag.value else ""))
    lines += [f"! {kind} ({', '.join(at)}): {reason}" for (kind, reason), at in flagged.items()]
    found = outcome.search
    if found is not None and found.n_over_headroom:
        lines.append(f"{found.n_over_headroom} of {found.n_fit} layouts that fit use more than "
                     f"{request.headroom:.0%} of usable memory (--memory-headroom): ranked "
                     "after "
                     "those within it")
    return lines


def _stages_cell(lay: Layout) -> str:
    """pp, with the first and last stages' layer counts when uneven ('16 (7..7)')."""
    if not lay.uneven:
        return str(lay.pp)
    return f"{lay.pp} ({lay.pp_first or '='}..{lay.pp_last or '='})"


def _precision_notes(results: list[PlanResult], dtype: str) -> list[str]:
    """Under fp8, what MFU divides by and each layout's utilisation of the FP8 peak."""
    if dtype != "fp8":
        return []
    shares = ", ".join(f"#{i} {r.step.fp8_peak_utilisation:.1%}"
                       for i, r in enumerate(results, 1)
                       if r.memory.fits and r.step.fp8_peak_utilisation is not None)
    return [f"fp8: MFU and HFU against the dense {results[0].step.mfu_peak} peak (as NeMo and "
            f"torchtitan publish it); utilisation of the dense FP8 peak: {shares or '-'}"]


def _sparsity_notes(results: list[PlanResult], request: PlanRequest) -> list[str]:
    """What a sparse plan assumed: the masks' memory and where the GEMMs run."""
    setup = request.setup
    if not setup.sparsity:
        return []
    return [f"sparsity {setup.sparsity:g} ({setup.sparsity_pattern}): masks "
            f"{results[0].memory.masks / GB:.2f} GB per device in #1; "
            f"{sparse_compute_note(setup, request.cluster.device)}; MFU counts the "
            "dense-equivalent FLOPs"]


def _moe_notes(results: list[PlanResult], request: PlanRequest) -> list[str]:
    """A mixture of experts: what MFU counts and each layout's all-to-all share of the step."""
    model = request.model
    if not model.n_experts:
        return []
    shares = ", ".join(f"#{i} {_pct(r.step.ep_comm_s, r.step.step_s)}"
                       for i, r in enumerate(results, 1) if r.memory.fits)
    return [f"mixture of experts ({model.n_experts} experts, top-{model.moe_top_k}): MFU "
            f"counts the active parameters; expert-parallel all-to-all share of the step: "
            f"{shares or '-'} (docs/planner.md, MoE)"]


def _runtime_notes(results: list[PlanResult]) -> list[str]:
    """'* #2, #5 not built by accelbench's runtime: <reason>', one line per reason."""
    ranks: dict[str, list[str]] = {}
    for i, r in enumerate(results, 1):
        if r.runtime_note:
            ranks.setdefault(r.runtime_note, []).append(f"#{i}")
    return [f"* {', '.join(at)} {NOT_BUILT}: {note}" for note, at in ranks.items()]


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


def _validation_table(rows: list[ValidationRow], loo: list[ValidationRow], title: str,
                      covered: list[Covered] | None = None) -> Table:
    """Predicted against observed MFU per run (leave-one-out column where given, with its 80%
    interval and whether the observed MFU fell inside), with the published figure, its kind
    and a footnote number for its source (see _source_lines)."""
    table = plain_table(title)
    priorities = {"id": 0, "run": 1, "device": 2, "published": 3, "observed MFU": 0,
                  "predicted MFU": 0, "error": 0, "left out": 2, "80% interval": 2, "in": 2,
                  "mem GB": 4, "fits": 4, "limit": 4, "attn": 5, "oracle": 5, "set-up": 5,
                  "src": 3}
    for col, priority in priorities.items():
        table.add_column(col, justify="left" if col in ("run", "device", "limit",
                                                        "published") else "right",
                         priority=priority, whole=col not in ("run", "device"))
    numbers = _source_numbers(rows)
    covered = covered or []
    for i, r in enumerate(rows):
        left_out = f"{loo[i].error:+.1%}" if i < len(loo) else "-"
        interval, inside = "-", "-"
        if i < len(loo) and i < len(covered):
            low, high = covered[i].interval.throughput(loo[i].predicted_mfu)
            interval = f"{100 * low:.1f}-{100 * high:.1f}%"
            inside = "yes" if covered[i].inside else "no"
        add_plain_row(table, r.run_id or "-", r.name, r.device, _published_figure(r),
                      f"{r.observed_mfu:.1%}",
                      f"{r.predicted_mfu:.1%}", f"{r.error:+.1%}", left_out, interval, inside,
                      f"{r.memory_gb:.0f}",
                      "yes" if r.fits else "no", r.limiter,
                      "fused" if r.fused_attention else "scores", r.oracle_tag, r.setup_tag,
                      f"[{numbers[r.source]}]")
    return table


def _coverage_table(covered: list[Covered]) -> Table:
    """Per group (generation, precision, limiter, scale): runs, how many fell inside their
    own out-of-sample 80% interval, and the leave-one-source-out |error|."""
    table = plain_table("80% prediction intervals: coverage out of sample (each run's interval "
                        "made without its source) and left-out |error|, by group")
    for col in ("by", "group", "runs", "inside", "coverage", "median |error|", "worst |error|"):
        table.add_column(col, justify="left" if col in ("by", "group") else "right")
    report = interval_report(covered)
    coverage, errors = report["coverage"], report["error_left_out"]
    assert isinstance(coverage, dict) and isinstance(errors, dict)
    for by in COVERAGE_BY:
        for group, c in coverage[by].items():
            if group == "overall" and by != COVERAGE_BY[-1]:
                continue
            e = errors[by][group]
            add_plain_row(table, "all" if group == "overall" else by, group, f"{c['n']:.0f}",
                          f"{c['inside']:.0f}", f"{c['coverage']:.0%}",
                          f"{e['median_abs_error']:.1%}", f"{e['worst_abs_error']:.1%}")
    return table


def _source_lines(rows: list[ValidationRow]) -> str:
    """The footnotes of _validation_table: '[1] Narayanan et al. SC21 ...', one a line."""
    return "\n".join(f"[{n}] {source}" for source, n in _source_numbers(rows).items())


def _run_notes(rows: list[ValidationRow]) -> list[str]:
    """'S10-1 Llama 3 405B: micro-batch not given: 1 assumed; ...' for each row with notes."""
    return [f"{r.run_id or '-'} {r.name}: {r.notes}" for r in rows if r.notes]


def _source_table(checked: Validation) -> Table:
    """Per source and overall: median and worst |error| of the published runs, in-sample and
    with the source left out of the fit."""
    table = plain_table("|error| of predicted MFU relative to the published, by source")
    for col in ("source", "runs", "median in-sample", "worst in-sample",
                "median left out", "worst left out"):
        table.add_column(col, justify="left" if col == "source" else "right",
                         priority=1 if col.startswith("worst") else 0)
    left = checked.by_source_left_out() if checked.leave_one_out else {}
    for key, s in checked.by_source().items():
        if not s["n"]:
            continue
        out = left.get(key, {})
        add_plain_row(table, key, f"{s['n']:.0f}", f"{s['median_abs_error']:.1%}",
                      f"{s['worst_abs_error']:.1%}",
                      f"{out['median_abs_error']:.1%}" if out.get("n") else "-",
                      f"{out['worst_abs_error']:.1%}" if out.get("n") else "-")
    return table


def _measured_steps(store: ResultStore) -> tuple[list[StepRow], list[str]]:
    """This machine's measured cells against the planner through the store's profiles, and a
    line for each cell left out (no profile at its thread count)."""
    profiles = profiles_by_threads(store)
    runs = measured_step_runs(store)
    left = [f"record {r['record_id']}: no profile at {r['threads']} threads (accelbench "
            f"calibrate --threads {r['threads']})" for r in runs if r["threads"] not in profiles]
    runs = [r for r in runs if r["threads"] in profiles]
    missing = [missing_precision(r, profiles) for r in runs]
    left += [why for why in missing if why]
    kept = [r for r, why in zip(runs, missing, strict=True) if not why]
    return validate_measured_steps(kept, profiles), left


def _steps_table(rows: list[StepRow]) -> Table:
    """Predicted against measured seconds per measured cell."""
    table = plain_table("Predicted vs measured step time on this machine (through its "
                        "measured profiles)")
    for col in ("record", "cell", "kind", "measured s", "predicted s", "error", "profile"):
        table.add_column(col, justify="left" if col in ("cell", "kind", "profile") else "right",
                         priority={"cell": 1, "kind": 2, "profile": 3}.get(col, 0))
    for r in rows:
        add_plain_row(table, str(r.record_id), r.name, r.kind, f"{r.measured_s:.3f}",
                      f"{r.predicted_s:.3f}", f"{r.error:+.1%}", r.profile)
    return table


def _show_moe(checked: Validation, wide: bool = False) -> None:
    """The published mixture-of-experts runs (checked only, none fitted), their sources, notes
    and median/worst |error| per source."""
    if not checked.moe:
        return
    _show(_validation_table(checked.moe, [], "Mixture of experts: predicted vs published MFU "
                                             "(checked only: nothing is fitted to these runs)"),
          wide)
    _show(_source_lines(checked.moe))
    _show("\n".join(["notes:"] + _run_notes(checked.moe)))
    for key, s in errors_by_source(checked.moe).items():
        _show(f"moe {key}: n={s['n']:.0f}, median |error| {s['median_abs_error']:.1%}, "
              f"worst {s['worst_abs_error']:.1%}")


def _validate(as_json: bool, efficiency: float | None, db: Path | None,
              wide: bool = False) -> None:
    """Print each published and measured run's error, the errors per source and overall, and
    the published runs not modelled with their reasons; then this machine's measured cells
    against the planner through its profiles."""
    check_efficiency(efficiency)
    store = ResultStore(db, write=False)
    checked = validate_all(measured_training_runs(store), efficiency)
    steps, left = _measured_steps(store)
    # intervals rest on the built-in curves' leave-one-source-out (none with --efficiency)
    covered = (interval_check(checked, tuple(step_residual(r) for r in steps))
               if checked.leave_one_out else [])
    if as_json:
        print(json.dumps({**checked.to_dict(), "measured_steps": [r.to_dict() for r in steps],
                          "measured_steps_summary": step_errors(steps),
                          "measured_steps_left_out": left,
                          "intervals": interval_report(covered) if covered else None},
                         indent=2))
        return
    _show(_validation_table(checked.published, checked.leave_one_out,
                            "Predicted vs published MFU (left out: the run's source left out of "
                            "the fit of the built-in curves; its 80% interval made without that "
                            "source's residuals)", covered), wide)
    _show(_source_lines(checked.published))
    _show("\n".join(["notes:"] + _run_notes(checked.published)))
    _show(_source_table(checked), wide)
    _show("\n".join([f"not modelled ({len(checked.not_modelled)} published runs, not scored):"]
                     + [f"{u.run_id} {u.name}: {u.reason}" for u in checked.not_modelled]))
    _show_moe(checked, wide)
    if checked.measured:
        _show(_validation_table(checked.measured, [], "Predicted vs measured MFU"), wide)
        _show(_source_lines(checked.measured))
    else:
        _show("measured runs: none from the results store yet")
    for name, s in checked.summary().items():
        if s.get("n"):
            _show(f"{name}: n={s['n']:.0f}, median |error| {s['median_abs_error']:.1%}, "
                      f"worst {s['worst_abs_error']:.1%}")
    if steps:
        _show(_steps_table(steps), wide)
    if covered:
        _show(_coverage_table(covered), wide)
        _show(f"method: {METHOD}. Runs inside their interval: "
              f"{sum(c.inside for c in covered)} of {len(covered)}.")
    else:
        _show("intervals: not computed with --efficiency (they rest on the built-in curves' "
              "leave-one-source-out residuals)")
    for name, s in step_errors(steps).items():
        _show(f"measured step time, {name}: n={s['n']:.0f}, median |error| "
              f"{s['median_abs_error']:.1%}, worst {s['worst_abs_error']:.1%}")
    for line in left:
        _show(line)


def plan(
    model: str = typer.Option("gpt3-175b", help="Preset, preset:overrides, or a planner shape "
                              "(gpt3-175b, megatron-530b, megatron-1t, palm-540b, llama3-8b, "
                              "llama3-70b)."),
    device: str = typer.Option("a100-80gb", help="Device key from `accelbench hw`, or a "
                               "variant of one: KEY:memory_gb=96,bw_gb_s=2400,peak_scale=0.8 "
                               "(labelled as derived from that datasheet row)."),
    nodes: int = typer.Option(1, help="Number of nodes."),
    gpus_per_node: int = typer.Option(None, "--gpus-per-node", help="Devices per node "
                                      "(default: the system's)."),
    global_batch: int = typer.Option(1536, help="Global batch in sequences."),
    seq: int = typer.Option(2048, help="Sequence length."),
    dtype: str = typer.Option("bf16", help="Training precision (mixed-precision Adam); fp8: "
                              "block GEMMs at the FP8 peak, the rest BF16, MFU against BF16."),
    optimizer: str = typer.Option("adam", help="adam or sgd."),
    top: int = typer.Option(10, help="How many layouts to show."),
    layout: str = typer.Option("", help="Evaluate one layout: dp=..,tp=..,pp=..,vp=..,mb=..,"
                               "zero=..,recompute=..[,sp=on|off,cp=..,ep=..,pp_first=..,"
                               "pp_last=..] (missing fields are searched; sp defaults to on "
                               "when tp > 1 in a full layout)."),
    intra_bw: float = typer.Option(None, help="Intra-node GB/s per device per direction."),
    inter_bw: float = typer.Option(None, help="Inter-node GB/s per device per direction."),
    intra_latency_us: float = typer.Option(None, help="Intra-node latency, microseconds."),
    inter_latency_us: float = typer.Option(None, help="Inter-node latency, microseconds."),
    efficiency: float = typer.Option(None, help="Large-GEMM efficiency of the built-in "
                                     "curves (default: fitted per device class)."),
    train_tokens: float = typer.Option(300e9, help="Tokens for the time-to-train column."),
    fused_attention: bool = typer.Option(True, "--fused-attention/--no-fused-attention",
                                         help="Flash/SDPA attention that never stores the "
                                         "scores (default); off: scores kept (5as/h term)."),
    sparsity: float = typer.Option(0.0, help="Weight sparsity of the block matrices, in [0, 1) "
                                   "(docs/sparsity.md): masks in memory; 2:4 also its kernels."),
    sparsity_pattern: str = typer.Option("unstructured", help="unstructured, or 2:4 (level "
                                         "0.5 only)."),
    overlap: str = typer.Option("megatron", help="What communication hides behind compute: "
                                "none, megatron (DP behind backward, TP/PP/EP exposed), "
                                "megatron-a2a (also the MoE all-to-all behind the paired "
                                "micro-batch's compute) or megascale (also TP, PP and the "
                                "all-to-all behind compute); docs/planner.md."),
    moe_imbalance: float = typer.Option(1.0, help="Mixture of experts: the busiest expert's "
                                        "routed tokens over the mean, >= 1 (1.0 balanced, as "
                                        "force-balanced benchmarks run; a train record's "
                                        "moe_load_imbalance is a measured one)."),
    profile: str = typer.Option(None, help="Time compute (and collectives inside a node) from "
                                "a measured machine profile: a profile record id of --db, "
                                "'latest', or a JSON file of `accelbench calibrate --json`."),
    memory_headroom: float = typer.Option(0.9, help="Fraction of usable memory a layout may "
                                          "use before it is flagged and ranked after those "
                                          "within it, in (0, 1]."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON on stdout."),
    db: Path = typer.Option(None, help="Results store whose training runs --validate uses, "
                            "and where --profile ID|latest is read."),
    validate: bool = typer.Option(False, "--validate", help="Compare predictions with "
                                  "published and measured runs."),
    wide: bool = typer.Option(False, "--wide", help="Every column of the tables, wider than "
                              "the terminal if need be."),
) -> None:
    """Predict memory and step time of parallel layouts and rank them (or --validate)."""
    given = PlanInput(
        model=model, device=device, nodes=nodes, gpus_per_node=gpus_per_node,
        global_batch=global_batch, seq=seq, dtype=dtype, optimizer=optimizer, top=top,
        layout=layout, intra_bw=intra_bw, inter_bw=inter_bw, intra_latency_us=intra_latency_us,
        inter_latency_us=inter_latency_us, efficiency=efficiency, train_tokens=train_tokens,
        fused_attention=fused_attention, sparsity=sparsity, sparsity_pattern=sparsity_pattern,
        overlap=overlap, moe_imbalance=moe_imbalance, memory_headroom=memory_headroom)
    if validate:
        check_validate(given)
        if profile is not None:
            raise ConfigError("profile", "--validate reads every profile of --db itself",
                              "--validate --db FILE")
        _validate(json_out, efficiency, db, wide)
        return
    if db is not None and profile is None:
        raise ConfigError("db", "a plan reads no results; --db is for --validate or --profile",
                          "--validate --db FILE, --profile ID|latest --db FILE")
    check_compute_source(efficiency, profile is not None)
    measured = resolve_profile(profile, db) if profile is not None else None
    request = resolve_plan_input(given, measured)
    outcome = run_plan(request)
    _emit(request, outcome, json_out, wide)


def _assumptions(request: PlanRequest) -> dict[str, str]:
    """Where the compute rates come from, what the overlap hides and, for a mixture of experts,
    the load imbalance, as the plan states them."""
    stated = {"compute": compute_source(request.cluster),
              f"overlap {request.setup.overlap}": OVERLAP_MODES[request.setup.overlap]}
    if request.model.n_experts:
        stated[f"moe imbalance {request.setup.moe_imbalance:g}"] = moe_imbalance_text(
            request.model, request.setup.moe_imbalance)
    return stated


def _header(outcome: PlanOutcome) -> str:
    """'given layout', or how the search went."""
    found = outcome.search
    if found is None:
        return "given layout"
    return (f"{found.n_evaluated} layouts, {found.n_fit} divide and fit, "
            f"{found.layouts_per_s:,.0f} layouts/s")


def _emit(request: PlanRequest, outcome: PlanOutcome, json_out: bool,
          wide: bool = False) -> None:
    """Table (or JSON) on stdout; exit 1 when nothing fits or the given layout does not,
    saying why on stderr."""
    header, results = _header(outcome), outcome.results
    rejected = outcome.search.rejection_summary() if outcome.search else ""
    cluster, setup = request.cluster, request.setup
    if json_out:
        print(json.dumps({"model": request.model.name, "cluster": cluster.to_dict(),
                          "setup": asdict(setup), "assumptions": _assumptions(request),
                          "search": header, "rejected": rejected,
                          "memory_headroom": request.headroom,
                          "over_headroom": outcome.search.n_over_headroom
                          if outcome.search else None,
                          "best": [{**r.to_dict(), **c.to_dict(r, cluster.n_devices,
                                                               request.train_tokens)}
                                   for r, c in zip(results, outcome.confidence, strict=True)]},
                         indent=2))
    if not results:
        _say(f"no layout divides and fits ({header})")
        if rejected:
            _say(f"rejected: {rejected}")
        raise typer.Exit(1)
    if not json_out:
        title = (f"{request.model.name} on {cluster.n_devices} x {cluster.device.key}: "
                 f"batch {setup.global_batch} x {setup.seq_len}, {setup.dtype}; {header}")
        _show(_plan_table(results, title, request.train_tokens, outcome.confidence), wide)
        if ":" in cluster.device.key:
            _show(f"device {cluster.device.key}: {cluster.device.source}")
        _show("; ".join(f"{k}: {v}" for k, v in _assumptions(request).items()))
        for line in (_confidence_notes(outcome, request) + _runtime_notes(results)
                     + _precision_notes(results, setup.dtype)
                     + _sparsity_notes(results, request) + _moe_notes(results, request)):
            _show(line)
    if outcome.search is None and not results[0].memory.fits:
        mem = results[0].memory
        _say(f"does not fit: {mem.total / GB:.1f} GB per device against "
                  f"{mem.usable_bytes / GB:.1f} GB usable")
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the plan command."""
    app.command("plan")(plan)
