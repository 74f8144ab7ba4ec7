"""The peak a utilisation is divided by: the datasheet's dense peak, else a measured GEMM peak.

Within a sweep (SweepPeaks) each precision's peak is decided once: a device with no datasheet
figure (a CPU) gets a GEMM peak measured with repetitions and their spread, stored as its own
record ('peak'), and handed to every cell (launched ranks receive it in their spec), so every MFU
of a sweep is divided by the same number and the caption names it. Across sweeps a recording
session offers the peak this machine measured before (`stored_peaks`): it is reused, so MFUs of
one machine stay comparable from sweep to sweep; `--remeasure-peak` measures it again.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import cache

import torch

from accelbench.bench.dtypes import parse_dtype, set_tf32
from accelbench.bench.outcome import Outcome
from accelbench.bench.peak_label import measured_label
from accelbench.bench.timing import PhaseTimer, run_timed
from accelbench.config.precision import resolve
from accelbench.config.record_kinds import metrics_dict
from accelbench.config.records.fields import PeakFields
from accelbench.config.records.peak import PeakMetrics
from accelbench.config.records.train import TrainMetrics
from accelbench.hardware.detect import detect_spec
from accelbench.hardware.specs import DeviceSpec


@dataclass(frozen=True)
class Peak:
    """A peak FLOP/s with where it came from, so every MFU says what it was divided by."""

    flops_per_s: float | None
    precision: str
    label: str  # "datasheet dense (<key>)", "measured peak (GEMM n=...)" or "none"
    sparse_flops_per_s: float | None = None  # the vendor's 2:4 sparse peak (never MFU's)
    clock_mhz: float | None = None  # the SM clock a datasheet peak is quoted at (specs.py)


TEST_PEAK_ENV = "ACCELBENCH_TEST_PEAK"  # tests/conftest.py: "quick"
TEST_GEMM_SIZE = 512  # the largest GEMM size of a peak the test suite measures


def quick_test_peak() -> bool:
    """Whether this process runs under the test suite's quick peak (TEST_PEAK_ENV): one attempt
    (the other test process disturbs every peak, so a retry would only add its pause) at GEMM
    sizes up to TEST_GEMM_SIZE (a 1024 fp32 peak is ~7 s of CPU, ~190 s over the suite); the
    record states the size and attempts it used, and the rule's own tests unset it."""
    return os.environ.get(TEST_PEAK_ENV) == "quick"


def gemm_size(device: torch.device) -> int:
    """GEMM size large enough to reach the device's plateau without a long run."""
    size = 8192 if device.type == "cuda" else 1024
    return min(size, TEST_GEMM_SIZE) if quick_test_peak() else size


def gemm_shapes(n: int) -> tuple[tuple[int, int, int], ...]:
    """(m, k, n) shapes tried: square, and the 1:4 shapes of a transformer MLP, whose rate on
    CPUs exceeds the square one's (a square-only "peak" gave block MFUs above 100%)."""
    return ((n, n, n), (n, n, 4 * n), (n, 4 * n, n))


GEMM_KERNELS = ("nn", "nt", "tn")  # a @ b; nn.Linear's x @ w.T; its weight gradient's g.T @ x


def gemm_call(device: torch.device, dtype: torch.dtype, kernel: str, m: int, k: int,
               cols: int) -> Callable[[], torch.Tensor]:
    """One (m x k) @ (k x cols) product in the memory layout `kernel` names.

    The layouts run different code on some devices (bf16 on an AVX2 CPU: x @ w.T, the layout of
    every nn.Linear forward, is ~10x faster than a plain a @ b), so a peak measured on one
    layout alone under-reads what the model's own matmuls reach and gives MFUs above 100%.
    """
    if kernel == "nn":
        a, b = (torch.randn(m, k, device=device, dtype=dtype),
                torch.randn(k, cols, device=device, dtype=dtype))
        return lambda: torch.mm(a, b)
    if kernel == "nt":
        x, w = (torch.randn(m, k, device=device, dtype=dtype),
                torch.randn(cols, k, device=device, dtype=dtype))
        return lambda: torch.nn.functional.linear(x, w)
    g, x = (torch.randn(k, m, device=device, dtype=dtype),
            torch.randn(k, cols, device=device, dtype=dtype))
    return lambda: torch.mm(g.t(), x)


def gemm_flops_per_s(device: torch.device, dtype: torch.dtype, kernel: str,
                      shape: tuple[int, int, int], repeats: int = 5, warmup: int = 2) -> float:
    """Best FLOP/s of one GEMM layout and (m, k, n) shape over `repeats` timed calls."""
    call = gemm_call(device, dtype, kernel, *shape)

    def step(timer: PhaseTimer) -> None:
        with timer.phase("gemm"):
            call()

    best_s = run_timed(step, device, warmup=warmup, repeats=repeats)["gemm"].min_s
    return 2.0 * shape[0] * shape[1] * shape[2] / best_s


@cache
def fastest_layout(device_str: str, dtype_name: str, tf32: bool) -> str:
    """The GEMM_KERNELS layout this device runs fastest in this dtype, from warmed 256^3
    products (cheap even where a slow layout is emulated; the peak then measures this one)."""
    device = torch.device(device_str)
    set_tf32(device, tf32)
    dtype = parse_dtype(dtype_name)
    rates = {kernel: gemm_flops_per_s(device, dtype, kernel, (256, 256, 256), repeats=3,
                                       warmup=1) for kernel in GEMM_KERNELS}
    return max(rates, key=rates.__getitem__)


def fitting_gemm_size(device: torch.device, dtype: str, tf32: bool) -> int:
    """Largest size up to gemm_size whose largest GEMM (4 n^3 multiply-adds) takes under 0.2 s
    in the fastest layout, from a warmed probe (a cold one picked n = 512 or 1024 at random)."""
    kernel = fastest_layout(str(device), dtype, tf32)
    n = gemm_size(device)
    while n > 128:
        rate = gemm_flops_per_s(device, parse_dtype(dtype), kernel, (n, n, n), repeats=2,
                                 warmup=1)
        if 8.0 * n**3 / rate < 0.2:
            break
        n //= 2
    return n


def resolve_peak(spec: DeviceSpec | None, device: torch.device, dtype: str, tf32: bool,
                 measure: bool = True) -> Peak:
    """Datasheet dense peak for the precision that ran; else a measured GEMM peak, labelled
    (measure_peak's best repetition), or none when measure is False."""
    precision = resolve(dtype, tf32, device.type).gemm_peak  # "fp8": the FP8 column
    if spec is not None:
        flops = spec.peak_flops_per_s(precision)
        if flops:
            return Peak(flops, precision, f"datasheet dense ({spec.key})",
                        spec.sparse_peak_flops_per_s(precision), spec.peak_clock_mhz)
    if not measure:
        return Peak(None, precision, "none")
    metrics, _ = measure_peak(device, dtype, tf32)
    return Peak(metrics.peak_flops_per_s_per_device, precision, measured_label(metrics))


def fp8_datasheet_peak(device: torch.device) -> float | None:
    """The device table's dense FP8 peak, beside an fp8 cell's MFU (which is over the BF16
    peak); never measured: where float8 units are absent a GEMM probe would time emulation."""
    return resolve_peak(detect_spec(device), device, "fp8", False, measure=False).flops_per_s


PEAK_KIND = "peak"
PEAK_REPETITIONS = 5


@dataclass(frozen=True)
class SweepPeak:
    """A precision's peak as the sweep decided it (serialisable for launched ranks)."""

    dtype: str
    flops_per_s: float | None
    precision: str
    label: str
    sparse_flops_per_s: float | None = None
    clock_mhz: float | None = None  # a datasheet peak's own clock

    def peak(self) -> Peak:
        """As the metrics builders take it."""
        return Peak(self.flops_per_s, self.precision, self.label, self.sparse_flops_per_s,
                    self.clock_mhz)


def _threads(threads: int | None) -> int:
    """The intra-op threads the measurement runs with (a rank's own, when given)."""
    return threads or torch.get_num_threads()


PEAK_ATTEMPTS = 3  # measurements of a peak in all while each is disturbed
PEAK_PAUSE_S = 2.0  # the pause before measuring a disturbed peak again
def peak_attempts() -> int:
    """PEAK_ATTEMPTS, or 1 under the test suite's quick peak (quick_test_peak); the rule's own
    tests pass their attempts to `settled`."""
    return 1 if quick_test_peak() else PEAK_ATTEMPTS


@dataclass(frozen=True)
class PeakAttempt:
    """One measurement of a peak: its metrics, every repetition's rate, and whether other work
    used the machine meanwhile (None: could not be judged)."""

    metrics: PeakMetrics
    rates: list[float]
    disturbed: bool | None


def settled(measure: Callable[[], PeakAttempt], attempts: int = PEAK_ATTEMPTS,
            pause: Callable[[], None] = lambda: time.sleep(PEAK_PAUSE_S)) -> PeakAttempt:
    """Measure until an attempt is undisturbed, pausing between, at most `attempts` times; the
    undisturbed one, else the fastest disturbed one flagged; `attempts` made, in its metrics."""
    made: list[PeakAttempt] = []
    while len(made) < attempts:
        if made:
            pause()
        made.append(measure())
        if not made[-1].disturbed:
            break
    last = made[-1]
    kept = last if not last.disturbed else max(
        made, key=lambda a: a.metrics.peak_flops_per_s_per_device or 0.0)
    return replace(kept, metrics=replace(kept.metrics, disturbed=kept.disturbed,
                                         attempts=len(made)))


def _probe() -> object | None:
    """A started disturbance probe, or None where one cannot be made."""
    from accelbench.hardware.disturbance import DisturbanceProbe

    try:
        probe = DisturbanceProbe()
        probe.start()
    except Exception:  # noqa: BLE001 - a probe never fails a measurement
        return None
    return probe


def _disturbed(probe: object | None) -> bool | None:
    """The window's verdict, None where the probe could not judge it."""
    try:
        return None if probe is None else probe.stop().disturbed  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - a probe never fails a measurement
        return None


def _measure_once(device: torch.device, dtype: str, tf32: bool, threads: int) -> PeakAttempt:
    """One measurement: the fastest layout over the model's shapes, PEAK_REPETITIONS times,
    inside one disturbance window."""
    n = fitting_gemm_size(device, dtype, tf32)
    kernel = fastest_layout(str(device), dtype, tf32)
    probe = _probe()
    rates = [max(gemm_flops_per_s(device, parse_dtype(dtype), kernel, shape)
                 for shape in gemm_shapes(n)) for _ in range(PEAK_REPETITIONS)]
    disturbed = _disturbed(probe)
    ordered = sorted(rates)
    return PeakAttempt(PeakMetrics(
        peak_flops_per_s_per_device=ordered[-1], peak_flops_per_s_median=ordered[len(ordered) // 2],
        peak_flops_per_s_min=ordered[0], repetitions=len(rates), gemm_n=n, gemm_layout=kernel,
        threads=threads), rates, disturbed)


def measure_peak(device: torch.device, dtype: str, tf32: bool, threads: int | None = None,
                 attempts: int | None = None) -> tuple[PeakMetrics, list[float]]:
    """The fastest GEMM layout over the model's shapes, PEAK_REPETITIONS times; the best
    repetition is the peak, the others its spread. Runs with `threads` intra-op threads; a
    measurement other work disturbed is made again (settled)."""
    before = torch.get_num_threads()
    torch.set_num_threads(_threads(threads))
    try:
        kept = settled(lambda: _measure_once(device, dtype, tf32, _threads(threads)),
                       attempts or peak_attempts())
    finally:
        torch.set_num_threads(before)
    return kept.metrics, kept.rates


def peak_of(outcome: Outcome) -> SweepPeak | None:
    """The peak a finished cell's utilisation was divided by, or None where it had none (a
    cell refused or failed): a resumed sweep divides the cells it runs by the same peak."""
    m, dtype = outcome.typed, outcome.setup.dtype
    if not isinstance(m, PeakFields):  # a peak record itself, a profile, ...: no cell's peak
        return None
    if not dtype or m.peak_flops_per_s_per_device is None or not m.peak_label:
        return None
    sparse = m.sparse_peak_flops_per_s_per_device if isinstance(m, TrainMetrics) else None
    return SweepPeak(dtype, m.peak_flops_per_s_per_device, m.peak_precision, m.peak_label,
                     sparse)


PeakLookup = Callable[[dict], "SweepPeak | None"]
"""A peak this machine measured before for a peak record's spec (dtype, precision, tf32,
threads), or None: offered by the recording session, which holds the store."""

_lookups: list[PeakLookup] = []  # the recording sessions' stored peaks, innermost last


@contextlib.contextmanager
def stored_peaks(lookup: PeakLookup) -> Iterator[None]:
    """Within the block a peak to be measured is first looked up with `lookup` (one peak per
    machine, reused by every later sweep on it)."""
    _lookups.append(lookup)
    try:
        yield
    finally:
        _lookups.pop()


def _stored(spec: dict) -> SweepPeak | None:
    """The stored peak the innermost session offers for this peak spec, if any."""
    return _lookups[-1](spec) if _lookups else None


def _key(dtype: str) -> str:
    """The precision a cell of `dtype` is held to a peak in: its compute dtype (fp8: bf16)."""
    return resolve(dtype).compute


class SweepPeaks:
    """Each precision's peak for one sweep, decided at its first use; a measured one is sent
    to `sink` as a 'peak' outcome (the record id, when the sink returns a record, is named in
    the label)."""

    def __init__(self, device: torch.device, tf32: bool, sink: Callable[[Outcome], object],
                 threads: int | None = None, known: tuple[SweepPeak, ...] = (),
                 attempts: int | None = None) -> None:
        self.device, self.tf32, self.sink, self.threads = device, tf32, sink, threads
        self.attempts = attempts  # 1 under a process group: its own waiting ranks disturb it
        self._peaks = {_key(p.dtype): p for p in known}  # fp8 cells: the bf16 peak

    def get(self, dtype: str) -> SweepPeak:
        """The sweep's peak for this precision (an fp8 cell's MFU is over the BF16 peak)."""
        dtype = _key(dtype)
        if dtype not in self._peaks:
            self._peaks[dtype] = self._decide(dtype)
        return self._peaks[dtype]

    def adopt(self, finished: Outcome) -> None:
        """Take the peak of a cell the sweep skipped (finished before) for its precision, if
        none is decided yet: one peak per precision across a resumed sweep, not measured twice."""
        peak = peak_of(finished)
        if peak is not None:  # an fp8 cell's is its bf16 peak (its compute dtype)
            self._peaks.setdefault(_key(peak.dtype), peak)

    def all(self) -> tuple[SweepPeak, ...]:
        """Every peak decided so far (to hand to launched ranks)."""
        return tuple(self._peaks.values())

    def _decide(self, dtype: str) -> SweepPeak:
        """Datasheet, else measured now and recorded."""
        sheet = resolve_peak(detect_spec(self.device), self.device, dtype, self.tf32,
                             measure=False)
        if sheet.flops_per_s is not None:
            return SweepPeak(dtype, sheet.flops_per_s, sheet.precision, sheet.label,
                             sheet.sparse_flops_per_s, sheet.clock_mhz)
        spec = {"workload": PEAK_KIND, "device": str(self.device), "dtype": dtype,
                "precision": sheet.precision, "tf32": self.tf32, "threads": _threads(self.threads)}
        reused = _stored(spec)
        if reused is not None:
            return reused
        metrics, rates = measure_peak(self.device, dtype, self.tf32, self.threads,
                                      self.attempts)
        stored = self.sink(Outcome(PEAK_KIND, "ok", spec, metrics_dict(metrics),
                                   {"flops_per_s": rates}))
        record = f", record {stored.id}" if getattr(stored, "id", None) is not None else ""
        return SweepPeak(dtype, metrics.peak_flops_per_s_per_device, sheet.precision,
                         measured_label(metrics, record))


def detect_here(device: str, measure: bool) -> dict:
    """What `accelbench hw` found on this machine: the device, its name, its datasheet row and
    environment, and, when measured or without a row, each precision's peak with its label."""
    from accelbench.config.vocab import DTYPES
    from accelbench.hardware.detect import device_name, resolve_device
    from accelbench.hardware.environment import environment

    dev = resolve_device(device)
    spec = detect_spec(dev)
    detected = {"device": str(dev), "name": device_name(dev), "spec": spec.key if spec else None,
                "environment": environment(dev)}
    if measure or spec is None:
        peaks = {d: resolve_peak(spec, dev, d, tf32=False, measure=measure) for d in DTYPES}
        detected["peaks"] = {d: {"tflops": p.flops_per_s and p.flops_per_s / 1e12,
                                 "label": p.label} for d, p in peaks.items()}
    return detected
