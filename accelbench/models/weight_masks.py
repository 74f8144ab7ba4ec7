"""Weight sparsity of a GPT's transformer blocks: which matrices, how their masks are chosen,
applied at build and kept after every optimizer step.

What is sparse: every block's four matrices, attention qkv (`attn.c_attn.weight`), attention
output (`attn.c_proj.weight`), MLP fc (`mlp.c_fc.weight`) and MLP proj (`mlp.c_proj.weight`).
Embeddings, the output head, norms and biases stay dense.

How the mask is chosen, per matrix (each matrix gets the requested level, so no layer is
emptied by a global threshold): `magnitude` keeps the largest |w| at initialisation (after an
initial checkpoint is loaded), `random` keeps a uniformly random set, drawn from a generator
seeded by the spec's seed. `unstructured` zeros round(level x numel) entries of the matrix;
`2:4` keeps 2 of every 4 consecutive weights along the input dimension (level 0.5 only), and
the mask is transposable: in each 4 x 4 tile, 2 of 4 along every row and every column (the
pattern of the 90 such tiles that keeps the most score), so the transposed matrix, which the
backward pass's input gradient multiplies by, is 2:4 as well and a semi-structured kernel can run
both (Hubara et al. 2021, "Accelerated sparse neural training"). Both dimensions must divide by 4.

How it is kept: the masked full weights are placed (TP/FSDP/pipeline shard them as any weight),
and each rank's mask is the non-zero pattern of its own local shard, read once after placement
(a freshly initialised weight is never exactly zero). After every optimizer step the local
shards and AdamW's exp_avg/exp_avg_sq at masked positions are multiplied by the mask, so zeros
stay zero and the optimizer's state does not drift.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache

import torch
from torch import nn

SPARSE_SUFFIXES = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
                   "mlp.c_proj.weight")
OPTIMIZER_STATE_KEYS = ("exp_avg", "exp_avg_sq")


def is_sparse_weight(name: str) -> bool:
    """Whether a parameter name (of a placed or wrapped model too) is one of the sparse
    matrices; wrappers (checkpoint, compile, FSDP) add prefixes, never change the suffix."""
    return name.endswith(SPARSE_SUFFIXES)


def make_mask(weight: torch.Tensor, level: float, pattern: str, mask_kind: str,
              generator: torch.Generator) -> torch.Tensor:
    """The boolean keep-mask of one (out, in) matrix: True where the weight stays."""
    if mask_kind == "magnitude":
        score = weight.detach().abs().float()
    else:
        score = torch.rand(weight.shape, generator=generator).to(weight.device)
    if pattern == "2:4":
        return transposable_two_four_mask(score)
    n_zero = round(level * weight.numel())
    keep = torch.ones(weight.numel(), dtype=torch.bool, device=weight.device)
    if n_zero:
        keep[score.flatten().topk(n_zero, largest=False).indices] = False
    return keep.reshape(weight.shape)


@cache
def _two_four_tiles() -> torch.Tensor:
    """The 90 4 x 4 boolean tiles with exactly 2 kept per row and per column, as (90, 16)."""
    rows = [r for r in itertools.product((0, 1), repeat=4) if sum(r) == 2]
    tiles = [t for t in itertools.product(rows, repeat=4)
             if all(sum(col) == 2 for col in zip(*t, strict=True))]
    return torch.tensor(tiles, dtype=torch.float32).reshape(len(tiles), 16)


def transposable_two_four_mask(score: torch.Tensor) -> torch.Tensor:
    """Keep-mask of an (out, in) score matrix, both sizes divisible by 4: in every 4 x 4 tile
    the 2-per-row-and-column pattern with the largest kept score."""
    out_dim, in_dim = score.shape
    tiles = (score.reshape(out_dim // 4, 4, in_dim // 4, 4).permute(0, 2, 1, 3)
             .reshape(-1, 16))
    patterns = _two_four_tiles().to(score.device)
    best = (tiles @ patterns.t()).argmax(dim=1)
    keep = patterns[best].bool().reshape(out_dim // 4, in_dim // 4, 4, 4)
    return keep.permute(0, 2, 1, 3).reshape(out_dim, in_dim)


def sparsify(model: nn.Module, level: float, pattern: str, mask_kind: str,
             seed: int) -> dict[str, torch.Tensor]:
    """Zero the masked weights of a whole (unplaced) model in place; the masks by name.
    Level 0 touches nothing (the dense run, bit for bit)."""
    if level == 0:
        return {}
    generator = torch.Generator().manual_seed(seed)
    masks = {}
    with torch.no_grad():
        for name, param in model.named_parameters():
            if is_sparse_weight(name):
                mask = make_mask(param, level, pattern, mask_kind, generator)
                param.mul_(mask)
                masks[name] = mask
    return masks


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's piece of a (DTensor) tensor; a plain tensor is its own piece."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def _named_params(module: object) -> Iterator[tuple[str, nn.Parameter]]:
    """Parameters of a placed module or of a PipelineRunner's stage modules."""
    parts = [module] if isinstance(module, nn.Module) else module.modules
    for part in parts:
        yield from part.named_parameters()


@dataclass
class SparseState:
    """Each sparse parameter of this rank with the keep-mask of its local shard."""

    params: list[tuple[str, nn.Parameter, torch.Tensor]] = field(default_factory=list)

    @classmethod
    def from_placed(cls, module: object) -> SparseState:
        """Masks read from the local shards of the placed (already masked) weights."""
        with torch.no_grad():
            return cls([(name, p, _local(p) != 0) for name, p in _named_params(module)
                        if is_sparse_weight(name)])

    def keep(self, optimizer: torch.optim.Optimizer) -> None:
        """Zero the masked positions again in the weights and AdamW's moments."""
        inner = getattr(optimizer, "optim", optimizer)  # ZeroRedundancyOptimizer wraps one
        with torch.no_grad():
            for _, param, mask in self.params:
                _local(param).mul_(mask)
                state = inner.state.get(param, {})
                for key in OPTIMIZER_STATE_KEYS:
                    if key in state:
                        _local(state[key]).mul_(mask)

    def local_counts(self) -> tuple[int, int]:
        """(zeros, elements) over this rank's local shards of the sparse matrices."""
        zeros = total = 0
        with torch.no_grad():
            for _, param, _ in self.params:
                local = _local(param)
                zeros += int((local == 0).sum())
                total += local.numel()
        return zeros, total


def per_matrix_sparsity(model: nn.Module) -> dict[str, float]:
    """Fraction of zeros of each sparse matrix of an unplaced model (for checks)."""
    return {name: float((p == 0).float().mean()) for name, p in model.named_parameters()
            if is_sparse_weight(name)}


def no_sparse_kernel_reason(pattern: str, device: str) -> str:
    """Why an unstructured cell runs masked dense (2:4 cells: models/semi_structured.py)."""
    return (f"no sparse kernel ran: masked dense on {device} (no kernel accelerates "
            "unstructured sparsity)")
