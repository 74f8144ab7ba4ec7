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

Routing, dispatch and the experts are in moe_routing.py; the auxiliary loss and the path of
its gradient in aux_loss.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext

import torch
from torch import nn

from accelbench.config.model import ModelConfig, moe_layer_count
from accelbench.models.aux_loss import AuxLossGradScale, load_balancing_loss, scale_aux_loss
from accelbench.models.mlp import MLP
from accelbench.models.moe_routing import Dispatch, Experts, Routing, local_dispatch, whole_sequence


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
