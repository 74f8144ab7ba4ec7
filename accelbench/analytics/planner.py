"""The planner: enumerate parallel layouts, drop those that do not divide or fit, rank the rest.

Pure arithmetic (never imports torch): memory from accelbench.analytics.memory, step time from
accelbench.analytics.steptime, FLOPs from accelbench.analytics.flops. Layouts and their rules
are accelbench.config.layout's, the runtime's own: a layout that breaks an arithmetic rule is
rejected; one that breaks a runtime rule is ranked like any other and marked not built by
accelbench's runtime.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from accelbench.analytics.cluster import ClusterSpec
from accelbench.analytics.memory import MemoryBreakdown, memory_per_device
from accelbench.analytics.steptime import StepBreakdown, estimate_step
from accelbench.analytics.train_setup import TrainSetup
from accelbench.config.errors import ConfigError
from accelbench.config.fit import FITS
from accelbench.config.layout import Layout, default_schedule
from accelbench.config.layout_parse import layout_from_fields
from accelbench.config.layout_rules import ARITHMETIC, RUNTIME, Target, first_broken
from accelbench.config.model import ModelConfig
from accelbench.config.vocab import GB, RECOMPUTE_KINDS, ZERO_STAGES

LIMITERS = ("compute", "memory", "bubble", "communication")
COMPUTE_BOUND_BELOW = 0.05  # overheads under 5% of the step: the layout is compute-bound
NOT_BUILT = "not built by accelbench's runtime"


@dataclass(frozen=True)
class PlanResult:
    """One layout's prediction: memory, step time and what limits it; runtime_note says why
    accelbench's runtime does not build the layout (empty when it does)."""

    layout: Layout
    memory: MemoryBreakdown
    step: StepBreakdown
    limiter: str
    runtime_note: str = ""

    @property
    def status(self) -> str:
        """'ok', or 'does not fit' (then the step time is what it would be if it fitted)."""
        return "ok" if self.memory.fits else "does not fit"

    @property
    def built_by_runtime(self) -> bool:
        """Whether accelbench's own runtime builds this layout (no runtime rule broken)."""
        return not self.runtime_note

    def to_dict(self) -> dict[str, object]:
        """Plain dict for JSON; a layout that does not fit labels its rates hypothetical."""
        step_key = "step" if self.memory.fits else "step_if_it_fitted"
        note = f"{NOT_BUILT}: {self.runtime_note}" if self.runtime_note else ""
        return {"layout": self.layout.label(full=True), **self.layout.to_dict(),
                "status": self.status, FITS: self.memory.fits,
                "built_by_runtime": self.built_by_runtime, "runtime_note": note,
                "memory": self.memory.to_dict(), step_key: self.step.to_dict(),
                "limiter": self.limiter}


@dataclass
class SearchResult:
    """The ranked layouts and how the search went (for the speed benchmark and the CLI)."""

    best: list[PlanResult]
    n_evaluated: int = 0
    n_fit: int = 0
    elapsed_s: float = 0.0
    rejected: dict[str, int] = field(default_factory=dict)
    rejected_example: dict[str, str] = field(default_factory=dict)
    n_over_headroom: int = 0  # layouts that fit but use more than the headroom of memory

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


def plan_target(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup) -> Target:
    """What the rules check a planned layout against: the model, the cluster's devices, the
    sequence and the global batch."""
    return Target(cfg, cluster.n_devices, setup.seq_len, setup.global_batch)


def layout_key_problem(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
                       layout: Layout) -> tuple[str, str] | None:
    """(rule key, reason) of the first arithmetic rule a layout breaks, or None when it
    divides."""
    target, m = plan_target(cfg, cluster, setup), _n_micro(setup, layout)
    rule = first_broken(layout, target, m, (ARITHMETIC,))
    return None if rule is None else (rule.key, rule.reason(layout, target, m))


def layout_error(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
                 layout: Layout) -> tuple[str, ConfigError] | None:
    """(rule key, the rule's ConfigError) of the first arithmetic rule a layout breaks, or
    None when it divides."""
    target, m = plan_target(cfg, cluster, setup), _n_micro(setup, layout)
    rule = first_broken(layout, target, m, (ARITHMETIC,))
    return None if rule is None else (rule.key, rule.error(layout, target, m))


def layout_problem(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
                   layout: Layout) -> str | None:
    """Why a layout cannot run on this cluster and model (does not divide), or None."""
    found = layout_key_problem(cfg, cluster, setup, layout)
    return found[1] if found else None


def runtime_note(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
                 layout: Layout) -> str:
    """Why accelbench's runtime does not build this layout (its first broken runtime rule),
    or '' when it does."""
    target, m = plan_target(cfg, cluster, setup), _n_micro(setup, layout)
    rule = first_broken(layout, target, m, (RUNTIME,))
    return "" if rule is None else rule.reason(layout, target, m)


def _zero_choices(dp: int, pp: int) -> tuple[int, ...]:
    """ZeRO stages worth searching: none without data parallelism (nothing to shard: such a
    layout is allowed, as the runtime allows it, just not worth trying); all four with a
    pipeline too (FSDP per stage, as accelbench's runtime and torchtitan run it)."""
    return (0,) if dp == 1 else ZERO_STAGES


def _pick(fixed: dict[str, int | str | bool], key: str, default: list[Any]) -> list[Any]:
    """The fixed value of `key` alone, else the search's own choices: a fixed value that does
    not divide is still tried, so that layout_problem says why it fails."""
    return [fixed[key]] if key in fixed else default


# From this sequence length on the search also tries context parallelism (cp = 2, 4, ... 32
# where 2 x cp divides the sequence and the devices allow): shorter sequences gain nothing
# from splitting them, and the search stays fast.
CP_SEARCH_FROM_SEQ = 32768
CP_CHOICES = (1, 2, 4, 8, 16, 32)


def _cp_choices(setup: TrainSetup, n_devices: int, fixed: dict[str, int | str | bool]
                ) -> list[int]:
    """cp values worth trying: the fixed one, else 1, or for long sequences every CP_CHOICES
    value that divides the devices and whose 2 x cp chunks divide the sequence."""
    if "cp" in fixed:
        return [int(fixed["cp"])]
    if setup.seq_len < CP_SEARCH_FROM_SEQ:
        return [1]
    return [c for c in CP_CHOICES if n_devices % c == 0 and setup.seq_len % (2 * c) == 0]


def ep_choices(cfg: ModelConfig, dp: int) -> list[int]:
    """Expert-parallel sizes worth trying: 1 for a dense model; for a mixture of experts every
    divisor of dp that divides the experts (ep is carved out of dp)."""
    if not cfg.n_experts:
        return [1]
    return [e for e in divisors(dp) if cfg.n_experts % e == 0]


def _tp_pp_dp(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
              fixed: dict[str, int | str | bool]) -> Iterator[tuple[int, int, int, int]]:
    """(tp, pp, dp, cp) candidates; tensor parallelism kept inside a node unless tp is fixed."""
    n = cluster.n_devices
    for cp in _cp_choices(setup, n, fixed):
        for tp in _pick(fixed, "tp", [t for t in divisors(n // cp)
                                      if t <= cluster.devices_per_node] if n % cp == 0 else [1]):
            rest = n // (tp * cp) if n % (tp * cp) == 0 else 0
            for pp in _pick(fixed, "pp", divisors(rest) if rest else [1]):
                dp = int(fixed.get("dp", max(1, n // (tp * pp * cp))))
                chosen = not fixed.keys() & {"tp", "pp", "dp"}
                if chosen and (setup.global_batch % dp or cfg.n_layer % pp):
                    continue
                yield int(tp), int(pp), dp, cp


def enumerate_layouts(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
                      fixed: dict[str, int | str | bool] | None = None) -> Iterator[Layout]:
    """Every candidate layout: fields in `fixed` are pinned, the others searched (sequence
    parallel both on and off when tp > 1; the schedule 1F1B, interleaved when vp > 1; context
    parallelism from CP_SEARCH_FROM_SEQ on; expert parallelism for a mixture of experts,
    ep_choices)."""
    fixed = fixed or {}
    pinned = {key: fixed[key] for key in ("pp_first", "pp_last") if key in fixed}
    for tp, pp, dp, cp in _tp_pp_dp(cfg, cluster, setup, fixed):
        per_rank = setup.global_batch // dp
        for mb in _pick(fixed, "mb", divisors(per_rank) if per_rank else [1]):
            vps = divisors(cfg.n_layer // pp) if pp > 1 and cfg.n_layer % pp == 0 else [1]
            for vp in _pick(fixed, "vp", vps):
                for zero in _pick(fixed, "zero", list(_zero_choices(dp, pp))):
                    for recompute in _pick(fixed, "recompute", list(RECOMPUTE_KINDS)):
                        for sp in _pick(fixed, "sp", [True, False] if tp > 1 else [False]):
                            for schedule in _pick(fixed, "pp_schedule", [default_schedule(vp)]):
                                for ep in _pick(fixed, "ep", ep_choices(cfg, dp)):
                                    yield Layout(dp=dp, tp=tp, pp=pp, vp=vp, zero=zero,
                                                 sp=sp, pp_schedule=schedule, mb=mb,
                                                 recompute=recompute, cp=cp, ep=ep, **pinned)


def _limiter(step: StepBreakdown) -> str:
    """The largest loss against pure compute: bubble, exposed communication, or the recompute
    that memory forced (reported as memory); compute when all are small."""
    losses = {"bubble": step.bubble_s,
              "communication": step.comm_exposed_s,
              "memory": step.recompute_s}
    name = max(losses, key=losses.__getitem__)
    return name if losses[name] >= COMPUTE_BOUND_BELOW * step.step_s else "compute"


def _memory(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
            layout: Layout) -> MemoryBreakdown:
    """The layout's memory per device under the set-up's attention kind."""
    return memory_per_device(cfg, setup.seq_len, layout, _n_micro(setup, layout), setup.dtype,
                             setup.optimizer, cluster.memory_bytes_per_device,
                             fused_attention=setup.fused_attention,
                             sparsity=setup.sparsity, kernels=setup.kernels)


def evaluate(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup, layout: Layout,
             efficiency: float | None = None) -> PlanResult:
    """Memory and step time of one layout (which must divide; see layout_problem), marked
    when accelbench's runtime does not build it."""
    memory = _memory(cfg, cluster, setup, layout)
    step = estimate_step(cfg, cluster, setup, layout, efficiency)
    return PlanResult(layout=layout, memory=memory, step=step, limiter=_limiter(step),
                      runtime_note=runtime_note(cfg, cluster, setup, layout))


def search(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
           fixed: dict[str, int | str | bool] | None = None, top: int = 10,
           efficiency: float | None = None, headroom: float | None = None) -> SearchResult:
    """The `top` layouts by predicted tokens/s among those that divide and fit (those the
    runtime does not build included, marked); the others are counted by reason in
    `rejected`. With a memory `headroom` (a fraction of usable memory), layouts above it rank
    after every layout within it (envelope.memory_flag says so)."""
    start = time.perf_counter()
    result = SearchResult(best=[])
    ranked: list[PlanResult] = []
    target = plan_target(cfg, cluster, setup)
    for layout in enumerate_layouts(cfg, cluster, setup, fixed):
        result.n_evaluated += 1
        m = _n_micro(setup, layout)
        rule = first_broken(layout, target, m)
        if rule is not None and rule.kind == ARITHMETIC:  # arithmetic rules come first
            result.reject(rule.key, rule.reason(layout, target, m))
            continue
        memory = _memory(cfg, cluster, setup, layout)
        if not memory.fits:
            result.reject("does not fit", f"{layout.label(full=True)} needs "
                          f"{memory.total / GB:.1f} GB of {memory.usable_bytes / GB:.1f}")
            continue
        step = estimate_step(cfg, cluster, setup, layout, efficiency)
        note = "" if rule is None else rule.reason(layout, target, m)
        ranked.append(PlanResult(layout=layout, memory=memory, step=step,
                                 limiter=_limiter(step), runtime_note=note))
    limit = float("inf") if headroom is None else headroom
    ranked.sort(key=lambda r: (r.memory.total > limit * r.memory.usable_bytes,
                               -r.step.tokens_per_s, r.memory.total))
    result.n_fit = len(ranked)
    result.n_over_headroom = sum(r.memory.total > limit * r.memory.usable_bytes for r in ranked)
    result.best = ranked[:top]
    result.elapsed_s = time.perf_counter() - start
    return result


def fixed_layout(cluster: ClusterSpec, fields: dict[str, int | str | bool]) -> Layout:
    """The layout `plan --layout` names in full: dp defaults to what tp and pp leave of the
    cluster, sp to tp > 1 (Megatron's usual choice), the schedule to what vp implies."""
    tp, pp, cp = (int(fields.get(key, 1)) for key in ("tp", "pp", "cp"))
    return layout_from_fields({"dp": max(1, cluster.n_devices // (tp * pp * cp)), "sp": tp > 1,
                               **fields})


def plan_fixed(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
               fields: dict[str, int | str | bool],
               efficiency: float | None = None) -> PlanResult:
    """Evaluate one fully given layout (see fixed_layout); one that breaks an arithmetic rule
    raises that rule's ConfigError, one that does not fit comes back with memory.fits False,
    for the caller to say."""
    layout = fixed_layout(cluster, fields)
    broken = layout_error(cfg, cluster, setup, layout)
    if broken is not None:
        raise broken[1]
    return evaluate(cfg, cluster, setup, layout, efficiency)
