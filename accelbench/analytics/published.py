"""Every check of the planner at once: published, left-out, measured, MoE and found runs; no torch.

The runs themselves are in published_csv (the packaged csvs' rows), found_runs and
published_run (what a run states). Only the csv's scored rows (PUBLISHED_RUNS) are fitted
(published_fit) and make the intervals' residuals (shipped_intervals); the runs found elsewhere
(FOUND_RUNS) and the MoE runs are predicted with those curves and reported apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accelbench.analytics.measured_runs import MeasuredRun, validate_measured_runs
from accelbench.analytics.published_csv import MOE_NOT_MODELLED, MOE_RUNS, NOT_MODELLED
from accelbench.analytics.published_fit import validate_leave_one_source_out
from accelbench.analytics.published_run import UnmodelledRun
from accelbench.analytics.validation_rows import (
    ValidationRow,
    error_summary,
    errors_by_precision,
    errors_by_source,
    validate_found,
    validate_published,
)


@dataclass(frozen=True)
class Validation:
    """Every check of the planner: the shipped (fitted) runs in-sample, the same with each
    source left out of the fit (only with the built-in curves), measured runs, the published
    runs it does not model, the MoE runs and the runs found outside the shipped csv (both
    validation only, never fitted); `summary` gives each list's errors, `by_source` the shipped
    runs' per source (in-sample and left out)."""

    published: list[ValidationRow]
    leave_one_out: list[ValidationRow]
    measured: list[ValidationRow]
    not_modelled: tuple[UnmodelledRun, ...] = NOT_MODELLED
    moe: list[ValidationRow] = field(default_factory=list)  # MOE_RUNS: checked, not fitted
    found: list[ValidationRow] = field(default_factory=list)  # FOUND_RUNS: never fitted

    def summary(self) -> dict[str, dict[str, float]]:
        """error_summary of each list, by name."""
        return {"published": error_summary(self.published),
                "leave_one_source_out": error_summary(self.leave_one_out),
                "measured": error_summary(self.measured), "moe": error_summary(self.moe),
                "found": error_summary(self.found)}

    def by_source(self) -> dict[str, dict[str, float]]:
        """The published runs' errors per source and overall."""
        return errors_by_source(self.published)

    def by_source_left_out(self) -> dict[str, dict[str, float]]:
        """The same, each source predicted by curves fitted without it."""
        return errors_by_source(self.leave_one_out)

    def to_dict(self) -> dict[str, object]:
        """Plain dict for JSON: the rows of each list and the summaries."""
        return {"published": [r.to_dict() for r in self.published],
                "leave_one_source_out": [r.to_dict() for r in self.leave_one_out],
                "measured": [r.to_dict() for r in self.measured],
                "moe": [r.to_dict() for r in self.moe],
                "by_source_moe": errors_by_source(self.moe),
                "found": [r.to_dict() for r in self.found],
                "by_source_found": errors_by_source(self.found),
                "by_precision_found": errors_by_precision(self.found),
                "not_modelled": [r.to_dict() for r in self.not_modelled],
                "summary": self.summary(), "by_source": self.by_source(),
                "by_source_left_out": self.by_source_left_out()}


def validate_all(measured_runs: list[MeasuredRun | Mapping[str, Any]],
                 efficiency: float | None = None) -> Validation:
    """The shipped runs, leave-one-source-out (with the built-in curves), the measured
    runs given (MeasuredRun, or mappings with MEASURED_RUN_KEYS), the published
    mixture-of-experts runs and the found runs (both checked only) and every run not modelled
    with its reason."""
    return Validation(validate_published(efficiency),
                      validate_leave_one_source_out() if efficiency is None else [],
                      validate_measured_runs(measured_runs, efficiency),
                      NOT_MODELLED + MOE_NOT_MODELLED, validate_published(efficiency, MOE_RUNS),
                      validate_found(efficiency))

