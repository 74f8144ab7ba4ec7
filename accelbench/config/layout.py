"""The one parallel layout and the one list of rules it is checked against; no torch.

A layout splits a training job into dp x cp x tp x pp ranks (tensor innermost, then context,
then data, pipeline outermost: Megatron's order), with vp model chunks per pipeline rank, ep
expert-parallel ranks carved out of the data-parallel ones (Megatron-Core's convention: ep
divides dp, adds no ranks; dense weights replicated over dp, each expert on one rank of its ep
group and replicated over the dp / ep "expert data parallel" ranks), a ZeRO
stage, sequence parallelism, a pipeline schedule, a micro-batch, a recompute kind, and optionally
fewer layers on the first and last pipeline stages (pp_first, pp_last; Llama 3 405B's 126 layers
on 16 stages). The runtime (`validate_layout`) and the planner
(accelbench.analytics.planner) read the same `RULES`:

- "arithmetic" rules say the layout does not divide (heads, layers into stages, devices,
  micro-batches...): it cannot run anywhere. The runtime refuses it; the planner rejects it.
- "runtime" rules say accelbench's runtime does not build the layout today, though it divides
  (zero=1 with tp > 1, a schedule that does not match vp). The runtime refuses it; the planner
  still ranks it, marked "not built by accelbench's runtime: <reason>".
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass

from accelbench.config.errors import ConfigError, require_choice
from accelbench.config.model import ModelConfig
from accelbench.config.vocab import PP_SCHEDULES, RECOMPUTE_KINDS, ZERO_STAGES

MESH_DIMS = ("pp", "dp", "tp")  # outermost to innermost: tp ranks are neighbours (same node)
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
_COUNTS = ("pp_first", "pp_last")  # layers on the first / last pipeline stage; 0 = even split
_TRUE, _FALSE = ("1", "true", "on", "yes"), ("0", "false", "off", "no")
ARITHMETIC, RUNTIME = "arithmetic", "runtime"
RULE_KINDS = (ARITHMETIC, RUNTIME)


@dataclass(frozen=True)
class Layout:
    """How a job is split: dp x cp x tp x pp ranks, vp model chunks per pipeline rank, ZeRO
    stage 0-3, sequence parallelism on the tensor group (Korthikanti et al.), the pipeline
    schedule, the micro-batch in sequences, the activation recompute kind, and the layers of
    the first and last pipeline stages when they hold fewer than the others (0: even), and
    ep, the expert-parallel ranks each MoE layer's experts are split over (inside dp)."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    vp: int = 1
    zero: int = 0
    sp: bool = False
    pp_schedule: str = "1f1b"
    mb: int = 1
    recompute: str = "none"
    cp: int = 1  # context parallel: each sequence split over cp ranks (parallel/context.py)
    pp_first: int = 0
    pp_last: int = 0
    ep: int = 1  # expert parallel: carved out of dp (ep divides dp), adds no ranks

    @property
    def world_size(self) -> int:
        """Ranks (devices, processes) the layout occupies: dp x cp x tp x pp."""
        return self.dp * self.cp * self.tp * self.pp

    @property
    def mesh_shape(self) -> tuple[int, int, int]:
        """Sizes of the mesh dimensions MESH_DIMS = (pp, dp, tp)."""
        return (self.pp, self.dp, self.tp)

    @property
    def n_stages(self) -> int:
        """Pipeline stages in all (model chunks): pp x vp."""
        return self.pp * self.vp

    @property
    def uneven(self) -> bool:
        """Whether the first or last pipeline stage is given its own layer count."""
        return bool(self.pp_first or self.pp_last)

    def spans(self) -> dict[str, int]:
        """Consecutive devices each group spans: tp innermost, then cp, dp, pp (Megatron order)."""
        return {"tp": self.tp, "cp": self.tp * self.cp, "dp": self.tp * self.cp * self.dp,
                "pp": self.world_size}

    def label(self, full: bool = False) -> str:
        """The --layout string that reproduces this layout through parse_layout.

        Compact by default: dp, tp, pp and zero always, sp whenever tp > 1 (so no default
        decides it), the others only where they differ from their default (the schedule from
        the one vp implies), so a runtime layout's label is a valid runtime --layout.
        full=True writes every field the planner takes, which `accelbench plan --layout` reads
        as a complete layout.
        """
        text = f"dp={self.dp},tp={self.tp},pp={self.pp}"
        if full or self.vp > 1:
            text += f",vp={self.vp}"
        if self.cp > 1:  # cp=1 is the default everywhere, also for a full label
            text += f",cp={self.cp}"
        if self.ep > 1:  # so is ep=1
            text += f",ep={self.ep}"
        text += f",zero={self.zero}"
        if full or self.sp or self.tp > 1:
            text += f",sp={'on' if self.sp else 'off'}"
        if self.pp_schedule != default_schedule(self.vp):
            text += f",schedule={self.pp_schedule}"
        if full or self.mb != 1:
            text += f",mb={self.mb}"
        if full or self.recompute != "none":
            text += f",recompute={self.recompute}"
        for key in _COUNTS:
            if getattr(self, key):
                text += f",{key}={getattr(self, key)}"
        return text

    def to_dict(self) -> dict[str, int | bool | str]:
        """Plain dict for records and JSON."""
        return asdict(self)


def default_schedule(vp: int) -> str:
    """The schedule a layout gets when none is named: interleaved_1f1b with vp > 1, else 1f1b."""
    return "interleaved_1f1b" if vp > 1 else "1f1b"


# --- Parsing: one parser for the runtime's and the planner's --layout ---

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
    if key in _COUNTS and number < 0:
        raise ConfigError(f"layout.{key}", f"must be 0 (even split) or a layer count, got "
                          f"{number}", "an integer >= 0")
    if key not in ("zero",) + _COUNTS and number < 1:
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
    for key in _COUNTS:
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


def stage_layer_counts(layout: Layout, n_layer: int) -> tuple[int, ...] | None:
    """Layers of each of the pp x vp stages in order, or None when they do not divide.

    Even: n_layer / (pp x vp) each. With pp_first / pp_last, the first and last pipeline ranks
    hold those counts and the ranks between share the rest equally (Megatron's
    decoder_first/last_pipeline_num_layers). Interleaved (vp > 1, pp >= 3): every rank's chunks
    hold middle / vp layers each, except the first chunk of the first rank and the last chunk
    of the last rank, which take the difference and may hold none (Llama 3 405B: 126 layers,
    pp 16, vp 8, 7 on the end ranks: the first chunk holds only the embedding, the last only
    the head). Stage s is chunk s // pp of rank s % pp.
    """
    n = layout.n_stages
    if not layout.uneven:
        return (n_layer // n,) * n if n_layer % n == 0 else None
    if layout.pp < 2 or (layout.vp > 1 and layout.pp < 3):
        return None
    ranks = _uneven_rank_counts(layout, n_layer)
    if ranks is None or layout.vp == 1:
        return ranks
    return _interleaved_counts(ranks, layout.vp)


def rank_layer_counts(layout: Layout, n_layer: int) -> tuple[int, ...] | None:
    """Layers each pipeline rank holds over its vp chunks (stage_layer_counts summed)."""
    counts = stage_layer_counts(layout, n_layer)
    if counts is None:
        return None
    return tuple(sum(counts[rank::layout.pp]) for rank in range(layout.pp))


def _uneven_rank_counts(layout: Layout, n_layer: int) -> tuple[int, ...] | None:
    """Layers per pipeline rank: pp_first / pp_last on the ends, the rest split equally."""
    pp = layout.pp
    ends = [layout.pp_first, layout.pp_last]
    middle = pp - sum(1 for e in ends if e)
    rest = n_layer - sum(ends)
    if rest < 0 or (middle == 0 and rest) or (middle and (rest % middle or rest == 0)):
        return None
    counts = [rest // middle if middle else 0] * pp
    if layout.pp_first:
        counts[0] = layout.pp_first
    if layout.pp_last:
        counts[-1] = layout.pp_last
    return tuple(counts)


def _interleaved_counts(ranks: tuple[int, ...], vp: int) -> tuple[int, ...] | None:
    """Per-rank counts as vp chunks each, in stage order: a middle rank's layers split equally,
    the first (last) rank's surplus or shortfall on its first (last) chunk, never below 0."""
    pp, middle = len(ranks), ranks[1]
    if middle % vp:
        return None
    chunk = middle // vp
    stages = [chunk] * (pp * vp)
    first, last = ranks[0] - chunk * (vp - 1), ranks[-1] - chunk * (vp - 1)
    if first < 0 or last < 0:
        return None
    stages[0], stages[-1] = first, last
    return tuple(stages)


# --- The rules: one list, read by the runtime and the planner ---

@dataclass(frozen=True)
class Target:
    """What a layout is checked against: the model and the devices; the sequence (checked
    under sequence parallelism) and the global batch in sequences (dp x mb must divide it)
    where the caller knows them."""

    model: ModelConfig
    world_size: int
    seq_len: int | None = None
    global_batch: int | None = None


_Test = Callable[[Layout, Target, int], bool]
_Text = Callable[[Layout, Target, int], str]


@dataclass(frozen=True)
class Rule:
    """One layout rule: `broken(layout, target, m)` with m the micro-batches per step per
    pipeline; the reason and the allowed values are built only for a layout that breaks it."""

    key: str
    kind: str  # ARITHMETIC or RUNTIME
    field: str  # the ConfigError field
    broken: _Test
    reason: _Text
    allowed: _Text

    def error(self, layout: Layout, target: Target, m: int) -> ConfigError:
        """The ConfigError that says why `layout` breaks this rule."""
        return ConfigError(self.field, self.reason(layout, target, m),
                           self.allowed(layout, target, m))


def _devices_reason(lay: Layout, t: Target, m: int) -> str:
    """Why a layout does not occupy the world exactly."""
    if t.world_size % (lay.tp * lay.pp * lay.cp):
        return (f"tp*pp*cp = {lay.tp * lay.pp * lay.cp} does not divide the {t.world_size} "
                "devices")
    return (f"dp*tp*pp*cp = {lay.dp}*{lay.tp}*{lay.pp}*{lay.cp} = {lay.world_size}, but the "
            f"world has {t.world_size} devices")


def _tp_divides(what: str, size: Callable[[ModelConfig], int]) -> tuple[_Test, _Text, _Text]:
    """A tensor-parallel divisibility rule's test, reason and allowed values; `what` is a
    template of the size ('{n} heads')."""
    return (lambda lay, t, m: size(t.model) % lay.tp != 0,
            lambda lay, t, m: f"tp={lay.tp} does not divide {what.format(n=size(t.model))}",
            lambda lay, t, m: f"a divisor of {size(t.model)}")


def n_experts(model: ModelConfig) -> int:
    """Routed experts per MoE layer of a model (0: dense), which ep must divide."""
    return int(getattr(model, "n_experts", 0) or 0)


# Arithmetic rules first, in the order reported, then the runtime's limits: the first broken
# rule of a layout is arithmetic whenever any arithmetic rule is broken.
RULES: tuple[Rule, ...] = (
    Rule("devices", ARITHMETIC, "layout", lambda lay, t, m: lay.world_size != t.world_size,
         _devices_reason, lambda lay, t, m: f"dp*tp*pp*cp = {t.world_size}"),
    Rule("heads", ARITHMETIC, "layout.tp", *_tp_divides("{n} heads", lambda c: c.n_head)),
    Rule("kv heads", ARITHMETIC, "layout.tp",
         lambda lay, t, m: t.model.kv_heads % lay.tp != 0 and lay.tp % t.model.kv_heads != 0,
         lambda lay, t, m: f"tp={lay.tp} neither divides the {t.model.kv_heads} key/value heads "
                           "nor is a multiple of them (each rank holds whole key/value heads, or "
                           "a share of the one its query heads use)",
         lambda lay, t, m: f"a divisor or a multiple of {t.model.kv_heads}"),
    Rule("hidden", ARITHMETIC, "layout.tp",
         *_tp_divides("the hidden size {n}", lambda c: c.d_model)),
    Rule("mlp width", ARITHMETIC, "layout.tp",
         *_tp_divides("the MLP width {n}", lambda c: c.ffn_dim)),
    Rule("sequence parallel", ARITHMETIC, "layout.sp", lambda lay, t, m: lay.sp and lay.tp == 1,
         lambda lay, t, m: "sequence parallelism needs tp > 1 (it splits the tensor-parallel "
                           "group's norms and dropouts)",
         lambda lay, t, m: "sp=off, or tp >= 2"),
    Rule("sequence", ARITHMETIC, "layout.tp",
         lambda lay, t, m: lay.sp and t.seq_len is not None
         and t.seq_len % (lay.tp * lay.cp) != 0,
         lambda lay, t, m: f"tp={lay.tp} does not divide sequence {t.seq_len}"
                           + (f" / cp={lay.cp}" if lay.cp > 1 else "") + " (sequence parallel)",
         lambda lay, t, m: f"a divisor of {t.seq_len // lay.cp}, or sp=off"),
    Rule("uneven stages", ARITHMETIC, "layout.pp_first",
         lambda lay, t, m: lay.uneven and (lay.pp < 2 or (lay.vp > 1 and lay.pp < 3)),
         lambda lay, t, m: "pp_first/pp_last need pp >= 2 (pp >= 3 with vp > 1: the middle "
                           "ranks set the chunk size)",
         lambda lay, t, m: "pp_first=0,pp_last=0, or pp >= 2 (vp=1) or pp >= 3"),
    Rule("layers", ARITHMETIC, "layout.pp",
         lambda lay, t, m: stage_layer_counts(lay, t.model.n_layer) is None,
         lambda lay, t, m: (f"pp_first={lay.pp_first}, pp_last={lay.pp_last} leave "
                            f"{t.model.n_layer - lay.pp_first - lay.pp_last} layers that do not "
                            f"divide equally over the other stages of pp={lay.pp}"
                            + (f" in chunks of vp={lay.vp} that leave the end ranks >= 0"
                               if lay.vp > 1 else ""))
         if lay.uneven else (f"pp*vp = {lay.pp}*{lay.vp} = {lay.n_stages} does not divide "
                             f"{t.model.n_layer} layers into equal stages"),
         lambda lay, t, m: "first + last + (pp - 2) x middle = "
                           f"{t.model.n_layer}, each >= 1"
                           + (f", middle divisible by vp={lay.vp}" if lay.vp > 1 else "")
                           if lay.uneven
         else f"pp*vp dividing {t.model.n_layer}"),
    Rule("context", ARITHMETIC, "layout.cp",
         lambda lay, t, m: lay.cp > 1 and t.seq_len is not None and t.seq_len % (2 * lay.cp),
         lambda lay, t, m: f"cp={lay.cp} splits each sequence into 2 x cp = {2 * lay.cp} "
                           f"load-balanced chunks, which do not divide sequence {t.seq_len}",
         lambda lay, t, m: f"cp with 2 x cp dividing {t.seq_len}"),
    Rule("expert model", ARITHMETIC, "layout.ep",
         lambda lay, t, m: lay.ep > 1 and n_experts(t.model) == 0,
         lambda lay, t, m: f"ep={lay.ep}: expert parallelism splits mixture-of-experts layers, "
                           f"and model {t.model.name} has none",
         lambda lay, t, m: "ep=1, or a model with experts"),
    Rule("experts", ARITHMETIC, "layout.ep",
         lambda lay, t, m: n_experts(t.model) % lay.ep != 0,
         lambda lay, t, m: f"ep={lay.ep} does not divide the {n_experts(t.model)} experts "
                           "(each expert-parallel rank holds experts / ep whole experts)",
         lambda lay, t, m: f"a divisor of {n_experts(t.model)}"),
    Rule("expert data", ARITHMETIC, "layout.ep", lambda lay, t, m: lay.dp % lay.ep != 0,
         lambda lay, t, m: f"ep={lay.ep} does not divide dp={lay.dp} (expert-parallel ranks are "
                           "carved out of the data-parallel ones, Megatron-Core's convention)",
         lambda lay, t, m: f"a divisor of dp={lay.dp}"),
    Rule("batch", ARITHMETIC, "layout.mb",
         lambda lay, t, m: t.global_batch is not None and t.global_batch % (lay.dp * lay.mb) != 0,
         lambda lay, t, m: f"dp*mb = {lay.dp * lay.mb} does not divide global batch "
                           f"{t.global_batch}",
         lambda lay, t, m: f"dp*mb dividing {t.global_batch}"),
    Rule("virtual stages", ARITHMETIC, "layout.vp", lambda lay, t, m: lay.vp > 1 and lay.pp == 1,
         lambda lay, t, m: f"virtual stages (vp={lay.vp}) need pp > 1",
         lambda lay, t, m: "vp=1, or pp >= 2"),
    Rule("micro-batches", ARITHMETIC, "gas", lambda lay, t, m: lay.pp > 1 and m < lay.pp,
         lambda lay, t, m: f"m = {m} micro-batches per step cannot fill pp = {lay.pp} stages "
                           "(needs m >= pp)",
         lambda lay, t, m: f">= {lay.pp} micro-batches (gradient accumulation steps)"),
    Rule("interleaving", ARITHMETIC, "gas",
         lambda lay, t, m: lay.vp > 1 and lay.pp > 1 and m % lay.pp != 0,
         lambda lay, t, m: f"interleaving runs micro-batches in rounds of pp={lay.pp}: the "
                           f"micro-batch count ({m}) must be a multiple of pp",
         lambda lay, t, m: f"a multiple of {lay.pp}"),
    Rule("interleaved schedule", RUNTIME, "layout.vp",
         lambda lay, t, m: lay.pp_schedule == "interleaved_1f1b" and lay.pp > 1 and lay.vp < 2,
         lambda lay, t, m: "interleaved_1f1b needs vp > 1 (model chunks per pipeline rank)",
         lambda lay, t, m: "vp >= 2, or schedule=1f1b"),
    Rule("chunk schedule", RUNTIME, "layout.schedule",
         lambda lay, t, m: lay.vp > 1 and lay.pp > 1 and lay.pp_schedule != "interleaved_1f1b",
         lambda lay, t, m: f"vp={lay.vp} model chunks run only under schedule=interleaved_1f1b "
                           f"(got {lay.pp_schedule})",
         lambda lay, t, m: "schedule=interleaved_1f1b, or vp=1"),
    # ZeroRedundancyOptimizer does not take tensor-parallel (DTensor) parameters; zero 0 with
    # tp averages gradients with its own all-reduce, zero 2/3 is FSDP2 on a 2-D mesh.
    Rule("context parallel", RUNTIME, "layout.cp",
         lambda lay, t, m: lay.cp > 1 and (lay.ep > 1 or t.model.kv_heads % lay.tp != 0),
         lambda lay, t, m: f"cp={lay.cp} with ep={lay.ep}, tp={lay.tp} on "
                           f"{t.model.kv_heads} key/value heads: accelbench's runtime builds "
                           "context parallelism with dp, ZeRO, pp and tp (+sp) dividing the "
                           "key/value heads only (the planner models the rest)",
         lambda lay, t, m: "cp with ep=1 and tp dividing the key/value heads, or cp=1"),
    Rule("context model", RUNTIME, "layout.cp",
         lambda lay, t, m: lay.cp > 1 and n_experts(t.model) > 0,
         lambda lay, t, m: f"cp={lay.cp} with model {t.model.name}'s mixture-of-experts "
                           "layers: their routing and load-balancing loss are per micro-batch, "
                           "which cp would split",
         lambda lay, t, m: "cp=1, or a dense model"),
    Rule("kv share", RUNTIME, "layout.tp",
         lambda lay, t, m: lay.tp > t.model.kv_heads and 2 * t.model.head_dim
         % (lay.tp // t.model.kv_heads) != 0,
         lambda lay, t, m: f"tp={lay.tp}: {lay.tp // t.model.kv_heads} ranks would share each "
                           f"key/value head, and they split its 2 x {t.model.head_dim} [k | v] "
                           "rows equally, which do not divide",
         lambda lay, t, m: f"tp dividing {t.model.kv_heads}, or tp / {t.model.kv_heads} "
                           f"dividing {2 * t.model.head_dim}"),
    Rule("zero-1 with tp", RUNTIME, "layout.zero", lambda lay, t, m: lay.zero == 1 and lay.tp > 1,
         lambda lay, t, m: "zero=1 with tp > 1 (ZeroRedundancyOptimizer does not take "
                           "tensor-parallel DTensor parameters)",
         lambda lay, t, m: "zero=0, 2 or 3 with tp > 1"),
)
RULES_BY_KEY = {rule.key: rule for rule in RULES}


def first_broken(layout: Layout, target: Target, m: int,
                 kinds: Collection[str] = RULE_KINDS) -> Rule | None:
    """The first rule of `kinds` the layout breaks (arithmetic before runtime), or None."""
    for rule in RULES:
        if rule.kind in kinds and rule.broken(layout, target, m):
            return rule
    return None


def validate_layout(layout: Layout, model: ModelConfig, world_size: int, micro_batches: int,
                    seq_len: int | None = None) -> Layout:
    """The runtime's check: ConfigError on the first broken rule, arithmetic or runtime.

    micro_batches is the gradient accumulation count (under pp > 1, the pipeline's
    micro-batches); seq_len, when given, is checked under sequence parallelism. zero >= 1 with
    dp = 1 is allowed: nothing is sharded, but the same code path runs, so a scaling study's
    one-device baseline is measured with the wrapper it divides by.
    """
    check_fields(layout)
    target = Target(model, world_size, seq_len)
    rule = first_broken(layout, target, micro_batches)
    if rule is not None:
        raise rule.error(layout, target, micro_batches)
    return layout
