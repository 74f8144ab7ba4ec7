"""What a calibration measures: the options as typed, checked in full (ConfigError, exit 2)
before anything runs, and the defaults that keep a CPU run near a minute."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields

from accelbench.analytics.kernels import COLLECTIVE_OPS, GEMM_PASSES, STREAM_OPS
from accelbench.config.errors import ConfigError, require_count
from accelbench.config.model import ModelConfig
from accelbench.config.option_fields import option
from accelbench.config.presets import resolve_model
from accelbench.config.units import COUNT_BOUNDS, parse_bytes, parse_choice_list, parse_int_list
from accelbench.config.vocab import DTYPES

OPS = ("gemm", "attention", "memory", "loss", "embedding", "optimizer", "collective")
KIND = "profile"
FP32_BYTES = 4  # memory and collective buffers are fp32
# (full, quick) defaults; accelerators add larger sizes, where their curves flatten
_DEFAULTS = {
    "tokens": ("128,512,2048", "128,512"),
    "seq": ("256,512,1024", "128,256"),
    "memory_sizes": ("16MiB,64MiB", "4MiB,16MiB"),
    "message_sizes": ("4KiB,16KiB,64KiB,256KiB,1MiB,4MiB,16MiB,64MiB", "4KiB,64KiB,1MiB"),
    "optimizer_params": ("16M,128M", "1M,4M"),
}
_ACCELERATOR_EXTRA = {"tokens": ",8192", "seq": ",4096", "memory_sizes": ",1GiB",
                      "message_sizes": ",256MiB", "optimizer_params": ",1G"}
_COUNT_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9}


@dataclass(frozen=True)
class CalibrateOptions:
    """The options of `accelbench calibrate` as typed ('' takes the default)."""

    device: str = option("auto", "auto, cpu, cuda, cuda:N, xpu, mps.")
    ops: str = option(",".join(OPS), "Comma-separated micro-benchmarks.")
    dtype: str = option("fp32,bf16", "GEMM and attention precisions.")
    model: str = option("gpt2", "Preset whose layer GEMM shapes are timed.")
    tokens: str = option("", "GEMM rows (batch x sequence), e.g. 128,512,2048.")
    gemm_passes: str = option(",".join(GEMM_PASSES), "Products of a linear layer.")
    seq: str = option("", "Attention sequence lengths, e.g. 256,512,1024.")
    head_dim: str = option("", "Attention head sizes (default: the model's).")
    memory_ops: str = option(",".join(STREAM_OPS), "Streaming ops: copy, adamw.")
    memory_sizes: str = option("", "fp32 buffer sizes, e.g. 16MiB,64MiB.")
    collectives: str = option(",".join(COLLECTIVE_OPS), "Collectives to time.")
    message_sizes: str = option("", "Collective message sizes, e.g. 4KiB,1MiB.")
    optimizer_params: str = option("", "Optimizer update sizes, e.g. 16M,128M.")
    # 0: every device of the kind (two CPU processes on a CPU)
    nproc: int = option(0, "Collective processes (0: every device; 2 on a CPU).")
    # CPU threads of the single-device points; 0: torch's default
    threads: int = option(0, "CPU threads of GEMM, attention, memory (0: torch's).")
    repeats: int = option(5, "Timed repetitions per point.")
    warmup: int = option(2, "Untimed warm-up calls per point.")
    timeout_s: float = option(300.0, "Seconds the collectives may take.", "--timeout")
    quick: bool = option(False, "Fewer, smaller sizes (seconds on a CPU).", "--quick")
    # compute points on every launched rank at once (CPU ranks)
    concurrent: bool = option(False, "Compute points on all --nproc ranks at once, one thread "
                              "each (a launched rank's view).", "--concurrent")
    from_block: bool = option(False, "Measure nothing: store the newest profile (at --threads) "
                              "plus the block records.", "--from-block")


@dataclass(frozen=True)
class CalibrateSpec:
    """A checked calibration: sizes as numbers, the model's layer shapes to time."""

    device: str
    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    model: ModelConfig
    tokens: tuple[int, ...]
    gemm_passes: tuple[str, ...]
    seqs: tuple[int, ...]
    head_dims: tuple[int, ...]
    memory_ops: tuple[str, ...]
    memory_bytes: tuple[int, ...]
    collectives: tuple[str, ...]
    message_bytes: tuple[int, ...]
    optimizer_params: tuple[int, ...]
    nproc: int
    threads: int
    repeats: int
    warmup: int
    timeout_s: float
    quick: bool
    concurrent: bool = False

    def to_dict(self) -> dict:
        """The record's spec (the model as its config)."""
        data = asdict(self)
        data["model"] = self.model.to_dict()
        data["workload"] = KIND
        return data


def spec_from_dict(data: dict) -> CalibrateSpec:
    """A spec back from to_dict (a launched rank's job)."""
    names = {f.name for f in fields(CalibrateSpec)}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in names}
    return CalibrateSpec(**{**values, "model": ModelConfig(**data["model"])})


def build_calibrate(options: CalibrateOptions) -> CalibrateSpec:
    """build_calibrate_spec for the device the options name (resolved now: torch)."""
    from accelbench.hardware.detect import resolve_device

    return build_calibrate_spec(options, resolve_device(options.device).type)


def _default(name: str, options: CalibrateOptions, accelerator: bool) -> str:
    """The typed value, else the default of this size of run and device."""
    typed = getattr(options, name)
    if typed:
        return typed
    text = _DEFAULTS[name][1 if options.quick else 0]
    return text + (_ACCELERATOR_EXTRA[name] if accelerator and not options.quick else "")


def parse_byte_list(field: str, text: str) -> tuple[int, ...]:
    """'4KiB,1MiB' -> (4096, 1048576): each a size, given once, ascending order kept as typed."""
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or "" in items:
        raise ConfigError(field, f"needs sizes separated by commas, got {text!r}",
                          "e.g. 4KiB,1MiB,64MiB")
    sizes = tuple(parse_bytes(field, item) for item in items)
    if len(set(sizes)) != len(sizes):
        raise ConfigError(field, f"a size given twice in {text!r}", "each size once")
    return sizes


def parse_count_list(field: str, text: str) -> tuple[int, ...]:
    """'16M,128M' -> (16000000, 128000000): positive counts with an optional K, M or G
    (powers of ten), each given once."""
    items = [item.strip().upper() for item in text.split(",")]
    counts = []
    for item in items:
        number, suffix = (item[:-1], item[-1]) if item and item[-1] in "KMG" else (item, "")
        if not number.isdigit() or int(number) < 1:
            raise ConfigError(field, f"needs positive counts separated by commas, got {text!r}",
                              "e.g. 16M,128M (K, M, G: powers of ten)")
        counts.append(int(number) * _COUNT_SUFFIX[suffix])
    if len(set(counts)) != len(counts):
        raise ConfigError(field, f"a count given twice in {text!r}", "each count once")
    return tuple(counts)


def _check_counts(options: CalibrateOptions) -> None:
    """Repetitions, warm-up, processes and the time limit."""
    if isinstance(options.repeats, bool) or options.repeats < 1:
        raise ConfigError("repeats", f"must be at least 1, got {options.repeats}", ">= 1")
    if options.warmup < 0:
        raise ConfigError("warmup", f"must be 0 or more, got {options.warmup}", ">= 0")
    if options.nproc < 0 or options.nproc == 1:
        raise ConfigError("nproc", f"collectives need 2 processes or more, got {options.nproc}",
                          "0 (every device; 2 on a CPU) or >= 2")
    if options.threads < 0:
        raise ConfigError("threads", f"must be 0 or more, got {options.threads}",
                          "0 (torch's default) or a thread count")
    for field, value, least in (("repeats", options.repeats, 1), ("warmup", options.warmup, 0),
                                ("threads", options.threads, 0)):
        require_count(field, value, COUNT_BOUNDS[field], minimum=least)
    if not options.timeout_s > 0:
        raise ConfigError("timeout", f"must be positive, got {options.timeout_s}", "> 0 s")
    if options.concurrent and options.threads not in (0, 1):
        raise ConfigError("threads", f"--concurrent runs one thread a rank, got {options.threads}",
                          "1 (or leave it out) with --concurrent")


def default_nproc(device_type: str) -> int:
    """Every device of an accelerator kind; two processes on a CPU (one if it has one core)."""
    if device_type == "cpu":
        return min(2, os.cpu_count() or 1)
    from accelbench.hardware import device as devices  # torch: only when a run is built

    return devices.device_count(device_type)


def _check_nproc(nproc: int, device_type: str) -> None:
    """An accelerator's ranks take one device each; CPU ranks may share the cores."""
    from accelbench.bench.train.spec import CPU_RANKS_PER_CORE
    from accelbench.hardware import device as devices  # torch: only when a run is built

    cores = os.cpu_count() or 1
    if device_type == "cpu" and nproc > CPU_RANKS_PER_CORE * cores:  # train's rule (nproc)
        raise ConfigError("nproc", f"{nproc} CPU ranks on {cores} cores",
                          f"2 to {CPU_RANKS_PER_CORE * cores} ({CPU_RANKS_PER_CORE} a core at "
                          "most)")
    have = devices.device_count(device_type)
    if device_type != "cpu" and nproc > have:
        raise ConfigError("nproc", f"{nproc} ranks need {nproc} {device_type} devices, this "
                          f"machine has {have}", f"2 to {have}" if have >= 2 else "a CPU run")


def build_calibrate_spec(options: CalibrateOptions, device_type: str) -> CalibrateSpec:
    """Every option checked, naming the field, before anything is measured."""
    _check_counts(options)
    _check_nproc(options.nproc, device_type)
    accelerator = device_type != "cpu"
    model = resolve_model(options.model)
    head_dims = (parse_int_list("head-dim", options.head_dim) if options.head_dim
                 else (model.head_dim,))
    return CalibrateSpec(
        device=options.device, ops=parse_choice_list("ops", options.ops, OPS),
        dtypes=parse_choice_list("dtype", options.dtype, DTYPES), model=model,
        tokens=parse_int_list("tokens", _default("tokens", options, accelerator)),
        gemm_passes=parse_choice_list("gemm-passes", options.gemm_passes, GEMM_PASSES),
        seqs=parse_int_list("seq", _default("seq", options, accelerator)), head_dims=head_dims,
        memory_ops=parse_choice_list("memory-ops", options.memory_ops, STREAM_OPS),
        memory_bytes=parse_byte_list("memory-sizes",
                                     _default("memory_sizes", options, accelerator)),
        collectives=parse_choice_list("collectives", options.collectives, COLLECTIVE_OPS),
        message_bytes=parse_byte_list("message-sizes",
                                      _default("message_sizes", options, accelerator)),
        optimizer_params=parse_count_list(
            "optimizer-params", _default("optimizer_params", options, accelerator)),
        nproc=options.nproc or default_nproc(device_type),
        threads=1 if options.concurrent else options.threads,
        repeats=options.repeats,
        warmup=options.warmup, timeout_s=options.timeout_s, quick=options.quick,
        concurrent=options.concurrent)
