"""The one list of rules a layout is checked against, by the runtime and the planner; no torch.

The runtime (`validate_layout`) and the planner (accelbench.analytics.planner) read the same
`RULES`:

- "arithmetic" rules say the layout does not divide (heads, layers into stages, devices,
  micro-batches...): it cannot run anywhere. The runtime refuses it; the planner rejects it.
- "runtime" rules say accelbench's runtime does not build the layout today, though it divides
  (zero=1 with tp > 1, a schedule that does not match vp). The runtime refuses it; the planner
  still ranks it, marked "not built by accelbench's runtime: <reason>".
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from accelbench.config.errors import ConfigError
from accelbench.config.layer_split import stage_layer_counts
from accelbench.config.layout import Layout
from accelbench.config.layout_parse import check_fields
from accelbench.config.model import ModelConfig

ARITHMETIC, RUNTIME = "arithmetic", "runtime"
RULE_KINDS = (ARITHMETIC, RUNTIME)


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
