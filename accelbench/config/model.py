"""Model configuration: one decoder family (GPT-2, GPT-3, GPT-NeoX, Llama-style, mixture of
experts) as a dataclass."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from accelbench.config.errors import ConfigError, require_choice, require_positive

POSITION_KINDS = ("learned", "rotary")
# "swiglu": the gated MLP of Llama-style models, down(silu(gate(x)) * up(x)), three matrices
ACTIVATIONS = ("gelu_tanh", "gelu", "swiglu")
NORM_KINDS = ("layernorm", "rmsnorm")
# rotary frequency scaling: none, or Llama 3.1's (low frequencies divided by rope_factor, high
# ones kept, a smooth ramp between: transformers' "llama3" rope_type)
ROPE_SCALINGS = ("none", "llama3")
# mixture-of-experts router scores: softmax over the experts (Mixtral, Qwen-MoE, DeepSeek-MoE) or
# a sigmoid per expert (DeepSeek-V3)
MOE_GATES = ("softmax", "sigmoid")
# The embedding's and output head's rows are the vocabulary rounded up to this (as nanoGPT and
# Megatron pad): GPT-2's 50257 left the head's GEMMs on cuBLAS's unaligned sm75 kernels, 11% of
# a GPT-2 XL bf16 step on an H200 (docs/gpu.md); the padded logits are cut off before any use.
VOCAB_MULTIPLE = 64


@dataclass(frozen=True)
class ModelConfig:
    """Shape and architecture switches of a GPT decoder; sizes are counts, not bytes."""

    name: str
    n_layer: int
    n_head: int
    d_model: int
    vocab_size: int
    n_positions: int
    d_ff: int = 0  # 0 means 4 * d_model
    position: str = "learned"  # learned absolute positions (GPT-2) or rotary (GPT-NeoX)
    rotary_pct: float = 1.0  # fraction of each head's dimensions that rotary embedding turns
    parallel_residual: bool = False  # GPT-NeoX: attention and MLP read the same input
    tie_embeddings: bool = True  # GPT-2 ties the output head to the token embedding
    activation: str = "gelu_tanh"
    layer_norm_eps: float = 1e-5
    norm: str = "layernorm"  # LayerNorm (GPT-2, NeoX) or RMSNorm (Llama-style)
    bias: bool = True  # biases on the block's linear layers and norms (Llama-style: none)
    n_kv_head: int = 0  # key/value heads of grouped-query attention; 0 means n_head (MHA)
    rotary_base: float = 10000.0  # rotary frequency base (Llama 3: 500000)
    qkv_bias: bool = False  # biases on the q/k/v projection even when bias is False (Qwen2)
    rope_scaling: str = "none"  # "llama3": Llama 3.1's frequency scaling, by the fields below
    rope_factor: float = 8.0  # low frequencies are divided by this
    rope_low_freq_factor: float = 1.0  # wavelengths above original/low are scaled fully
    rope_high_freq_factor: float = 4.0  # wavelengths below original/high are kept
    rope_original_positions: int = 8192  # the context the frequencies were trained for
    # Mixture of experts (models/moe.py, docs/moe.md); n_experts 0 is a dense model.
    n_experts: int = 0  # routed experts in each MoE layer
    moe_top_k: int = 2  # experts each token visits
    moe_gate: str = "softmax"  # router scores: softmax over experts, or sigmoid per expert
    moe_norm_topk: bool = True  # divide the k gates by their sum (Mixtral yes, DeepSeek-MoE no)
    n_shared_experts: int = 0  # experts every token visits, fused into one MLP
    moe_shared_gate: bool = False  # Qwen-MoE: the shared experts' output times sigmoid(x . w)
    moe_ffn_dim: int = 0  # width of one expert's MLP; 0 means ffn_dim
    capacity_factor: float = 0.0  # 0: dropless; else each expert takes ceil(cf x T x k / E)
    aux_loss_coef: float = 0.0  # load-balancing loss (Switch form) weight in the training loss
    moe_every: int = 1  # layer i is MoE when (i + 1) % moe_every == 0 ...
    moe_first_dense: int = 0  # ... and i >= moe_first_dense (DeepSeek's first_k_dense_replace)

    @property
    def padded_vocab(self) -> int:
        """Rows the embedding and head hold: vocab_size rounded up to VOCAB_MULTIPLE."""
        return -(-self.vocab_size // VOCAB_MULTIPLE) * VOCAB_MULTIPLE

    @property
    def ffn_dim(self) -> int:
        """Hidden size of the MLP."""
        return self.d_ff or 4 * self.d_model

    @property
    def expert_ffn_dim(self) -> int:
        """Hidden size of one expert's MLP (routed or shared)."""
        return self.moe_ffn_dim or self.ffn_dim

    @property
    def is_moe(self) -> bool:
        """Whether some layer's MLP is a mixture of experts."""
        return self.n_experts > 0 and moe_layer_count(self) > 0

    @property
    def kv_heads(self) -> int:
        """Key/value heads: n_head for multi-head attention, fewer under grouped-query."""
        return self.n_kv_head or self.n_head

    @property
    def head_dim(self) -> int:
        """Dimensions per attention head."""
        return self.d_model // self.n_head

    @property
    def kv_dim(self) -> int:
        """Width of the key (and of the value) projection: kv_heads x head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def gated_mlp(self) -> bool:
        """Whether the MLP has a gate matrix beside its input matrix (SwiGLU)."""
        return self.activation == "swiglu"

    @property
    def norm_params(self) -> int:
        """Parameters of one norm: weight, plus a bias for a LayerNorm with biases."""
        return self.d_model * (2 if self.norm == "layernorm" and self.bias else 1)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for records and JSON."""
        return asdict(self)

    def with_changes(self, **changes: Any) -> ModelConfig:
        """A validated copy with some fields changed."""
        return validate_model(replace(self, **changes))


def validate_model(cfg: ModelConfig) -> ModelConfig:
    """Check sizes and switches; raise ConfigError naming the field on the first problem."""
    for field in ("n_layer", "n_head", "d_model", "vocab_size", "n_positions"):
        require_positive(f"model.{field}", getattr(cfg, field))
    if cfg.d_ff < 0:
        raise ConfigError("model.d_ff", f"must be positive (or 0 for 4 x d_model), got {cfg.d_ff}")
    if cfg.d_model % cfg.n_head:
        raise ConfigError(
            "model.n_head",
            f"{cfg.n_head} heads do not divide hidden size {cfg.d_model}",
            f"a divisor of {cfg.d_model}",
        )
    require_choice("model.position", cfg.position, POSITION_KINDS)
    require_choice("model.activation", cfg.activation, ACTIVATIONS)
    require_choice("model.norm", cfg.norm, NORM_KINDS)
    if cfg.n_kv_head < 0 or cfg.n_head % cfg.kv_heads:
        raise ConfigError("model.n_kv_head", f"{cfg.n_kv_head} key/value heads do not divide "
                          f"{cfg.n_head} heads", f"a divisor of {cfg.n_head} (0 for n_head)")
    require_positive("model.rotary_base", cfg.rotary_base)
    _validate_rope_scaling(cfg)
    _validate_moe(cfg)
    if not 0.0 < cfg.rotary_pct <= 1.0:
        raise ConfigError("model.rotary_pct", f"must be in (0, 1], got {cfg.rotary_pct}")
    if cfg.position == "rotary" and rotary_dims(cfg) % 2:
        raise ConfigError("model.rotary_pct", "rotary dimensions per head must be even")
    return cfg


def _validate_rope_scaling(cfg: ModelConfig) -> None:
    """Llama 3.1 scaling needs rotary positions and factors that order the two wavelengths."""
    require_choice("model.rope_scaling", cfg.rope_scaling, ROPE_SCALINGS)
    if cfg.rope_scaling == "none":
        return
    if cfg.position != "rotary":
        raise ConfigError("model.rope_scaling", f"{cfg.rope_scaling!r} needs rotary positions",
                          "none, or position rotary")
    for field in ("rope_factor", "rope_low_freq_factor", "rope_original_positions"):
        require_positive(f"model.{field}", getattr(cfg, field))
    if cfg.rope_high_freq_factor <= cfg.rope_low_freq_factor:
        raise ConfigError("model.rope_high_freq_factor", f"{cfg.rope_high_freq_factor} is not "
                          f"above rope_low_freq_factor {cfg.rope_low_freq_factor}",
                          "a factor larger than rope_low_freq_factor")


def rotary_dims(cfg: ModelConfig) -> int:
    """Number of dimensions per head that rotary embedding rotates (GPT-NeoX's rule)."""
    return int(cfg.head_dim * cfg.rotary_pct)


def is_moe_layer(cfg: ModelConfig, layer: int) -> bool:
    """Whether block `layer` (0-based) holds a mixture of experts instead of the dense MLP:
    every moe_every-th layer (Qwen-MoE's decoder_sparse_step rule) after the first dense ones."""
    return (cfg.n_experts > 0 and layer >= cfg.moe_first_dense
            and (layer + 1) % cfg.moe_every == 0)


def moe_layer_count(cfg: ModelConfig) -> int:
    """How many of the blocks are MoE blocks."""
    return sum(is_moe_layer(cfg, i) for i in range(cfg.n_layer))


def _validate_moe(cfg: ModelConfig) -> None:
    """The MoE fields, each refused in one line naming it; a dense model (n_experts 0) skips."""
    _require_count("model.n_experts", cfg.n_experts, "0 (dense) or a number of experts")
    if cfg.n_experts == 0:
        return
    if not isinstance(cfg.moe_top_k, int) or not 1 <= cfg.moe_top_k <= cfg.n_experts:
        raise ConfigError("model.moe_top_k", f"{cfg.moe_top_k} experts per token with "
                          f"{cfg.n_experts} experts", f"1 to {cfg.n_experts}")
    require_choice("model.moe_gate", cfg.moe_gate, MOE_GATES)
    _require_count("model.n_shared_experts", cfg.n_shared_experts, "0 or more")
    _require_count("model.moe_ffn_dim", cfg.moe_ffn_dim, "a width, or 0 for ffn_dim")
    for field in ("capacity_factor", "aux_loss_coef"):
        value = getattr(cfg, field)
        if not isinstance(value, int | float) or not 0.0 <= value < float("inf"):
            raise ConfigError(f"model.{field}", f"must be 0 or a positive number, got {value!r}",
                              "0 (off) or a finite number > 0")
    if cfg.moe_shared_gate and cfg.n_shared_experts == 0:
        raise ConfigError("model.moe_shared_gate", "a shared-expert gate without shared "
                          "experts", "false, or n_shared_experts >= 1")
    require_positive("model.moe_every", cfg.moe_every)
    _require_count("model.moe_first_dense", cfg.moe_first_dense, f"0 to {cfg.n_layer}")


def _require_count(field: str, value: int, allowed: str) -> None:
    """An integer that may be 0 but not negative."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(field, f"must be 0 or a positive integer, got {value!r}", allowed)
