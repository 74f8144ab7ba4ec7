"""The run-and-record policy of a sweep: only rank 0 opens the results store and records (the
other ranks of a torchrun/srun group measure and return), every outcome is stored the moment it
exists, and the view (the command line) is told what to show."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from accelbench.bench.gemm_peak import stored_peaks
from accelbench.bench.kept_trials import keeping_trials
from accelbench.bench.outcome import Outcome, Progress, Sink, Skip
from accelbench.bench.recording.interrupted import CellSeen, stopped_sweep
from accelbench.bench.recording.peaks import machine_peaks
from accelbench.bench.recording.pending import recover, recovered_line
from accelbench.bench.recording.recorder import Recorder
from accelbench.bench.recording.resume import FinishedCells, Resume, TrialStore
from accelbench.bench.train.cell_folder import recording_into
from accelbench.bench.train.cell_metrics import StepReport
from accelbench.hardware.detect import resolve_device
from accelbench.hardware.environment import environment
from accelbench.parallel.dist import is_rank_zero
from accelbench.parallel.procs import Interrupted, signals_raise
from accelbench.store.record import Record
from accelbench.store.store import ResultStore

Sweep = Callable[[Sink, Callable[[StepReport], None] | None, Progress | None, Skip | None],
                 list[Outcome]]


@dataclass
class SweepView:
    """What the command line shows of a sweep; every callback may be a no-op."""

    banner: Callable[[str], None]
    cell: Progress
    step: Callable[[StepReport], None] | None
    failed: Callable[[Record], None]
    note: Callable[[str], None] = lambda text: None  # a skipped cell, the resume summary


def open_recorder(db: Path | None, device: str) -> Recorder | None:
    """A recorder on the store, on rank 0 only (None on the other ranks of a group)."""
    if not is_rank_zero():
        return None
    return Recorder(ResultStore(db), environment(resolve_device(device)))


def record_sweep(sweep: Sweep, recorder: Recorder | None, view: SweepView, title: str,
                 tag: Callable[[Outcome], Outcome] | None = None,
                 rerun: bool = False, finished: FinishedCells | None = None,
                 remeasure_peak: bool = False) -> list[Record]:
    """Run a sweep, storing each outcome as it lands and telling the view; the records, in
    sweep order, with the finished ones it skipped (results.resume; none with `rerun`;
    `finished`: an index of finished cells shared with other sweeps, a study's). A peak to be
    measured reuses the one this machine stored before (recording.peaks), unless
    `remeasure_peak`.
    Launched cells a dead accelbench process left are recorded first (results.pending); every
    finished trial of a cell of several is kept in the store as it ends, and a cell an earlier
    run left unfinished runs only its missing trials (bench/trials.py, TrialStore); SIGINT
    or SIGTERM ends the sweep with SweepInterrupted (results.interrupted) once every cell with
    a finished trial is recorded."""
    if recorder is None:  # a rank other than 0: measure, record nothing, show nothing
        sweep(lambda outcome: None, None, None, None)
        return []
    view.banner(f"{title} on {recorder.environment['device_name']}; "
                f"results -> {recorder.store.path}")
    for recovered in recover(recorder.store):
        view.note(recovered_line(recovered))
    resume = Resume(recorder, view.note, rerun, finished)
    trials = TrialStore(recorder, resume.finished, rerun, tag)
    seen = CellSeen(view.cell)

    def sink(outcome: Outcome) -> Record:
        record = resume.sink(tag(outcome) if tag else outcome)
        seen.recorded(record)
        if record.status != "ok":
            view.failed(record)
        return record

    try:
        lookup = (lambda spec: None) if remeasure_peak else \
            machine_peaks(recorder.store, recorder.environment)
        with signals_raise(), stored_peaks(lookup), keeping_trials(trials), \
                recording_into(str(recorder.store.path), recorder.environment, recorder.run_id):
            try:
                sweep(sink, view.step, seen, resume.skip)
            except Interrupted as stop:
                raise stopped_sweep(stop, recorder, seen, tag) from None
    finally:  # the .db file alone holds the sweep; the command closes the recorder at its end
        recorder.store.close()
    summary = resume.summary(trials.resumed)
    if summary:
        view.note(summary)
    return resume.records
