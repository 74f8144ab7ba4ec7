"""What one rank's steps of a training cell leave for the record: one dataclass, gathered from
every rank (all_gather_object) and combined by rank 0 (bench/train/cell_metrics.py). A diverged
rank carries the step and reason instead of timings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accelbench.parallel.topology import RankPlace


@dataclass
class RankResult:
    """One rank's timings, losses, memory, energy and the features' notes of one cell."""

    rank: int
    step_times_s: list[float]  # every step, warm-up included
    loss: list[float]
    place: RankPlace | None = None  # node and host (set where ranks are gathered)
    coords: dict[str, int] = field(default_factory=dict)  # mesh position: pp, dp, tp (cp)
    lr: list[float] = field(default_factory=list)
    data_wait_s: list[float] = field(default_factory=list)
    # every step's CPU seconds of forward and backward (a CPU device; empty elsewhere): the
    # rank's own work, which waiting in a collective does not add to (bench/train/straggler.py)
    compute_s: list[float] = field(default_factory=list)
    # every step's seconds blocked, neither running nor queued for a processor: waiting in
    # collectives or for data (a CPU device on Linux; empty elsewhere; bench/train/straggler.py)
    wait_s: list[float] = field(default_factory=list)
    timed_steps: int = 0
    step_time_s: float | None = None  # median of the timed steps
    optimizer: str = ""
    collective_s: float | None = None  # in collectives, the profiled step
    collective_source: str = "not profiled"
    all_to_all_s: float | None = None
    moe_load: dict[str, Any] | None = None  # this rank's routed/dropped tokens per expert
    mem_peak_bytes: int | None = None
    mem_base_bytes: int | None = None
    mem_method: str | None = None
    energy: dict[str, Any] | None = None  # the meter's result over the timed steps
    device_type: str = "cpu"
    sparsity_measured: float | None = None
    sparse_kernel: str | None = None
    sparse_kernel_reason: str | None = None
    float8: dict[str, Any] | None = None  # an fp8 cell's conversion
    disturbance: dict[str, Any] | None = None  # what else used the machine in the timed steps
    diverged_step: int | None = None  # the 1-based step whose loss was not finite
    reason: str = ""

    def raw(self) -> dict[str, Any]:
        """The per-step lists the record keeps raw, one entry a rank."""
        return {"step_times_s": self.step_times_s, "loss": self.loss, "lr": self.lr,
                "data_wait_s": self.data_wait_s, "compute_s": self.compute_s,
                "wait_s": self.wait_s,
                "collective_s": self.collective_s,
                "disturbance": self.disturbance}
