"""`accelbench plan`: predicted memory and throughput of parallel layouts; `--validate` checks
the predictions against published and measured runs. Options from PlanOptions
(analytics/plan_options.py: their guards too); the plan from analytics, its view from report;
here only the printing: the result (table or JSON) on stdout, what went wrong on stderr."""

from __future__ import annotations

import typer

from accelbench.analytics.plan_input import resolve_plan_input, run_plan
from accelbench.analytics.plan_options import PlanOptions, check_plan_options
from accelbench.cli.common import console
from accelbench.cli.options import dataclass_command
from accelbench.report.plan_profile import resolve_profile
from accelbench.report.plan_table import PlanView, plan_view
from accelbench.report.plan_validation import validation_view

# Tables and their notes on `out` (stdout, never reads markup: cli.common's kind of console, whose
# tables fit its width, report/table_width.py); messages on `console` (stderr) as plain text.
out = type(console)(markup=False, highlight=False)


def plan(options: PlanOptions) -> None:
    """Predict memory and step time of parallel layouts and rank them (or --validate)."""
    check_plan_options(options)
    if options.validate:
        show(validation_view(options.efficiency, options.db, options.json_out), options.wide)
        return
    measured = (resolve_profile(options.profile, options.db) if options.profile is not None
                else None)
    request = resolve_plan_input(options, measured)
    show(plan_view(request, run_plan(request), options.json_out), options.wide)


def show(view: PlanView, wide: bool = False) -> None:
    """JSON and the tables (every column when `wide`) and lines on stdout, printed as text;
    what went wrong on stderr; then the exit code."""
    if view.data is not None:
        print(view.data)
    for thing in view.shown:
        out.widened(wide and not isinstance(thing, str)).print(thing)
    for line in view.said:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    if view.code:
        raise typer.Exit(view.code)


def register(app: typer.Typer) -> None:
    """Add the plan command."""
    app.command("plan")(dataclass_command(plan, PlanOptions, help=plan.__doc__ or "",
                                          name="plan"))
