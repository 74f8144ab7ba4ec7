"""How a training run is split over processes: data x tensor x pipeline, ZeRO stage, schedule.

`parse_layout("dp=2,tp=2,pp=1,zero=3")` reads the --layout string; `validate_layout` checks it
against the model, the world size and the micro-batch count before any process group exists, so
a layout that cannot run is a ConfigError with the reason, not a hang or a shape error later.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from accelbench.config.errors import ConfigError, require_choice
from accelbench.config.model import ModelConfig

PP_SCHEDULES = ("gpipe", "1f1b", "interleaved_1f1b")
ZERO_STAGES = (0, 1, 2, 3)
MESH_DIMS = ("pp", "dp", "tp")  # outermost to innermost: tp ranks are neighbours (same node)
_TRUE = ("1", "true", "on", "yes")
_FALSE = ("0", "false", "off", "no")
_INT_KEYS = ("dp", "tp", "pp", "vp", "zero")
_ALIASES = {"schedule": "pp_schedule"}


@dataclass(frozen=True)
class Layout:
    """Process layout: dp x tp x pp ranks, vp model chunks per pipeline rank, ZeRO stage 0-3,
    sequence parallelism on the tensor group, and the pipeline schedule."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    vp: int = 1
    zero: int = 0
    sp: bool = False
    pp_schedule: str = "1f1b"

    @property
    def world_size(self) -> int:
        """Processes the layout needs."""
        return self.dp * self.tp * self.pp

    @property
    def mesh_shape(self) -> tuple[int, int, int]:
        """Sizes of the mesh dimensions MESH_DIMS = (pp, dp, tp)."""
        return (self.pp, self.dp, self.tp)

    @property
    def n_stages(self) -> int:
        """Pipeline stages in all (model chunks): pp x vp."""
        return self.pp * self.vp

    def label(self) -> str:
        """The --layout string that reproduces this layout."""
        text = f"dp={self.dp},tp={self.tp},pp={self.pp},zero={self.zero}"
        if self.vp > 1:
            text += f",vp={self.vp}"
        if self.sp:
            text += ",sp=1"
        if self.pp > 1:
            text += f",schedule={self.pp_schedule}"
        return text

    def to_dict(self) -> dict[str, int | bool | str]:
        """Plain dict for records."""
        return asdict(self)


def _parse_bool(key: str, value: str) -> bool:
    """'1/true/on/yes' or '0/false/off/no'."""
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ConfigError(f"layout.{key}", f"must be a boolean, got {value!r}", "1, 0, true, false")


def parse_layout(text: str) -> Layout:
    """'dp=2,tp=2,pp=1,zero=3[,vp=2,sp=1,schedule=1f1b]' -> Layout (unset fields default).

    vp > 1 without a schedule picks interleaved_1f1b, the only schedule that uses virtual stages.
    """
    allowed = ", ".join((*_INT_KEYS, "sp", "schedule"))
    values: dict[str, int | bool | str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, eq, value = (s.strip() for s in item.partition("="))
        key = _ALIASES.get(key, key)
        if not eq or key not in {f.name for f in fields(Layout)}:
            raise ConfigError("layout", f"bad item {item!r} in {text!r}", allowed)
        if key == "sp":
            values[key] = _parse_bool(key, value)
        elif key == "pp_schedule":
            values[key] = require_choice("layout.schedule", value.lower(), PP_SCHEDULES)
        else:
            try:
                values[key] = int(value)
            except ValueError:
                raise ConfigError(f"layout.{key}", f"must be an integer, got {value!r}") from None
    if int(values.get("vp", 1)) > 1 and "pp_schedule" not in values:
        values["pp_schedule"] = "interleaved_1f1b"
    layout = Layout(**values)  # type: ignore[arg-type]
    _check_ranges(layout)
    return layout


def _check_ranges(layout: Layout) -> None:
    """Field-by-field checks that need no model."""
    for key in ("dp", "tp", "pp", "vp"):
        value = getattr(layout, key)
        if not isinstance(value, int) or value < 1:
            raise ConfigError(f"layout.{key}", f"must be a positive integer, got {value!r}", ">= 1")
    if layout.zero not in ZERO_STAGES:
        raise ConfigError("layout.zero", f"unknown ZeRO stage {layout.zero!r}", "0, 1, 2, 3")
    require_choice("layout.schedule", layout.pp_schedule, PP_SCHEDULES)


def _check_schedule(layout: Layout, micro_batches: int) -> None:
    """Pipeline schedule rules: virtual stages only with interleaving, enough micro-batches."""
    if layout.pp_schedule == "interleaved_1f1b" and layout.pp > 1 and layout.vp < 2:
        raise ConfigError("layout.vp", "interleaved_1f1b needs vp > 1 (model chunks per rank)",
                          ">= 2, or schedule=1f1b")
    if layout.vp > 1 and (layout.pp < 2 or layout.pp_schedule != "interleaved_1f1b"):
        raise ConfigError("layout.vp", f"vp={layout.vp} needs pp > 1 and "
                          f"schedule=interleaved_1f1b (got pp={layout.pp}, "
                          f"schedule={layout.pp_schedule})", "vp=1")
    if layout.pp > 1 and micro_batches < layout.pp:
        raise ConfigError("gas", f"{micro_batches} micro-batches cannot fill {layout.pp} "
                          "pipeline stages", f">= {layout.pp} (gradient accumulation steps)")
    if layout.vp > 1 and micro_batches % layout.pp:
        raise ConfigError("gas", f"interleaved_1f1b runs micro-batches in rounds of pp="
                          f"{layout.pp}; {micro_batches} is not a multiple",
                          f"a multiple of {layout.pp}")


def _check_combinations(layout: Layout) -> None:
    """Combinations this layer does not build, refused with the reason."""
    if layout.sp and layout.tp < 2:
        raise ConfigError("layout.sp", "sequence parallelism splits the tensor-parallel group's "
                          "norms and needs tp > 1", "sp=0, or tp >= 2")
    # ZeroRedundancyOptimizer does not take tensor-parallel (DTensor) parameters (zero 0 with
    # tp averages gradients with its own all-reduce, zero 2/3 is FSDP2 on a 2-D mesh).
    if layout.tp > 1 and layout.zero == 1:
        raise ConfigError("layout.zero", "zero=1 with tp > 1 is not built: "
                          "ZeroRedundancyOptimizer does not take tensor-parallel (DTensor) "
                          "parameters", "zero=0, 2 or 3 with tp > 1")


def validate_layout(layout: Layout, model: ModelConfig, world_size: int,
                    micro_batches: int) -> Layout:
    """Check a layout against the model, the process count and the micro-batches per step.

    micro_batches is the gradient accumulation count: under pp > 1 these are the pipeline's
    micro-batches. zero >= 1 with dp = 1 is allowed: nothing is sharded, but the same code path
    runs, so a scaling study's one-device baseline is measured with the wrapper it divides by.
    """
    _check_ranges(layout)
    if layout.world_size != world_size:
        raise ConfigError("layout", f"dp x tp x pp = {layout.dp} x {layout.tp} x {layout.pp} = "
                          f"{layout.world_size} processes, but the world has {world_size}",
                          f"a product equal to {world_size}")
    for name, size in (("n_head", model.n_head), ("d_model", model.d_model),
                       ("ffn_dim", model.ffn_dim)):
        if size % layout.tp:
            raise ConfigError("layout.tp", f"tp={layout.tp} does not divide the model's "
                              f"{name}={size} (each rank must hold whole heads and equal slices)",
                              f"a divisor of {size}")
    if model.n_layer % layout.n_stages:
        raise ConfigError("layout.pp", f"{model.n_layer} layers do not divide into pp x vp = "
                          f"{layout.pp} x {layout.vp} = {layout.n_stages} equal stages",
                          f"pp x vp dividing {model.n_layer}")
    _check_schedule(layout, micro_batches)
    _check_combinations(layout)
    return layout
