"""Training cells on several processes: inside a process group (torchrun or srun), or each cell
launched as its own torchrun job from a single `accelbench` process.

`accelbench train --nproc N` (outside torchrun) starts each cell as its own torchrun launch of
this module: a dead or hung rank then costs one cell (recorded with the rank's error), never the
sweep. Under torchrun or srun the same command runs its cells on the group directly.

A launched cell lives in a folder beside the results database (bench/train/cell_folder.py), so
that rank 0's outcome survives its `accelbench` process. Its ranks write heartbeats there for
the launcher's hang watchdog, and each failed rank its own exception. SIGINT or SIGTERM to the
launcher stops the ranks and ends the sweep with CellInterrupted, which carries the cell's
'interrupted' outcome for the caller to record.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist

from accelbench.bench.gemm_peak import SweepPeak, SweepPeaks, peak_of
from accelbench.bench.guard import is_oom
from accelbench.bench.outcome import Outcome, Progress, Sink, Skip, finished
from accelbench.bench.train.cell import KIND, cell_spec, refusal, run_cell
from accelbench.bench.train.cell_folder import (
    FINAL_FILE,
    OUTCOME_FILE,
    SPEC_FILE,
    hand_over,
    open_cell_folder,
    read_outcome,
    write_json,
)
from accelbench.bench.train.cell_trials import combine_train_trials
from accelbench.bench.train.fault_injection import (
    TEST_FAULT_ENV,
    stop_before_first_beat,
    with_test_fault,
)
from accelbench.bench.train.nodes import join_nodes, lost_node_outcome, ranks_on_my_node
from accelbench.bench.train.spec import TrainCell, TrainSpec, cell_layout, spec_from_dict
from accelbench.bench.train.steps import StepProgress, set_heartbeat
from accelbench.bench.trials import CellTrials, interleave, resolve_trials
from accelbench.config.global_options import quiet_if_asked
from accelbench.config.layout import Layout
from accelbench.config.record_kinds import carries
from accelbench.config.records.train import TRAIN_SWEPT, TrainMetrics
from accelbench.hardware.detect import resolve_device
from accelbench.parallel.dist import init_distributed, read_env, teardown
from accelbench.parallel.liveness import give_verdict, wait_for_verdict
from accelbench.parallel.procs import Interrupted, signal_name, watch_parent
from accelbench.parallel.rank_files import write_rank_error
from accelbench.parallel.topology import Topology
from accelbench.parallel.torchrun_launch import LaunchResult, launch_torchrun
from accelbench.parallel.watchdog import HEARTBEAT_DIR, HeartbeatWriter

# Launched ranks wait in a collective this much longer than the watchdog waits for progress, so
# the watchdog, which can name the rank that stopped, acts before the ranks' own timeouts.
WATCHDOG_MARGIN_S = 30.0
_REASON_CHARS = 2000


class CellInterrupted(Interrupted):  # noqa: N818 - an Interrupted, as KeyboardInterrupt is
    """SIGINT or SIGTERM stopped a launched cell; `outcome` is what to record for it (status
    'interrupted', or the measured outcome where rank 0 had finished)."""

    def __init__(self, signum: int, outcome: Outcome) -> None:
        super().__init__(signum)
        self.outcome = outcome


def in_process_group() -> bool:
    """True under torchrun or srun with more than one process."""
    return read_env().world_size > 1


def _group_peak(peaks: SweepPeaks, dtype: str) -> SweepPeak:
    """Rank 0 decides the peak (measuring it if need be) and every rank gets the same one."""
    box = [peaks.get(dtype) if dist.get_rank() == 0 else None]
    if dist.get_world_size() > 1:
        dist.broadcast_object_list(box, src=0)
    return box[0]


def _group_finished(skip: Skip | None, record_spec: dict, rank: int,
                    world_size: int) -> Outcome | None:
    """Rank 0 asks `skip` (only rank 0 has the store) and every rank gets the same answer."""
    box = [finished(skip, KIND, record_spec) if rank == 0 else None]
    if world_size > 1:
        dist.broadcast_object_list(box, src=0)
    return box[0]


def run_group_sweep(spec: TrainSpec, sink: Sink, progress: StepProgress | None = None,
                    on_cell: Progress | None = None, skip: Skip | None = None) -> list[Outcome]:
    """Every cell on the process group; rank 0 sinks the outcomes, the other ranks return [].
    A cell rank 0's `skip` reports finished is skipped by every rank (and returned on rank 0).
    When a cell fails on several nodes, rank 0 first records the nodes that stopped beating as
    the cell's error (then every rank raises: the group is broken)."""
    device_type = None if spec.device == "auto" else spec.device.split(":")[0]
    info, device = init_distributed(device_type, timeout_s=spec.hang_timeout_s)
    rank_sink = sink if info.rank == 0 else (lambda outcome: None)
    # Measured once under a group: the peers waiting in the broadcast are the disturbance a
    # pause cannot wait out, and every pause is one the group's collective timeout counts.
    peaks = SweepPeaks(device, spec.tf32, rank_sink, known=spec.peaks, attempts=1)
    group = _Group(spec, device, peaks, progress, skip)
    outcomes: list[Outcome] = []
    cells = spec.cells()
    clean = False
    try:
        group.topology = join_nodes(info.rank)
        for i, cell in enumerate(cells):
            layout = cell_layout(spec, info.world_size, cell.gas)
            if on_cell and info.rank == 0:
                on_cell(i, len(cells), f"{cell.label} on {layout.label()}")
            try:
                outcome, finished_before = group.cell(cell, layout)
            except Exception as err:
                group.record_lost_node(cell, layout, err, sink)
                raise
            if outcome is not None and info.rank == 0:
                if not finished_before:
                    sink(outcome)
                outcomes.append(outcome)
        clean = True
    finally:
        teardown(together=clean)
    return outcomes


class _Group:
    """What every cell of a group sweep shares: the spec, device, peaks and the topology."""

    def __init__(self, spec: TrainSpec, device: torch.device, peaks: SweepPeaks,
                 progress: StepProgress | None, skip: Skip | None) -> None:
        self.spec, self.device, self.peaks = spec, device, peaks
        self.progress, self.skip = progress, skip
        self.topology: Topology | None = None

    def cell(self, cell: TrainCell, layout: Layout) -> tuple[Outcome | None, bool]:
        """(rank 0's outcome, whether it was finished before) of one cell on every rank."""
        rank, world = dist.get_rank(), dist.get_world_size()
        done = _group_finished(self.skip, cell_spec(self.spec, cell, layout, str(self.device)),
                               rank, world)
        if done is not None:
            self.peaks.adopt(done)
            return done, True
        peak = _group_peak(self.peaks, cell.dtype).peak()
        local = ranks_on_my_node(self.topology, rank) if self.topology else world
        return run_cell(self.spec, cell, layout, self.device, peak, self.progress,
                        local_ranks=local), False

    def record_lost_node(self, cell: TrainCell, layout: Layout, err: BaseException,
                         sink: Sink) -> None:
        """Rank 0 of a group over several nodes: the cell as an error naming the nodes whose
        ranks stopped beating, when some did; the other ranks wait for it before they exit."""
        if self.topology is None or self.topology.n_nodes < 2:
            return
        if dist.get_rank() != 0:
            wait_for_verdict()  # torchrun would stop rank 0 with this rank's node
            return
        record_spec = cell_spec(self.spec, cell, layout, str(self.device))
        try:
            lost = lost_node_outcome(self.topology, layout, record_spec, err)
            if lost is not None:
                sink(lost)
        finally:
            give_verdict()


def join_user_launch() -> None:
    """A rank of a user's torchrun ends itself once its agent is gone (an orphan would hold
    its peers in a collective until their timeout), and takes a test's fault if one is set."""
    info = read_env()
    if info.launcher == "torchrun":
        watch_parent(os.getppid(), signal.SIGKILL)
    if os.environ.get(TEST_FAULT_ENV):
        set_heartbeat(with_test_fault(lambda step, phase: None, info.rank))


def rank_env(spec: TrainSpec) -> dict[str, str]:
    """On a CPU a device is one core: one thread per rank, also for a single rank (torchrun sets
    OMP_NUM_THREADS=1 only from two ranks up, which would give a one-rank baseline every core)."""
    return {"OMP_NUM_THREADS": "1"} if _on_cpu(spec) else {}


def _on_cpu(spec: TrainSpec) -> bool:
    """Whether launched ranks will run on the CPU (decided without touching an accelerator)."""
    return resolve_device(spec.device).type == "cpu"  # selects; creates no device context


def with_launch_peaks(spec: TrainSpec, sink: Sink) -> TrainSpec:
    """The spec with the peak of each of its dtypes decided here, once: on a CPU measured at one
    thread, as a rank runs (each a 'peak' record through `sink`), and handed to every launch;
    an accelerator's ranks read their datasheet peak themselves (the parent never touches it)."""
    if not _on_cpu(spec):
        return spec
    peaks = SweepPeaks(resolve_device("cpu"), spec.tf32, sink, threads=1, known=spec.peaks)
    for dtype in spec.dtypes:
        peaks.get(dtype)
    return replace(spec, peaks=peaks.all())


def adopt_peak(peaks: dict[str, SweepPeak], finished_cell: Outcome) -> None:
    """Keep the peak a skipped cell was divided by, for its dtype, unless one is kept already
    (launched cells of a resumed sweep are then divided by the same peak)."""
    peak = peak_of(finished_cell)
    if peak is not None:
        peaks.setdefault(peak.dtype, peak)


def launched_cell_spec(spec: TrainSpec, cell: TrainCell) -> dict:
    """The record spec of a cell launched on `spec.nproc` processes, as it is asked about
    before the launch (its device is the one asked for; a fingerprint ignores it)."""
    return cell_spec(spec, cell, cell_layout(spec, spec.nproc, cell.gas), spec.device)


class LaunchPeaks:
    """The peaks every launch of a sweep divides by: a skipped cell's adopted, the rest decided
    once, before the first launch (never, when every cell is skipped)."""

    def __init__(self, spec: TrainSpec, sink: Sink) -> None:
        self.spec, self.sink = spec, sink
        self.adopted = {p.dtype: p for p in spec.peaks}
        self._decided: TrainSpec | None = None

    def adopt(self, finished_cell: Outcome) -> None:
        """Keep the peak a finished (skipped) cell was divided by."""
        adopt_peak(self.adopted, finished_cell)

    def decided(self) -> TrainSpec:
        """The sweep's spec with its peaks, decided at the first call."""
        if self._decided is None:
            known = replace(self.spec, peaks=tuple(self.adopted.values()))
            self._decided = with_launch_peaks(known, self.sink)
        return self._decided


def launched_trials(spec: TrainSpec) -> TrainSpec:
    """The spec with its trials resolved: as asked, or auto for the ranks' kind of device."""
    return replace(spec, trials=resolve_trials(spec.trials, resolve_device(spec.device)))


def run_launched_sweep(spec: TrainSpec, sink: Sink, on_cell: Progress | None = None,
                       skip: Skip | None = None) -> list[Outcome]:
    """Each cell as `spec.trials` torchrun launches of `spec.nproc` processes (auto: per
    device), each bounded by cell_timeout_s, the cells' trials interleaved round by round
    (bench/trials.py interleave, as one-process cells run theirs: one trial is one round in
    the cells' order, each record sunk as it lands); the peaks are decided before the first
    launch."""
    spec = launched_trials(spec)
    peaks = LaunchPeaks(spec, sink)
    cells = spec.cells()
    done = [finished(skip, KIND, launched_cell_spec(spec, cell)) for cell in cells]
    to_run = []
    for cell, outcome in zip(cells, done, strict=True):
        if outcome is not None:
            peaks.adopt(outcome)
            continue
        run = partial(_trial_of, peaks, cell, spec.trials)
        to_run.append(CellTrials(f"{cell.label} on {spec.nproc} processes", run,
                                 combine_train_trials, KIND, launched_cell_spec(spec, cell)))
    measured = iter(interleave(to_run, spec.trials, spec.seed, sink, on_cell,
                               len(cells) - len(to_run)))
    return [o if o is not None else next(measured) for o in done]


def _trial_of(peaks: LaunchPeaks, cell: TrainCell, trials: int, trial: int) -> Outcome:
    """Trial `trial` of a launched cell, on the sweep's spec with its peaks."""
    return launch_trial(peaks.decided(), cell, trial, trials)


def launch_trial(spec: TrainSpec, cell: TrainCell, trial: int, trials: int) -> Outcome:
    """One trial of a launched cell: its own torchrun launch (a fresh process group, the model
    built anew from the seed). A signal raises CellInterrupted with the launch's outcome: the
    interleaved sweep keeps it as a trial where rank 0 had measured it in full, and records the
    cell's finished trials (bench/trials.py)."""
    return launch_cell(spec, cell, None if trials == 1 else (trial, trials))


def launch_cell(spec: TrainSpec, cell: TrainCell, trial: tuple[int, int] | None = None
                ) -> Outcome:
    """Run one cell under torchrun; its outcome, or the failed rank's error as the outcome.
    Every outcome records the cell's layout and world size (nproc). `trial` (r, of n) marks
    one trial of several in its folder (a dead launcher's trial is never recovered as the
    cell's record). Raises CellInterrupted (after the ranks are stopped) when SIGINT or
    SIGTERM reached this process."""
    layout = cell_layout(spec, spec.nproc, cell.gas)
    refused = refusal(spec, cell, layout, resolve_device(spec.device), spec.nproc)
    if refused is not None:  # its ranks would refuse it alike (run_cell): no launch
        return refused
    single = replace(spec, **{key: (getattr(cell, name),) for key, name in TRAIN_SWEPT.items()})
    record_spec = cell_spec(spec, cell, layout, spec.device)
    folder = open_cell_folder(single.to_dict(), record_spec, cell.label, trial)
    try:
        result = launch_torchrun(spec.nproc, ["-m", __name__, str(folder)], spec.cell_timeout_s,
                                 env=rank_env(spec), work_dir=folder,
                                 hang_timeout_s=spec.hang_timeout_s)
        outcome = _outcome_of(result, folder / OUTCOME_FILE, record_spec)
        write_json(folder / FINAL_FILE, vars(outcome))
    finally:
        hand_over(folder)
    if result.interrupted is not None:
        raise CellInterrupted(result.interrupted, outcome)
    return outcome


def _outcome_of(result: LaunchResult, out_path: Path, record_spec: dict) -> Outcome:
    """Rank 0's outcome where it wrote one (every rank's results were gathered: the measurement
    is kept), else the launch's failure as the outcome."""
    if out_path.exists():
        return _with_exit_note(read_outcome(out_path), result)
    if result.interrupted is not None:
        return Outcome(KIND, "interrupted", record_spec, reason=result.error)
    rank = f"rank {result.failed_rank}: " if result.failed_rank is not None else ""
    reason = result.error
    if len(rank) + len(reason) > _REASON_CHARS:  # a log tail: its end says most
        reason = "..." + reason[-(_REASON_CHARS - len(rank) - 3):]
    return Outcome(KIND, failure_status(result), record_spec, reason=rank + reason)


def failure_status(result: LaunchResult) -> str:
    """timeout (the deadline ended it), oom (the failed rank ran out of memory: a rank cannot
    record that itself while its peers wait in a collective) or error."""
    if result.timed_out:
        return "timeout"
    return "oom" if is_oom(RuntimeError(result.error)) else "error"


def _with_exit_note(outcome: Outcome, result: LaunchResult) -> Outcome:
    """A rank that failed after the outcome was complete (at teardown) is noted, not fatal."""
    if result.ok:
        return outcome
    if result.interrupted is not None:
        note = f"measured in full before {signal_name(result.interrupted)} stopped the launch"
        return replace(outcome, reason=f"{outcome.reason}; {note}" if outcome.reason else note)
    rank = f"rank {result.failed_rank}" if result.failed_rank is not None else "a rank"
    how = "timed out" if result.timed_out else f"failed: {result.error}"
    note = f"measured in full; afterwards {rank} {how}"[-1000:]
    return replace(outcome, reason=f"{outcome.reason}; {note}" if outcome.reason else note)


def worker_main(folder: str) -> None:
    """A launched rank: run the one cell of <folder>/spec.json; rank 0 writes the outcome for
    the launcher. Every phase beats the rank's heartbeat; an exception is written to the folder
    before the rank exits; the rank ends itself when the torchrun agent is gone."""
    quiet_if_asked()
    work, rank = Path(folder), read_env().rank
    watch_parent(os.getppid(), signal.SIGKILL)  # an orphan has no one to report to
    stop_before_first_beat(rank)
    beat = HeartbeatWriter(work / HEARTBEAT_DIR, rank)
    heartbeat = with_test_fault(beat, rank, work)
    set_heartbeat(heartbeat)
    heartbeat(0, "starting")
    spec = spec_from_dict(json.loads((work / SPEC_FILE).read_text()))

    def write(outcome: Outcome) -> None:
        # the cell's outcome only: a peak decided by the ranks stays inside the cell's record
        if carries(outcome.kind, TrainMetrics):
            write_json(work / OUTCOME_FILE, vars(outcome))
            heartbeat(0, "outcome written")

    try:
        device_type = None if spec.device == "auto" else spec.device.split(":")[0]
        init_distributed(device_type, timeout_s=spec.hang_timeout_s + WATCHDOG_MARGIN_S)
        run_group_sweep(spec, write)
    except BaseException as err:
        write_rank_error(work, rank, err)
        raise


if __name__ == "__main__":
    worker_main(sys.argv[1])
