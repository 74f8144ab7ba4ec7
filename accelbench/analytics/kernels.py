"""FLOPs and bytes of one call of each kernel `accelbench calibrate` times; no torch.

Counting follows analytics/flops.py (and torch.utils.flop_counter.FlopCounterMode): a
multiply-add is 2 FLOPs, attention scores are counted over the full T x T matrix even when the
kernel is causal, a backward costs twice its forward. Bytes are the least traffic a call must
make (each operand read once, each result written once). Collective sizes and bus bandwidth
follow nccl-tests (doc/PERFORMANCE.md): the size is the whole buffer, algbw = size / time,
busbw = algbw x 2(n-1)/n for all-reduce, x (n-1)/n for all-gather, reduce-scatter and
all-to-all, x 1 for point-to-point, the ring volumes of analytics/comm.py.
"""

from __future__ import annotations

from accelbench.analytics.comm import allreduce_bytes_per_rank, gather_bytes_per_rank
from accelbench.config.errors import require_choice
from accelbench.config.model import ModelConfig

# fp32 AdamW: param, grad, exp_avg, exp_avg_sq read; param and both moments written (4 B each)
ADAMW_BYTES_PER_PARAM = 28
STREAM_OPS = ("copy", "adamw")
# the train loop's update (bench/train/steps.py): the global gradient norm reads every
# gradient (4 B), the clip scales them in place (read and write, 8 B), then fp32 AdamW (28 B)
OPTIMIZER_BYTES_PER_PARAM = 4 + 8 + ADAMW_BYTES_PER_PARAM
LOSS_BYTES = 4  # the loss runs in fp32 (models/gpt.py: cross_entropy(logits.float()))
ATTENTION_DIRECTIONS = ("forward", "backward")
COLLECTIVE_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
LAYER_GEMMS = ("qkv", "attn_out", "mlp_up", "mlp_down")
# a linear layer's three products: y = x @ w.T, dx = dy @ w, dw = dy.T @ x
GEMM_PASSES = ("forward", "input_grad", "weight_grad")


def gemm_flops(m: int, k: int, n: int) -> float:
    """An (m x k) @ (k x n) product: m*n dot products of k multiply-adds."""
    return 2.0 * m * k * n


def gemm_bytes(m: int, k: int, n: int, bytes_per_value: int) -> float:
    """Both operands read and the result written once."""
    return float((m * k + k * n + m * n) * bytes_per_value)


def layer_gemm_shapes(cfg: ModelConfig, tokens: int) -> tuple[tuple[str, int, int, int], ...]:
    """(name, m, k, n) of the forward GEMMs of one transformer layer over `tokens` rows: the
    fused QKV projection (keys and values kv_heads wide), the attention output, the MLP input
    (twice as wide with a SwiGLU gate) and the MLP output."""
    h, ffn = cfg.d_model, cfg.ffn_dim
    kv = cfg.kv_heads * cfg.head_dim
    up = 2 * ffn if cfg.activation == "swiglu" else ffn
    return (("qkv", tokens, h, h + 2 * kv), ("attn_out", tokens, h, h),
            ("mlp_up", tokens, h, up), ("mlp_down", tokens, ffn, h))


def pass_shape(gemm_pass: str, m: int, k: int, n: int) -> tuple[int, int, int]:
    """(m, k, n) of one pass's product for a forward (m x k) @ (k x n): the input gradient is
    (m x n) @ (n x k), the weight gradient (n x m) @ (m x k); each costs the forward's FLOPs."""
    require_choice("gemm pass", gemm_pass, GEMM_PASSES)
    if gemm_pass == "forward":
        return m, k, n
    return (m, n, k) if gemm_pass == "input_grad" else (n, m, k)


def attention_flops(batch: int, heads: int, seq: int, head_dim: int, direction: str) -> float:
    """Scaled-dot-product attention over full seq x seq scores: QK^T and PV, 2*s*s*d FLOPs each
    per head forward; the backward's four products (dV, dP, dQ, dK) twice that."""
    require_choice("direction", direction, ATTENTION_DIRECTIONS)
    forward = 4.0 * batch * heads * seq * seq * head_dim
    return forward if direction == "forward" else 2.0 * forward


def attention_bytes(batch: int, heads: int, seq: int, head_dim: int, bytes_per_value: int,
                    direction: str) -> float:
    """A fused kernel's least traffic: Q, K, V read and O written forward; backward also reads
    O and dO and writes dQ, dK, dV."""
    require_choice("direction", direction, ATTENTION_DIRECTIONS)
    tensors = 4 if direction == "forward" else 8
    return float(tensors * batch * heads * seq * head_dim * bytes_per_value)


def stream_bytes(op: str, numel: int, bytes_per_value: int) -> float:
    """Bytes a streaming op moves: a copy reads and writes each element; an fp32 AdamW step
    reads four tensors and writes three (ADAMW_BYTES_PER_PARAM; bytes_per_value is ignored)."""
    require_choice("op", op, STREAM_OPS)
    if op == "copy":
        return 2.0 * numel * bytes_per_value
    return float(ADAMW_BYTES_PER_PARAM * numel)


def loss_bytes(tokens: int, vocab: int, bytes_per_value: int) -> float:
    """Cross-entropy over (tokens x vocab) logits, forward and backward, as the model runs it:
    log-softmax reads the fp32 logits and writes log-probabilities (2 values an element); the
    backward fills the gradient of the log-probabilities with zeros (1), and the log-softmax
    backward reads it and the log-probabilities and writes the logits' gradient (3); logits of
    a narrower dtype are cast to fp32 first and their gradient back (read b, write 4, read 4,
    write b). The per-token gather of the targets is left out (tokens, not tokens x vocab)."""
    elements = tokens * vocab
    cast = 0 if bytes_per_value == LOSS_BYTES else 2 * (bytes_per_value + LOSS_BYTES)
    return float(elements * (6 * LOSS_BYTES + cast))


def embedding_bytes(tokens: int, rows: int, width: int, tied: bool,
                    bytes_per_value: int = 4) -> float:
    """A token embedding's forward and backward: the gather reads and writes tokens x width;
    the dense backward zero-fills the rows x width gradient, then adds each token's gradient
    into its row (read the gradient, read and write the row: 3 x tokens x width); a table tied
    to the output head adds the head's gradient out of place (read two, write one: 3 x rows x
    width)."""
    values = 5 * tokens * width + rows * width * (4 if tied else 1)
    return float(values * bytes_per_value)


def optimizer_bytes(n_params: int) -> float:
    """One update of the train loop over n fp32 parameters: the gradient norm, the clip and
    AdamW (OPTIMIZER_BYTES_PER_PARAM)."""
    return float(OPTIMIZER_BYTES_PER_PARAM * n_params)


def bus_factor(op: str, ranks: int) -> float:
    """nccl-tests' busbw / algbw: the ring volume per rank over the buffer."""
    require_choice("op", op, COLLECTIVE_OPS)
    if op == "send_recv":
        return 1.0
    if op == "all_reduce":
        return allreduce_bytes_per_rank(1.0, ranks)
    return gather_bytes_per_rank(1.0, ranks)


def collective_elements(op: str, message_bytes: int, bytes_per_value: int,
                        ranks: int) -> tuple[int, int]:
    """(input, output) elements of one rank's buffers for a message of `message_bytes` (the
    nccl-tests size: all-gather's output, reduce-scatter's input, the whole buffer otherwise),
    rounded down to a multiple of `ranks` so that every rank gets an equal share."""
    require_choice("op", op, COLLECTIVE_OPS)
    total = max(message_bytes // bytes_per_value // ranks, 1) * ranks
    if op == "all_gather":
        return total // ranks, total
    if op == "reduce_scatter":
        return total, total // ranks
    return total, total
