"""`accelbench plan --validate`'s output: each published and measured run's predicted against
observed MFU, the errors per source and overall, the published runs not modelled, the runs
found outside the shipped csv apart (validation only, never fitted), this machine's measured
cells against the planner through its profiles, and the prediction intervals' coverage;
gathered as a PlanView (report/plan_table.py) the command prints."""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from accelbench.analytics.intervals import Covered
from accelbench.analytics.measured_step_runs import (
    StepRow,
    missing_precision,
    step_errors,
    step_residual,
    validate_measured_steps,
)
from accelbench.analytics.published import Validation, validate_all
from accelbench.analytics.source_check import (
    BY,
    METHOD,
    IntervalCheck,
    interval_check,
    interval_report,
)
from accelbench.analytics.source_model import MIN_SOURCES
from accelbench.analytics.validation_rows import (
    ValidationRow,
    errors_by_precision,
    errors_by_source,
)
from accelbench.config.records.seq_search import FITS
from accelbench.config.records.train import TrainFigure
from accelbench.report.measured import measured_training_runs
from accelbench.report.measured_steps import measured_step_runs, profiles_by_threads
from accelbench.report.plan_table import PlanView
from accelbench.report.table import add_plain_row, plain_table
from accelbench.store.store import ResultStore

_ORACLE_UNITS = {TrainFigure.MFU: "MFU", TrainFigure.TFLOPS_PER_DEVICE: "TFLOP/s per GPU",
                 TrainFigure.TOKENS_PER_S_PER_DEVICE: "tokens/s per device"}


def _published_figure(r: ValidationRow) -> str:
    """The oracle as the source states it, with its kind."""
    if r.oracle_kind == TrainFigure.MFU:
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
                  "mem GB": 4, FITS: 4, "limit": 4, "attn": 5, "oracle": 5, "set-up": 5,
                  "src": 3}
    for col, priority in priorities.items():
        table.add_column(col, justify="left" if col in ("run", "device", "limit",
                                                        "published") else "right",
                         priority=priority, whole=col not in ("run", "device"))
    numbers = _source_numbers(rows)
    judged = {c.residual.name: c for c in covered or []}
    for i, r in enumerate(rows):
        left_out = f"{loo[i].error:+.1%}" if i < len(loo) else "-"
        interval, inside = "-", "-"
        own = judged.get(f"{r.run_id} {r.name}".strip())
        if i < len(loo) and own is not None:
            low, high = own.interval.throughput(loo[i].predicted_mfu)
            interval = f"{100 * low:.1f}-{100 * high:.1f}%"
            inside = "yes" if own.inside else "no"
        add_plain_row(table, r.run_id or "-", r.name, r.device, _published_figure(r),
                      f"{r.observed_mfu:.1%}",
                      f"{r.predicted_mfu:.1%}", f"{r.error:+.1%}", left_out, interval, inside,
                      f"{r.memory_gb:.0f}",
                      "yes" if r.fits else "no", r.limiter,
                      "fused" if r.fused_attention else "scores", r.oracle_tag, r.setup_tag,
                      f"[{numbers[r.source]}]")
    return table


# how each set of judged runs was judged, as the coverage table names it
JUDGED = {"unseen": "shipped, source left out, unseen stack",
          "named_source": "shipped, source left out, stack named (fitted on its other source)",
          "named_run": "shipped, run left out, stack named",
          "own": "own measured cells (a source each), unseen stack",
          "found": "found runs (never fitted), unseen stack",
          "found_named": "found runs of a fitted stack, stack named"}


def _coverage_row(table: Table, judged: str, group: str, s: dict) -> None:
    """One row of the coverage table from a source_model.summary."""
    low, high = s["coverage_per_source_90"]
    spread = f" ({low:.0%}-{high:.0%})" if s["sources"] > 1 else ""
    add_plain_row(table, judged, group, f"{s['sources']}", f"{s['runs']}", f"{s['inside']}",
                  f"{s['coverage_per_source']:.0%}{spread}",
                  f"{s['coverage_per_run']:.0%}", f"{s['median_abs_error']:.1%}",
                  f"{s['worst_abs_error']:.1%}", f"{s['median_width']:.2f}")


def _coverage_table(report: dict) -> Table:
    """Per way of judging, overall and by generation and precision: sources, runs, runs
    inside, coverage per source (each source once, with its bootstrap 90% interval) and per
    run, |error| and the median width (high / low)."""
    table = plain_table("80% prediction intervals out of sample: coverage per source (each "
                        "source weighing once; bootstrap 90% over sources) and per run")
    for col in ("judged", "group", "sources", "runs", "inside", "per source", "per run",
                "median |error|", "worst", "width"):
        table.add_column(col, justify="left" if col in ("judged", "group") else "right",
                         priority={"judged": 1, "worst": 2}.get(col, 0))
    for key, name in JUDGED.items():
        judged = report[key]
        if not judged["overall"].get("runs"):
            continue
        _coverage_row(table, name, "overall", judged["overall"])
        for by in BY:
            for group, s in judged[by].items():
                if group != "overall" and len(judged[by]) > 2:
                    _coverage_row(table, name, f"{by} {group}", s)
    return table


def _own_lines(report: dict) -> list[str]:
    """Our own measured cells' coverage, one line a source: they are a source like any
    other, kept apart from the shipped runs'."""
    own = report["own"]["source"]
    return [f"own cells, {source}: {s['inside']} of {s['runs']} inside their 80% interval "
            f"(unseen stack), median |error| {s['median_abs_error']:.1%}, worst "
            f"{s['worst_abs_error']:.1%}, median width {s['median_width']:.2f}"
            for source, s in own.items() if source != "overall" and s.get("runs")]


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
    left = [f"record {r.record_id}: no profile at {r.threads} threads (accelbench "
            f"calibrate --threads {r.threads})" for r in runs if r.threads not in profiles]
    runs = [r for r in runs if r.threads in profiles]
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


def _moe_shown(checked: Validation) -> list[Table | str]:
    """The published mixture-of-experts runs (checked only, none fitted), their sources, notes
    and median/worst |error| per source."""
    if not checked.moe:
        return []
    shown: list[Table | str] = [
        _validation_table(checked.moe, [], "Mixture of experts: predicted vs published MFU "
                                           "(checked only: nothing is fitted to these runs)"),
        _source_lines(checked.moe), "\n".join(["notes:"] + _run_notes(checked.moe))]
    return shown + [f"moe {key}: n={s['n']:.0f}, median |error| {s['median_abs_error']:.1%}, "
                    f"worst {s['worst_abs_error']:.1%}"
                    for key, s in errors_by_source(checked.moe).items()]


FOUND_TITLE = "validation only: runs not shipped, never fitted"


def _found_shown(checked: Validation, covered: list[Covered]) -> list[Table | str]:
    """The runs found outside the shipped csv, apart: predicted with the curves fitted on every
    shipped run, each with the 80% interval a plan gives it, and their errors by precision."""
    if not checked.found:
        return []
    return [_validation_table(checked.found, checked.found if covered else [],
                              f"{FOUND_TITLE.capitalize()}: predicted vs published MFU (error "
                              "and left out alike: no fit has seen them; interval from the "
                              "shipped runs' residuals)", covered),
            _source_lines(checked.found), "\n".join(["notes:"] + _run_notes(checked.found)),
            *[f"{FOUND_TITLE}, {key}: n={e['n']:.0f}, median |error| "
              f"{e['median_abs_error']:.1%}, worst {e['worst_abs_error']:.1%}"
              for key, e in errors_by_precision(checked.found).items()],
            *([f"{FOUND_TITLE}: inside their 80% interval {sum(c.inside for c in covered)} of "
               f"{len(covered)}"] if covered else [])]


def _published_shown(checked: Validation, covered: list[Covered]) -> list[Table | str]:
    """The published runs: predicted against published MFU, sources, notes, errors by source,
    those not modelled, and the mixture-of-experts runs."""
    return [_validation_table(checked.published, checked.leave_one_out,
                              "Predicted vs published MFU (left out: the run's source left out "
                              "of the fit of the built-in curves; its 80% interval made without "
                              "that source's residuals)", covered),
            _source_lines(checked.published),
            "\n".join(["notes:"] + _run_notes(checked.published)),
            _source_table(checked),
            "\n".join([f"not modelled ({len(checked.not_modelled)} published runs, not "
                       "scored):"] + [f"{u.run_id} {u.name}: {u.reason}"
                                      for u in checked.not_modelled]),
            *_moe_shown(checked)]


def _measured_shown(checked: Validation, steps: list[StepRow], left: list[str],
                    check: IntervalCheck | None) -> list[Table | str]:
    """The measured runs, the summary, this machine's step times and the intervals'
    coverage."""
    shown: list[Table | str] = (
        [_validation_table(checked.measured, [], "Predicted vs measured MFU"),
         _source_lines(checked.measured)] if checked.measured else
        ["measured runs: none from the results store yet"])
    shown += [f"{name}: n={s['n']:.0f}, median |error| {s['median_abs_error']:.1%}, "
              f"worst {s['worst_abs_error']:.1%}"
              for name, s in checked.summary().items() if s.get("n")]
    shown += [_steps_table(steps)] if steps else []
    if check is not None:
        report = interval_report(check)
        unseen = check.unseen
        shown += [_coverage_table(report), *_own_lines(report),
                  f"method: {METHOD}. Shipped runs inside their unseen-stack interval: "
                  f"{sum(c.inside for c in unseen)} of {len(unseen)}; a generation, precision "
                  f"or stack with fewer than {MIN_SOURCES} shipped sources is flagged in a "
                  "plan."]
    else:
        shown.append("intervals: not computed with --efficiency (they rest on the built-in "
                     "curves' leave-one-source-out residuals)")
    shown += [f"measured step time, {name}: n={s['n']:.0f}, median |error| "
              f"{s['median_abs_error']:.1%}, worst {s['worst_abs_error']:.1%}"
              for name, s in step_errors(steps).items()]
    return shown + left


def validation_view(efficiency: float | None, db: Path | None, json_out: bool) -> PlanView:
    """Each published and measured run's error, the errors per source and overall, and the
    published runs not modelled with their reasons; then this machine's measured cells
    against the planner through its profiles (JSON, or tables and lines)."""
    store = ResultStore(db, write=False)
    checked = validate_all(measured_training_runs(store), efficiency)
    steps, left = _measured_steps(store)
    # intervals rest on the built-in curves' leave-one-source-out (none with --efficiency)
    check = (interval_check(checked, tuple(step_residual(r) for r in steps))
             if checked.leave_one_out else None)
    if json_out:
        report = interval_report(check) if check is not None else None
        return PlanView(data=json.dumps(
            {**checked.to_dict(), "measured_steps": [r.to_dict() for r in steps],
             "measured_steps_summary": step_errors(steps), "measured_steps_left_out": left,
             **dict(intervals=report,
                    found_intervals={"runs": report["found"]["runs"]} if report else None)},
            indent=2))
    unseen = check.unseen if check else []
    found = check.found if check else []
    return PlanView(shown=_published_shown(checked, unseen) + _found_shown(checked, found)
                    + _measured_shown(checked, steps, left, check))
