"""The one parser of --layout text (the runtime's and the planner's), and the field checks."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from accelbench.config.errors import ConfigError, require_choice
from accelbench.config.layout import LAYER_COUNT_KEYS, Layout, default_schedule
from accelbench.config.vocab import PP_SCHEDULES, RECOMPUTE_KINDS, ZERO_STAGES

ALL_KEYS = ("dp", "tp", "pp", "vp", "cp", "ep", "zero", "sp", "schedule", "mb", "recompute",
            "pp_first", "pp_last")
# The runtime's --layout: micro-batch and recompute come from --micro-batch / --recompute.
RUNTIME_KEYS = ("dp", "tp", "pp", "vp", "cp", "ep", "zero", "sp", "schedule", "pp_first",
                "pp_last")
# The planner's --layout: it models 1F1B (interleaved when vp > 1), so the schedule follows vp.
PLANNER_KEYS = ("dp", "tp", "pp", "vp", "cp", "ep", "zero", "sp", "mb", "recompute",
                "pp_first", "pp_last")
_ELSEWHERE = {"mb": "set the micro-batch with --micro-batch",
              "recompute": "set it with --recompute",
              "schedule": "the planner models 1f1b, and interleaved_1f1b when vp > 1"}
_POSITIVE = ("dp", "tp", "pp", "vp", "cp", "ep", "mb")


_TRUE, _FALSE = ("1", "true", "on", "yes"), ("0", "false", "off", "no")


def _parse_value(key: str, value: str) -> int | bool | str:
    """One --layout value, checked: a positive int, a ZeRO stage, a boolean or a choice."""
    if key == "sp":  # words are lower-case, as every name (config/units.py)
        if value in _TRUE + _FALSE:
            return value in _TRUE
        raise ConfigError("layout.sp", f"must be a boolean, got {value!r}",
                          ", ".join(_TRUE + _FALSE))
    if key == "schedule":
        return require_choice("layout.schedule", value, PP_SCHEDULES)
    if key == "recompute":
        return require_choice("layout.recompute", value, RECOMPUTE_KINDS)
    allowed = ", ".join(map(str, ZERO_STAGES)) if key == "zero" else "an integer >= 1"
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"layout.{key}", f"must be an integer, got {value!r}", allowed) \
            from None
    if key == "zero" and number not in ZERO_STAGES:
        raise ConfigError("layout.zero", f"unknown ZeRO stage {number}", allowed)
    if key in LAYER_COUNT_KEYS and number < 0:
        raise ConfigError(f"layout.{key}", f"must be 0 (even split) or a layer count, got "
                          f"{number}", "an integer >= 0")
    if key not in ("zero",) + LAYER_COUNT_KEYS and number < 1:
        raise ConfigError(f"layout.{key}", f"must be a positive integer, got {number}", allowed)
    return number


def parse_layout_fields(text: str, keys: Collection[str] = ALL_KEYS) -> dict[str, int | bool | str]:
    """'dp=16,tp=8,sp=off' -> {'dp': 16, 'tp': 8, 'sp': False}: the fields given, by Layout
    field name (schedule= is pp_schedule), each checked; a key outside `keys`, one given twice
    or a bad value raises ConfigError naming the field and what is allowed."""
    allowed = ", ".join(keys)
    fields: dict[str, int | bool | str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, eq, value = (s.strip() for s in item.partition("="))
        key = "schedule" if key == "pp_schedule" else key
        if not eq or key not in ALL_KEYS:
            raise ConfigError("layout", f"bad item {item!r} in {text!r}", allowed)
        if key not in keys:
            raise ConfigError(f"layout.{key}", f"{key}= is not a --layout item here: "
                              f"{_ELSEWHERE.get(key, 'not taken')}", allowed)
        name = "pp_schedule" if key == "schedule" else key
        if name in fields:
            raise ConfigError(f"layout.{key}", f"given twice in {text!r}", "each key once")
        fields[name] = _parse_value(key, value)
    return fields


def layout_from_fields(fields: Mapping[str, int | bool | str]) -> Layout:
    """A checked Layout from field values; the others default, the schedule from vp, and dp
    from ep (ep=2 alone is dp=2,ep=2: expert parallelism is carved out of data parallelism)."""
    values = dict(fields)
    if "ep" in values:
        values.setdefault("dp", values["ep"])
    values.setdefault("pp_schedule", default_schedule(int(values.get("vp", 1))))
    unknown = values.keys() - Layout.__dataclass_fields__.keys()
    if unknown:
        raise ConfigError("layout", f"unknown fields {sorted(unknown)}",
                          ", ".join(Layout.__dataclass_fields__))
    return check_fields(Layout(**values))  # type: ignore[arg-type]


def parse_layout(text: str, keys: Collection[str] = ALL_KEYS) -> Layout:
    """'dp=2,tp=2,pp=1,zero=3[,vp=2,sp=1,schedule=1f1b,ep=2]' -> Layout (unset fields default;
    vp > 1 without a schedule picks interleaved_1f1b, the one schedule that uses chunks; dp
    defaults to ep)."""
    return layout_from_fields(parse_layout_fields(text, keys))


def check_fields(layout: Layout) -> Layout:
    """Field-by-field checks that need no model (a Layout built in Python skips the parser)."""
    for key in _POSITIVE:
        value = getattr(layout, key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"layout.{key}", f"must be a positive integer, got {value!r}", ">= 1")
    for key in LAYER_COUNT_KEYS:
        value = getattr(layout, key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"layout.{key}", f"must be an integer >= 0, got {value!r}", ">= 0")
    if layout.zero not in ZERO_STAGES:
        raise ConfigError("layout.zero", f"unknown ZeRO stage {layout.zero!r}",
                          ", ".join(map(str, ZERO_STAGES)))
    if not isinstance(layout.sp, bool):
        raise ConfigError("layout.sp", f"must be a boolean, got {layout.sp!r}", "True, False")
    require_choice("layout.schedule", layout.pp_schedule, PP_SCHEDULES)
    require_choice("layout.recompute", layout.recompute, RECOMPUTE_KINDS)
    return layout
