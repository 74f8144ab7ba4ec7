"""The mixture-of-experts MLP of the one decoder (Mixtral, Qwen-MoE, DeepSeek-MoE by config).

One MoE layer, for the tokens x of shape (T, d_model) that reach it:

    route(x)      -> Routing: the kept (token, expert, gate) assignments sorted by expert, the
                     tokens routed to and dropped by each expert (router: one d_model x E matrix,
                     softmax or sigmoid scores, top-k, the k gates renormalised or not, capacity)
    dispatch(x, routing, experts) -> (T, d_model): every token's gated sum over its experts
    + shared experts (one MLP every token visits; Qwen-MoE: times a sigmoid gate)

The seam for expert parallelism is `MoE.dispatch`, a callable `(x, routing, experts) -> y`.
`local_dispatch` (the default) gathers each assignment's token in expert order
(`permute`), runs `experts(x_sorted, counts)` (the experts held here, on contiguous groups of
rows, one group per expert in order) and adds the gated rows back to their tokens (`combine`).
An expert-parallel dispatch replaces it (`set_dispatch`): permute, exchange the per-expert
counts and then the rows over the ep group with all_to_all_single so that each rank holds the
rows of its own experts, run its `Experts` (built with `n_local` experts starting at
`first_expert`, or sliced by `Experts.shard`), send the rows back the same way and combine.
Routing, the gates, capacity drops, the load counters and the auxiliary loss stay in this
module and are identical under any dispatch.

Capacity: with capacity_factor cf > 0 each expert takes at most ceil(cf x T x k / E) of the
assignments of the T tokens in one forward, first come (token order) first served; the rest are
dropped (that expert adds nothing to that token) and counted. cf 0 is dropless.

Auxiliary load-balancing loss (Switch Transformer eq. 4, in Mixtral's form as transformers
computes it): E x sum_e f_e x P_e, with f_e the tokens that chose expert e among their top k
(before drops) over T, and P_e the mean router probability of e (sigmoid scores normalised per
token first). The model adds aux_loss_coef times the mean of its MoE layers' losses. Its
gradient reaches the router through `AuxLossAutoScaler` on each layer's output (Megatron-Core's
technique), not through the loss tensor: the output's backward also gives the layer's loss
coef / L times the factor the backward gives the model's loss (`AuxLossGradScale`: set by the
loss itself in one process, 1 / micro-batches by a pipeline stage), so the same mechanism works
on a pipeline stage that never sees the loss. The loss's value still includes the term.

Load: `tokens_routed` and `tokens_dropped` (per expert, this process's tokens) add up over
forwards until `reset_load`; the rerun forward of full recompute does not count twice. They
live on the layer's device and are read on the host only when the steps end (expert_load), so
counting adds no host sync to a timed step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.config.model import ModelConfig, moe_layer_count
from accelbench.models.mlp import MLP, activate


@dataclass(frozen=True)
class Routing:
    """Where the tokens of one forward go: kept assignments sorted by expert (ascending token
    within an expert), and the per-expert counts."""

    token_index: torch.Tensor  # (A,) long: the token of each kept assignment
    expert_index: torch.Tensor  # (A,) long: its expert, ascending
    gate: torch.Tensor  # (A,) float32: its gate
    tokens_per_expert: torch.Tensor  # (E,) long: kept assignments per expert
    dropped_per_expert: torch.Tensor  # (E,) long: assignments over capacity, per expert
    n_tokens: int | torch.Tensor  # a tensor once summed over sp shards (whole_sequence)

    def counts(self) -> list[int]:
        """Kept assignments per expert as Python ints (the split sizes of the sorted rows)."""
        return self.tokens_per_expert.tolist()


Dispatch = Callable[[torch.Tensor, Routing, "Experts"], torch.Tensor]


def permute(x: torch.Tensor, routing: Routing) -> torch.Tensor:
    """The token rows of every kept assignment, in expert order: (A, d_model)."""
    return x.index_select(0, routing.token_index)


def combine(y_sorted: torch.Tensor, routing: Routing) -> torch.Tensor:
    """Each expert row times its gate, added back to its token: (A, d) -> (T, d)."""
    weighted = y_sorted * routing.gate.to(y_sorted.dtype).unsqueeze(-1)
    out = y_sorted.new_zeros(routing.n_tokens, y_sorted.shape[-1])
    return out.index_add(0, routing.token_index, weighted)


def local_dispatch(x: torch.Tensor, routing: Routing, experts: Experts) -> torch.Tensor:
    """Every expert in this process: permute, compute, combine."""
    return combine(experts(permute(x, routing), routing.counts()), routing)


class Experts(nn.Module):
    """E expert MLPs as stacked weights (E, rows, cols), so that expert parallelism can shard
    dim 0: w_fc (E, [gate | up] or ffn, d_model), w_proj (E, d_model, ffn), biases if the model
    has them; `first_expert` is the global index of row 0."""

    def __init__(self, cfg: ModelConfig, n_local: int | None = None, first_expert: int = 0) -> None:
        super().__init__()
        n = cfg.n_experts if n_local is None else n_local
        ffn = cfg.expert_ffn_dim
        self.gated = cfg.gated_mlp
        self.approximate = "tanh" if cfg.activation == "gelu_tanh" else "none"
        self.first_expert = first_expert
        width = 2 * ffn if self.gated else ffn
        self.w_fc = nn.Parameter(torch.empty(n, width, cfg.d_model))
        self.w_proj = nn.Parameter(torch.empty(n, cfg.d_model, ffn))
        self.b_fc = nn.Parameter(torch.zeros(n, width)) if cfg.bias else None
        self.b_proj = nn.Parameter(torch.zeros(n, cfg.d_model)) if cfg.bias else None
        nn.init.normal_(self.w_fc, mean=0.0, std=0.02)  # GPT's init, scaled on the output side
        nn.init.normal_(self.w_proj, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @property
    def n_local(self) -> int:
        """Experts held by this module."""
        return self.w_fc.shape[0]

    def forward(self, x_sorted: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """Rows grouped by expert (counts[i] rows for local expert i, in order) -> outputs.

        The stacked weights are unbound once: the gradient is one stacked tensor, not one
        zero-filled (E, ...) tensor per expert as indexing each expert would make it."""
        if len(counts) != self.n_local:
            raise ValueError(f"{len(counts)} row counts for {self.n_local} experts")
        w_fc, w_proj = self.w_fc.unbind(0), self.w_proj.unbind(0)
        b_fc = self.b_fc.unbind(0) if self.b_fc is not None else [None] * self.n_local
        b_proj = self.b_proj.unbind(0) if self.b_proj is not None else [None] * self.n_local
        outs = [self._mlp(rows, w_fc[i], b_fc[i], w_proj[i], b_proj[i])
                for i, rows in enumerate(x_sorted.split(counts))]
        return torch.cat(outs) if outs else x_sorted

    def _mlp(self, rows: torch.Tensor, w_fc: torch.Tensor, b_fc: torch.Tensor | None,
             w_proj: torch.Tensor, b_proj: torch.Tensor | None) -> torch.Tensor:
        """One expert's MLP on its rows (n, d_model)."""
        h = activate(F.linear(rows, w_fc, b_fc), self.gated, self.approximate)
        return F.linear(h, w_proj, b_proj)

    @torch.no_grad()
    def shard(self, first_expert: int, n_local: int) -> None:
        """Keep experts [first_expert, first_expert + n_local) only (expert parallelism)."""
        keep = slice(first_expert, first_expert + n_local)
        for name in ("w_fc", "w_proj", "b_fc", "b_proj"):
            p = getattr(self, name)
            if p is not None:
                setattr(self, name, nn.Parameter(p[keep].clone()))
        self.first_expert = first_expert


class MoE(nn.Module):
    """Router, routed experts, optional shared experts; the MLP of an MoE block."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_experts, self.top_k = cfg.n_experts, cfg.moe_top_k
        self.gate_kind, self.norm_topk = cfg.moe_gate, cfg.moe_norm_topk
        self.capacity_factor = cfg.capacity_factor
        self.router = nn.Linear(cfg.d_model, cfg.n_experts, bias=False)
        self.experts = Experts(cfg)
        width = cfg.n_shared_experts * cfg.expert_ffn_dim
        self.shared = MLP(cfg, width) if cfg.n_shared_experts else None
        self.shared_gate = nn.Linear(cfg.d_model, 1, bias=False) if cfg.moe_shared_gate else None
        self.dispatch: Dispatch = local_dispatch
        # sequence parallelism (parallel/tp.py): x is this tp rank's sequence shard, and this
        # sums a tensor over the tp ranks' shards (identity backward); None: x is the sequence
        self.sequence_sum: Callable[[torch.Tensor], torch.Tensor] | None = None
        self.with_aux_loss = cfg.aux_loss_coef > 0
        self.aux_loss: torch.Tensor | None = None
        # d(training loss)/d(this layer's aux loss) before the loss's own scaling: coef / L
        self.aux_grad_weight = cfg.aux_loss_coef / max(moe_layer_count(cfg), 1)
        self.aux_grad_scale = AuxLossGradScale()  # one per model: share_aux_grad_scale
        self.aux_log: list[torch.Tensor] | None = None  # this layer's losses, when logging
        self.tokens_routed = torch.zeros(cfg.n_experts, dtype=torch.long)
        self.tokens_dropped = torch.zeros(cfg.n_experts, dtype=torch.long)

    def capacity(self, n_tokens: int) -> int | None:
        """Assignments one expert takes of n_tokens tokens; None when dropless."""
        if self.capacity_factor <= 0:
            return None
        return math.ceil(self.capacity_factor * n_tokens * self.top_k / self.n_experts)

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """Router scores (T, E) in float32: softmax over experts, or a sigmoid per expert."""
        logits = self.router(x).float()
        return logits.softmax(-1) if self.gate_kind == "softmax" else logits.sigmoid()

    def route(self, x: torch.Tensor, scores: torch.Tensor) -> Routing:
        """Top-k experts and gates per token, sorted by expert, over capacity dropped."""
        top, idx = scores.topk(self.top_k, dim=-1)
        if self.norm_topk:
            top = top / top.sum(-1, keepdim=True)
        n_tokens = x.shape[0]
        expert = idx.reshape(-1)
        order = torch.argsort(expert, stable=True)  # token order kept within each expert
        expert = expert[order]
        token = order // self.top_k
        gate = top.reshape(-1)[order]
        routed = torch.bincount(expert, minlength=self.n_experts)
        cap = self.capacity(n_tokens)
        if cap is None:
            return Routing(token, expert, gate, routed, torch.zeros_like(routed), n_tokens)
        start = torch.cumsum(routed, 0) - routed
        keep = torch.arange(expert.numel(), device=x.device) - start[expert] < cap
        kept = routed.clamp(max=cap)
        return Routing(token[keep], expert[keep], gate[keep], kept, routed - kept, n_tokens)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., d_model) -> (..., d_model)."""
        flat = x.reshape(-1, x.shape[-1])
        scores = self.scores(flat)
        routing = self.route(flat, scores)
        y = self.dispatch(flat, routing, self.experts)
        if self.sequence_sum is not None:  # load and aux loss: the whole sequence's, not double
            routing = whole_sequence(routing, self.sequence_sum, self.top_k)  # counted over tp
        if self.shared is not None:
            shared = self.shared(flat)
            if self.shared_gate is not None:
                shared = torch.sigmoid(self.shared_gate(flat)) * shared
            y = y + shared
        self._count(routing)
        if self.with_aux_loss:
            self.aux_loss = load_balancing_loss(scores, routing, self.top_k, self.sequence_sum)
            self._log_aux_loss(self.aux_loss)
            y = scale_aux_loss(y, self.aux_loss, self.aux_grad_weight, self.aux_grad_scale)
        return y.reshape(x.shape)

    def _log_aux_loss(self, aux_loss: torch.Tensor) -> None:
        """Keep the loss's value while a pipeline logs them (not a recompute's rerun)."""
        if self.aux_log is not None and not _counting_paused:
            self.aux_log.append(aux_loss.detach())

    @torch.no_grad()
    def _count(self, routing: Routing) -> None:
        """Add this forward's per-expert load (not during a recompute's rerun)."""
        if _counting_paused:
            return
        routed = routing.tokens_per_expert.detach()
        if self.tokens_routed.device != routed.device:  # once: the counters join the layer
            self.tokens_routed = self.tokens_routed.to(routed.device)
            self.tokens_dropped = self.tokens_dropped.to(routed.device)
        dropped = routing.dropped_per_expert.detach()
        self.tokens_routed += routed + dropped  # on the device: no host sync in the step
        self.tokens_dropped += dropped

    def reset_load(self) -> None:
        """Start counting the per-expert load afresh."""
        self.tokens_routed.zero_()
        self.tokens_dropped.zero_()


class AuxLossGradScale:
    """The factor the backward under way gives the model's loss (1 / accumulation steps, an fp16
    loss scale): the aux losses' gradients are their weight times it. One per model, shared by
    its MoE layers; 0 until a loss sets it, so a backward of the logits alone adds none."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: torch.Tensor | float = 0.0


class AuxLossAutoScaler(torch.autograd.Function):
    """Identity on an MoE layer's output; its backward also gives the layer's aux loss the
    gradient weight x scale.value, read when the backward runs (Megatron-Core's technique)."""

    @staticmethod
    def forward(ctx, output: torch.Tensor, aux_loss: torch.Tensor, weight: float,
                scale: AuxLossGradScale) -> torch.Tensor:
        ctx.weight, ctx.scale = weight, scale
        ctx.aux_dtype, ctx.aux_device = aux_loss.dtype, aux_loss.device  # nothing saved
        return output.view_as(output)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        value = ctx.scale.value  # a tensor on the loss's device, or a stage's float: no copy
        if isinstance(value, torch.Tensor):
            grad_aux = (value * ctx.weight).to(ctx.aux_dtype).reshape(())
        else:
            grad_aux = torch.full((), value * ctx.weight, dtype=ctx.aux_dtype,
                                  device=ctx.aux_device)
        return grad_output, grad_aux, None, None


class LossGradProbe(torch.autograd.Function):
    """The model's loss plus the (detached) aux term, for its value; in backward it records the
    gradient the loss receives, before any MoE layer's backward (they all lie upstream)."""

    @staticmethod
    def forward(ctx, loss: torch.Tensor, aux_term: torch.Tensor,
                scale: AuxLossGradScale) -> torch.Tensor:
        ctx.scale = scale
        return loss + aux_term

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        ctx.scale.value = grad.detach()
        return grad, None, None


@torch.compiler.disable  # run eagerly: the scale is read when the backward runs, not traced
def scale_aux_loss(output: torch.Tensor, aux_loss: torch.Tensor, weight: float,
                   scale: AuxLossGradScale) -> torch.Tensor:
    """`output`, whose backward also backpropagates weight x scale.value into `aux_loss`."""
    return AuxLossAutoScaler.apply(output, aux_loss, weight, scale)


@torch.compiler.disable
def with_aux_term(loss: torch.Tensor, aux_term: torch.Tensor,
                  scale: AuxLossGradScale) -> torch.Tensor:
    """loss + aux_term (detached) as the value; its backward sets scale.value to the loss's
    gradient, which the layers' AuxLossAutoScaler multiply their weights by."""
    return LossGradProbe.apply(loss, aux_term.detach(), scale)


def share_aux_grad_scale(model: nn.Module) -> AuxLossGradScale:
    """One AuxLossGradScale for every MoE layer of `model` (a GPT's, or a stage's)."""
    scale = AuxLossGradScale()
    for m in moe_layers(model):
        m.aux_grad_scale = scale
    return scale


def set_aux_grad_scale(modules: Iterable[nn.Module], value: float) -> None:
    """Give the MoE layers of `modules` a fixed factor: a pipeline stage's, whose loss (the
    last stage's) is on another rank."""
    for module in modules:
        for m in moe_layers(module):
            m.aux_grad_scale.value = value


def start_aux_log(modules: Iterable[nn.Module]) -> None:
    """From now on the MoE layers of `modules` keep every forward's aux loss value."""
    for module in modules:
        for m in moe_layers(module):
            m.aux_log = [] if m.with_aux_loss else None


def logged_aux_loss_sum(modules: Iterable[nn.Module], last: int,
                        device: torch.device) -> torch.Tensor:
    """Sum of the last `last` logged aux losses of every MoE layer of `modules` (float32)."""
    total = torch.zeros((), dtype=torch.float32, device=device)
    for module in modules:
        for m in moe_layers(module):
            for value in (m.aux_log or [])[-last:]:
                total = total + value.float()
    return total


def load_balancing_loss(scores: torch.Tensor, routing: Routing, top_k: int,
                        sequence_sum: Callable[[torch.Tensor], torch.Tensor] | None = None
                        ) -> torch.Tensor:
    """E x sum_e f_e P_e: f_e the share of tokens whose top k held e (drops included), P_e the
    mean (per-token normalised) score of e. Under sequence parallelism (routing of the whole
    sequence, whole_sequence) P_e sums the tp ranks' shards, so each computes the one loss."""
    n_experts = scores.shape[-1]
    chosen = (routing.tokens_per_expert + routing.dropped_per_expert).to(scores.dtype)
    fraction = chosen / routing.n_tokens
    probs = scores / scores.sum(-1, keepdim=True)
    mean = probs.mean(0) if sequence_sum is None else sequence_sum(probs.sum(0)) / routing.n_tokens
    return n_experts * torch.sum(fraction * mean)


def whole_sequence(routing: Routing, sequence_sum: Callable[[torch.Tensor], torch.Tensor],
                   top_k: int) -> Routing:
    """Sequence parallelism: this shard's routing with the per-expert counts and the token count
    of the whole sequence (summed over the tp ranks' shards), for the load counters (each tp
    rank then holds its replica's load, as without sp) and the auxiliary loss."""
    load = sequence_sum(torch.stack((routing.tokens_per_expert, routing.dropped_per_expert)))
    return replace(routing, tokens_per_expert=load[0], dropped_per_expert=load[1],
                   n_tokens=load.sum() // top_k)  # a tensor: read on the host would sync


def moe_layers(model: nn.Module) -> list[MoE]:
    """The MoE modules of a model (or of a pipeline stage), in order."""
    return [m for m in model.modules() if isinstance(m, MoE)]


def aux_loss_of(blocks: Iterable[nn.Module]) -> torch.Tensor:
    """The mean load-balancing loss of the MoE layers among `blocks` (this forward's)."""
    losses = [m.aux_loss for b in blocks for m in moe_layers(b) if m.aux_loss is not None]
    if not losses:
        raise ValueError("aux_loss_coef is set but no MoE layer computed a loss")
    return torch.stack(losses).mean()


def expert_load(model: nn.Module) -> tuple[list[list[int]], list[list[int]]]:
    """(tokens routed, tokens dropped) per MoE layer and expert, since the last reset."""
    layers = moe_layers(model)
    return ([m.tokens_routed.tolist() for m in layers],
            [m.tokens_dropped.tolist() for m in layers])


def set_dispatch(model: nn.Module, dispatch: Dispatch) -> None:
    """Use `dispatch` in every MoE layer of `model` (the expert-parallel seam)."""
    for m in moe_layers(model):
        m.dispatch = dispatch


_counting_paused = False


@contextmanager
def _paused_counting() -> Iterator[None]:
    """The per-expert load is not counted inside (a recompute's rerun of the forward)."""
    global _counting_paused
    before, _counting_paused = _counting_paused, True
    try:
        yield
    finally:
        _counting_paused = before


def recompute_contexts() -> tuple[nullcontext, object]:
    """checkpoint's context_fn: the first forward as usual, the rerun without counting load."""
    return nullcontext(), _paused_counting()
