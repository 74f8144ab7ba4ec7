"""What `accelbench plan` was asked, checked and resolved, and the plan it asks for; no torch.

The command line parses into a PlanOptions (plan_options.py: the options and the guards
between them), calls `resolve_plan_input` and `run_plan` and renders the outcome: the checks
of each input (choices, sizes, efficiency, the --layout string) live here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from accelbench.analytics.cluster import ClusterSpec, make_cluster
from accelbench.analytics.compute_rates import compute_rates, layer_rates
from accelbench.analytics.confidence import Confidence, assess, limited
from accelbench.analytics.efficiency import device_class
from accelbench.analytics.envelope import HEADROOM, check_headroom
from accelbench.analytics.machine_profile import MachineProfile
from accelbench.analytics.plan_options import (
    PlanOptions,
    check_compute_source,
    check_efficiency,
)
from accelbench.analytics.planner import (
    PlanResult,
    SearchResult,
    enumerate_layouts,
    layout_error,
    plan_fixed,
    search,
)
from accelbench.analytics.published_csv import FITTED_STACKS
from accelbench.analytics.published_run import STACKS, reduce_bytes, stack_framework
from accelbench.analytics.shipped_intervals import (
    shipped_interval_model,
    unseen_class_interval_model,
    validated_envelope,
)
from accelbench.analytics.source_model import UNKNOWN_STACK
from accelbench.analytics.train_setup import OVERLAP_MODES, TrainSetup
from accelbench.analytics.validation_shapes import resolve_shape
from accelbench.config.errors import (
    ConfigError,
    require_choice,
    require_finite,
    require_positive,
)
from accelbench.config.layout import Layout
from accelbench.config.layout_parse import PLANNER_KEYS, parse_layout_fields
from accelbench.config.layout_rules import RULES_BY_KEY, Target
from accelbench.config.model import ModelConfig
from accelbench.config.sparsity import validate_sparsity
from accelbench.config.vocab import PEAK_PRECISIONS
from accelbench.hardware.specs import DeviceSpec

OPTIMIZERS = ("adam", "sgd")
# A --layout naming all of these is evaluated alone; with any missing, the rest is searched.
FULL_LAYOUT = frozenset({"dp", "tp", "pp", "vp", "mb", "zero", "recompute"})


@dataclass(frozen=True)
class PlanRequest:
    """A checked plan: model, cluster, set-up and the layout fields fixed (the others are
    searched)."""

    model: ModelConfig
    cluster: ClusterSpec
    setup: TrainSetup
    fixed: dict[str, int | bool | str] = field(default_factory=dict)
    top: int = 10
    efficiency: float | None = None
    train_tokens: float = 300e9
    headroom: float = HEADROOM
    stack: str = UNKNOWN_STACK

    @property
    def full(self) -> bool:
        """Whether --layout names a whole layout (evaluated alone, not searched)."""
        return FULL_LAYOUT <= self.fixed.keys()


@dataclass(frozen=True)
class PlanOutcome:
    """The ranked layouts (one for a full --layout) and, for a search, how it went."""

    results: list[PlanResult]
    search: SearchResult | None = None
    confidence: list[Confidence] = field(default_factory=list)  # one per result


# --layout items of features the planner does not model, each with its one-line reason
NOT_MODELLED_ITEMS = {
    "hsdp": "hybrid sharding (FSDP inside a group, data parallel across groups) is not "
            "modelled by the planner",
}


def not_modelled(layout: str) -> str:
    """The --layout text, unless it names a feature the planner does not model: then one
    ConfigError line saying so (never a silent stand-in)."""
    for item in filter(None, (part.strip() for part in layout.split(","))):
        key = item.partition("=")[0].strip()
        if key in NOT_MODELLED_ITEMS:
            raise ConfigError(f"layout.{key}", NOT_MODELLED_ITEMS[key], ", ".join(PLANNER_KEYS))
    return layout


EP_RULES = ("expert model", "experts", "expert data")


def check_ep(model: ModelConfig, cluster: ClusterSpec,
             fixed: dict[str, int | bool | str]) -> None:
    """A fixed ep must suit the model before any search (the layout rules' own lines): a model
    with experts, ep dividing them, and ep dividing dp when dp is fixed too."""
    if "ep" not in fixed:
        return
    ep = int(fixed["ep"])
    layout = Layout(dp=int(fixed.get("dp", ep)), ep=ep)
    target = Target(model, cluster.n_devices, 1, 1)
    for key in EP_RULES:
        rule = RULES_BY_KEY[key]
        if rule.broken(layout, target, 1):
            raise rule.error(layout, target, 1)


def check_moe_imbalance(imbalance: float) -> None:
    """The busiest expert's load over the mean: a finite number of at least 1 (1 = balanced)."""
    require_finite("moe-imbalance", imbalance)
    if imbalance < 1:
        raise ConfigError("moe-imbalance", f"must be at least 1 (the busiest expert's load over "
                          f"the mean), got {imbalance!r}", ">= 1 (1.0 = balanced)")


def check_imbalance_model(model: ModelConfig, imbalance: float) -> None:
    """An imbalance other than 1 only for a model with experts (a dense one would ignore it)."""
    if imbalance != 1 and not model.n_experts:
        raise ConfigError("moe-imbalance", f"{model.name} has no experts",
                          "1.0 for a dense model, or a model with experts")


def moe_imbalance_text(model: ModelConfig, imbalance: float) -> str:
    """What the stated imbalance does to a plan of this model, in words."""
    if model.capacity_factor > 0:
        return (f"capacity factor {model.capacity_factor:g}: every expert padded to its "
                "capacity, over it dropped, so the imbalance changes no time")
    if imbalance == 1:
        return "balanced routing (each expert tokens x k / E), as force-balanced benchmarks run"
    return (f"the busiest expert-parallel rank's expert GEMMs and all-to-alls carry "
            f"min({imbalance:g}, ep) x the mean rank's routed tokens (the step waits for it)")


def check_stack(stack: str) -> str:
    """A stack with shipped runs (its error is fitted), or unknown; a known stack without
    shipped runs (torchtitan, megascale) is refused, saying why."""
    allowed = ", ".join((UNKNOWN_STACK, *FITTED_STACKS))
    if stack in (UNKNOWN_STACK, *FITTED_STACKS):
        return stack
    if stack in STACKS.values():
        raise ConfigError("stack", f"{stack} has no shipped run, so no error of it is fitted "
                          "(--stack unknown gives an unseen stack's interval)", allowed)
    raise ConfigError("stack", f"unknown value {stack!r}", allowed)


def _us(value: float | None) -> float | None:
    """Microseconds to seconds, None kept."""
    return None if value is None else value * 1e-6


def _check_links(given: PlanOptions) -> None:
    """The cluster options as typed (positive finite sizes and bandwidths, finite latencies
    of zero or more), named as on the command line."""
    if given.gpus_per_node is not None:
        require_positive("gpus-per-node", given.gpus_per_node)
    for name, value in (("intra-bw", given.intra_bw), ("inter-bw", given.inter_bw)):
        if value is not None:
            require_positive(name, value)
    for name, value in (("intra-latency-us", given.intra_latency_us),
                        ("inter-latency-us", given.inter_latency_us)):
        if value is not None:
            require_finite(name, value)
            if value < 0:
                raise ConfigError(name, f"must not be negative, got {value!r}", ">= 0")


def most_devices(model: ModelConfig, global_batch: int, seq: int) -> int:
    """The most devices any layout of this model and batch can occupy: dp x mb divides the
    global batch, tp the heads, the stages the layers, and 2 x cp the sequence."""
    return global_batch * model.n_head * model.n_layer * max(1, seq // 2)


def check_cluster_size(given: PlanOptions, model: ModelConfig, cluster: ClusterSpec) -> None:
    """A cluster larger than any layout can occupy is refused before a search (whose divisor
    lists would grow with it), naming --nodes (or --gpus-per-node on one node)."""
    most = most_devices(model, given.global_batch, given.seq)
    if cluster.n_devices <= most:
        return
    field = "gpus-per-node" if given.nodes == 1 and given.gpus_per_node else "nodes"
    raise ConfigError(field, f"{given.nodes:,} nodes x {cluster.devices_per_node:,} = "
                      f"{cluster.n_devices:,} devices, more than any layout of {model.name} "
                      f"occupies: {most:,} (dp <= global batch {given.global_batch}, tp <= "
                      f"{model.n_head} heads, pp <= {model.n_layer} layers, cp <= seq / 2)",
                      f"nodes x gpus-per-node <= {most:,}")


def check_divides(request: PlanRequest, layout_text: str) -> None:
    """A partial --layout (or, without one, the cluster) that no candidate of the search can
    divide is bad input, refused before a search: of the arithmetic rules the candidates break,
    the one latest in the rules' order says why (its candidate passed the most of them); with
    no candidate at all, the devices cannot be split. A full
    --layout is checked by plan_fixed, also before anything prints."""
    if request.full:
        return
    model, cluster, setup = request.model, request.cluster, request.setup
    broken: dict[str, ConfigError] = {}  # rule key -> the first candidate's error
    for layout in enumerate_layouts(model, cluster, setup, request.fixed):
        found = layout_error(model, cluster, setup, layout)
        if found is None:
            return
        broken.setdefault(*found)
    field = "layout" if request.fixed else "nodes"  # what the user chose that cannot divide
    given = (f"--layout {layout_text}" if request.fixed else
             f"{model.name} on {cluster.n_devices:,} devices with global batch "
             f"{setup.global_batch}")
    if not broken:
        raise ConfigError(field, f"{given}: no split of the devices into dp x tp x pp x cp "
                          f"with dp dividing the global batch, tp <= "
                          f"{cluster.devices_per_node} in a node unless given, pp dividing "
                          f"{model.n_layer} layers", "a device count such a split reaches")
    order = list(RULES_BY_KEY)  # the candidate that passed the most rules says most
    error = broken[max(broken, key=order.index)]
    if error.field.startswith("layout") and request.fixed:
        field = error.field  # the layout field the rule names
    raise ConfigError(field, f"{given} never divides: {error.problem}", error.allowed)


def resolve_plan_input(given: PlanOptions,
                       profile: MachineProfile | None = None) -> PlanRequest:
    """Check every input (ConfigError naming the first bad one) and resolve model, cluster,
    set-up and --layout fields; a measured profile (the CLI loads it) times the compute and
    the collectives inside a node, in place of the built-in curves."""
    check_efficiency(given.efficiency)
    check_compute_source(given.efficiency, profile is not None)
    require_choice("overlap", given.overlap, tuple(OVERLAP_MODES))
    require_choice("dtype", given.dtype, PEAK_PRECISIONS)
    require_choice("optimizer", given.optimizer, OPTIMIZERS)
    check_stack(given.stack)
    for name, value in (("global-batch", given.global_batch), ("seq", given.seq),
                        ("nodes", given.nodes), ("top", given.top),
                        ("train-tokens", given.train_tokens)):
        require_positive(name, value)
    _check_links(given)
    check_moe_imbalance(given.moe_imbalance)
    check_headroom(given.memory_headroom)
    model = resolve_shape(given.model)
    check_imbalance_model(model, given.moe_imbalance)
    if model.position == "learned" and given.seq > model.n_positions:
        raise ConfigError("seq", f"{given.seq} is longer than {model.name}'s "
                          f"{model.n_positions} positions", f"<= {model.n_positions}")
    cluster = make_cluster(given.device, given.nodes, given.gpus_per_node, given.intra_bw,
                           given.inter_bw, _us(given.intra_latency_us),
                           _us(given.inter_latency_us))
    check_cluster_size(given, model, cluster)
    compute_rates(cluster.device, given.dtype)  # the peaks the precision needs, before a search
    if profile is not None:
        check_profile_device(profile, cluster.device)
        cluster = replace(cluster, profile=profile)
        layer_rates(cluster, given.dtype)  # the profile has this precision's curves
    fixed = parse_layout_fields(not_modelled(given.layout), PLANNER_KEYS) if given.layout else {}
    check_ep(model, cluster, fixed)
    validate_sparsity([given.sparsity], given.sparsity_pattern, "magnitude", model.d_model)
    # the data-parallel reduction's width: the named stack's, else the precision's default
    reduce = reduce_bytes(stack_framework(given.stack), given.dtype)
    setup = TrainSetup(given.global_batch, given.seq, given.dtype, given.optimizer,
                       given.fused_attention, given.sparsity, given.sparsity_pattern,
                       given.overlap, moe_imbalance=given.moe_imbalance, reduce_bytes=reduce)
    request = PlanRequest(model, cluster, setup, fixed, given.top, given.efficiency,
                          given.train_tokens, given.memory_headroom, given.stack)
    check_divides(request, given.layout)
    return request


# torch device types of a measured profile and the datasheet kinds they may time
PROFILE_TYPE_KINDS = {"cuda": ("gpu",), "xpu": ("gpu",), "xla": ("tpu",), "hpu": ("hpu",)}


def check_profile_device(profile: MachineProfile, device: DeviceSpec) -> None:
    """A profile times only the kind of device it was measured on: its datasheet row's where
    it recorded one, else a device of its torch type (a CPU profile times no accelerator)."""
    base = device.key.partition(":")[0]
    measured = f"{profile.device_type or 'an unknown device'}" + (
        f" ({profile.device_name})" if profile.device_name else "")
    if profile.device_key:
        if profile.device_key != base:
            raise ConfigError("profile", f"measured on {profile.device_key} {measured}, cannot "
                              f"time {device.key}", f"--device {profile.device_key}, or a "
                              f"profile measured on {base}")
        return
    if device.kind not in PROFILE_TYPE_KINDS.get(profile.device_type, ()):
        raise ConfigError("profile", f"measured on {measured}, cannot time {device.key} (a "
                          f"{device.kind})", f"a profile measured on {base}; this machine's "
                          "own cells: plan --validate --db FILE")


def run_plan(request: PlanRequest) -> PlanOutcome:
    """Evaluate the full --layout alone, else search the fields it leaves open; each result
    with its interval and extrapolation flags (layouts above the memory headroom ranked
    last)."""
    if request.full:
        results = [plan_fixed(request.model, request.cluster, request.setup, request.fixed,
                              request.efficiency)]
        found = None
    else:
        found = search(request.model, request.cluster, request.setup, request.fixed,
                       request.top, request.efficiency, request.headroom)
        results = found.best
    intervals, envelope = shipped_interval_model(), validated_envelope()
    cls_known = envelope.has_class(device_class(request.cluster.device))
    unseen = (unseen_class_interval_model() if request.cluster.profile is not None
              or not cls_known or limited(request.cluster.device.key) else None)
    stack = None if request.stack == UNKNOWN_STACK else request.stack
    confidence = [assess(r, request.model, request.cluster, request.setup, intervals, envelope,
                         request.headroom, unseen, stack) for r in results]
    return PlanOutcome(results, found, confidence)
