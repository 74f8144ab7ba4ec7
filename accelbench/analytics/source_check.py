"""The intervals judged as they are used (issue 41): each shipped source left out whole and
predicted as an unseen stack, the same with its stack named where another source of it stays,
each run left out with its stack named, this project's own measured cells (a source each), and
the found runs (never fitted); coverage counted per source, each source weighing once; no
torch."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from accelbench.analytics.intervals import COVERAGE, Covered, Residual
from accelbench.analytics.published import Validation
from accelbench.analytics.published_fit import nested_leave_one_source_out
from accelbench.analytics.shipped_intervals import (
    row_residual,
    shipped_interval_model,
    unseen_class_interval_model,
)
from accelbench.analytics.source_model import (
    MIN_SOURCES,
    IntervalModel,
    centred_error,
    point_error,
    summary,
    summary_by,
)

METHOD = ("80% interval: the source as a level of its own (one-way random effects on the "
          "leave-one-source-out log(predicted / observed) residuals, each source weighing once; "
          "docs/planner.md): an unseen stack carries the between-source and the within-source "
          "spread, a named fitted stack its sources' shrunken mean and the within spread; t "
          "bounds with Satterthwaite's degrees of freedom; judged leaving each source out whole "
          "(the tops refitted without it too), coverage counted per source")
BY = ("generation", "precision")


@dataclass(frozen=True)
class IntervalCheck:
    """Every judged run, by how it was judged (each list of Covered)."""

    unseen: list[Covered]  # each source left out whole, predicted as an unseen stack
    named_source: list[Covered]  # the same, its stack named and fitted on its other sources
    named_run: list[Covered]  # each run left out, its stack named and fitted on the rest
    own: list[Covered] = field(default_factory=list)  # own cells: unseen, shipped fit
    found: list[Covered] = field(default_factory=list)  # found runs: unseen, shipped fit
    found_named: list[Covered] = field(default_factory=list)  # found runs of a fitted stack


def _held_out(checked: Validation) -> tuple[list[Covered], list[Covered]]:
    """Each source's left-out rows against the intervals of the other sources' nested
    residuals: as an unseen stack, and named where its stack has another source."""
    unseen: list[Covered] = []
    named: list[Covered] = []
    for source in dict.fromkeys(r.source_key for r in checked.leave_one_out):
        model = IntervalModel(tuple(map(row_residual, nested_leave_one_source_out(source))))
        fitted = model.fit().stacks()
        for row in (r for r in checked.leave_one_out if r.source_key == source):
            residual = row_residual(row)
            unseen.append(Covered(residual, model.interval()))
            if residual.stack in fitted:
                named.append(Covered(residual, model.interval(residual.stack)))
    return unseen, named


def _named_runs(model: IntervalModel) -> list[Covered]:
    """Each residual against its stack's named interval fitted without that one run (where
    its stack keeps other runs)."""
    out = []
    for r in model.residuals:
        if r.stack in model.fit(drop=r.name).stacks():
            out.append(Covered(r, model.interval(r.stack, drop=r.name)))
    return out


def _own(residuals: Sequence[Residual]) -> list[Covered]:
    """Our own measured cells against the interval a plan gives them: an unseen stack (their
    runtime is not fitted); a generation no shipped run has (a CPU profile's) takes the
    unseen-class residuals, as `plan --profile` does."""
    shipped = shipped_interval_model()
    known = {r.where.generation for r in shipped.residuals}
    return [Covered(r, (shipped if r.where.generation in known
                        else unseen_class_interval_model()).interval()) for r in residuals]


def interval_check(checked: Validation, extra: tuple[Residual, ...] = ()) -> IntervalCheck:
    """The shipped runs judged three ways, then the measured runs and `extra` (this machine's
    cells) and the found runs against the shipped fit."""
    unseen, named_source = _held_out(checked)
    shipped = shipped_interval_model()
    found = [row_residual(r) for r in checked.found]
    fitted = shipped.fit().stacks()
    return IntervalCheck(unseen, named_source, _named_runs(shipped),
                         _own([row_residual(r) for r in checked.measured] + list(extra)),
                         [Covered(r, shipped.interval()) for r in found],
                         [Covered(r, shipped.interval(r.stack)) for r in found
                          if r.stack in fitted])


def _where(by: str) -> Callable[[Covered], str]:
    return lambda row: str(getattr(row.residual.where, by))


def _runs(rows: list[Covered]) -> list[dict[str, object]]:
    """Each judged run: its names, conditions, interval and whether it held."""
    return [{"name": c.residual.name, "source": c.residual.source, "stack": c.residual.stack,
             **c.residual.where.__dict__, **c.interval.to_dict(),
             "observed_over_predicted": math.exp(-c.residual.log_ratio),
             "inside": c.inside} for c in rows]


def _judged(rows: list[Covered], error: Callable[[Covered], float]) -> dict[str, object]:
    """Runs, and summaries overall, by generation and precision, and by source."""
    return {"runs": _runs(rows), "overall": summary(rows, error),
            **{by: summary_by(rows, _where(by), error) for by in BY}}


def interval_report(check: IntervalCheck) -> dict[str, object]:
    """Plain dict for JSON: the method, the shipped fit, and each way of judging."""
    fit = shipped_interval_model().fit()
    return {"method": METHOD, "coverage_target": COVERAGE, "min_sources": MIN_SOURCES,
            "fit": {"mu": fit.mu, "within_sd": fit.within_var ** 0.5,
                    "between_sd": fit.tau2 ** 0.5, "sources": fit.n_sources,
                    "runs": fit.n_runs,
                    "source_means": {k: {"stack": fit.stack_of[k], "mean_log_ratio": m,
                                         "runs": n} for k, (m, n) in fit.means.items()}},
            "runs": _runs(check.unseen),
            "unseen": _judged(check.unseen, point_error),
            "named_source": _judged(check.named_source, centred_error),
            "named_run": _judged(check.named_run, centred_error),
            "own": {**_judged(check.own, point_error),
                    "source": summary_by(check.own, lambda c: c.residual.source)},
            "found": _judged(check.found, point_error),
            "found_named": _judged(check.found_named, centred_error)}
