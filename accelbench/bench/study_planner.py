"""A study's experiments as sweeps (config/study_file.py reads the file).

Each experiment names a registered workload (config/workload.py; the built-in ones in
accelbench/workloads/); its options are checked against that workload's options dataclass (the
command's options) and planned by the workload's `plan`, which builds the spec with the same
functions the commands call, so a study refuses what the command would refuse, naming the key
in the file. Axes that one sweep takes as a list (a
block's batch and dtype, a training sweep's seq, micro-batch, GAS, dtype and recompute, a
scaling study's device counts) form one sweep; an axis over any other option gives one sweep
per value. Every cell is planned before anything runs: its memory estimate (analytics), its fit
verdict against the device's budget (bench/guard.py) and a rough time (FLOPs over the device's
peak, plus overheads measured on a CPU: ROUGH_TIME). Recording is bench/recording/study_run.py's.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

import torch

from accelbench.bench.dtypes import dtype_support, parse_dtype
from accelbench.bench.gemm_peak import SweepPeak, fastest_layout, gemm_flops_per_s, resolve_peak
from accelbench.bench.guard import memory_budget_bytes
from accelbench.bench.outcome import Outcome, Progress, Sink, Skip
from accelbench.config.errors import ConfigError
from accelbench.config.fit import DOES_NOT_FIT, FITS
from accelbench.config.precision import resolve as resolve_precision
from accelbench.config.study_file import Experiment, Scalar, Study, key_path, pick_profile
from accelbench.config.vocab import GIB
from accelbench.config.workload import Workload, get_workload, workloads
from accelbench.hardware import device as devices
from accelbench.hardware.detect import detect_spec, resolve_device

# --- option sets ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OptionField:
    """One option of a workload: its Python type (as the dataclass declares it) and default."""

    type: str
    default: Any


def _fields_of(workload: Workload) -> dict[str, OptionField]:
    """A workload's options as a study's keys, with the workload's own defaults; the device is
    chosen when the study runs, never in the file."""
    return {f.name: OptionField(str(f.type), workload.defaults.get(f.name, f.default))
            for f in fields(workload.options) if f.name not in (*workload.skip, "device")}


@dataclass(frozen=True)
class StudyWorkload:
    """A registered workload as a study sees it: its keys, the ones one sweep takes as lists,
    and how a sweep's values become planned, runnable sweeps."""

    name: str
    fields: dict[str, OptionField]
    axes: tuple[str, ...]
    plan: Callable[[dict[str, Any], Planner], SweepPlan]


def study_workloads() -> dict[str, Workload]:
    """The registered workloads a study may name (those that declare a plan)."""
    return {w.name: w for w in workloads() if w.plan is not None}


def study_workload(name: str) -> StudyWorkload | None:
    """The study's view of a registered workload, or None when a study cannot name it."""
    workload = get_workload(name)
    if workload is None or workload.plan is None:
        return None
    return StudyWorkload(name, _fields_of(workload), workload.axes, workload.plan)


# --- plans ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedCell:
    """One cell as the dry run lists it."""

    label: str
    mem_bytes: float | None  # estimated per device (per rank)
    budget_bytes: float | None  # what it is compared with (None: no limit known)
    verdict: str  # fits, does not fit, unsupported: why, or a search's note
    time_s: float  # rough (ROUGH_TIME)


RunSweep = Callable[[Sink, Progress | None, Skip | None, tuple[SweepPeak, ...]], list[Outcome]]


@dataclass(frozen=True)
class SweepPlan:
    """One sweep of an experiment: its cells in the order it runs them, and how to run it
    (`peaks`: those a study decided before, taken by sweeps that run in this process)."""

    title: str
    cells: tuple[PlannedCell, ...]
    run: RunSweep
    tf32: bool = False
    local: bool = False  # runs in this process (shares the study's peaks)
    summary: Callable[[list], Outcome] | None = None  # a scaling study's table (kind 'scale')
    note: str = ""  # what was left out, and why
    part: str = ""  # the values of the axes split into sweeps ('model genslm-250m')


@dataclass(frozen=True)
class ExperimentPlan:
    """An experiment at the chosen profile: its sweeps, or why it does not run here."""

    experiment: Experiment
    sweeps: tuple[SweepPlan, ...] = ()
    skipped: str = ""

    @property
    def cells(self) -> list[PlannedCell]:
        """Every planned cell of every sweep."""
        return [c for s in self.sweeps for c in s.cells]


@dataclass(frozen=True)
class StudyPlan:
    """What `accelbench study run` will do, checked, before anything runs."""

    study: Study
    profile: str  # the declared profile chosen
    asked: str  # what the user asked for (auto, or a profile)
    device: torch.device
    experiments: tuple[ExperimentPlan, ...]
    peaks: dict[str, str] = field(default_factory=dict)  # dtype -> how its time was estimated

    @property
    def cells(self) -> list[PlannedCell]:
        """Every planned cell of the study."""
        return [c for e in self.experiments for c in e.cells]

    def tag(self, experiment: str) -> dict[str, str]:
        """What every record of an experiment carries in spec.study."""
        return {"name": self.study.name, "experiment": experiment, "profile": self.profile}


# --- rough time -------------------------------------------------------------------------------

# A cell's rough time: FLOPs / (peak x ASSUMED_MFU) + STEP_OVERHEAD_S per step or repetition
# + CELL_OVERHEAD_S (building, data, warm-up of the runtime) + LAUNCH_OVERHEAD_S for a cell
# launched under torchrun (ranks start and import torch) + PEAK_MEASURE_S for each precision
# whose peak is measured (no datasheet). The overheads were measured on a 2-core CPU VM
# (docs/study.md); on an accelerator the FLOPs term dominates.
ASSUMED_MFU = 0.3
STEP_OVERHEAD_S = 0.1
CELL_OVERHEAD_S = 1.5
LAUNCH_OVERHEAD_S = 12.0
PEAK_MEASURE_S = 10.0
PROBE_N = 1024  # the quick GEMM probe of a device without a datasheet (under a second)
ROUGH_TIME = (f"rough: FLOPs at {ASSUMED_MFU:.0%} of the peak, plus {STEP_OVERHEAD_S} s a step, "
              f"{CELL_OVERHEAD_S} s a cell, {LAUNCH_OVERHEAD_S:.0f} s a launched cell and "
              f"{PEAK_MEASURE_S:.0f} s a measured peak")


class Planner:
    """The device's budgets and peaks, and the study's peaks so far (each measured once)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.sheet = detect_spec(device)
        self.peaks: dict[tuple[str, bool], float | None] = {}
        self.labels: dict[str, str] = {}
        self.decided: set[tuple[str, bool, bool]] = set()  # (dtype, tf32, local) peaks decided

    def budget(self, mem_limit_bytes: int | None,
               ranks_on_host: int = 1) -> tuple[float | None, bool]:
        """The guard's budget of one rank and whether the run refuses by it (a CPU, or
        --mem-limit); on an accelerator without a limit, its memory (the run tries the cell)."""
        budget = memory_budget_bytes(self.device, mem_limit_bytes, ranks_on_host)
        if budget is not None:
            return budget, True
        return devices.total_memory_bytes(self.device), False

    def verdict(self, dtype: str, need: float, budget: float | None) -> str:
        """fits, does not fit, or why the device cannot run the dtype."""
        unsupported = dtype_support(self.device, dtype)
        if unsupported:
            return f"unsupported: {unsupported}"
        return DOES_NOT_FIT if budget is not None and need > budget else FITS

    def peak(self, dtype: str, tf32: bool) -> float | None:
        """The datasheet's dense peak, else a quick GEMM probe (labelled per dtype)."""
        key = (dtype, tf32)
        if key not in self.peaks:
            sheet = resolve_peak(self.sheet, self.device, dtype, tf32, measure=False)
            if sheet.flops_per_s:
                self.peaks[key], self.labels[dtype] = sheet.flops_per_s, sheet.label
            else:
                self.peaks[key] = self._probe(dtype, tf32)
        return self.peaks[key]

    def _probe(self, dtype: str, tf32: bool) -> float | None:
        try:
            layout = fastest_layout(str(self.device), dtype, tf32)
            rate = gemm_flops_per_s(self.device, parse_dtype(dtype), layout,
                                    (PROBE_N,) * 3, repeats=3, warmup=1)
        except Exception:  # noqa: BLE001 - an estimate without a peak is still a plan
            self.labels[dtype] = "no peak (the probe failed)"
            return None
        self.labels[dtype] = (f"quick GEMM probe (n={PROBE_N} {layout}, "
                              f"{torch.get_num_threads()} thread(s)): {rate / 1e12:.3g} TFLOPS")
        return rate

    def time_s(self, flops: float, dtype: str, tf32: bool, steps: int,
               local: bool = True) -> float:
        """A cell's rough time (ROUGH_TIME); the first cell of a precision pays its peak."""
        peak = self.peak(resolve_precision(dtype).compute, tf32)  # fp8: the bf16 peak, as its MFU
        if peak and not local and self.device.type == "cpu":
            peak /= torch.get_num_threads()  # a launched CPU rank runs one thread
        seconds = CELL_OVERHEAD_S + steps * STEP_OVERHEAD_S
        seconds += flops / (peak * ASSUMED_MFU) if peak else 0.0
        if not local:
            seconds += LAUNCH_OVERHEAD_S
        if self.sheet is None and (dtype, tf32, local) not in self.decided:
            self.decided.add((dtype, tf32, local))
            seconds += PEAK_MEASURE_S
        return seconds

    def cell(self, label: str, dtype: str, need: float, mem_limit_bytes: int | None,
             flops: float, tf32: bool, steps: int, local: bool = True,
             ranks_on_host: int = 1) -> PlannedCell:
        """A planned cell (`need` and the budget per rank, the run's rule: bench/guard.py). A
        cell the run refuses before it allocates costs no time."""
        budget, enforced = self.budget(mem_limit_bytes, ranks_on_host)
        verdict = self.verdict(dtype, need, budget)
        refused = verdict.startswith("unsupported") or (verdict != FITS and enforced)
        time = 0.0 if refused else self.time_s(flops, dtype, tf32, steps, local)
        return PlannedCell(label, need, budget, verdict, time)


def available_devices(device: torch.device) -> tuple[int, str]:
    """How many devices a scaling study may use here, and what they are: on a CPU one core a
    rank (the cores this process may run on), else the accelerators torch sees."""
    if device.type == "cpu":
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        count = cores or os.cpu_count() or 1
        return count, f"{count} CPU core(s), one a rank"
    count = devices.device_count(device.type)
    return count, f"{count} {device.type} device(s)"


# --- from a study file to a plan ---------------------------------------------------------------


def _typed(value: Scalar, option: OptionField, path: str) -> Any:
    """A TOML value as the option's type: numbers are text for text options (seq = 1024 is
    '1024', as typed on the command line); booleans are never numbers."""
    kind = option.type
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind in ("int", "int | None") and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind in ("float", "float | None") and isinstance(value, int | float) \
            and not isinstance(value, bool):
        return float(value)
    if kind == "str" and not isinstance(value, bool):
        return str(value)
    want = {"bool": "true or false", "int": "an integer", "str": "a string or a number"}
    raise ConfigError(path, f"must be {want.get(kind, 'a number')}, got {value!r}",
                      want.get(kind, "a number"))


def _check_keys(experiment: Experiment, workload: StudyWorkload) -> None:
    """Every option and axis is one of the workload's."""
    for key in [*experiment.options, *experiment.sweep]:
        if key == "device":
            raise ConfigError(experiment.path(key), "the device is chosen when the study runs "
                              "(--device), not in the file", ", ".join(workload.fields))
        if key not in workload.fields:
            raise ConfigError(experiment.path(key), f"unknown option of workload "
                              f"{workload.name!r}", ", ".join(workload.fields))


def _combinations(experiment: Experiment, workload: StudyWorkload) -> list[dict[str, Any]]:
    """One dict of typed option values per sweep: the options, the workload's axes joined as
    comma lists, one value of each other axis."""
    base = {k: f.default for k, f in workload.fields.items()}
    base |= {k: _typed(v, workload.fields[k], experiment.path(k))
             for k, v in experiment.options.items()}
    for axis in workload.axes:
        if axis in experiment.sweep:
            items = [_typed(v, workload.fields[axis], experiment.path(axis))
                     for v in experiment.sweep[axis]]
            base[axis] = ",".join(map(str, items))
    split = [k for k in experiment.sweep if k not in workload.axes]
    choices = [[_typed(v, workload.fields[k], experiment.path(k)) for v in experiment.sweep[k]]
               for k in split]
    return [base | dict(zip(split, combo, strict=True)) for combo in itertools.product(*choices)]


def _at_key(err: ConfigError, experiment: Experiment, workload: StudyWorkload) -> ConfigError:
    """A workload's error on an option, named by its key in the study file."""
    key = err.field.split(".")[0].replace("-", "_")
    if key in workload.fields:
        return ConfigError(experiment.path(key), err.problem, err.allowed)
    return ConfigError(key_path("experiments", experiment.name),
                       f"{err.field}: {err.problem}", err.allowed)


def plan_experiment(experiment: Experiment, planner: Planner, device: str) -> ExperimentPlan:
    """Check an experiment against its workload and plan its sweeps (ConfigError on bad
    input, naming the key); an experiment that cannot run here is planned as skipped."""
    workload = study_workload(experiment.workload)
    if workload is None:
        raise ConfigError(key_path("experiments", experiment.name, "workload"),
                          f"unknown workload {experiment.workload!r}",
                          ", ".join(study_workloads()))
    _check_keys(experiment, workload)
    sweeps = []
    split = [k for k in experiment.sweep if k not in workload.axes]
    for values in _combinations(experiment, workload):
        try:
            sweep = workload.plan({**values, "device": device}, planner)
        except ConfigError as err:
            raise _at_key(err, experiment, workload) from None
        part = ", ".join(f"{k.replace('_', '-')} {values[k]}" for k in split)
        sweeps.append(replace(sweep, part=part, cells=tuple(
            replace(c, label=f"{part}: {c.label}") for c in sweep.cells) if part else sweep.cells))
    if not any(s.cells for s in sweeps):
        notes = "; ".join(s.note for s in sweeps if s.note) or "no cell to run"
        return ExperimentPlan(experiment, tuple(sweeps), skipped=notes)
    return ExperimentPlan(experiment, tuple(sweeps))


def plan_study(study: Study, profile: str = "auto", device: str = "auto") -> StudyPlan:
    """Every experiment of the study at a profile (auto: quick on a CPU, full on an
    accelerator), checked and planned; nothing is measured but a quick GEMM probe per
    precision on a device without a datasheet peak."""
    target = resolve_device(device)
    chosen = pick_profile(study, profile, target.type == "cpu")
    planner = Planner(target)
    plans = tuple(plan_experiment(e, planner, device) for e in study.experiments(chosen))
    return StudyPlan(study, chosen, profile, target, plans, dict(planner.labels))


def gib(value: float | None) -> str:
    """Bytes as GiB for the dry run, '-' where unknown."""
    return "-" if value is None else f"{value / GIB:.2f}"
