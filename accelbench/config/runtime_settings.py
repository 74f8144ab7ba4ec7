"""How accelbench's runtime places a layout's data parallelism beyond what the layout says: the
leaner torch settings it uses by default, each one a user can turn off (`--runtime`), and which
of them a layout uses; no torch.

- ddp_views: DistributedDataParallel(gradient_as_bucket_view=True), so the gradients are views
  into DDP's all-reduce buckets instead of a second copy of every gradient beside them.
- zero_views: ZeroRedundancyOptimizer(parameters_as_bucket_view=True): the parameters live in
  one flat buffer a device, broadcast bucket by bucket after each step, not one by one.
- fsdp_mp: FSDP2 with a MixedPrecisionPolicy in bf16 cells: the unsharded parameters gathered
  for compute are bf16 (the sharded fp32 ones stay the master copy), so the all-gathers move
  and the unsharded blocks hold 2 bytes a parameter instead of 4.
- reduce: the dtype FSDP2 reduce-scatters gradients in under that policy: fp32 (the default,
  as Megatron-Core reduces bf16 gradients) or bf16 (half the traffic, rounded sums). Without
  the policy gradients are fp32 and reduced so.
The record keeps only the settings a cell's layout used (`applied`), so a cell they do not touch
keeps the fingerprint it had before they existed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from accelbench.config.errors import ConfigError
from accelbench.config.layout import Layout

REDUCE_DTYPES = ("fp32", "bf16")
RUNTIME_KEYS = ("ddp_views", "zero_views", "fsdp_mp", "reduce")
_TRUE, _FALSE = ("1", "true", "on", "yes"), ("0", "false", "off", "no")
# How the runtime reduces a layout's data-parallel gradients (dp_wrapper)
DDP, GRAD_SYNC, FSDP, PIPELINE, NONE = "ddp", "grad_sync", "fsdp", "pipeline", "none"
MP_PRECISIONS = ("bf16",)  # the cell precisions FSDP2's mixed-precision policy is applied to


@dataclass(frozen=True)
class RuntimeSettings:
    """The runtime's data-parallel settings (module docstring); the defaults are the lean ones."""

    ddp_views: bool = True
    zero_views: bool = True
    fsdp_mp: bool = True
    reduce: str = "fp32"

    def to_dict(self) -> dict[str, bool | str]:
        """Plain dict for records."""
        return asdict(self)


LEAN = RuntimeSettings()
LEGACY = RuntimeSettings(ddp_views=False, zero_views=False, fsdp_mp=False)  # before issue 37


def parse_runtime(text: str) -> RuntimeSettings:
    """'ddp_views=off,reduce=bf16' -> RuntimeSettings; empty: the defaults. One line naming the
    field and the allowed values for anything else."""
    values: dict[str, bool | str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = part.partition("=")
        key, value = key.strip(), value.strip().lower()
        if key not in RUNTIME_KEYS:
            raise ConfigError("runtime", f"unknown setting {key!r}", ", ".join(RUNTIME_KEYS))
        if key == "reduce":
            if value not in REDUCE_DTYPES:
                raise ConfigError("runtime", f"reduce={value!r}", ", ".join(REDUCE_DTYPES))
            values[key] = value
        elif value in _TRUE or value in _FALSE:
            values[key] = value in _TRUE
        else:
            raise ConfigError("runtime", f"{key}={value!r}", f"{key}=on or {key}=off")
    return RuntimeSettings(**values)


def dp_wrapper(layout: Layout, moe: bool = False) -> str:
    """How the runtime reduces this placed layout's gradients (cp folded into dp, as
    parallel/context.placement folds it): FSDP2 at zero 2/3; a pipeline's own all-reduce at
    zero 0/1; DataParallelGradSync where DDP cannot serve (tp at zero 0, expert parallel, MoE
    under sequence parallelism); DDP otherwise; none with one data-parallel rank at zero 0."""
    if layout.zero >= 2:
        return FSDP
    if layout.pp > 1:
        return PIPELINE
    if layout.ep > 1 or (moe and layout.sp):
        return GRAD_SYNC
    if layout.dp == 1 and layout.zero == 0:
        return NONE
    if layout.tp > 1 and layout.zero == 0:
        return GRAD_SYNC
    return DDP


def mixed_precision(settings: RuntimeSettings, layout: Layout, precision: str) -> bool:
    """Whether FSDP2 gathers bf16 parameters for compute in this cell."""
    return settings.fsdp_mp and layout.zero >= 2 and precision in MP_PRECISIONS


def applied(settings: RuntimeSettings, layout: Layout, precision: str,
            moe: bool = False) -> dict[str, bool | str]:
    """The settings this placed layout uses, for its record (empty when it uses none)."""
    wrapper = dp_wrapper(layout, moe)
    out: dict[str, bool | str] = {}
    if wrapper == DDP:
        out["ddp_views"] = settings.ddp_views
    if layout.zero == 1:
        out["zero_views"] = settings.zero_views
    if wrapper == FSDP and precision in MP_PRECISIONS:
        out["fsdp_mp"] = settings.fsdp_mp
        if settings.fsdp_mp:
            out["reduce"] = settings.reduce
    return out


def reduce_bytes(settings: RuntimeSettings, layout: Layout, precision: str) -> int:
    """Bytes a gradient value moves in the data-parallel reduction: 2 only where FSDP2's policy
    reduces in bf16; fp32 gradients everywhere else in this runtime."""
    bf16 = mixed_precision(settings, layout, precision) and settings.reduce == "bf16"
    return 2 if bf16 else 4
