"""The one fitted number per device class, and runs predicted with a group left out of it."""

from __future__ import annotations

import statistics
from collections.abc import Callable

from accelbench.analytics.compute_rates import compute_efficiency
from accelbench.analytics.efficiency import device_class
from accelbench.analytics.published_csv import PUBLISHED_RUNS
from accelbench.analytics.published_run import PublishedRun
from accelbench.analytics.validation_rows import ValidationRow, validate_published


def solve_efficiency(predict_mfu: Callable[[float], float], observed_mfu: float,
                      start: float) -> float:
    """The compute efficiency at which a prediction meets the observed MFU. MFU grows with
    efficiency, less than in proportion where communication is exposed: one proportional
    step, then secant steps on the MFU gap (a handful of predictions instead of the fixed
    point's dozen and more, as `plan` solves every shipped run for its intervals); at most 30,
    stopping once a step moves it by less than 1e-13 of itself."""
    e0, m0 = start, predict_mfu(start)
    e1 = min(1.0, e0 * observed_mfu / m0)
    for _ in range(30):
        if abs(e1 - e0) <= 1e-13 * e0:
            return e1
        m1 = predict_mfu(e1)
        slope = (m1 - m0) / (e1 - e0)
        step = e1 + (observed_mfu - m1) / slope if slope > 0 else e1 * observed_mfu / m1
        e0, m0, e1 = e1, m1, min(1.0, max(step, 1e-6))
    return e1


def needed_efficiency(run: PublishedRun) -> float:
    """The efficiency that would make the planner reproduce this published run exactly."""
    return solve_efficiency(lambda e: validate_published(e, (run,))[0].predicted_mfu,
                             run.published_mfu(), compute_efficiency(run.device))


def fit_gemm_top(needed: list[tuple[str, float]], classes: set[str] | None = None
                 ) -> dict[str, float]:
    """The built-in curves' one fitted number per device class: the median, over the class's
    runs, of the large-GEMM efficiency each run needs ((class, needed) pairs); "pooled" is the
    median over all, which a class without runs (in `classes`) takes."""
    pooled = statistics.median(value for _, value in needed)
    by_class: dict[str, list[float]] = {}
    for cls, value in needed:
        by_class.setdefault(cls, []).append(value)
    tops = {cls: statistics.median(values) for cls, values in by_class.items()}
    return {**{cls: pooled for cls in classes or ()}, **tops, "pooled": pooled}


def needed_by_run(runs: tuple[PublishedRun, ...] = PUBLISHED_RUNS) -> list[tuple[str, float]]:
    """(device class, needed large-GEMM efficiency) of each run."""
    return [(device_class(run.device), needed_efficiency(run)) for run in runs]


def validate_leave_one_source_out(runs: tuple[PublishedRun, ...] = PUBLISHED_RUNS
                                  ) -> list[ValidationRow]:
    """Each source's runs predicted with curves fitted without that source (fit_gemm_top on
    every other source's runs; a class left with no run takes the pooled fit): the planner
    judged on runs it has not seen. Rows in the order of `runs`."""
    return _leave_out(runs, lambda run: run.source_key)


def validate_leave_one_class_out(runs: tuple[PublishedRun, ...] = PUBLISHED_RUNS
                                 ) -> list[ValidationRow]:
    """Each device class's runs predicted as a class with no published run is: with the
    pooled fit of the other classes' runs. The errors of a device the planner has never seen
    validated (B200, MI300X, ...). Rows in the order of `runs`."""
    return _leave_out(runs, lambda run: device_class(run.device))


_NEEDED: dict[int, tuple[tuple[PublishedRun, ...], list[tuple[str, float]]]] = {}


def _needed_once(runs: tuple[PublishedRun, ...]) -> list[tuple[str, float]]:
    """needed_by_run(runs), computed once a process for the same runs."""
    kept = _NEEDED.get(id(runs))
    if kept is None or kept[0] is not runs:
        kept = _NEEDED[id(runs)] = (runs, needed_by_run(runs))
    return kept[1]


def _leave_out(runs: tuple[PublishedRun, ...], key: Callable[[PublishedRun], str],
               needed: list[tuple[str, float]] | None = None) -> list[ValidationRow]:
    """Each group's runs (by `key`) predicted with the tops fitted without that group
    (`needed`: the runs' needed efficiencies where already solved)."""
    needed = _needed_once(runs) if needed is None else needed
    classes = {cls for cls, _ in needed}
    rows: dict[int, ValidationRow] = {}
    for group in dict.fromkeys(key(run) for run in runs):
        inside = [i for i, run in enumerate(runs) if key(run) == group]
        tops = fit_gemm_top([n for i, n in enumerate(needed) if i not in inside], classes)
        for i, row in zip(inside, validate_published(None, tuple(runs[i] for i in inside),
                                                     tops), strict=True):
            rows[i] = row
    return [rows[i] for i in range(len(runs))]


def nested_leave_one_source_out(without: str,
                                runs: tuple[PublishedRun, ...] = PUBLISHED_RUNS
                                ) -> list[ValidationRow]:
    """Every run but source `without`'s, each predicted with the tops fitted without both
    `without` and its own source: the residuals an interval for `without` may rest on when
    `without` is left out whole (nothing of it in the fit, not even through the tops)."""
    needed = _needed_once(runs)
    keep = [i for i, run in enumerate(runs) if run.source_key != without]
    return _leave_out(tuple(runs[i] for i in keep), lambda run: run.source_key,
                      [needed[i] for i in keep])
