"""`accelbench check`: what of accelbench works on this device, one feature at a time.

Each probe is a small function of a `CheckSettings`; it returns what it found (a line of text
and a few values), raises `NotHere` when the feature does not exist on this device (with the
reason), and any other exception is that feature failing. `run_check` isolates every probe, so
a missing or broken feature is one line of the matrix, never a crash; the matrix is one
'check' outcome (config.schema CheckMetrics). Sizes are small: seconds on a CPU.
"""

from __future__ import annotations

import socket
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.bench.outcome import Outcome, Progress
from accelbench.config.schema import CheckMetrics, metrics_dict

KIND = "check"
OK, UNAVAILABLE, FAILED = "ok", "unavailable", "failed"
STATUSES = (OK, UNAVAILABLE, FAILED)
MATMUL_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
SDPA_BACKENDS = ("flash", "efficient", "cudnn", "math")  # torch's priority order, roughly
_SDPA_ENUM = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
              "cudnn": "CUDNN_ATTENTION", "math": "MATH"}


class NotHere(Exception):  # noqa: N818 - a result ('unavailable'), not an error
    """The feature does not exist on this device or install; the message says why."""


@dataclass(frozen=True)
class CheckSettings:
    """The device a check runs on and its sizes (small on a CPU, the paper's head on a GPU)."""

    device: torch.device
    matmul_n: int = 256
    matmul_repeats: int = 3
    attention_shape: tuple[int, int, int, int] = (1, 4, 256, 64)  # batch, heads, seq, head
    compile_backend: str = "inductor"
    energy_window_s: float = 0.5


def settings_for(device: torch.device, compile_backend: str = "inductor") -> CheckSettings:
    """Sizes for this device: a GPU gets GEMMs and attention big enough to reach its units."""
    if device.type == "cpu":
        return CheckSettings(device, compile_backend=compile_backend)
    return CheckSettings(device, matmul_n=4096, matmul_repeats=10,
                         attention_shape=(8, 25, 1024, 64), compile_backend=compile_backend)


@dataclass(frozen=True)
class Feature:
    """One line of the matrix."""

    name: str
    status: str  # ok, unavailable, failed
    detail: str  # what was found, or why not
    seconds: float
    values: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """As the record stores it."""
        return {"name": self.name, "status": self.status, "detail": self.detail,
                "seconds": self.seconds, "values": self.values}


Found = tuple[str, dict[str, Any]]
Probe = Callable[[CheckSettings], Found]


def _sync(device: torch.device) -> None:
    """Wait for the device (hardware.device)."""
    from accelbench.hardware import device as devices

    devices.synchronize(device)


def probe_device(s: CheckSettings) -> Found:
    """The device's name, and the hardware-table row it matches (or why none)."""
    from accelbench.hardware.detect import detect_spec, device_name

    name = device_name(s.device)
    spec = detect_spec(s.device)
    if spec is not None:
        return f"{name} ({s.device}) -> {spec.key}", {"name": name, "spec": spec.key}
    why = ("CPUs have no row: MFU uses a measured GEMM peak" if s.device.type == "cpu"
           else "no row in the hardware table: MFU uses a measured GEMM peak")
    return f"{name} ({s.device}) -> none ({why})", {"name": name, "spec": None}


def probe_memory(s: CheckSettings) -> Found:
    """The allocator's peak counter sees a 64 MiB tensor (malloc's bytes in use on a CPU)."""
    from accelbench.hardware import device as devices

    how = devices.memory_reporting(s.device)
    if how is None:
        raise NotHere(devices.memory_unavailable_reason(s.device) or "no memory statistics")
    size = 64 * 2**20
    devices.reset_peak(s.device)
    held = torch.empty(size, dtype=torch.uint8, device=s.device).fill_(1)
    _sync(s.device)
    peak = devices.max_allocated_bytes(s.device)
    now = devices.allocated_bytes(s.device)
    del held
    if peak is None:  # the CPU: PeakMemory samples host memory, there is no counter to reset
        return f"{how}: {now / 2**20:.0f} MiB now", {"method": how, "allocated_bytes": now}
    if peak < size:
        raise RuntimeError(f"peak {peak} B is below the 64 MiB tensor just made ({how})")
    return (f"{how}: peak {peak / 2**20:.0f} MiB with a 64 MiB tensor held",
            {"method": how, "peak_bytes": peak})


def _timed_s(s: CheckSettings, work: Callable[[], Any], repeats: int) -> float:
    """The median seconds of `work` after one untimed call, timed by the runner's run_timed
    (events on accelerators, the device synchronised at the window's edges)."""
    from accelbench.bench.timing import PhaseTimer, run_timed

    def step(timer: PhaseTimer) -> None:
        with timer.phase("work"):
            work()

    return run_timed(step, s.device, warmup=1, repeats=repeats)["work"].median_s


def probe_timing(s: CheckSettings) -> Found:
    """Windows are timed as the runner times them and a matmul takes a positive time."""
    from accelbench.hardware import device as devices

    a = torch.randn(s.matmul_n, s.matmul_n, device=s.device)
    seconds = _timed_s(s, lambda: a @ a, 3)
    how = ("device events" if devices.has_timing_events(s.device)
           else "synchronise + perf_counter")
    if not seconds > 0:
        raise RuntimeError(f"a {s.matmul_n}^3 matmul timed {seconds} s by {how}")
    return f"{how}: {s.matmul_n}^3 matmul {seconds * 1e3:.3f} ms", {"method": how}


@contextmanager
def _tf32(device: torch.device, allow: bool) -> Iterator[None]:
    """TF32 matmuls allowed (or not) inside, restored after."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allow
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _matmul_problem(device: torch.device, precision: str) -> str | None:
    """Why this precision has no matmul here, or None."""
    from accelbench.bench.dtypes import dtype_support

    if precision == "tf32":
        if device.type != "cuda" or torch.version.hip:
            return f"tf32 is an NVIDIA matmul mode ({device.type} here)"
        major, minor = torch.cuda.get_device_capability(device)
        return None if major >= 8 else f"compute capability {major}.{minor} (tf32 needs 8.0+)"
    return dtype_support(device, precision)


def probe_matmul(precision: str) -> Probe:
    """A square matmul in `precision` and its achieved TFLOPS (with the datasheet's share)."""

    def probe(s: CheckSettings) -> Found:
        from accelbench.bench.dtypes import TORCH_DTYPES

        problem = _matmul_problem(s.device, precision)
        if problem:
            raise NotHere(problem)
        dtype = TORCH_DTYPES["fp32" if precision == "tf32" else precision]
        a = torch.randn(s.matmul_n, s.matmul_n, device=s.device, dtype=dtype)
        with _tf32(s.device, precision == "tf32"):
            seconds = _timed_s(s, lambda: a @ a, s.matmul_repeats)
        tflops = 2 * s.matmul_n**3 / seconds / 1e12
        return (f"{tflops:.3f} TFLOPS at n={s.matmul_n}{_share(s.device, precision, tflops)}",
                {"tflops": tflops, "n": s.matmul_n})

    probe.__doc__ = f"A {precision} matmul and its achieved TFLOPS."
    return probe


def _share(device: torch.device, precision: str, tflops: float) -> str:
    """'; 61% of the datasheet's dense <precision> peak (<key>)', or nothing without a row."""
    from accelbench.hardware.detect import detect_spec

    spec = detect_spec(device)
    peak = spec.peak_tflops.get(precision) if spec else None
    return f"; {tflops / peak:.0%} of the dense {precision} peak ({spec.key})" if peak else ""


def probe_attention(backend: str) -> Probe:
    """Whether SDPA's `backend` runs a causal bf16 (fp16 where bf16 is not) shape here."""

    def probe(s: CheckSettings) -> Found:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        wanted = getattr(SDPBackend, _SDPA_ENUM[backend], None)
        if wanted is None:
            raise NotHere(f"this torch {torch.__version__} has no {_SDPA_ENUM[backend]}")
        q = _attention_input(s)
        chosen = _sdpa_choice(q)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            try:
                with sdpa_kernel([wanted]):
                    F.scaled_dot_product_attention(q, q, q, is_causal=True)
            except RuntimeError as err:  # torch says why in warnings, the error is generic
                why = [str(w.message).splitlines()[0] for w in said if "kernel" in str(w.message)]
                raise NotHere("; ".join(why[:2]) or _no_kernel(backend, q, err)) from None
        _sync(s.device)
        used = "; torch picks it by default" if chosen == backend else (
            f"; torch picks {chosen} by default" if chosen else "")
        return (f"runs {q.dtype} {tuple(q.shape)} causal{used}",
                {"default_backend": chosen, "shape": list(q.shape)})

    probe.__doc__ = f"Whether SDPA's {backend} backend runs here."
    return probe


def _no_kernel(backend: str, q: torch.Tensor, err: RuntimeError) -> str:
    """Why SDPA refused a backend when torch gave no warning saying so."""
    if "No viable backend" in str(err):
        return (f"torch has no {backend} kernel for {q.device.type} {q.dtype} "
                f"{tuple(q.shape)} causal")
    return _first_line(err)


def _attention_input(s: CheckSettings) -> torch.Tensor:
    """A (batch, heads, seq, head) query in bf16, or fp16 where bf16 does not run."""
    from accelbench.bench.dtypes import dtype_support

    dtype = torch.bfloat16 if dtype_support(s.device, "bf16") is None else torch.float16
    return torch.randn(*s.attention_shape, device=s.device, dtype=dtype)


def _sdpa_choice(q: torch.Tensor) -> str | None:
    """The backend torch's dispatcher picks for causal attention of q (torch._fused_sdp_choice),
    or None where this torch does not say."""
    from torch.nn.attention import SDPBackend

    choose = getattr(torch, "_fused_sdp_choice", None)
    if choose is None:
        return None
    index = choose(q, q, q, None, 0.0, True)
    names = {getattr(SDPBackend, enum, None): name for name, enum in _SDPA_ENUM.items()}
    return names.get(SDPBackend(index), str(SDPBackend(index)))


def _first_line(err: BaseException) -> str:
    """An exception as one short line."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:200] if text else ''}"


def _tiny_block(s: CheckSettings) -> nn.Module:
    """One GPT-2 tiny block on the device (the model's own Block)."""
    from accelbench.config.presets import resolve_model
    from accelbench.models.gpt import Block

    return Block(resolve_model("gpt2-tiny")).to(s.device)


def probe_compile(s: CheckSettings) -> Found:
    """torch.compile of one block, forward and backward, agrees with eager."""
    block = _tiny_block(s)
    x = torch.randn(2, 64, block.ln_1.normalized_shape[0], device=s.device, requires_grad=True)
    eager = block(x)
    torch._dynamo.reset()  # a fresh cache: this compile is this probe's own
    compiled = torch.compile(block, backend=s.compile_backend)
    start = time.perf_counter()
    y = compiled(x)
    y.sum().backward()
    _sync(s.device)
    seconds = time.perf_counter() - start
    err = (y - eager).abs().max().item()
    torch._dynamo.reset()
    if not err < 1e-3:
        raise RuntimeError(f"compiled block differs from eager by {err:.3g}")
    return (f"{s.compile_backend}: forward+backward compiled in {seconds:.1f} s, "
            f"max |compiled - eager| {err:.1e}", {"backend": s.compile_backend})


def probe_fused_adamw(s: CheckSettings) -> Found:
    """torch.optim.AdamW(fused=True) takes a step here."""
    weight = nn.Parameter(torch.ones(256, device=s.device))
    opt = torch.optim.AdamW([weight], lr=0.1, fused=True)
    weight.grad = torch.ones_like(weight)
    opt.step()
    _sync(s.device)
    if not bool((weight < 1).all()):
        raise RuntimeError("the fused step did not move the weight")
    return "AdamW(fused=True) stepped", {}


def probe_fp8(s: CheckSettings) -> Found:
    """torchao float8 training of a linear layer: on float8 units, or emulated."""
    from accelbench.bench.dtypes import fp8_mode
    from accelbench.config.errors import ConfigError
    from accelbench.models.float8 import float8_config, torchao_float8

    try:
        float8 = torchao_float8()
    except ConfigError as err:
        raise NotHere(err.problem) from None
    mode, why = fp8_mode(s.device)
    model = nn.Sequential(nn.Linear(64, 64)).to(s.device)
    float8.convert_to_float8_training(model, config=float8_config(
        "tensorwise", mode != "native", False))
    x = torch.randn(32, 64, device=s.device, dtype=torch.bfloat16)
    with torch.autocast(s.device.type, dtype=torch.bfloat16):
        model(x).float().sum().backward()
    _sync(s.device)
    if model[0].weight.grad is None:
        raise RuntimeError("no gradient reached the float8 layer")
    return f"{mode}: {why}", {"mode": mode}


def memory_order(t: torch.Tensor) -> str:
    """How a matrix's rows lie in memory: a check line never calls a transposed output row-major."""
    if t.is_contiguous():
        return "row-major"
    rows = t.flatten(0, -2)  # a view where the leading dims merge; a copy (row-major) if not
    if rows.stride(0) == 1 and rows.stride(1) == rows.shape[0]:
        return "column-major"
    return "neither row- nor column-major"


def probe_two_four(s: CheckSettings) -> Found:
    """torch's 2:4 semi-structured kernels: a compressed linear equals the dense one."""
    from accelbench.models.semi_structured import device_problem, kernel_backend
    from accelbench.models.sparsity import transposable_two_four_mask

    problem = device_problem(s.device, "bf16")
    if problem:
        raise NotHere(problem)
    w = torch.randn(128, 128, device=s.device, dtype=torch.bfloat16)
    w = w * transposable_two_four_mask(w.float().abs())
    x = torch.randn(2, 64, 128, device=s.device, dtype=torch.bfloat16)
    y = F.linear(x, torch.sparse.to_sparse_semi_structured(w))
    err = (y - F.linear(x, w)).abs().max().item()
    if not err < 0.5:
        raise RuntimeError(f"sparse result differs from dense by {err:.3g}")
    layout = f"{memory_order(y)}, strides {tuple(y.stride())}"
    return (f"{kernel_backend()}: bf16 linear, max error {err:.2g}, output {layout}",
            {"backend": kernel_backend(), "output_contiguous": y.is_contiguous()})


def probe_energy(s: CheckSettings) -> Found:
    """The energy counter opens, reads, and advances over a short busy window."""
    from accelbench.hardware.energy.choose import open_source
    from accelbench.hardware.energy.source import Unavailable

    source = open_source(s.device)
    if isinstance(source, Unavailable):
        raise NotHere(source.reason)
    try:
        first = sum(source.read_j())
        window = max(s.energy_window_s, 5 * source.interval_s)
        a = torch.randn(s.matmul_n, s.matmul_n, device=s.device)
        end = time.perf_counter() + window
        while time.perf_counter() < end:
            a = (a @ a).clamp_(-1, 1)
            _sync(s.device)
        joules = sum(source.read_j()) - first
    finally:
        source.close()
    if not joules > 0:
        raise RuntimeError(f"{source.name}: counter did not advance over {window:.2f} s")
    return (f"{source.name}: {joules:.2f} J over {window:.2f} s ({', '.join(source.devices)})",
            {"source": source.name, "joules": joules})


def _free_port() -> int:
    """A TCP port nothing listens on now, for a one-rank group's store."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def _one_rank_group(device: torch.device) -> Iterator[str]:
    """A process group of this process alone on the device's backend; yields the backend."""
    import datetime

    import torch.distributed as dist

    from accelbench.parallel.dist import backend_for, init_kwargs

    if not dist.is_available():
        raise NotHere("this torch is built without torch.distributed")
    if dist.is_initialized():
        raise NotHere("a process group exists already (run check outside torchrun)")
    backend = backend_for(device)
    dist.init_process_group(backend=backend, init_method=f"tcp://127.0.0.1:{_free_port()}",
                            rank=0, world_size=1, timeout=datetime.timedelta(seconds=60),
                            **init_kwargs(backend, device))
    try:
        yield backend
    finally:
        dist.destroy_process_group()


def probe_collective(s: CheckSettings) -> Found:
    """A one-rank group on the device's backend (NCCL, RCCL, gloo) all-reduces a tensor."""
    import torch.distributed as dist

    with _one_rank_group(s.device) as backend:
        t = torch.full((1024,), 2.0, device=s.device)
        dist.all_reduce(t)
        _sync(s.device)
        if float(t[0]) != 2.0:
            raise RuntimeError(f"{backend} all_reduce over one rank gave {float(t[0])}")
    label = "rccl" if backend == "nccl" and torch.version.hip else backend
    return f"{label}: one-rank all_reduce", {"backend": label}


def probe_fsdp2(s: CheckSettings) -> Found:
    """FSDP2's fully_shard over a one-rank mesh: DTensor parameters, a forward and backward."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    with _one_rank_group(s.device) as backend:
        mesh = init_device_mesh(s.device.type, (1,))
        model = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 64)).to(s.device)
        fully_shard(model, mesh=mesh)
        if not isinstance(model[0].weight, DTensor):
            raise RuntimeError("fully_shard left plain tensors")
        model(torch.randn(8, 64, device=s.device)).sum().backward()
        _sync(s.device)
    return f"fully_shard on {backend}: DTensor parameters, forward and backward", {}


PROBES: tuple[tuple[str, Probe], ...] = (
    ("device", probe_device),
    ("memory", probe_memory),
    ("timing", probe_timing),
    *((f"matmul_{p}", probe_matmul(p)) for p in MATMUL_PRECISIONS),
    *((f"attention_{b}", probe_attention(b)) for b in SDPA_BACKENDS),
    ("compile", probe_compile),
    ("fused_adamw", probe_fused_adamw),
    ("fp8", probe_fp8),
    ("sparse_2to4", probe_two_four),
    ("energy", probe_energy),
    ("collective", probe_collective),
    ("fsdp2", probe_fsdp2),
)
PROBE_NAMES = tuple(name for name, _ in PROBES)


def run_probe(name: str, probe: Probe, settings: CheckSettings) -> Feature:
    """One probe, isolated: its result, 'unavailable' with the reason, or 'failed' with the
    error; never raises (but for KeyboardInterrupt and SystemExit)."""
    start = time.perf_counter()
    try:
        detail, values = probe(settings)
        status = OK
    except NotHere as why:
        detail, values, status = str(why), {}, UNAVAILABLE
    except Exception as err:  # noqa: BLE001 - any failure of a feature is that feature's line
        detail, values, status = _first_line(err), {}, FAILED
    return Feature(name, status, detail, round(time.perf_counter() - start, 3), values)


def run_check(settings: CheckSettings, probes: tuple[tuple[str, Probe], ...] | None = None,
              progress: Progress | None = None) -> Outcome:
    """Every probe (default: PROBES) in order, into one 'check' outcome (status ok: the matrix
    was made)."""
    probes = PROBES if probes is None else probes
    start = time.perf_counter()
    features = []
    for i, (name, probe) in enumerate(probes):
        if progress:
            progress(i, len(probes), name)
        features.append(run_probe(name, probe, settings))
    return check_outcome(settings, features, time.perf_counter() - start)


def check_outcome(settings: CheckSettings, features: list[Feature], seconds: float) -> Outcome:
    """The record's outcome: the spec (device, sizes), the features, the counts."""
    counts = {status: sum(f.status == status for f in features) for status in STATUSES}
    metrics = CheckMetrics(features=[f.to_dict() for f in features], features_ok=counts[OK],
                           features_unavailable=counts[UNAVAILABLE],
                           features_failed=counts[FAILED], check_time_s=round(seconds, 3))
    failed = [f.name for f in features if f.status == FAILED]
    spec = {"device": str(settings.device), "matmul_n": settings.matmul_n,
            "attention_shape": list(settings.attention_shape),
            "compile_backend": settings.compile_backend,
            "probes": [f.name for f in features]}
    return Outcome(KIND, OK, spec, metrics_dict(metrics),
                   reason=f"failed: {', '.join(failed)}" if failed else "")
