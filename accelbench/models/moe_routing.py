"""Where an MoE layer's tokens go (Routing) and the stacked expert MLPs that compute them."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.config.model import ModelConfig
from accelbench.models.mlp import activate


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


def whole_sequence(routing: Routing, sequence_sum: Callable[[torch.Tensor], torch.Tensor],
                   top_k: int) -> Routing:
    """Sequence parallelism: this shard's routing with the per-expert counts and the token count
    of the whole sequence (summed over the tp ranks' shards), for the load counters (each tp
    rank then holds its replica's load, as without sp) and the auxiliary loss."""
    load = sequence_sum(torch.stack((routing.tokens_per_expert, routing.dropped_per_expert)))
    return replace(routing, tokens_per_expert=load[0], dropped_per_expert=load[1],
                   n_tokens=load.sum() // top_k)  # a tensor: read on the host would sync
