"""The collectives this implementation issues per step, and the bytes a rank sends in them.

comm_bytes_per_step is checked against the profiler's collectives; expert parallelism's
all-to-all is a kind of its own (ep), its routed rows the uniform-routing expectation. Time in
collectives is collective_time.py's, the pipeline bubble bubble.py's, Megatron's ideal volume
(the planner's model) ideal_comm.py's, the parameters a rank holds rank_params.py's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from accelbench.analytics.moe_cost import moe_tokens, shared_params
from accelbench.analytics.training_widths import BYTES_PER_VALUE
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig
from accelbench.config.runtime_settings import LEAN, RuntimeSettings, mixed_precision, reduce_bytes
from accelbench.parallel.context import placement
from accelbench.parallel.rank_params import (
    kv_share,
    local_param_split,
    rank_layers,
    rank_moe_layers,
)

# What this implementation sends (measured with the profiler at dp=2, gas=2, gloo; see
# docs/parallel.md): parameters and gradients are fp32 (autocast keeps fp32 master weights),
# and so is the residual stream, hence pipeline messages and SP's all-gathers of norm outputs.
FP32_BYTES = 4
INT64_BYTES = 8  # expert parallelism's per-expert row counts
COMM_KINDS = ("tp", "pp", "dp", "tied", "ep", "cp")


@dataclass(frozen=True)
class CommCall:
    """Collectives of one kind that one rank issues per optimizer step."""

    kind: str  # 'tp', 'pp' (stage messages), 'dp', 'tied' (embedding and head copy), 'ep', 'cp'
    op: str  # all_reduce, all_gather, reduce_scatter, broadcast, send or all_to_all
    buffer_bytes: float  # one call's whole (unsharded) buffer; all_to_all: this rank's input
    calls: float  # calls per optimizer step
    group_size: int


def call_bytes_sent(call: CommCall, backend: str = "nccl") -> float:
    """Bytes one rank sends for these calls: ring all-reduce 2(n-1)/n of the buffer, all-gather,
    reduce-scatter, broadcast and all-to-all (n-1)/n, a send the buffer. gloo runs a
    reduce-scatter as an all-reduce of the whole buffer (seen in the profiler), so it costs an
    all-reduce there."""
    op = "all_reduce" if call.op == "reduce_scatter" and backend == "gloo" else call.op
    n = call.group_size
    factor = 1.0 if op == "send" else (n - 1) / n * (2 if op == "all_reduce" else 1)
    return factor * call.buffer_bytes * call.calls


def _tp_calls(cfg: ModelConfig, layout: Layout, act_bytes_fp32: float, compute_bytes: int,
              n_micro: int, recompute: str, pp_rank: int) -> list[CommCall]:
    """Per layer and micro-batch: 2 forward collectives in the compute dtype (row-parallel
    outputs) and 2 backward in fp32 (input gradients of the column-parallel layers, whose
    input, a norm output, is fp32); an MoE layer, whose MLP is not split, 1 of each (its
    attention's). Full recompute reruns the forward ones. SP splits each all-reduce into
    all-gather + reduce-scatter and gathers at the model's edges in fp32.
    Key/value heads shared by r ranks add a gather of the head in forward and a reduce-scatter
    of its gradient in backward, per layer, within the r ranks (_kv_calls)."""
    if layout.tp == 1:
        return []
    t, layers = layout.tp, rank_layers(cfg, layout, pp_rank) * n_micro
    n_moe = len(rank_moe_layers(cfg, layout, pp_rank)) if cfg.n_experts else 0
    sites = 2 * layers - n_moe * n_micro  # split collectives per direction
    act_compute = act_bytes_fp32 / FP32_BYTES * compute_bytes
    fwd = 2 * sites if recompute == "full" else sites
    kv = _kv_calls(cfg, t, act_compute, layers, recompute)
    if not layout.sp:
        return [CommCall("tp", "all_reduce", act_compute, fwd, t),
                CommCall("tp", "all_reduce", act_bytes_fp32, sites, t)] + kv
    edges = (pp_rank == 0) + (pp_rank == layout.pp - 1)  # embedding grads, head input
    return [CommCall("tp", "all_gather", act_bytes_fp32, fwd + edges * n_micro, t),
            CommCall("tp", "reduce_scatter", act_compute, fwd, t),
            CommCall("tp", "all_gather", act_compute, sites, t),
            CommCall("tp", "reduce_scatter", act_bytes_fp32, sites, t)] + kv


def _kv_calls(cfg: ModelConfig, tp: int, act_compute: float, layers: int,
              recompute: str) -> list[CommCall]:
    """A shared key/value head's [k | v] (2 x head_dim of the d_model columns of the
    activation, in the compute dtype, whole sequence) gathered in forward (again under full
    recompute) and its gradient reduce-scattered in backward, within the r sharing ranks."""
    share = kv_share(cfg.kv_heads, tp)
    if share == 1:
        return []
    kv_bytes = act_compute * 2 * cfg.head_dim / cfg.d_model
    gathers = 2 * layers if recompute == "full" else layers
    return [CommCall("tp", "all_gather", kv_bytes, gathers, share),
            CommCall("tp", "reduce_scatter", kv_bytes, layers, share)]


def _pp_calls(layout: Layout, act_bytes_fp32: float, n_micro: int,
              pp_rank: int) -> list[CommCall]:
    """Each of this rank's stages sends its fp32 output forward (not the last stage) and its
    input gradient backward (not the first) per micro-batch; under SP each tp rank its shard."""
    if layout.pp == 1:
        return []
    n_stages = layout.n_stages
    sends = sum((s < n_stages - 1) + (s > 0) for s in range(pp_rank, n_stages, layout.pp))
    message = act_bytes_fp32 / (layout.tp if layout.sp else 1)
    return [CommCall("pp", "send", message, sends * n_micro, 2)]


def _dp_calls(layout: Layout, grad_bytes: float, n_micro: int, group_size: int | None = None,
              fsdp: bool = True, gathered_per_grad: float = 1.0) -> list[CommCall]:
    """ZeRO 0: one all-reduce per step (DDP's no_sync, or one flat all-reduce); ZeRO 1 adds
    ZeroRedundancyOptimizer's broadcast of the updated parameters; FSDP2 (ZeRO 2/3) gathers
    and reduce-scatters every micro-batch, ZeRO-3 gathers again for the backward. Under pp
    the schedule keeps FSDP's parameters gathered through a step's micro-batches after a
    backward and defers the reduce-scatter to the step's end. group_size: dp, or the
    expert-data-parallel group's dp / ep for the experts; FSDP2 over a group of one (fsdp
    False) issues nothing, while the all-reduce and ZeRO-1's broadcasts still run.
    gathered_per_grad: an all-gathered parameter's bytes over a reduced gradient's (FSDP2's
    bf16 policy gathers 2 bytes and reduces 4, or 2 with reduce=bf16)."""
    n = layout.dp if group_size is None else group_size
    if layout.dp == 1 or not grad_bytes:
        return []
    reduce = CommCall("dp", "all_reduce", grad_bytes, 1, n)
    if layout.zero <= 1:
        return [reduce] + ([CommCall("dp", "broadcast", grad_bytes, 1, n)] if layout.zero else [])
    if not fsdp:
        return []
    if layout.pp > 1:
        gathers, scatters = (n_micro + 1 if layout.zero == 3 else 1), 1
    else:
        gathers, scatters = (2 * n_micro if layout.zero == 3 else n_micro), n_micro
    return [CommCall("dp", "all_gather", grad_bytes * gathered_per_grad, gathers, n),
            CommCall("dp", "reduce_scatter", grad_bytes, scatters, n)]


def _data_parallel_calls(layout: Layout, dense_bytes: float, expert_bytes: float,
                         n_micro: int, gathered_per_grad: float = 1.0) -> list[CommCall]:
    """Gradients reduced as the runtime does: at ep 1 all of them over dp as one; under ep the
    dense ones over dp and the experts over their expert-data-parallel group (dp / ep ranks:
    grad_sync.py and the pipeline at zero 0, ExpertZeroOptimizer's two parts at zero 1, FSDP2
    with the experts sharded over that group at zero 2/3)."""
    g = gathered_per_grad
    if layout.ep == 1:
        return _dp_calls(layout, dense_bytes + expert_bytes, n_micro, gathered_per_grad=g)
    edp = layout.dp // layout.ep
    return (_dp_calls(layout, dense_bytes, n_micro, gathered_per_grad=g)
            + _dp_calls(layout, expert_bytes, n_micro, edp, fsdp=edp > 1, gathered_per_grad=g))


def _sp_moe_calls(layout: Layout, dense_moe_bytes: float, expert_bytes: float,
                  n_micro: int) -> list[CommCall]:
    """Sequence parallelism: each tp rank routed its sequence shard, so the MoE layers'
    gradients (router, shared and this rank's experts) are summed over tp: at zero 0/1 once per
    step, whole; at zero 2/3 by FSDP2's all-reduce hook on each reduce-scattered shard (the MoE
    unit's over dp, the experts' over their group, or with the unit at ep 1)."""
    if not (layout.sp and layout.tp > 1 and (dense_moe_bytes or expert_bytes)):
        return []
    if layout.zero <= 1:
        return [CommCall("tp", "all_reduce", dense_moe_bytes + expert_bytes, 1, layout.tp)]
    scatters = 1 if layout.pp > 1 else n_micro
    edp = layout.dp // layout.ep
    if layout.ep == 1:
        shard = (dense_moe_bytes + expert_bytes) / layout.dp
    else:
        shard = dense_moe_bytes / layout.dp + expert_bytes / edp
    return [CommCall("tp", "all_reduce", shard, scatters, layout.tp)]


def _ep_calls(cfg: ModelConfig, layout: Layout, seq_len: int, micro_batch: int,
              n_micro: int, compute_bytes: int, recompute: str, pp_rank: int) -> list[CommCall]:
    """Expert parallelism's all-to-alls over the ep group, per MoE layer and micro-batch: the
    per-expert row counts (E int64) once per forward; the routed rows (d_model values each) in
    the dispatch (fp32: a norm output) and its gradient, in the combine (the experts' output,
    compute dtype) and its gradient; full recompute reruns the forward's. How many rows a rank
    sends and receives depends on the routing: the buffers are the expectation under uniform
    routing, each rank its tokens x k rows (of which (ep-1)/ep leave it), capped by the
    capacity (the runtime drops, not pads); the ep group's summed buffers are exact."""
    n_moe = len(rank_moe_layers(cfg, layout, pp_rank)) if cfg.n_experts else 0
    if layout.ep == 1 or not n_moe:
        return []
    tokens = moe_tokens(seq_len * micro_batch, layout.tp, layout.sp)
    rows = float(tokens * cfg.moe_top_k)
    if cfg.capacity_factor > 0:
        rows = min(rows, cfg.n_experts * math.ceil(cfg.capacity_factor * rows / cfg.n_experts))
    forwards = 2 if recompute == "full" else 1  # 2 x forwards + 2 = moe_cost's count
    per_step = n_moe * n_micro
    return [CommCall("ep", "all_to_all", INT64_BYTES * cfg.n_experts, forwards * per_step,
                     layout.ep),
            CommCall("ep", "all_to_all", rows * cfg.d_model * FP32_BYTES,
                     (forwards + 1) * per_step, layout.ep),
            CommCall("ep", "all_to_all", rows * cfg.d_model * compute_bytes,
                     (forwards + 1) * per_step, layout.ep)]


def _cp_calls(cfg: ModelConfig, layout: Layout, seq_len: int, micro_batch: int, n_micro: int,
              compute_bytes: int, recompute: str, pp_rank: int = 0) -> list[CommCall]:
    """Context parallelism (parallel/context.py): each layer all-gathers the whole sequence's
    keys and values over cp in every forward (again when full recompute reruns the block) and
    reduce-scatters their gradients in the backward."""
    if layout.cp == 1:
        return []
    # keys and values of the whole sequence, this tensor rank's heads (cp needs tp | kv heads)
    kv = 2 * micro_batch * seq_len * cfg.kv_dim // layout.tp * compute_bytes
    layers = rank_layers(cfg, layout, pp_rank) * n_micro
    forwards = 2 if recompute == "full" else 1
    return [CommCall("cp", "all_gather", kv, layers * forwards, layout.cp),
            CommCall("cp", "reduce_scatter", kv, layers, layout.cp)]


def _tied_calls(cfg: ModelConfig, layout: Layout, pp_rank: int) -> list[CommCall]:
    """Under pp a tied head's copy and the embedding sum their gradients once per step between
    the first and last stage (each tensor rank whole; under ZeRO 2/3 each rank its shard of
    the dp x cp ranks FSDP2 shards over)."""
    if not cfg.tie_embeddings or layout.pp == 1 or 0 < pp_rank < layout.pp - 1:
        return []
    shards = placement(layout).dp if layout.zero >= 2 else 1
    grad = FP32_BYTES * cfg.padded_vocab * cfg.d_model / shards
    return [CommCall("tied", "all_reduce", grad, 1, 2)]


def comm_calls_per_step(cfg: ModelConfig, layout: Layout, seq_len: int, micro_batch: int,
                        n_micro: int, dtype: str, recompute: str = "none",
                        pp_rank: int = 0, settings: RuntimeSettings = LEAN) -> list[CommCall]:
    """The collectives one rank at pipeline position pp_rank issues per step in this
    implementation (scalar ones, the loss and the gradient norm, and SP's small all-reduces
    of norm and bias gradients left out, and under sp the MoE layers' small sums of their
    per-expert counts and mean router scores over tp). Data-parallel gradients move in the
    width the runtime reduces them in and FSDP2's parameters in the width it gathers
    (config/runtime_settings.py: fp32, but bf16 gathers under FSDP2's bf16 policy)."""
    act = FP32_BYTES * micro_batch * seq_len // layout.cp * cfg.d_model  # this rank's tokens
    compute_bytes = BYTES_PER_VALUE[dtype]
    placed = placement(layout)
    grad_width = reduce_bytes(settings, placed, dtype)
    gathered = (2 if mixed_precision(settings, placed, dtype) else FP32_BYTES) / grad_width
    dense, expert = (grad_width * n for n in local_param_split(cfg, layout, pp_rank))
    n_moe = len(rank_moe_layers(cfg, layout, pp_rank)) if cfg.n_experts else 0
    moe_dense = FP32_BYTES * n_moe * shared_params(cfg)
    return (_tp_calls(cfg, layout, act, compute_bytes, n_micro, recompute, pp_rank)
            + _sp_moe_calls(layout, moe_dense, expert, n_micro)
            + _pp_calls(layout, act, n_micro, pp_rank)
            + _data_parallel_calls(placed, dense, expert, n_micro, gathered)  # dp x cp
            + _cp_calls(cfg, layout, seq_len, micro_batch, n_micro, compute_bytes, recompute,
                        pp_rank)
            + _tied_calls(cfg, layout, pp_rank)
            + _ep_calls(cfg, layout, seq_len, micro_batch, n_micro, compute_bytes, recompute,
                        pp_rank))


def comm_bytes_per_step(cfg: ModelConfig, layout: Layout, seq_len: int, micro_batch: int,
                        n_micro: int, dtype: str, recompute: str = "none", pp_rank: int = 0,
                        backend: str = "nccl", settings: RuntimeSettings = LEAN
                        ) -> dict[str, float]:
    """Bytes one rank at pipeline position pp_rank sends per optimizer step, by kind, as this
    implementation communicates (comm_calls_per_step), and their sum."""
    calls = comm_calls_per_step(cfg, layout, seq_len, micro_batch, n_micro, dtype, recompute,
                                pp_rank, settings)
    out = {f"{kind}_bytes_per_step": sum(call_bytes_sent(c, backend) for c in calls
                                         if c.kind == kind) for kind in COMM_KINDS}
    out["comm_bytes_per_step"] = sum(out.values())
    return out


def busiest_rank_comm_bytes(cfg: ModelConfig, layout: Layout, seq_len: int, micro_batch: int,
                            n_micro: int, dtype: str, recompute: str = "none",
                            backend: str = "nccl", settings: RuntimeSettings = LEAN
                            ) -> tuple[int, dict[str, float]]:
    """(pipeline rank, its bytes by kind) of the pipeline position that sends the most; every
    rank of one pipeline position sends the same."""
    per_rank = [comm_bytes_per_step(cfg, layout, seq_len, micro_batch, n_micro, dtype,
                                    recompute, r, backend, settings) for r in range(layout.pp)]
    busiest = max(range(layout.pp), key=lambda r: per_rank[r]["comm_bytes_per_step"])
    return busiest, per_rank[busiest]
