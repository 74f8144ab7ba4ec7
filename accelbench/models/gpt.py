"""The GPT decoder: GPT-2 by default, GPT-NeoX (GenSLM) and Llama-style models by configuration.

GPT-2: learned positions, pre-LayerNorm, GELU MLP, tied embeddings, causal attention through
scaled_dot_product_attention. GPT-NeoX: rotary embedding on part of each head, parallel attention
and MLP, untied output head. Llama-style (Llama 2/3, Mistral, Qwen2): RMSNorm, SwiGLU MLP,
grouped-query attention, full rotary with its base (and Llama 3.1's frequency scaling), untied
head, no biases (Qwen2: q/k/v biases only). Mixture of experts (Mixtral, Qwen-MoE, DeepSeek-MoE):
the configured blocks' MLP is models/moe.py's MoE. One module family, switched by ModelConfig; the
parameter names are the same for every family:

- attn.c_attn: the fused projection, rows [q | k | v] with q n_head x head_dim wide and k, v
  each kv_heads x head_dim (all three d_model wide without grouped-query attention);
- mlp.c_fc: GELU's input matrix, or SwiGLU's fused [gate | up] rows (2 x ffn_dim); mlp.c_proj
  the output matrix (SwiGLU's down);
- ln_1, ln_2, ln_f: LayerNorm or RMSNorm (weight only).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from accelbench.config.model import ModelConfig, is_moe_layer, rotary_dims
from accelbench.config.vocab import LOSS_IMPLS, RECOMPUTE_KINDS
from accelbench.models.aux_loss import with_aux_term
from accelbench.models.chunked_loss import chunked_cross_entropy
from accelbench.models.mlp import MLP
from accelbench.models.moe import MoE, aux_loss_of, recompute_contexts, share_aux_grad_scale
from accelbench.models.prefix_attention import prefix_causal_attention

__all__ = ["GPT", "MLP", "Block", "set_recompute"]


def llama3_inv_freq(inv_freq: torch.Tensor, cfg: ModelConfig) -> torch.Tensor:
    """Llama 3.1's rotary scaling (transformers' "llama3" rope_type): wavelengths longer than
    original/low are divided by the factor, shorter than original/high kept, a ramp between."""
    factor, low, high = cfg.rope_factor, cfg.rope_low_freq_factor, cfg.rope_high_freq_factor
    original = cfg.rope_original_positions
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > original / low, inv_freq / factor, inv_freq)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= original / high) & (wavelen <= original / low)
    return torch.where(medium, smoothed, scaled)


class Rotary(nn.Module):
    """Rotary position embedding (the rotate-half form of GPT-NeoX and Llama) on the first
    rotary_dims of each head, at the configured base and scaling."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.dims = rotary_dims(cfg)
        steps = torch.arange(0, self.dims, 2, dtype=torch.float32)
        inv_freq = 1.0 / (cfg.rotary_base ** (steps / self.dims))
        if cfg.rope_scaling == "llama3":
            inv_freq = llama3_inv_freq(inv_freq, cfg)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor,
                q_positions: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate q and k of shape (batch, heads, seq, head_dim): k at positions 0..seq-1, q at
        the same or, under context parallelism, at its tokens' global positions."""
        k_cos, k_sin = self._angles(torch.arange(k.shape[-2], device=k.device), k.dtype)
        if q_positions is None and q.shape[-2] == k.shape[-2]:
            return self._rotate(q, k_cos, k_sin), self._rotate(k, k_cos, k_sin)
        if q_positions is None:
            q_positions = torch.arange(q.shape[-2], device=q.device)
        q_cos, q_sin = self._angles(q_positions, q.dtype)
        return self._rotate(q, q_cos, q_sin), self._rotate(k, k_cos, k_sin)

    def _angles(self, positions: torch.Tensor, dtype: torch.dtype
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of each position's angles."""
        freqs = torch.outer(positions.to(torch.float32), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def _rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Named so as not to override nn.Module._apply, which .to(device) calls."""
        if self.dims == x.shape[-1]:  # the whole head turns (Llama): no split, no concatenation
            return x * cos + _rotate_half(x) * sin
        rot, rest = x[..., : self.dims], x[..., self.dims :]
        return torch.cat((rot * cos + _rotate_half(rot) * sin, rest), dim=-1)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) over the last dimension's two halves."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def make_norm(cfg: ModelConfig) -> nn.Module:
    """The configured norm over d_model: LayerNorm (with a bias when the model has biases) or
    RMSNorm."""
    if cfg.norm == "rmsnorm":
        return nn.RMSNorm(cfg.d_model, eps=cfg.layer_norm_eps)
    return nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps, bias=cfg.bias)


def _causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      spans: tuple[tuple[int, int, int, object], ...] = ()) -> torch.Tensor:
    """softmax(QK^T / sqrt(d)) V with a causal mask, through PyTorch's fused kernels; fewer key
    and value heads than query heads (grouped-query) are shared by groups of query heads.
    `spans` (context parallelism: this rank's query chunks against the whole sequence's keys):
    each (start, end, keys, bias) attends queries start:end to the first `keys` keys under its
    lower-right causal bias (parallel.context.ContextShard.spans)."""
    gqa = k.shape[1] != q.shape[1]
    if not spans:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    return torch.cat([_span_attention(q[:, :, start:end], k[:, :, :keys], v[:, :, :keys], bias,
                                      gqa) for start, end, keys, bias in spans], dim=2)


def _span_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: object,
                    gqa: bool) -> torch.Tensor:
    """Queries aligned at the end of the keys, attending causally: under the bias given, or
    (bias None: on a CPU, where a bias is a mask tensor kept for the backward) with no mask at
    all (models/prefix_attention.py: the flash kernel's memory, linear in the keys)."""
    if bias is None:
        return prefix_causal_attention(q, k, v)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, enable_gqa=gqa)


class Attention(nn.Module):
    """Causal self-attention (multi-head or grouped-query) with one fused QKV projection."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.head_dim = cfg.head_dim
        self.c_attn = nn.Linear(cfg.d_model, cfg.d_model + 2 * cfg.kv_dim,
                                bias=cfg.bias or cfg.qkv_bias)
        self.c_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.rotary = Rotary(cfg) if cfg.position == "rotary" else None
        self.recompute_core = False  # selective recompute: rerun the attention core in backward
        self.context = None  # context parallelism: a parallel.context.ContextShard

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq, d_model) -> (batch, seq, d_model).

        The query width is n_head x head_dim and the key/value widths split what the projection
        gives beyond it, so under tensor parallelism (c_attn holding this rank's heads, n_head
        set to the local count) the same code runs the local query and key/value heads.
        """
        qkv = self.c_attn(x)
        b, t, width = qkv.shape
        d = self.head_dim
        q_width = self.n_head * d
        kv_width = (width - q_width) // 2
        q, k, v = qkv.split((q_width, kv_width, kv_width), dim=2)
        q = q.view(b, t, self.n_head, d).transpose(1, 2)
        k, v = (z.view(b, t, kv_width // d, d).transpose(1, 2) for z in (k, v))
        positions, spans = None, ()
        if self.context is not None:  # the cp group's keys and values, in sequence order
            k, v = self.context.gather(k), self.context.gather(v)
            positions = self.context.positions(t, q.device)
            spans = self.context.spans(t, q.device)
        if self.rotary is not None:
            q, k = self.rotary(q, k, positions)
        if self.recompute_core and torch.is_grad_enabled():
            y = checkpoint(_causal_attention, q, k, v, spans, use_reentrant=False)
        else:
            y = _causal_attention(q, k, v, spans)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, q_width))


class Block(nn.Module):
    """Pre-norm transformer block; sequential (GPT-2, Llama) or parallel (GPT-NeoX) residual.
    Block `layer` of a mixture-of-experts model (is_moe_layer) holds an MoE as its mlp."""

    def __init__(self, cfg: ModelConfig, layer: int = 0) -> None:
        super().__init__()
        self.parallel = cfg.parallel_residual
        self.ln_1 = make_norm(cfg)
        self.attn = Attention(cfg)
        self.ln_2 = make_norm(cfg)
        self.mlp = MoE(cfg) if is_moe_layer(cfg, layer) else MLP(cfg)
        self.recompute = False  # full recompute: keep only the input, rerun the block in backward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq, d_model) -> (batch, seq, d_model)."""
        if self.recompute and torch.is_grad_enabled():
            if isinstance(self.mlp, MoE):  # the rerun forward does not count expert load again
                return checkpoint(self._forward, x, use_reentrant=False,
                                  context_fn=recompute_contexts)
            return checkpoint(self._forward, x, use_reentrant=False)
        return self._forward(x)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.parallel:
            return x + self.attn(self.ln_1(x)) + self.mlp(self.ln_2(x))
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


def embed_tokens(wte: nn.Embedding, wpe: nn.Embedding | None, idx: torch.Tensor,
                 positions: torch.Tensor | None = None) -> torch.Tensor:
    """Token (and learned position) embeddings of ids (batch, seq) at their positions
    (0..seq-1 unless given): one place for the whole model and a pipeline's first stage."""
    x = wte(idx)
    if wpe is not None:
        if positions is None:
            positions = torch.arange(idx.shape[1], device=idx.device)
        x = x + wpe(positions)
    return x


class GPT(nn.Module):
    """Decoder-only language model: logits, plus mean cross-entropy when given targets."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.padded_vocab, cfg.d_model)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.d_model) if cfg.position == "learned" else None
        self.h = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layer))
        self.context = None  # context parallelism: a parallel.context.ContextShard
        self.loss_impl = LOSS_IMPLS[0]  # how the loss is computed (set_loss_impl)
        self.ln_f = make_norm(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.padded_vocab, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):  # GPT-2's scaled init of residual projections
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))
        with torch.no_grad():  # the padding rows: never looked up, their logits cut off
            self.wte.weight[cfg.vocab_size:].zero_()
            self.lm_head.weight[cfg.vocab_size:].zero_()
        self.aux_grad_scale = share_aux_grad_scale(self)  # set by the loss's backward

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def embed(self, idx: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Token (and learned position) embeddings of ids (batch, seq) at their positions
        (0..seq-1 unless given)."""
        return embed_tokens(self.wte, self.wpe, idx, positions)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """Logits (batch, seq, vocab), or (logits, loss) when targets are given. Under context
        parallelism (`context` set) it takes whole sequences and computes, and returns the
        logits and mean loss of, only this rank's tokens."""
        if idx.shape[1] > self.cfg.n_positions and self.wpe is not None:
            raise ValueError(f"sequence {idx.shape[1]} exceeds n_positions {self.cfg.n_positions}")
        positions = None
        if self.context is not None:
            positions = self.context.positions(idx.shape[1] // self.context.cp, idx.device)
            idx = self.context.shard(idx)
            targets = self.context.shard(targets) if targets is not None else None
        x = self.embed(idx, positions)
        for block in self.h:
            x = block(x)
        logits, loss = self._head_and_loss(x, targets)
        if targets is None:
            self.aux_grad_scale.value = 0.0  # no loss: the aux losses add no gradient
            return logits
        if self.cfg.aux_loss_coef > 0 and self.cfg.is_moe:  # MoE: the load-balancing loss,
            # its value here; its gradient through each layer's AuxLossAutoScaler (moe.py)
            aux_term = self.cfg.aux_loss_coef * aux_loss_of(self.h)
            loss = with_aux_term(loss, aux_term, self.aux_grad_scale)
        return logits, loss

    def _head_and_loss(self, x: torch.Tensor, targets: torch.Tensor | None
                       ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The logits and the mean cross-entropy (None without targets); the chunked loss
        returns no logits (models/chunked_loss.py: they are never held whole)."""
        h = self.ln_f(x)
        if targets is not None and self.loss_impl == "chunked":
            return None, chunked_cross_entropy(h, self.lm_head, targets, self.cfg.vocab_size)
        logits = vocab_logits(self.lm_head(h), self.cfg)
        if targets is None:
            return logits, None
        flat = logits.reshape(-1, logits.size(-1)).float()
        return logits, F.cross_entropy(flat, targets.reshape(-1))

    def set_loss_impl(self, impl: str) -> None:
        """The loss's implementation: 'torch' (logits, then F.cross_entropy in fp32) or
        'chunked' (models/chunked_loss.py: no whole logits; the forward returns None for them)."""
        if impl not in LOSS_IMPLS:
            raise ValueError(f"loss_impl must be one of {LOSS_IMPLS}, got {impl!r}")
        self.loss_impl = impl

    def set_recompute(self, mode: str) -> None:
        """Activation recompute of every block (see set_recompute)."""
        set_recompute(list(self.h), mode)

    def num_params(self) -> int:
        """Parameters with shared tensors counted once, the vocabulary's padding rows not."""
        padding = (self.cfg.padded_vocab - self.cfg.vocab_size) * self.cfg.d_model
        heads = 1 if self.lm_head.weight is self.wte.weight else 2
        return sum(p.numel() for p in self.parameters()) - padding * heads


def pad_vocab_rows(state: dict[str, torch.Tensor], cfg: ModelConfig) -> None:
    """A checkpoint's embedding and head (vocab_size rows) grown with zero rows to the model's
    padded_vocab, in place, so that a strict load matches."""
    for key in ("wte.weight", "lm_head.weight"):
        tensor = state.get(key)
        if tensor is not None and tensor.shape[0] == cfg.vocab_size < cfg.padded_vocab:
            state[key] = F.pad(tensor, (0, 0, 0, cfg.padded_vocab - cfg.vocab_size))


def vocab_logits(padded: torch.Tensor, cfg: ModelConfig) -> torch.Tensor:
    """The head's output without its padding columns (ModelConfig.padded_vocab): the logits
    of the real vocabulary, a view the loss reads in place."""
    if padded.shape[-1] == cfg.vocab_size:
        return padded
    return padded[..., : cfg.vocab_size]


def set_recompute(blocks: list[Block], mode: str) -> None:
    """The one recompute switch: 'none', 'selective' (rerun the attention core in backward) or
    'full' (keep only each block's input and rerun the block)."""
    if mode not in RECOMPUTE_KINDS:
        raise ValueError(f"recompute must be one of {RECOMPUTE_KINDS}, got {mode!r}")
    for block in blocks:
        block.recompute = mode == "full"
        block.attn.recompute_core = mode == "selective"


def fresh_compile_cache() -> None:
    """Forget every graph Dynamo compiled, at the start of a compiled cell. Its cache is keyed
    on the one Block.forward all blocks share: without this, each dtype, recompute mode or
    shape of an in-process sweep adds a recompile until Dynamo's limit (8), and later cells
    silently run eager while their records say compile=True."""
    torch._dynamo.reset()


def compile_blocks(blocks: list[Block]) -> None:
    """torch.compile each block in place, on a fresh Dynamo cache (fresh_compile_cache)."""
    fresh_compile_cache()
    for block in blocks:
        block.compile()
