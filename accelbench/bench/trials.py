"""Independent trials of a sweep's cells, interleaved (a cell's record from them: trial_record.py).

A trial is one timed window with its own warm-up (the block: `warmup` untimed and `repeats`
timed repetitions of a block built anew; a training cell: its warm-up and timed steps of a
model built anew from the same seed). The cells of one sweep are measured round-robin: round r
runs trial r of every cell still running, in a seeded random order drawn per round, so that
drift, heat and other work on the machine fall on every cell alike. A cell's record is made
once its last trial has run: each timed figure is the median over trials of each trial's
median, with a distribution-free 95% interval (analytics/stats.py `median_interval`; none, and
said so, below 6 trials). Each timed window is bracketed by a DisturbanceProbe (outside the
window: a snapshot costs about 12 ms; window_probe.py) and the record says whether any trial was
disturbed. Finished trials are kept as they end through kept_trials.py.
docs/metrics.md has the rules; workloads/block/runner.py and bench/train/sweep.py use them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from accelbench.bench.guard import settled_heap
from accelbench.bench.kept_trials import KeptTrial, active_keepers
from accelbench.bench.outcome import Outcome, Progress, Sink
from accelbench.config.record_kinds import partial_metrics_dict
from accelbench.config.records.fields import TrialFields
from accelbench.config.trial_count import auto_trials
from accelbench.parallel.procs import Interrupted, signal_name
from accelbench.store.trial_rows import TRIAL_ROWS_KEY, TRIAL_RUNS_KEY

ORDER_SEED = 0  # the block sweep's order seed (a training sweep uses its --seed)


def resolve_trials(trials: int | None, device: torch.device) -> int:
    """The trials to run: as asked, or AUTO_TRIALS for this kind of device."""
    return trials if trials is not None else auto_trials(device.type)


# --- interleaving -------------------------------------------------------------------------


@dataclass(frozen=True)
class CellTrials:
    """One cell of an interleaved sweep: `run(r)` measures its trial r (an ok outcome, or the
    failure that ends the cell); `finish(ok trials)` makes its record. With `kind` and `spec`
    (the cell's record spec as the sweep asks about it) each finished trial is kept by the
    recording session as it ends, and a resumed sweep runs only the trials not kept."""

    label: str
    run: Callable[[int], Outcome]
    finish: Callable[[list[Outcome]], Outcome]
    kind: str | None = None
    spec: dict[str, Any] | None = None
    adopt: Callable[[list[Outcome]], None] | None = None  # told the kept trials, if any


class TrialsInterrupted(Interrupted):
    """SIGINT or SIGTERM ended an interleaved sweep after its cells were recorded: every
    finished cell, and every unfinished cell with a finished trial as 'interrupted' with its
    trials; `lost` names the trial that was running and is not kept ('' when none was)."""

    def __init__(self, signum: int, lost: str) -> None:
        super().__init__(signum)
        self.lost = lost


def interleave(cells: Sequence[CellTrials], trials: int, seed: int, sink: Sink,
               progress: Progress | None = None, done_before: int = 0) -> list[Outcome]:
    """Run `trials` rounds, each cell's trial r in round r, in a random order per round
    (random.Random(seed)); a cell's record is sunk at the end of the round of its last trial
    (its last, or the one that failed), in the cells' order, so a sparse cell's record follows
    its dense one's. One trial is one round in the cells' order, each record sunk as it is
    made (as before trials). Returns the records in the cells' order.
    Trials already kept (a resumed sweep, keeping_trials) are not run again: round r runs the
    cells whose trial r is missing. SIGINT or SIGTERM (Interrupted) records what the sweep has
    and raises TrialsInterrupted.
    `progress` is told each trial as it starts: (trials started before it, `done_before` +
    trials x cells in all, the cell's label and trial), `done_before` counting the sweep's cells
    finished before (skipped by resume)."""
    with settled_heap():
        return _Interleaved(cells, trials, seed, sink, progress, done_before).run()


class _Interleaved:
    """interleave's state: each cell's kept trials, the records made and sunk, what runs."""

    def __init__(self, cells: Sequence[CellTrials], trials: int, seed: int, sink: Sink,
                 progress: Progress | None, done_before: int) -> None:
        self.cells, self.trials, self.seed, self.sink = cells, trials, seed, sink
        self.progress = progress
        self.keeper = active_keepers[-1] if active_keepers else None
        self.kept = [self._resumed(c) for c in cells]
        for cell, kept in zip(cells, self.kept, strict=True):
            if kept and cell.adopt is not None:  # e.g. the micro-batch a search found then
                cell.adopt([kept[r].outcome for r in sorted(kept)])
        self.done: dict[int, Outcome] = {}
        self.sunk: set[int] = set()
        self.running: tuple[int, int, int, list[str]] | None = None  # cell, trial, place, order
        self.total = done_before + trials * len(cells)
        self.started = done_before + sum(len(k) for k in self.kept)

    def _kept_in_store(self, cell: CellTrials) -> bool:
        """Whether this cell's trials are kept as they end (several trials, a keeper)."""
        return self.trials > 1 and self.keeper is not None and cell.kind is not None \
            and cell.spec is not None

    def _resumed(self, cell: CellTrials) -> dict[int, KeptTrial]:
        if not self._kept_in_store(cell):
            return {}
        return {k.trial: k for k in self.keeper.kept(cell.kind, cell.spec, self.trials)}

    def run(self) -> list[Outcome]:
        try:
            for i in range(len(self.cells)):  # every trial kept before: the record at once
                if len(self.kept[i]) >= self.trials:
                    self._end(i, self._finish(i))
            self._sink_ended(sorted(self.done))
            rng = random.Random(self.seed)
            for r in range(self.trials):
                self._round(r, rng)
        except Interrupted as stop:
            raise self._stopped(stop) from None
        return [self.done[i] for i in range(len(self.cells))]

    def _round(self, r: int, rng: random.Random) -> None:
        order = [i for i in range(len(self.cells)) if i not in self.done and r not in self.kept[i]]
        if not order:
            return
        if self.trials > 1:
            rng.shuffle(order)
        labels = [self.cells[i].label for i in order]
        ended = []
        for place, i in enumerate(order):
            if self.progress:
                self.progress(self.started, self.total,
                              _trial_label(self.cells[i].label, r, self.trials))
            self.started += 1
            self.running = (i, r, place, labels)
            outcome = self.cells[i].run(r)
            if outcome.status == "ok":
                self._keep(i, KeptTrial(r, outcome, place, labels))
                self.running = None
                if len(self.kept[i]) < self.trials:
                    continue
                outcome = self._finish(i)
            else:
                self.running = None
                outcome = self._failed(i, r, outcome, place, labels)
            self._end(i, outcome)
            if self.trials == 1:
                self._sink_ended([i])
            else:
                ended.append(i)
        self._sink_ended(sorted(ended))

    def _keep(self, i: int, trial: KeptTrial) -> None:
        """A finished trial, kept in the store at once where the cell can be resumed."""
        cell = self.cells[i]
        if self._kept_in_store(cell):
            trial = self.keeper.keep(cell.kind, cell.spec, trial)
        self.kept[i][trial.trial] = trial

    def _end(self, i: int, outcome: Outcome) -> None:
        self.done[i] = outcome

    def _sink_ended(self, ended: Sequence[int]) -> None:
        for i in ended:
            if i not in self.sunk:
                self.sink(self.done[i])
                self.sunk.add(i)

    def _trials_of(self, i: int) -> list[KeptTrial]:
        return [self.kept[i][r] for r in sorted(self.kept[i])]

    def _finish(self, i: int) -> Outcome:
        """The cell's record from every trial it has."""
        kept = self._trials_of(i)
        outcome = self.cells[i].finish([k.outcome for k in kept])
        return self._with_order(outcome, kept)

    def _failed(self, i: int, r: int, outcome: Outcome, place: int, labels: list[str]
                ) -> Outcome:
        """A failure: the record it is today, with the trial it happened in kept raw (and the
        rows of the trials finished before it: they stay in the store for a rerun)."""
        if self.trials > 1:
            outcome = replace(outcome, raw={**outcome.raw, "failed_trial": r})
        failing = KeptTrial(r, outcome, place, labels)
        return self._with_order(outcome, [*self._trials_of(i), failing])

    def _with_order(self, outcome: Outcome, kept: list[KeptTrial]) -> Outcome:
        """The order of every round its trials ran in (raw: cell labels; not for one trial,
        whose raw data stays as before trials), the seed and this cell's position in each
        round (metrics, for a record with metrics; raw for a failure of several trials, whose
        metrics stay as today), and the kept rows it is made of."""
        several = self.trials > 1
        positions = [k.position for k in kept]
        raw = {**outcome.raw, **_rows(kept)}
        if not several and outcome.status != "ok":
            return replace(outcome, raw=raw)
        if several:
            raw["trial_order"] = [k.order for k in kept]
        if outcome.status not in ("ok", "interrupted"):
            return replace(outcome, raw={**raw, **partial_metrics_dict(
                TrialFields, trial_seed=self.seed, trial_positions=positions)})
        metrics = {**outcome.metrics, **partial_metrics_dict(
            TrialFields, trial_seed=self.seed, trial_positions=positions,
            trial_cells=len(kept[0].order))}
        return replace(outcome, metrics=metrics, raw=raw)

    def _stopped(self, stop: Interrupted) -> TrialsInterrupted:
        """Record what the sweep has (cells ended, unfinished cells with their trials as
        'interrupted'); the exception that says which trial was lost."""
        lost = self._take_running(stop)
        self._sink_ended(sorted(self.done))
        launched = getattr(stop, "outcome", None)  # a launch stopped (train/launch.py)
        for i in range(len(self.cells)):
            if i in self.done:
                continue
            if self.kept[i]:
                self.sink(self._interrupted(i, stop.signum))
            elif launched is not None and self.running is not None and self.running[0] == i:
                self.sink(_launch_interrupted(launched, self.running[1], self.trials))
        return TrialsInterrupted(stop.signum, lost)

    def _take_running(self, stop: Interrupted) -> str:
        """The running trial: kept where its launch had measured it in full before the signal
        (a CellInterrupted's ok outcome); else what is lost, named."""
        if self.running is None:
            return ""
        i, r, place, labels = self.running
        measured = getattr(stop, "outcome", None)
        if measured is not None and measured.status == "ok" and i not in self.done:
            self._keep(i, KeptTrial(r, measured, place, labels))
            self.running = None
            if len(self.kept[i]) >= self.trials:
                self._end(i, self._finish(i))
            return ""
        return _trial_label(self.cells[i].label, r, self.trials)

    def _interrupted(self, i: int, signum: int) -> Outcome:
        """An unfinished cell's record: its finished trials combined, status 'interrupted'."""
        kept = self._trials_of(i)
        k, n = len(kept), self.trials
        outcome = self.cells[i].finish([t.outcome for t in kept])
        why = (f"interrupted by {signal_name(signum)} after {k} of {n} trials: this record "
               f"holds the {k} finished; a resumed sweep measures only the other {n - k}")
        return self._with_order(replace(outcome, status="interrupted", reason=why), kept)


def _rows(kept: Sequence[KeptTrial]) -> dict[str, Any]:
    """Raw data naming the kept trial rows a record is made of, and each trial's run."""
    stored = [k for k in kept if k.row is not None]
    if not stored:
        return {}
    return {TRIAL_ROWS_KEY: [k.row for k in stored], TRIAL_RUNS_KEY: [k.run_id for k in stored]}


def _launch_interrupted(outcome: Outcome, trial: int, trials: int) -> Outcome:
    """A launched cell stopped in its first trial: the launch's 'interrupted' outcome, saying
    which trial where there are several."""
    if trials == 1:
        return outcome
    why = f"interrupted in trial {trial + 1} of {trials}, before any trial of it finished"
    return replace(outcome, reason=f"{why}; {outcome.reason}" if outcome.reason else why)


def _trial_label(label: str, trial: int, trials: int) -> str:
    """A cell's progress label, with the trial when there are several."""
    return label if trials == 1 else f"{label}, trial {trial + 1}/{trials}"
