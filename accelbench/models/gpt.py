"""The GPT decoder: GPT-2 by default, GPT-NeoX (GenSLM) by configuration.

GPT-2: learned positions, pre-LayerNorm, GELU MLP, tied embeddings, causal attention through
scaled_dot_product_attention. GPT-NeoX: rotary embedding on part of each head, parallel attention
and MLP, untied output head. One module family, switched by ModelConfig.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from accelbench.config.model import ModelConfig, rotary_dims
from accelbench.config.vocab import RECOMPUTE_KINDS


class Rotary(nn.Module):
    """Rotary position embedding (GPT-NeoX's rotate-half form) on the first `dims` of each head."""

    def __init__(self, dims: int, base: float = 10000.0) -> None:
        super().__init__()
        self.dims = dims
        inv_freq = 1.0 / (base ** (torch.arange(0, dims, 2, dtype=torch.float32) / dims))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate q and k of shape (batch, heads, seq, head_dim)."""
        seq = q.shape[-2]
        t = torch.arange(seq, device=q.device, dtype=torch.float32)
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(q.dtype), emb.sin().to(q.dtype)
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin)

    def _rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Named so as not to override nn.Module._apply, which .to(device) calls."""
        rot, rest = x[..., : self.dims], x[..., self.dims :]
        half = self.dims // 2
        rotated = torch.cat((-rot[..., half:], rot[..., :half]), dim=-1)
        return torch.cat((rot * cos + rotated * sin, rest), dim=-1)


def _causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(QK^T / sqrt(d)) V with a causal mask, through PyTorch's fused kernels."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class Attention(nn.Module):
    """Causal multi-head self-attention with one fused QKV projection."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.c_proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.rotary = Rotary(rotary_dims(cfg)) if cfg.position == "rotary" else None
        self.recompute_core = False  # selective recompute: rerun the attention core in backward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq, d_model) -> (batch, seq, d_model).

        Widths come from the projection's output, so under tensor parallelism (c_attn holding
        this rank's heads, n_head set to the local count) the same code runs the local heads.
        """
        qkv = self.c_attn(x)
        b, t, width = qkv.shape
        c = width // 3
        q, k, v = qkv.split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        if self.rotary is not None:
            q, k = self.rotary(q, k)
        if self.recompute_core and torch.is_grad_enabled():
            y = checkpoint(_causal_attention, q, k, v, use_reentrant=False)
        else:
            y = _causal_attention(q, k, v)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    """Two linear layers around a GELU."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.d_model, cfg.ffn_dim)
        self.c_proj = nn.Linear(cfg.ffn_dim, cfg.d_model)
        self.approximate = "tanh" if cfg.activation == "gelu_tanh" else "none"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq, d_model) -> (batch, seq, d_model)."""
        return self.c_proj(F.gelu(self.c_fc(x), approximate=self.approximate))


class Block(nn.Module):
    """Pre-LayerNorm transformer block; sequential (GPT-2) or parallel (GPT-NeoX) residual."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.parallel = cfg.parallel_residual
        self.ln_1 = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.attn = Attention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.mlp = MLP(cfg)
        self.recompute = False  # full recompute: keep only the input, rerun the block in backward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq, d_model) -> (batch, seq, d_model)."""
        if self.recompute and torch.is_grad_enabled():
            return checkpoint(self._forward, x, use_reentrant=False)
        return self._forward(x)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.parallel:
            return x + self.attn(self.ln_1(x)) + self.mlp(self.ln_2(x))
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Decoder-only language model: logits, plus mean cross-entropy when given targets."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.d_model) if cfg.position == "learned" else None
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):  # GPT-2's scaled init of residual projections
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        """Token (and learned position) embeddings of ids (batch, seq)."""
        x = self.wte(idx)
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        return x

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """Logits (batch, seq, vocab), or (logits, loss) when targets are given."""
        if idx.shape[1] > self.cfg.n_positions and self.wpe is not None:
            raise ValueError(f"sequence {idx.shape[1]} exceeds n_positions {self.cfg.n_positions}")
        x = self.embed(idx)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.reshape(-1))
        return logits, loss

    def set_recompute(self, mode: str) -> None:
        """Activation recompute of every block (see set_recompute)."""
        set_recompute(list(self.h), mode)

    def num_params(self) -> int:
        """Parameters with shared tensors counted once."""
        return sum(p.numel() for p in self.parameters())


def set_recompute(blocks: list[Block], mode: str) -> None:
    """The one recompute switch: 'none', 'selective' (rerun the attention core in backward) or
    'full' (keep only each block's input and rerun the block)."""
    if mode not in RECOMPUTE_KINDS:
        raise ValueError(f"recompute must be one of {RECOMPUTE_KINDS}, got {mode!r}")
    for block in blocks:
        block.recompute = mode == "full"
        block.attn.recompute_core = mode == "selective"
