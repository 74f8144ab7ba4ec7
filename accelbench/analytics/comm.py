"""Communication volumes and times of the parallel layouts (bytes per rank, seconds); no torch.

Volumes follow ring accounting (as NCCL's bus-bandwidth notes do): an all-reduce moves
2(n-1)/n of the buffer per rank, reduce-scatter and all-gather (n-1)/n each; Megatron tensor
parallelism does 2 all-reduces of
b*s*h values in the forward and 2 in the backward of every layer (with sequence parallelism the
same volume as all-gather plus reduce-scatter); pipeline stages send b*s*h values per
micro-batch each way (b*s*h/t with the scatter/gather optimisation); data parallelism moves 2x
the gradient bytes per step under ZeRO 0-2 and 3x (1.5 times) under ZeRO-3 (ZeRO sec. 7);
context parallelism passes each rank's key/value chunk around the cp ring (ring attention).
Every activation and gradient is sent at the precision's communication width (BF16 under FP8
training: precision.training_widths).
"""

from __future__ import annotations

import math

from accelbench.analytics.activations import kv_width_per_rank
from accelbench.analytics.training_widths import training_widths
from accelbench.config.model import ModelConfig


def allreduce_bytes_per_rank(buffer_bytes: float, n: int) -> float:
    """Ring all-reduce: each rank sends (and receives) 2(n-1)/n of the buffer."""
    return 2 * (n - 1) / n * buffer_bytes


def gather_bytes_per_rank(buffer_bytes: float, n: int) -> float:
    """Ring reduce-scatter or all-gather of a buffer of the full size: (n-1)/n of it per rank."""
    return (n - 1) / n * buffer_bytes


def collective_time_s(bytes_per_rank: float, n: int, bytes_per_s: float, latency_s: float,
                      n_ops: int = 1) -> float:
    """Bandwidth term of a ring plus a latency term of 2*ceil(log2 n) hops per op (tree-like).

    Zero for a group of one rank.
    """
    if n <= 1:
        return 0.0
    return bytes_per_rank / bytes_per_s + n_ops * latency_s * 2 * math.ceil(math.log2(n))


def tp_collectives_per_layer(recompute: str) -> int:
    """All-reduces per layer per micro-batch: 2 forward + 2 backward, +2 when full recompute
    reruns the forward (selective recompute reruns only the attention core, no collective)."""
    return 6 if recompute == "full" else 4


def tp_message_bytes(cfg: ModelConfig, seq_len: int, micro_batch: int, dtype: str) -> float:
    """One tensor-parallel all-reduce's buffer: the layer's b*s*h activations."""
    return seq_len * micro_batch * cfg.d_model * training_widths(dtype).comm


def tp_bytes_per_layer(cfg: ModelConfig, seq_len: int, micro_batch: int, dtype: str, tp: int,
                       recompute: str = "none") -> float:
    """Bytes each tensor rank sends per layer per micro-batch (forward + backward)."""
    message = tp_message_bytes(cfg, seq_len, micro_batch, dtype)
    return tp_collectives_per_layer(recompute) * allreduce_bytes_per_rank(message, tp)


def pp_message_bytes(cfg: ModelConfig, seq_len: int, micro_batch: int, dtype: str,
                     tp: int) -> float:
    """One point-to-point send between stages: b*s*h values, split over tp (scatter/gather)."""
    return seq_len * micro_batch * cfg.d_model * training_widths(dtype).comm / tp


def cp_rounds_per_layer(recompute: str) -> int:
    """Ring passes per layer per micro-batch: K and V in the forward; K and V again plus dK and
    dV in the backward (twice the forward's volume); recompute of any kind reruns the attention
    core and so its forward ring once more."""
    return 3 if recompute == "none" else 4


def cp_bytes_per_layer(cfg: ModelConfig, seq_len: int, micro_batch: int, dtype: str, tp: int,
                       cp: int, recompute: str = "none") -> float:
    """Bytes each rank sends per layer per micro-batch under context parallelism (ring
    attention, Megatron's): its chunk of s/cp tokens' keys and values (2 x kv values each,
    kv the KV width a tensor rank holds) goes cp - 1 hops per pass (cp_rounds_per_layer)."""
    if cp == 1:
        return 0.0
    kv = kv_width_per_rank(cfg, tp) / tp
    chunk = 2 * seq_len / cp * micro_batch * kv * training_widths(dtype).comm
    return cp_rounds_per_layer(recompute) * (cp - 1) * chunk


def pp_sends_per_microbatch(vp: int) -> int:
    """Sends per micro-batch per rank: one forward and one backward per model chunk."""
    return 2 * vp


def dp_bytes_per_rank(grad_bytes: float, dp: int, zero: int, n_micro: int = 1,
                      pp: int = 1, weight_bytes: float | None = None) -> float:
    """Data-parallel bytes each rank sends per optimizer step: `grad_bytes` are the gradients
    at the reduction's width, `weight_bytes` the weights ZeRO gathers at theirs (by default
    grad_bytes: one width for both).

    ZeRO 0: one all-reduce of the gradients, 2(n-1)/n. ZeRO 1: a reduce-scatter of the
    gradients and an all-gather of the updated weights (Megatron's distributed optimizer).
    ZeRO 2: gradients are sharded, so they are reduce-scattered after every micro-batch, and
    the updated weights all-gathered once. ZeRO 3: every micro-batch all-gathers the weights
    for the forward and again for the backward and reduce-scatters the gradients: 3(n-1)/n.
    With one micro-batch and one width this is ZeRO's 2 : 2 : 2 : 3. Under a pipeline (FSDP
    per stage, as accelbench and torchtitan run it) the reduce-scatter waits for the step's
    last micro-batch: ZeRO 2 then gathers once and reduce-scatters once; ZeRO 3 gathers m + 1
    times (every forward, and once more for the backwards, measured by accelbench's profiler
    test).
    """
    reduce = gather_bytes_per_rank(grad_bytes, dp)
    gather = gather_bytes_per_rank(grad_bytes if weight_bytes is None else weight_bytes, dp)
    if zero == 0:
        return 2 * reduce
    if zero == 1:
        return reduce + gather
    if pp > 1:
        return reduce + gather * (1 if zero == 2 else n_micro + 1)
    if zero == 2:
        return n_micro * reduce + gather
    return n_micro * (reduce + 2 * gather)


def dp_collective_ops(zero: int, n_micro: int, pp: int = 1) -> int:
    """Collective calls per step, for the latency term (bucketing ignored)."""
    if zero <= 1:
        return 1
    if pp > 1:
        return 2 if zero == 2 else n_micro + 2
    return n_micro + 1 if zero == 2 else 3 * n_micro
