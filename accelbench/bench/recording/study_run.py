"""Running a study (bench/study_planner.py plans it): every sweep through the commands' own
run-and-record path (bench/recording/session.py `record_sweep`, with resume), one index of finished
cells shared by the study's sweeps, each precision's peak decided once for the sweeps that run
in this process, and every record tagged with the study, experiment and profile in
`spec.study`, so that the report can group them and a study's cells are its own (the tag is
part of the cell's fingerprint). A scaling study's table is stored as its summary record."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from accelbench.bench.gemm_peak import SweepPeak, peak_of
from accelbench.bench.outcome import Outcome, Progress, Sink, Skip
from accelbench.bench.recording.recorder import Recorder
from accelbench.bench.recording.resume import (
    FinishedCells,
    disturbed,
    outcome_of,
    stored_summary,
)
from accelbench.bench.recording.session import SweepView, record_sweep
from accelbench.bench.study_planner import ExperimentPlan, StudyPlan, SweepPlan
from accelbench.config.record_kinds import carries
from accelbench.config.records.train import TrainMetrics
from accelbench.store.record import Record

STUDY_KEY = "study"  # spec.study = {"name", "experiment", "profile"}


@dataclass
class StudyView:
    """What the command line shows of a study: a sweep's banner, notes (skipped cells, parts
    left out), failed cells, and its progress as cells of the whole study (`cell`: the study's
    index of a cell starting now; `done`: that cell finished, `skipped` when it was finished
    before and not run)."""

    banner: Callable[[str], None]
    note: Callable[[str], None]
    failed: Callable[[Record], None]
    cell: Callable[[int, str], None]
    done: Callable[[int, bool], None]


@dataclass
class ExperimentResult:
    """One experiment's records (cells, measured peaks, summaries) and what was left out."""

    records: list[Record] = field(default_factory=list)
    skipped: int = 0  # cells finished on this machine before
    left_out: list[str] = field(default_factory=list)  # why it, or part of it, did not run


def tagged(spec: dict, tag: dict) -> dict:
    """A record spec with the study's tag."""
    return {**spec, STUDY_KEY: tag}


def _tagger(tag: dict) -> Callable[[Outcome], Outcome]:
    def tag_outcome(outcome: Outcome) -> Outcome:
        asked = None if outcome.asked_spec is None else tagged(outcome.asked_spec, tag)
        return replace(outcome, spec=tagged(outcome.spec, tag), asked_spec=asked)

    return tag_outcome


class _Cells:
    """A sweep's cells as the study's: which one runs, whether it was skipped; the cells a
    sweep never started are closed (skipped) when it ends."""

    def __init__(self, view: StudyView, offset: int, count: int, prefix: str) -> None:
        self.view, self.offset, self.count, self.prefix = view, offset, count, prefix
        self.current: int | None = None
        self.was_skipped = False
        self.closed: set[int] = set()

    def start(self, i: int, total: int, label: str) -> None:
        # a sweep of trials reports trials x cells starts: each study cell spans its share, and
        # is closed when the next one starts, not at each of its trials (closing it at its first
        # left the ETA counting one trial of every cell: "ETA 6 s" with 11 trials to run)
        if i >= total:  # the sweep's last word: every cell started has ended
            self.finish()
            return
        cell = min(i * self.count // total if total > self.count else i, self.count - 1)
        if cell != self.current:
            self.finish()
            self.current, self.was_skipped = cell, False
        self.view.cell(self.offset + self.current, f"{self.prefix}{label}")

    def finish(self) -> None:
        if self.current is not None and self.current not in self.closed:
            self.closed.add(self.current)
            self.view.done(self.offset + self.current, self.was_skipped)
        self.current = None

    def end(self) -> None:
        self.finish()
        for i in range(self.count):
            if i not in self.closed:
                self.view.done(self.offset + i, True)


class StudyRunner:
    """Runs a plan's sweeps in order into one recorder."""

    def __init__(self, plan: StudyPlan, recorder: Recorder, view: StudyView,
                 rerun: bool = False, remeasure_peak: bool = False,
                 retry_disturbed: int = 0) -> None:
        self.plan, self.recorder, self.view, self.rerun = plan, recorder, view, rerun
        self.retry_disturbed = retry_disturbed
        self.remeasure_peak = remeasure_peak  # for the first sweep: the later ones reuse it
        self.finished = None if rerun else FinishedCells(recorder.store, recorder.environment)
        self.peaks: dict[bool, dict[str, SweepPeak]] = {}  # by tf32: this process's peaks
        self.offset = 0

    def run(self) -> dict[str, ExperimentResult]:
        """Every experiment, then up to `retry_disturbed` more passes that measure again only
        the cells flagged disturbed (the first records are kept: the report reads the latest
        record of a cell); the first pass's results. The cells of an earlier run of the study
        count alike (FinishedCells.owes_retry): a resumed study performs the retries the
        interrupted one still owed."""
        results = latest = self._run_all()
        for attempt in range(1, self.retry_disturbed + 1):
            retrying = FinishedCells(self.recorder.store, self.recorder.environment,
                                     redo_disturbed=self.retry_disturbed)
            flagged = sum(retrying.owes_retry(r) for rs in latest.values() for r in rs.records
                          if disturbed(r))
            if not flagged:
                break
            self.view.note(f"retry {attempt}/{self.retry_disturbed}: {flagged} cell(s) flagged "
                           "disturbed, measured again")
            self.finished, self.rerun = retrying, False  # --rerun: the first pass only
            self.offset = 0
            latest = self._run_all()
        return results

    def _run_all(self) -> dict[str, ExperimentResult]:
        """Every experiment; one that cannot run here is reported with its reason."""
        results = {}
        for experiment in self.plan.experiments:
            name = experiment.experiment.name
            result = results[name] = ExperimentResult()
            if experiment.skipped:
                result.left_out.append(experiment.skipped)
                self.view.note(f"{name}: skipped: {experiment.skipped}")
                continue
            for sweep in experiment.sweeps:
                if sweep.note:
                    result.left_out.append(sweep.note)
                    self.view.note(f"{name}: {sweep.note}")
                if sweep.cells:
                    self._sweep(experiment, sweep, result)
        return results

    def _sweep(self, experiment: ExperimentPlan, sweep: SweepPlan,
               result: ExperimentResult) -> None:
        name = experiment.experiment.name
        tag = self.plan.tag(name)
        tag_outcome = _tagger(tag)
        prefix = f"{name}: {sweep.part}: " if sweep.part else f"{name}: "
        cells = _Cells(self.view, self.offset, len(sweep.cells), prefix)
        self.offset += len(sweep.cells)
        known = tuple(self.peaks.get(sweep.tf32, {}).values()) if sweep.local else ()

        def run(sink: Sink, step: object, on_cell: Progress | None,
                skip: Skip | None) -> list[Outcome]:
            def ask(kind: str, spec: dict) -> Outcome | None:
                found = skip(kind, tagged(spec, tag)) if skip else None
                cells.was_skipped = found is not None
                return found

            return sweep.run(sink, on_cell, ask if skip else None, known)

        view = SweepView(banner=self.view.banner, cell=cells.start, step=None,
                         failed=self.view.failed, note=self.view.note)
        try:
            records = record_sweep(run, self.recorder, view, f"{name}: {sweep.title}",
                                   tag_outcome, self.rerun, self.finished,
                                   self.remeasure_peak)
            self.remeasure_peak = False
        finally:
            cells.end()
        self._keep(sweep, records, result)
        if sweep.summary is not None:
            table = sweep.summary([r for r in records if carries(r.kind, TrainMetrics)])
            result.records.append(stored_summary(self.recorder, tag_outcome(table)))

    def _keep(self, sweep: SweepPlan, records: list[Record], result: ExperimentResult) -> None:
        """The sweep's records: counted, found by the next sweeps, their peaks adopted."""
        result.records.extend(records)
        fresh = [r for r in records if r.run_id == self.recorder.run_id]
        result.skipped += sum(1 for r in records if r not in fresh)
        for record in records:
            if self.finished is not None:
                self.finished.add(record)
            peak = peak_of(outcome_of(record)) if sweep.local else None
            if peak is not None:
                self.peaks.setdefault(sweep.tf32, {}).setdefault(peak.dtype, peak)


def run_study(plan: StudyPlan, recorder: Recorder, view: StudyView,
              rerun: bool = False, remeasure_peak: bool = False, retry_disturbed: int = 0
              ) -> dict[str, ExperimentResult]:
    """Run every experiment of the plan, storing each cell as it finishes; the records by
    experiment (cells finished on this machine before are skipped, unless `rerun`)."""
    return StudyRunner(plan, recorder, view, rerun, remeasure_peak, retry_disturbed).run()
