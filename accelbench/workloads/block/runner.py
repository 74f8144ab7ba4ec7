"""The transformer-block micro-benchmark (Emani et al. sec. III-1, figs. 3-4).

One decoder layer, forward and backward timed separately, for every batch x dtype of a sweep.
The block runs in the named dtype end to end (weights and activations), as the study's
per-precision layer measurements do.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from accelbench.analytics.cell_energy import cell_energy
from accelbench.analytics.flops import FORMULA, block_flops
from accelbench.analytics.memory import block_train_bytes
from accelbench.analytics.throughput import at_measured_clock, mean_clock
from accelbench.bench.dtypes import TORCH_DTYPES, dtype_support, parse_dtype, set_tf32
from accelbench.bench.gemm_peak import Peak, SweepPeak, SweepPeaks
from accelbench.bench.guard import guarded, refuse_if_too_big
from accelbench.bench.outcome import Outcome, Progress, Sink, Skip, finished
from accelbench.bench.peak_memory import PeakMemory
from accelbench.bench.timed_metrics import one_rank_memory, peak_warning, phase_metrics
from accelbench.bench.timing import PhaseTimer, TimingStats, run_timed, summarize
from accelbench.bench.trial_record import (
    combine_timed,
    combined_raw,
    disturbance_summary,
    interval_fields,
    spread,
    timed_map,
)
from accelbench.bench.trials import ORDER_SEED, CellTrials, interleave, resolve_trials
from accelbench.bench.window_probe import WindowProbe
from accelbench.config.errors import ConfigError, require_count, require_positive
from accelbench.config.model import ModelConfig
from accelbench.config.presets import resolve_model
from accelbench.config.record_kinds import metrics_dict, partial_metrics_dict, read_metrics
from accelbench.config.records.block import (
    BLOCK_PHASES,
    BlockMetrics,
    BlockReading,
    PhaseFields,
    PhaseTimed,
    phase_dict,
)
from accelbench.config.trial_count import parse_trials, require_trials
from accelbench.config.units import MAX_REPEATS, parse_bytes, parse_choice_list, parse_int_list
from accelbench.config.vocab import DTYPES
from accelbench.hardware.detect import resolve_device
from accelbench.hardware.disturbance import OTHER_CPU_THRESHOLD, check_threshold
from accelbench.hardware.energy import open_meter
from accelbench.models.gpt import Block, fresh_compile_cache
from accelbench.workloads.block.options import BlockOptions

KIND = "block"


@dataclass(frozen=True)
class BlockSpec:
    """A block sweep: one model's layer at one sequence length, over batches and dtypes."""

    model: ModelConfig
    seq_len: int = 1024
    batches: tuple[int, ...] = (8, 16, 32, 64)
    dtypes: tuple[str, ...] = DTYPES
    device: str = "auto"
    repeats: int = 10  # timed repetitions of one trial
    warmup: int = 3  # untimed repetitions before them, every trial
    trials: int = 1  # independent trials, interleaved across the sweep's cells (bench/trials.py)
    disturbance_threshold: float = OTHER_CPU_THRESHOLD  # others' CPU share that flags a window
    compile: bool = False
    tf32: bool = False
    mem_limit_bytes: int | None = None

    @property
    def title(self) -> str:
        """The sweep's banner and table title."""
        return f"{self.model.name} block, seq {self.seq_len}"
    peaks: tuple[SweepPeak, ...] = ()  # decided before the sweep (a study's earlier sweeps)

    def validate(self) -> BlockSpec:
        """Raise ConfigError on the first bad field."""
        require_positive("seq", self.seq_len)
        cfg = self.model
        if cfg.position == "learned" and self.seq_len > cfg.n_positions:
            raise ConfigError("seq", f"{self.seq_len} is longer than the model's "
                              f"{cfg.n_positions} positions", f"<= {cfg.n_positions}")
        require_positive("repeats", self.repeats)
        require_count("repeats", self.repeats, MAX_REPEATS)
        require_trials(self.trials)
        check_threshold("disturbance-threshold", self.disturbance_threshold)
        if self.warmup < 0:
            raise ConfigError("warmup", f"must be 0 or more, got {self.warmup}", ">= 0")
        require_count("warmup", self.warmup, MAX_REPEATS, minimum=0)
        if self.compile and self.warmup < 1:  # else compilation lands in the first timed window
            raise ConfigError("warmup", "--compile needs at least 1 warm-up repetition", ">= 1")
        for name, values in (("batch", self.batches), ("dtype", self.dtypes)):
            if not values:
                raise ConfigError(name, "needs at least one value")
            if len(set(values)) != len(values):
                twice = next(v for v in values if values.count(v) > 1)
                raise ConfigError(name, f"{twice} given twice", "each value once")
        for batch in self.batches:
            require_positive("batch", batch)
        for dtype in self.dtypes:
            parse_dtype(dtype)
        if self.mem_limit_bytes is not None:
            require_positive("mem-limit", self.mem_limit_bytes)
        return self


def cell_spec(spec: BlockSpec, batch: int, dtype: str, device: torch.device) -> dict:
    """The full spec of one cell, as recorded."""
    return {"workload": KIND, "model": spec.model.to_dict(), "model_name": spec.model.name,
            "seq_len": spec.seq_len, "batch": batch, "dtype": dtype, "device": str(device),
            "repeats": spec.repeats, "warmup": spec.warmup, "trials": spec.trials,
            "disturbance_threshold": spec.disturbance_threshold, "compile": spec.compile,
            "tf32": spec.tf32, "mem_limit_bytes": spec.mem_limit_bytes,
            "flops_formula": FORMULA}


def time_block(cfg: ModelConfig, seq_len: int, batch: int, dtype: str, device: torch.device,
               spec: BlockSpec) -> tuple[dict[str, TimingStats], PeakMemory, dict, dict | None]:
    """One trial: forward and backward times of a block built anew, the peak memory of the
    run, the energy of its timed repetitions (the meter's result) and what else used the
    machine while they ran (the disturbance probe's dict)."""
    probe = WindowProbe(device, spec.disturbance_threshold)
    torch_dtype = TORCH_DTYPES[dtype]
    with PeakMemory(device) as peak_mem, open_meter(device) as meter:
        block = Block(cfg).to(device=device, dtype=torch_dtype)
        if spec.compile:
            fresh_compile_cache()  # each cell compiles, past Dynamo's recompile limit
        module = torch.compile(block) if spec.compile else block
        x = torch.randn(batch, seq_len, cfg.d_model, device=device, dtype=torch_dtype,
                        requires_grad=True)  # as inside a model: the input's gradient is needed
        grad_out = torch.randn_like(x, requires_grad=False)
        params = list(block.parameters())

        def step(timer: PhaseTimer) -> None:
            for p in params:
                p.grad = None
            x.grad = None
            with timer.phase("forward"):
                y = module(x)
            with timer.phase("backward"):
                y.backward(grad_out)

        stats = run_timed(step, device, spec.warmup, spec.repeats, meter, probe)
    fwd, bwd = stats["forward"].times_s, stats["backward"].times_s
    stats["forward_backward"] = summarize([f + b for f, b in zip(fwd, bwd, strict=True)])
    return stats, peak_mem, meter.result(), probe.result


def block_metrics(cell: BlockMetrics, phases: dict[str, PhaseFields] | None = None) -> dict:
    """A block record's metrics: the cell's fields and every phase's (empty where not timed),
    so each record carries exactly config.record_kinds.metric_names("block")."""
    metrics = metrics_dict(cell)
    for phase in BLOCK_PHASES:
        metrics.update(phase_dict(phase, (phases or {}).get(phase, PhaseFields())))
    return metrics


def run_block_cell(spec: BlockSpec, batch: int, dtype: str, device: torch.device,
                   peak_for: Callable[[str], Peak]) -> Outcome:
    """Measure one cell against the sweep's peak for its dtype (decided only for a cell that
    runs), or record why it could not run."""
    cfg = spec.model
    record_spec = cell_spec(spec, batch, dtype, device)
    estimate = block_train_bytes(cfg, spec.seq_len, batch, dtype, fused_attention=True)
    unsupported = dtype_support(device, dtype)
    if unsupported:
        return Outcome(KIND, "unsupported", record_spec, reason=unsupported)
    refusal = refuse_if_too_big(estimate, device, spec.mem_limit_bytes)
    if refusal:
        return Outcome(KIND, "oom", record_spec,
                       block_metrics(BlockMetrics(mem_estimate_bytes_per_rank=estimate)),
                       reason=refusal)

    def body() -> Outcome:
        set_tf32(device, spec.tf32)
        peak = peak_for(dtype)  # before the timed window: its GEMMs are not the cell's memory
        stats, peak_mem, energy, window = time_block(cfg, spec.seq_len, batch, dtype, device,
                                                     spec)
        flops = block_flops(cfg, spec.seq_len, batch)
        tokens = batch * spec.seq_len
        memory = one_rank_memory(estimate, peak_mem.peak_bytes, peak_mem.base_bytes,
                                 peak_mem.method)
        cell = BlockMetrics(**metrics_dict(memory),
                            **metrics_dict(cell_energy([energy], tokens * spec.repeats)),
                            tokens_per_step_global=tokens,
                            peak_flops_per_s_per_device=peak.flops_per_s, peak_label=peak.label,
                            peak_precision=peak.precision, peak_clock_mhz=peak.clock_mhz)
        phase_flops = {"forward": flops.forward, "backward": flops.backward,
                       "forward_backward": flops.total}
        phases = {phase: phase_metrics(stats[phase], phase_flops[phase], tokens, peak)
                  for phase in BLOCK_PHASES}
        metrics = block_metrics(cell, phases)
        metrics.update(block_at_clock([read_metrics(KIND, metrics)], read_metrics(KIND, metrics)))
        raw = {**{phase: list(s.times_s) for phase, s in stats.items()}, "disturbance": window}
        return Outcome(KIND, "ok", record_spec, metrics, raw,
                       reason=peak_warning(read_metrics(KIND, metrics)))

    return guarded(KIND, record_spec, device, body)


# each phase's median time and the rates computed from it: the figures with an interval
TIMED = timed_map(PhaseTimed, [f"{phase}_" for phase in BLOCK_PHASES])


def block_at_clock(trials: list[BlockReading], combined: BlockReading) -> dict:
    """The trials' mean SM clock (each its window's mean) and the forward-and-backward MFU
    against the peak at that clock; nothing where a trial read no clock."""
    clock = mean_clock([t.sm_clock_mhz_mean for t in trials])
    if clock is None:
        return {}
    return partial_metrics_dict(BlockMetrics, sm_clock_mhz_mean=clock,
                                mfu_at_measured_clock=at_measured_clock(
                                    combined.forward_backward.mfu, combined.peak_clock_mhz,
                                    clock))


def combine_block_trials(trials: list[Outcome]) -> Outcome:
    """A cell's record from its ok trials: the median of the trials' medians per phase, with
    intervals, the spread over every repetition, disturbance, the first trial's memory and
    energy (docs/metrics.md, "Trials")."""
    timed, values = combine_timed([o.metrics for o in trials], TIMED)
    metrics = {**trials[0].metrics, **timed, **interval_fields(len(trials)),
               **disturbance_summary([o.raw.get("disturbance") for o in trials])}
    for phase in BLOCK_PHASES:
        metrics.update(spread([o.metrics for o in trials], f"{phase}_time_s"))
    metrics.update(block_at_clock([read_metrics(KIND, o.metrics) for o in trials],
                                  read_metrics(KIND, metrics)))
    return replace(trials[0], metrics=metrics, raw=combined_raw(trials, values),
                   reason=peak_warning(read_metrics(KIND, metrics)))


def run_block_sweep(spec: BlockSpec, sink: Sink, progress: Progress | None = None,
                    skip: Skip | None = None) -> list[Outcome]:
    """Every batch x dtype cell, spec.trials trials each, interleaved (bench/trials.py); each
    record goes to `sink` once its cell's last trial has run (a cell `skip` reports finished is
    returned, not run nor sunk)."""
    spec.validate()
    device = resolve_device(spec.device)
    peaks = SweepPeaks(device, spec.tf32, sink, known=spec.peaks)  # measured: own records
    cells = [(batch, dtype) for dtype in spec.dtypes for batch in spec.batches]
    outcomes: list[Outcome | None] = []
    to_run = []
    for batch, dtype in cells:
        outcome = finished(skip, KIND, cell_spec(spec, batch, dtype, device))
        if outcome is not None:
            peaks.adopt(outcome)
        else:
            to_run.append(CellTrials(
                f"batch {batch} {dtype}",
                functools.partial(_trial, spec, batch, dtype, device, peaks),
                combine_block_trials, KIND, cell_spec(spec, batch, dtype, device)))
        outcomes.append(outcome)
    skipped = len(cells) - len(to_run)
    measured = iter(interleave(to_run, spec.trials, ORDER_SEED, sink, progress, skipped))
    done = [o if o is not None else next(measured) for o in outcomes]
    if progress:
        total = skipped + spec.trials * len(to_run)
        progress(total, total, "done")
    return done


def _trial(spec: BlockSpec, batch: int, dtype: str, device: torch.device, peaks: SweepPeaks,
           trial: int) -> Outcome:
    """One trial of a cell (every trial measures the same way: `trial` only orders them)."""
    return run_block_cell(spec, batch, dtype, device, lambda d: peaks.get(d).peak())


def run_block(spec: BlockSpec, sink: Sink, step: object, cell: Progress | None = None,
              skip: Skip | None = None) -> list[Outcome]:
    """The block workload's runner in the registry's form (a block has no per-step lines)."""
    return run_block_sweep(spec, sink, cell, skip)


def build_block_spec(options: BlockOptions) -> BlockSpec:
    """Options to a checked BlockSpec (ConfigError naming the option, before anything runs)."""
    spec = BlockSpec(
        model=resolve_model(options.model), seq_len=options.seq,
        batches=parse_int_list("batch", options.batch),
        dtypes=parse_choice_list("dtype", options.dtype, tuple(TORCH_DTYPES)),
        device=options.device, repeats=options.repeats, warmup=options.warmup,
        trials=_trials(options), disturbance_threshold=options.disturbance_threshold,
        compile=options.compile, tf32=options.tf32,
        mem_limit_bytes=parse_bytes("mem-limit", options.mem_limit) if options.mem_limit
        else None)
    return spec.validate()


def _trials(options: BlockOptions) -> int:
    """--trials as a number: as given, or auto's for the device (the device is resolved only
    for auto, after the value itself is checked)."""
    trials = parse_trials(options.trials)
    return trials if trials is not None else resolve_trials(None, resolve_device(options.device))
