"""The planner: enumerate parallel layouts, drop those that do not divide or fit, rank the rest.

Pure arithmetic (never imports torch): memory from accelbench.analytics.memory, step time from
accelbench.analytics.steptime, FLOPs from accelbench.analytics.flops.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

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

    @property
    def status(self) -> str:
        """'ok', or 'does not fit' (then the step time is what it would be if it fitted)."""
        return "ok" if self.memory.fits else "does not fit"

    def to_dict(self) -> dict[str, object]:
        """Plain dict for JSON; a layout that does not fit labels its rates hypothetical."""
        step_key = "step" if self.memory.fits else "step_if_it_fitted"
        return {"layout": self.layout.label(), **self.layout.__dict__, "status": self.status,
                "fits": self.memory.fits, "memory": self.memory.to_dict(),
                step_key: self.step.to_dict(), "limiter": self.limiter}


@dataclass
class SearchResult:
    """The ranked layouts and how the search went (for the speed benchmark and the CLI)."""

    best: list[PlanResult]
    n_evaluated: int = 0
    n_fit: int = 0
    elapsed_s: float = 0.0
    rejected: dict[str, int] = field(default_factory=dict)
    rejected_example: dict[str, str] = field(default_factory=dict)

    @property
    def layouts_per_s(self) -> float:
        """Evaluated layouts per second of search."""
        return self.n_evaluated / self.elapsed_s if self.elapsed_s > 0 else float("inf")

    def reject(self, key: str, reason: str) -> None:
        """Count one rejected layout under `key`, keeping the first full reason as an example."""
        self.rejected[key] = self.rejected.get(key, 0) + 1
        self.rejected_example.setdefault(key, reason)

    def rejection_summary(self) -> str:
        """'12 x heads (tp=3 does not divide 96 heads); ...', most frequent first."""
        keys = sorted(self.rejected, key=lambda k: -self.rejected[k])
        return "; ".join(f"{self.rejected[k]} x {k} ({self.rejected_example[k]})" for k in keys)


def divisors(n: int) -> list[int]:
    """Positive divisors of n, ascending."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _n_micro(setup: TrainSetup, layout: Layout) -> int:
    """Micro-batches per step per pipeline (0 when dp*mb exceeds the global batch)."""
    return setup.global_batch // max(1, layout.dp * layout.mb)


def _devices_reason(cluster: ClusterSpec, layout: Layout) -> str:
    """Why a layout does not occupy the cluster exactly."""
    n, model_ranks = cluster.n_devices, layout.tp * layout.pp
    if n % model_ranks:
        return f"tp*pp = {model_ranks} does not divide the cluster's {n} devices"
    return f"dp*tp*pp = {layout.n_devices} but the cluster has {n} devices"


_Rule = Callable[[ModelConfig, ClusterSpec, TrainSetup, Layout, int], str]
# Each rule's reason, built only for a layout that breaks it (the search checks thousands).
_REASONS: dict[str, _Rule] = {
    "devices": lambda c, cl, st, lay, m: _devices_reason(cl, lay),
    "heads": lambda c, cl, st, lay, m: f"tp={lay.tp} does not divide {c.n_head} heads",
    "mlp width": lambda c, cl, st, lay, m: f"tp={lay.tp} does not divide the MLP width "
                                           f"{c.ffn_dim}",
    "sequence parallel": lambda c, cl, st, lay, m: "sequence parallelism needs tp > 1",
    "sequence": lambda c, cl, st, lay, m: f"tp={lay.tp} does not divide sequence "
                                          f"{st.seq_len} (sequence parallel)",
    "layers": lambda c, cl, st, lay, m: f"pp*vp = {lay.pp * lay.vp} does not divide "
                                        f"{c.n_layer} layers",
    "batch": lambda c, cl, st, lay, m: f"dp*mb = {lay.dp * lay.mb} does not divide global "
                                       f"batch {st.global_batch}",
    "virtual stages": lambda c, cl, st, lay, m: "virtual stages need pp > 1",
    "micro-batches": lambda c, cl, st, lay, m: f"m = {m} micro-batches per step, fewer than "
                                               f"pp = {lay.pp} stages (needs m >= pp)",
    "interleaving": lambda c, cl, st, lay, m: f"interleaving needs the micro-batch count ({m}) "
                                              f"to be a multiple of pp={lay.pp}",
    "zero without dp": lambda c, cl, st, lay, m: f"ZeRO-{lay.zero} shards over data-parallel "
                                                 "ranks and needs dp > 1",
}


def _broken_rule(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup, lay: Layout,
                 m: int) -> str | None:
    """The key (in _REASONS) of the first rule the layout breaks, in the order reported."""
    rules = (
        ("devices", lay.n_devices != cluster.n_devices),
        ("heads", cfg.n_head % lay.tp != 0),
        ("mlp width", cfg.ffn_dim % lay.tp != 0),
        ("sequence parallel", bool(lay.sp) and lay.tp == 1),
        ("sequence", bool(lay.sp) and setup.seq_len % lay.tp != 0),
        ("layers", cfg.n_layer % (lay.pp * lay.vp) != 0),
        ("batch", setup.global_batch % (lay.dp * lay.mb) != 0),
        ("virtual stages", lay.vp > 1 and lay.pp == 1),
        ("micro-batches", lay.pp > 1 and m < lay.pp),
        ("interleaving", lay.vp > 1 and lay.pp > 1 and m % lay.pp != 0),
        ("zero without dp", lay.zero > 0 and lay.dp == 1),
    )
    return next((key for key, failed in rules if failed), None)


def layout_key_problem(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
                       layout: Layout) -> tuple[str, str] | None:
    """(short key, reason) of the first rule a layout breaks, or None when it can run."""
    m = _n_micro(setup, layout)
    key = _broken_rule(cfg, cluster, setup, layout, m)
    return None if key is None else (key, _REASONS[key](cfg, cluster, setup, layout, m))


def layout_problem(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
                   layout: Layout) -> str | None:
    """Why a layout cannot run on this cluster and model (does not divide), or None."""
    found = layout_key_problem(cfg, cluster, setup, layout)
    return found[1] if found else None


def _zero_choices(dp: int, pp: int) -> tuple[int, ...]:
    """ZeRO stages worth trying: none without data parallelism; all four with a pipeline too
    (FSDP per stage, as accelbench's runtime and torchtitan run it)."""
    return (0,) if dp == 1 else (0, 1, 2, 3)


def _pick(fixed: dict[str, int | str | bool], key: str, default: list[Any]) -> list[Any]:
    """The fixed value of `key` alone, else the search's own choices: a fixed value that does
    not divide is still tried, so that layout_problem says why it fails."""
    return [fixed[key]] if key in fixed else default


def _tp_pp_dp(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
              fixed: dict[str, int | str | bool]) -> Iterator[tuple[int, int, int]]:
    """(tp, pp, dp) candidates; tensor parallelism kept inside a node unless tp is fixed."""
    n = cluster.n_devices
    for tp in _pick(fixed, "tp", [t for t in divisors(n) if t <= cluster.devices_per_node]):
        for pp in _pick(fixed, "pp", divisors(n // tp) if n % tp == 0 else [1]):
            dp = int(fixed.get("dp", max(1, n // (tp * pp))))
            chosen = not fixed.keys() & {"tp", "pp", "dp"}
            if chosen and (setup.global_batch % dp or cfg.n_layer % pp):
                continue
            yield int(tp), int(pp), dp


def enumerate_layouts(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
                      fixed: dict[str, int | str | bool] | None = None) -> Iterator[Layout]:
    """Every candidate layout: fields in `fixed` are pinned, the others searched (sequence
    parallel both on and off when tp > 1)."""
    fixed = fixed or {}
    for tp, pp, dp in _tp_pp_dp(cfg, cluster, setup, fixed):
        per_rank = setup.global_batch // dp
        for mb in _pick(fixed, "mb", divisors(per_rank) if per_rank else [1]):
            vps = divisors(cfg.n_layer // pp) if pp > 1 and cfg.n_layer % pp == 0 else [1]
            for vp in _pick(fixed, "vp", vps):
                for zero in _pick(fixed, "zero", list(_zero_choices(dp, pp))):
                    for recompute in _pick(fixed, "recompute", list(RECOMPUTE_KINDS)):
                        for sp in _pick(fixed, "sp", [True, False] if tp > 1 else [False]):
                            yield Layout(dp, tp, pp, vp, mb, zero, recompute, sp)


def _limiter(step: StepBreakdown) -> str:
    """The largest loss against pure compute: bubble, exposed communication, or the recompute
    that memory forced (reported as memory); compute when all are small."""
    losses = {"bubble": step.bubble_s,
              "communication": step.tp_comm_s + step.pp_comm_s + step.dp_comm_exposed_s,
              "memory": step.recompute_s}
    name = max(losses, key=losses.__getitem__)
    return name if losses[name] >= COMPUTE_BOUND_BELOW * step.step_s else "compute"


def _memory(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
            layout: Layout) -> MemoryBreakdown:
    """The layout's memory per device under the set-up's attention kind."""
    return memory_per_device(cfg, setup.seq_len, layout, _n_micro(setup, layout), setup.dtype,
                             setup.optimizer, cluster.memory_bytes_per_device,
                             fused_attention=setup.fused_attention)


def evaluate(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup, layout: Layout,
             efficiency: float | None = None) -> PlanResult:
    """Memory and step time of one layout (which must divide; see layout_problem)."""
    memory = _memory(cfg, cluster, setup, layout)
    step = estimate_step(cfg, cluster, setup, layout, efficiency)
    return PlanResult(layout, memory, step, _limiter(step))


def search(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
           fixed: dict[str, int | str | bool] | None = None, top: int = 10,
           efficiency: float | None = None) -> SearchResult:
    """The `top` layouts by predicted tokens/s among those that divide and fit; the others
    are counted by reason in `rejected`."""
    start = time.perf_counter()
    result = SearchResult(best=[])
    ranked: list[PlanResult] = []
    for layout in enumerate_layouts(cfg, cluster, setup, fixed):
        result.n_evaluated += 1
        problem = layout_key_problem(cfg, cluster, setup, layout)
        if problem:
            result.reject(*problem)
            continue
        memory = _memory(cfg, cluster, setup, layout)
        if not memory.fits:
            result.reject("does not fit", f"{layout.label()} needs "
                          f"{memory.total / 1e9:.1f} GB of {memory.usable_bytes / 1e9:.1f}")
            continue
        step = estimate_step(cfg, cluster, setup, layout, efficiency)
        ranked.append(PlanResult(layout, memory, step, _limiter(step)))
    ranked.sort(key=lambda r: (-r.step.tokens_per_s, r.memory.total))
    result.n_fit = len(ranked)
    result.best = ranked[:top]
    result.elapsed_s = time.perf_counter() - start
    return result


def plan_fixed(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
               fields: dict[str, int | str | bool],
               efficiency: float | None = None) -> PlanResult:
    """Evaluate one fully given layout (dp defaults to what the other fields leave, sp to
    tp > 1); one that does not fit comes back with memory.fits False, for the caller to say."""
    tp, pp = int(fields.get("tp", 1)), int(fields.get("pp", 1))
    dp = int(fields.get("dp", max(1, cluster.n_devices // (tp * pp))))
    layout = replace(Layout(dp, tp), **{k: v for k, v in fields.items() if k != "dp"})
    problem = layout_problem(cfg, cluster, setup, layout)
    if problem:
        raise ConfigError("layout", problem)
    return evaluate(cfg, cluster, setup, layout, efficiency)
