"""`accelbench study list|show|run` and the main job `accelbench run` (the built-in study at
the profile that suits this machine, then its report)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from accelbench.cli.common import console, out
from accelbench.cli.options import dataclass_command
from accelbench.config.errors import ConfigError
from accelbench.config.record_kinds import carries
from accelbench.config.records.fields import TrialFields
from accelbench.config.study_file import AUTO, load_study, parse_study, study_files, user_study_dir
from accelbench.config.study_options import (
    MAIN_STUDY,
    MainJobOptions,
    StudyListOptions,
    StudyRunOptions,
    StudyShowOptions,
    check_retry,
)
from accelbench.report import make_report
from accelbench.report.cell_lines import StudyLines
from accelbench.report.table_width import FitTable
from accelbench.store.record import Record
from accelbench.store.store import default_db_path

if TYPE_CHECKING:  # planning and running import torch: loaded when a study is planned
    from accelbench.bench.recording.study_run import ExperimentResult, StudyView
    from accelbench.bench.study_planner import StudyPlan



def _say(text: str, style: str = "") -> None:
    """A line on stderr, printed as text (names and reasons come from files and processes)."""
    console.print(Text(text, style=style), highlight=False, soft_wrap=True)


def _minutes(seconds: float) -> str:
    """'4 min 10 s', '12 s'."""
    seconds = round(seconds)
    return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"


# --- list and show ------------------------------------------------------------------------------


def list_studies(options: StudyListOptions) -> None:
    """The built-in studies and those in the user folder, with their experiments."""
    files = study_files()
    for origin, found in files.items():
        for name, path in found:
            try:
                study = parse_study(path.read_text(), name, path)
            except (ConfigError, OSError, UnicodeDecodeError) as err:
                out.print(f"{name} ({origin}: {path}): cannot be used: {err}")
                continue
            table = FitTable(title=Text(f"{name} ({origin}: {path}): {study.title}"),
                             title_justify="left")
            for column, priority in (("experiment", 0), ("workload", 0), ("reproduces", 1),
                                     ("description", 2)):
                table.add_column(column, priority=priority)
            for exp in study.experiment_names():
                raw = study.raw[exp]
                table.add_row(*(Text(v) for v in (exp, raw["workload"], raw.get("source", ""),
                                                  raw.get("description", ""))))
            out.widened(options.wide).print(table)
            profiles = ", ".join(f"{p} ({d})" if d else p for p, d in study.profiles.items())
            out.print(f"profiles: {profiles}; auto: quick on a CPU, full on an accelerator\n")
    if not files["user"]:
        out.print(f"no user studies in {user_study_dir()} (copy one there: accelbench study "
                  f"show {MAIN_STUDY} > {user_study_dir() / 'my.toml'})")


def show(options: StudyShowOptions) -> None:
    """Print a study's file as it is (copy it to edit: accelbench study show NAME > my.toml)."""
    sys.stdout.write(load_study(options.study).text)


# --- dry run ------------------------------------------------------------------------------------


def _dry_run_table(plan: StudyPlan) -> FitTable:
    """Every cell with its memory estimate, fit verdict and rough time."""
    from accelbench.bench.study_planner import gib

    table = FitTable(title=Text(f"study {plan.study.name}, profile {plan.profile} on "
                                f"{plan.device}: {len(plan.cells)} cells"), title_justify="left")
    for column, priority in (("experiment", 0), ("reproduces", 2), ("cell", 0), ("est. GiB", 0),
                             ("budget GiB", 1), ("fit", 0), ("est. time", 0)):
        table.add_column(column, justify="right" if "GiB" in column or "time" in column
                         else "left", priority=priority, whole=column == "fit" or None)
    for experiment in plan.experiments:
        exp = experiment.experiment
        if experiment.skipped:
            table.add_row(Text(exp.name), Text(exp.source),
                          Text(f"skipped: {experiment.skipped}", style="italic"), "", "", "", "")
        for sweep in experiment.sweeps:
            if sweep.note and not experiment.skipped:
                table.add_row(Text(exp.name), Text(exp.source), Text(sweep.note,
                              style="italic"), "", "", "", "")
            for cell in sweep.cells:
                table.add_row(Text(exp.name), Text(exp.source), Text(cell.label),
                              gib(cell.mem_bytes), gib(cell.budget_bytes), Text(cell.verdict),
                              _minutes(cell.time_s))
        table.add_section()
    return table


def _dry_run(plan: StudyPlan, wide: bool = False) -> None:
    """The cells' table (stdout; `wide`: every column), the study's rough time and peaks."""
    from accelbench.bench.study_planner import ROUGH_TIME

    out.widened(wide).print(_dry_run_table(plan))
    total = sum(c.time_s for c in plan.cells)
    out.print(f"estimated time: {_minutes(total)} ({ROUGH_TIME})")
    for dtype, label in plan.peaks.items():
        out.print(f"  {dtype} peak: {label}")
    out.print("GiB are per device (per rank): mem_limit bounds each rank; on a CPU the ranks "
              "of a cell share the host's memory. Nothing was run and no database was opened.")


# --- running ------------------------------------------------------------------------------------


class _Progress(ProgressColumn):
    """One progress display over the whole study (cells done of all), and its ETA column: the
    same ETA as the lines off a terminal (report/cell_lines.py StudyLines), less the time the
    running cell has had (so it counts down between cells)."""

    def __init__(self, plan: StudyPlan, bar: Progress) -> None:
        super().__init__()
        self.lines = StudyLines([c.time_s for c in plan.cells], lambda text: None)
        self.bar, self.done = bar, 0
        self.task = bar.add_task(plan.study.name, total=len(plan.cells) or 1, label="")

    def render(self, task: object) -> Text:
        running = time.monotonic() - self.lines.start if self.lines.label else 0.0
        return Text(f"ETA {_minutes(max(self.lines.eta() - running, 0.0))}")

    def cell(self, index: int, label: str) -> None:
        self.lines.cell(index, label)
        self.bar.update(self.task, label=label)

    def finished(self, index: int, skipped: bool) -> None:
        self.lines.done(index, skipped)
        self.done = len(self.lines.closed)
        self.bar.update(self.task, completed=self.done)


@contextmanager
def _study_progress(plan: StudyPlan) -> Iterator[StudyView]:
    """The study's view: lines on stderr above one progress bar on a terminal; off one (a log,
    a pipe), a line per cell run with its time and the study's ETA instead of the bar."""
    from accelbench.bench.recording.study_run import StudyView

    def failed(record: Record) -> None:
        _say(f"  {record.status}: {record.reason}", "yellow")

    if not sys.stderr.isatty():
        lines = StudyLines([c.time_s for c in plan.cells], _say)
        yield StudyView(banner=lambda text: _say(text, "bold"), note=_say, failed=failed,
                        cell=lines.cell, done=lines.done)
        return
    with Progress(console=console, transient=True) as bar:
        progress = _Progress(plan, bar)
        bar.columns = (TextColumn("{task.description}", style="bold", markup=False),
                       BarColumn(), TextColumn("{task.completed}/{task.total} cells"),
                       TimeElapsedColumn(), progress,
                       TextColumn("{task.fields[label]}", markup=False))
        yield StudyView(banner=lambda text: _say(text, "bold"), note=_say, failed=failed,
                        cell=progress.cell, done=progress.finished)


def _summary(plan: StudyPlan, results: dict[str, ExperimentResult]) -> Table:
    """One row per experiment: cells by status, skipped ones, what was left out and why."""
    from accelbench.bench.recording.study_run import ExperimentResult

    table = FitTable(title=Text(f"study {plan.study.name}, profile {plan.profile}"),
                     title_justify="left")
    for column, priority in (("experiment", 0), ("reproduces", 3), ("cells", 0), ("ok", 0),
                             ("does not fit", 0), ("other", 0), ("skipped (done before)", 2),
                             ("note", 1)):
        table.add_column(column, justify="left" if column in ("experiment", "reproduces",
                                                               "note") else "right",
                         priority=priority)
    for experiment in plan.experiments:
        exp = experiment.experiment
        result = results.get(exp.name, ExperimentResult())
        cells = [r for r in result.records if carries(r.kind, TrialFields)]  # measured cells
        ok = sum(r.status == "ok" for r in cells)
        oom = sum(r.status == "oom" for r in cells)
        table.add_row(Text(exp.name), Text(exp.source), str(len(cells)), str(ok), str(oom),
                      str(len(cells) - ok - oom), str(result.skipped),
                      Text("; ".join(result.left_out)))
    return table


def execute(plan: StudyPlan, db: Path | None, device: str, rerun: bool,
            wide: bool = False, remeasure_peak: bool = False, retry: int = 0) -> Path:
    """Run a checked plan into the store (each cell stored as it finishes), print the summary
    on stdout; the database's path. A signal ends it with the line of what was kept."""
    from accelbench.bench.recording.interrupted import SweepInterrupted
    from accelbench.bench.recording.session import open_recorder
    from accelbench.bench.recording.study_run import run_study

    recorder = open_recorder(db, device)
    assert recorder is not None  # a study is not run under torchrun
    _say(f"study {plan.study.name} ({plan.study.path}), profile {plan.profile}"
         f"{' (auto)' if plan.asked == AUTO else ''}: {len(plan.cells)} cells, rough "
         f"estimate {_minutes(sum(c.time_s for c in plan.cells))}; results -> "
         f"{recorder.store.path}", "bold")
    start = time.monotonic()
    try:
        with _study_progress(plan) as view:
            results = run_study(plan, recorder, view, rerun, remeasure_peak, retry)
    except SweepInterrupted as stop:
        _say(stop.line)
        raise typer.Exit(stop.exit_code) from None
    out.widened(wide).print(_summary(plan, results))
    _say(f"study {plan.study.name} finished in {_minutes(time.monotonic() - start)}; "
         f"results in {recorder.store.path}")
    recorder.close()  # raises, naming the file, if a record could not be stored
    return recorder.store.path


def run_cmd(options: StudyRunOptions) -> None:
    """Run a study: every experiment, stored as it goes; cells finished before are skipped."""
    from accelbench.bench.study_planner import plan_study

    retry = check_retry(options.retry_disturbed)
    plan = plan_study(load_study(options.study), options.profile, options.device)  # bad: exit 2
    if options.dry_run:
        _dry_run(plan, options.wide)
        return
    execute(plan, options.db, options.device, options.rerun, options.wide,
            options.remeasure_peak, retry)


def main_job(options: MainJobOptions) -> None:
    """The main job: the built-in study (emani2023) at the profile that suits this machine,
    then its report."""
    from accelbench.bench.study_planner import plan_study

    plan = plan_study(load_study(MAIN_STUDY), options.profile, options.device)
    path = execute(plan, options.db, options.device, options.rerun, options.wide)
    written = make_report([path or default_db_path()], options.out_dir)
    _say(f"report: {written.html} (open it in any browser: xdg-open {written.html}); "
         f"Markdown {written.markdown}, {len(written.pngs)} figures in "
         f"{written.html.parent / 'figures'}", "bold")
    out.print(str(written.html))


def register(app: typer.Typer) -> None:
    """Add `study` and the main job `run`."""
    study_app = typer.Typer(help="Studies: named sets of experiments run as one "
                            "(docs/study.md).", no_args_is_help=True)
    for name, body, options in (("list", list_studies, StudyListOptions),
                                ("show", show, StudyShowOptions),
                                ("run", run_cmd, StudyRunOptions)):
        study_app.command(name)(dataclass_command(body, options, help=body.__doc__ or "",
                                                  name=name))
    app.add_typer(study_app, name="study")
    app.command("run")(dataclass_command(main_job, MainJobOptions, help=main_job.__doc__ or "",
                                         name="run"))
