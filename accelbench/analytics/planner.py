"""The planner: enumerate parallel layouts, drop those that do not divide or fit, rank the rest.

Pure arithmetic (never imports torch): memory from accelbench.analytics.memory, step time from
accelbench.analytics.steptime, FLOPs from accelbench.analytics.flops.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from accelbench.analytics.cluster import ClusterSpec, Layout
from accelbench.analytics.flops import RECOMPUTE_KINDS
from accelbench.analytics.memory import MemoryBreakdown, memory_per_device
from accelbench.analytics.steptime import StepBreakdown, TrainSetup, estimate_step
from accelbench.config.errors import ConfigError
from accelbench.config.model import ModelConfig

LIMITERS = ("compute", "memory", "bubble", "communication")
COMPUTE_BOUND_BELOW = 0.05  # overheads under 5% of the step: the layout is compute-bound


@dataclass(frozen=True)
class PlanResult:
    """One layout's prediction: memory, step time and what limits it."""

    layout: Layout
    memory: MemoryBreakdown
    step: StepBreakdown
    limiter: str

    def to_dict(self) -> dict[str, object]:
        """Plain dict for JSON."""
        return {"layout": self.layout.label(), **self.layout.__dict__,
                "memory": self.memory.to_dict(), "step": self.step.to_dict(),
                "limiter": self.limiter}


@dataclass
class SearchResult:
    """The ranked layouts and how the search went (for the speed benchmark and the CLI)."""

    best: list[PlanResult]
    n_evaluated: int = 0
    n_fit: int = 0
    elapsed_s: float = 0.0
    rejected: dict[str, int] = field(default_factory=dict)

    @property
    def layouts_per_s(self) -> float:
        """Evaluated layouts per second of search."""
        return self.n_evaluated / self.elapsed_s if self.elapsed_s > 0 else float("inf")


def divisors(n: int) -> list[int]:
    """Positive divisors of n, ascending."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def layout_problem(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
                   layout: Layout) -> str | None:
    """Why a layout cannot run on this cluster and model (does not divide), or None."""
    checks = (
        (layout.n_devices != cluster.n_devices,
         f"dp*tp*pp = {layout.n_devices} but the cluster has {cluster.n_devices} devices"),
        (cfg.n_head % layout.tp != 0, f"tp={layout.tp} does not divide {cfg.n_head} heads"),
        (cfg.ffn_dim % layout.tp != 0, f"tp={layout.tp} does not divide the MLP width"),
        (layout.sp and setup.seq_len % layout.tp != 0,
         f"tp={layout.tp} does not divide sequence {setup.seq_len} (sequence parallel)"),
        (cfg.n_layer % (layout.pp * layout.vp) != 0,
         f"pp*vp = {layout.pp * layout.vp} does not divide {cfg.n_layer} layers"),
        (setup.global_batch % (layout.dp * layout.mb) != 0,
         f"dp*mb = {layout.dp * layout.mb} does not divide global batch {setup.global_batch}"),
        (layout.vp > 1 and layout.pp == 1, "virtual stages need pipeline parallelism"),
        (layout.vp > 1 and layout.pp > 1
         and (setup.global_batch // max(1, layout.dp * layout.mb)) % layout.pp != 0,
         "interleaving needs the micro-batch count to be a multiple of pp"),
        (layout.zero >= 2 and layout.pp > 1, "ZeRO-2/3 shard gradients per micro-batch and are "
         "not combined with pipeline parallelism (DeepSpeed's rule)"),
    )
    return next((reason for failed, reason in checks if failed), None)


def _zero_choices(dp: int, pp: int) -> tuple[int, ...]:
    """ZeRO stages worth trying: none without data parallelism, at most 1 with a pipeline."""
    if dp == 1:
        return (0,)
    return (0, 1) if pp > 1 else (0, 1, 2, 3)


def enumerate_layouts(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
                      fixed: dict[str, int | str] | None = None) -> Iterator[Layout]:
    """Every layout that divides, tensor parallelism kept inside a node; `fixed` pins fields."""
    fixed = fixed or {}
    n = cluster.n_devices
    for tp in divisors(n):
        if tp > cluster.devices_per_node and "tp" not in fixed:
            continue
        for pp in divisors(n // tp):
            dp = n // (tp * pp)
            if setup.global_batch % dp or cfg.n_layer % pp:
                continue
            for mb in divisors(setup.global_batch // dp):
                vps = divisors(cfg.n_layer // pp) if pp > 1 else [1]
                for vp in vps:
                    for zero in _zero_choices(dp, pp):
                        for recompute in RECOMPUTE_KINDS:
                            layout = Layout(dp, tp, pp, vp, mb, zero, recompute)
                            if all(getattr(layout, k) == v for k, v in fixed.items()):
                                yield layout


def _limiter(step: StepBreakdown) -> str:
    """The largest loss against pure compute: bubble, exposed communication, or the recompute
    that memory forced (reported as memory); compute when all are small."""
    losses = {"bubble": step.bubble_s,
              "communication": step.tp_comm_s + step.pp_comm_s + step.dp_comm_exposed_s,
              "memory": step.recompute_s}
    name = max(losses, key=losses.__getitem__)
    return name if losses[name] >= COMPUTE_BOUND_BELOW * step.step_s else "compute"


def evaluate(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup, layout: Layout,
             efficiency: float | None = None) -> PlanResult:
    """Memory and step time of one layout (which must divide; see layout_problem)."""
    n_micro = setup.global_batch // (layout.dp * layout.mb)
    memory = memory_per_device(cfg, setup.seq_len, layout, n_micro, setup.dtype,
                               setup.optimizer, cluster.memory_bytes_per_device)
    step = estimate_step(cfg, cluster, setup, layout, efficiency)
    return PlanResult(layout, memory, step, _limiter(step))


def search(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
           fixed: dict[str, int | str] | None = None, top: int = 10,
           efficiency: float | None = None) -> SearchResult:
    """The `top` layouts by predicted tokens/s among those that divide and fit."""
    start = time.perf_counter()
    result = SearchResult(best=[])
    ranked: list[PlanResult] = []
    for layout in enumerate_layouts(cfg, cluster, setup, fixed):
        problem = layout_problem(cfg, cluster, setup, layout)
        result.n_evaluated += 1
        if problem:
            key = problem.split(" ")[0]
            result.rejected[key] = result.rejected.get(key, 0) + 1
            continue
        n_micro = setup.global_batch // (layout.dp * layout.mb)
        memory = memory_per_device(cfg, setup.seq_len, layout, n_micro, setup.dtype,
                                   setup.optimizer, cluster.memory_bytes_per_device)
        if not memory.fits:
            result.rejected["does not fit"] = result.rejected.get("does not fit", 0) + 1
            continue
        step = estimate_step(cfg, cluster, setup, layout, efficiency)
        ranked.append(PlanResult(layout, memory, step, _limiter(step)))
    ranked.sort(key=lambda r: (-r.step.tokens_per_s, r.memory.total))
    result.n_fit = len(ranked)
    result.best = ranked[:top]
    result.elapsed_s = time.perf_counter() - start
    return result


def plan_fixed(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
               fields: dict[str, int | str], efficiency: float | None = None) -> PlanResult:
    """Evaluate one fully given layout (dp defaults to what the other fields leave)."""
    tp, pp = int(fields.get("tp", 1)), int(fields.get("pp", 1))
    dp = int(fields.get("dp", max(1, cluster.n_devices // (tp * pp))))
    layout = replace(Layout(dp), **{k: v for k, v in fields.items() if k != "dp"})
    problem = layout_problem(cfg, cluster, setup, layout)
    if problem:
        raise ConfigError("layout", problem)
    return evaluate(cfg, cluster, setup, layout, efficiency)
