"""Megatron tensor parallelism of our decoder (GPT-2, GPT-NeoX, Llama) through DTensor's
parallelize_module.

Attention: c_attn (fused QKV) column-parallel, c_proj row-parallel; MLP: c_fc column-parallel
(SwiGLU's fused [gate | up] too), c_proj row-parallel: one all-reduce after each row-parallel
layer in forward, one in backward. A fused weight's rows are reordered so that a plain column
split gives each rank what it needs: c_attn's [q | k | v] becomes [q_0 kv_0 | q_1 kv_1 | ...]
(each rank's query heads and their key/value rows), SwiGLU's [gate | up] becomes
[gate_0 up_0 | gate_1 up_1 | ...], and each attention module runs with its local head count.
Grouped-query attention (kv_heads key/value heads) follows Megatron's rule: when tp divides
kv_heads each rank holds kv_heads / tp whole key/value heads; when tp is a multiple of kv_heads,
the r = tp / kv_heads ranks whose query heads share one key/value head each store 1/r of its
[k | v] rows and all-gather the head's keys and values in forward (the backward sums each part's
gradient over those ranks), so every rank computes with the whole head it needs, no weight is
stored twice and the gradients need no extra reduction. Sequence parallelism (Korthikanti et
al.) shards the norms (LayerNorm or RMSNorm) and the residual stream along the sequence:
all-gather before the column-parallel layers, reduce-scatter after the row-parallel ones.
Embeddings and the output head stay replicated.

Mixture-of-experts blocks: attention as above; the MoE layer (router, experts, shared experts)
is replicated over tp, not split. Without sp every tp rank routes and computes the whole
sequence. With sp (Megatron-Core's approach) each tp rank routes only its sequence shard (the
stream stays Shard(1) around the layer: no expert row is computed twice), with ep over the ep
group of its tp coordinate; the per-expert counts and the auxiliary loss's mean scores are
summed over tp (sum_over_group), so the load counters hold the whole sequence's load and every
tp rank computes the one auxiliary loss. The MoE parameters' gradients then hold only the
shard's tokens: they are summed over tp after the backward (moe_sequence_params: zero 0 in
grad_sync.py and the pipeline's reduction; zero 2/3 in FSDP2's all-reduce hook of the MoE
units, sum_over_tp_hook), as Megatron-Core all-reduces its sequence-parallel parameters'
gradients.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    PrepareModuleInputOutput,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from accelbench.models.gpt import Attention, Block
from accelbench.models.mlp import MLP
from accelbench.models.moe import MoE, moe_layers
from accelbench.parallel.rank_params import kv_share


def qkv_rank_order(n_head: int, kv_heads: int, head_dim: int, tp: int) -> torch.Tensor:
    """Row permutation of a fused [q | k | v] weight (q n_head heads, k and v kv_heads heads of
    head_dim rows) after which a split in tp equal parts gives rank t its query heads followed
    by its key/value rows: kv_heads / tp whole k heads then the same v heads, or, when r ranks
    share a head, part t mod r of the r equal parts of head t // r's [k | v] rows."""
    q_rows, kv_rows = n_head * head_dim, kv_heads * head_dim
    q = torch.arange(q_rows).view(tp, -1)
    k = q_rows + torch.arange(kv_rows)
    v = k + kv_rows
    if kv_share(kv_heads, tp) == 1:
        kv = torch.cat((k.view(tp, -1), v.view(tp, -1)), dim=1)
    else:  # (kv_heads, 2 head_dim) rows [k_j | v_j], cut into tp parts of equal size
        kv = torch.cat((k.view(kv_heads, -1), v.view(kv_heads, -1)), dim=1).reshape(tp, -1)
    return torch.cat((q, kv), dim=1).reshape(-1)


def gate_up_rank_order(ffn_dim: int, tp: int) -> torch.Tensor:
    """Row permutation of SwiGLU's fused [gate | up] weight that puts each rank's gate and up
    rows together, so the MLP's halves of a rank's output are its gate and its up."""
    return torch.arange(2 * ffn_dim).view(2, tp, ffn_dim // tp).transpose(0, 1).reshape(-1)


def _permute_rows(linear: nn.Linear, order: torch.Tensor) -> None:
    """Reorder a Linear's output rows (weight and bias) in place."""
    with torch.no_grad():
        linear.weight.copy_(linear.weight[order])
        if linear.bias is not None:
            linear.bias.copy_(linear.bias[order])


class _GatherLastDim(torch.autograd.Function):
    """All-gather along the last dimension over a group; backward: each rank's part of the
    gradient summed over the group (a reduce-scatter; gloo has none, so all-reduce and slice)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.group = group
        x = x.contiguous()  # a column slice of c_attn's output; collectives want dense tensors
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, x, group=group)
        return torch.cat(parts, dim=-1)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        size, rank = dist.get_world_size(ctx.group), dist.get_rank(ctx.group)
        if "gloo" in str(dist.get_backend(ctx.group)):
            total = grad.contiguous().clone()
            dist.all_reduce(total, group=ctx.group)
            return total.chunk(size, dim=-1)[rank].contiguous(), None
        parts = [part.contiguous() for part in grad.chunk(size, dim=-1)]
        out = torch.empty_like(parts[rank])
        dist.reduce_scatter(out, parts, group=ctx.group)
        return out, None


def _gather_kv_hook(q_width: int, group: dist.ProcessGroup):
    """c_attn forward hook: this rank's query columns, then its shared key/value head's whole
    [k | v] gathered from the parts its r ranks hold."""
    def hook(_module: nn.Module, _args, out: torch.Tensor) -> torch.Tensor:
        q, kv = out.split((q_width, out.shape[-1] - q_width), dim=-1)
        return torch.cat((q, _GatherLastDim.apply(kv, group)), dim=-1)
    return hook


def kv_share_group(mesh: DeviceMesh, share: int) -> dist.ProcessGroup:
    """This rank's group of the `share` consecutive tensor ranks that hold parts of one
    key/value head; every rank creates all of them, in the same order."""
    tp = mesh["tp"].size()
    rows = mesh.mesh.reshape(-1, tp).tolist()  # every tensor group of the world
    groups = [row[i:i + share] for row in rows for i in range(0, tp, share)]
    mine, _ = dist.new_subgroups_by_enumeration(groups)
    return mine


def _kv_heads(attn: Attention) -> int:
    """Key/value heads of an attention module, from its fused projection's width."""
    return (attn.c_attn.out_features - attn.n_head * attn.head_dim) // (2 * attn.head_dim)


def _make_tp_attention(attn: Attention, tp: int) -> None:
    """Reorder the fused QKV rows for the split and count this rank's query heads."""
    order = qkv_rank_order(attn.n_head, _kv_heads(attn), attn.head_dim, tp)
    _permute_rows(attn.c_attn, order)
    attn.n_head = attn.n_head // tp  # Attention.forward then runs this rank's heads


def _make_tp_mlp(mlp: nn.Module, tp: int) -> None:
    """SwiGLU: reorder the fused [gate | up] rows so each rank's half-and-half split is its own."""
    if isinstance(mlp, MLP) and mlp.gated:
        _permute_rows(mlp.c_fc, gate_up_rank_order(mlp.c_proj.in_features, tp))


def block_plan(sp: bool, moe: bool = False) -> dict[str, object]:
    """parallelize_module plan of one Block (module paths relative to the block); an MoE
    block's mlp is not split: under sp it takes and gives back the local sequence shard."""
    if not sp:
        plan = {"attn.c_attn": ColwiseParallel(), "attn.c_proj": RowwiseParallel()}
        return plan if moe else {**plan, "mlp.c_fc": ColwiseParallel(),
                                 "mlp.c_proj": RowwiseParallel()}
    seq = Shard(1)
    plan = {
        "ln_1": SequenceParallel(),
        "attn.c_attn": ColwiseParallel(input_layouts=seq),
        "attn.c_proj": RowwiseParallel(output_layouts=seq, use_local_output=False),
        "ln_2": SequenceParallel(),
    }
    if moe:
        return {**plan, "mlp": PrepareModuleInputOutput(
            input_layouts=(seq,), desired_input_layouts=(seq,), use_local_input=True,
            output_layouts=(seq,), desired_output_layouts=(seq,), use_local_output=False)}
    return {**plan, "mlp.c_fc": ColwiseParallel(input_layouts=seq),
            "mlp.c_proj": RowwiseParallel(output_layouts=seq, use_local_output=False)}


class _SumOverGroup(torch.autograd.Function):
    """All-reduce (sum) over a group; backward: the gradient as it is (each rank's shard feeds
    the one loss every rank computes: Megatron's reduce_from_tensor_model_parallel_region)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        total = x.detach().clone()
        dist.all_reduce(total, group=group)
        return total

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, None


def sum_over_group(group: dist.ProcessGroup):
    """The MoE layer's sequence_sum under sp: a tensor summed over the tp ranks' shards."""
    def total(x: torch.Tensor) -> torch.Tensor:
        return _SumOverGroup.apply(x, group)
    return total


def moe_sequence_params(modules: list[nn.Module]) -> list[nn.Parameter]:
    """Under sp, the parameters of the MoE layers (routing their tp rank's sequence shard),
    whose gradients must be summed over tp; call after the experts are placed (ep)."""
    return [p for module in modules for m in moe_layers(module) for p in m.parameters()
            if p.requires_grad]


def sum_over_tp_hook(group: dist.ProcessGroup):
    """FSDP2's all-reduce hook (set_all_reduce_hook) of an MoE unit under sp: its reduce-
    scattered gradient shard summed over the tp ranks' sequence shards (ZeRO 2/3)."""
    def hook(reduce_output: torch.Tensor) -> None:
        dist.all_reduce(reduce_output, group=group)
    return hook


def apply_tensor_parallel(blocks: list[Block], mesh: DeviceMesh, sp: bool) -> None:
    """Split every block's attention and MLP over the mesh's tp dimension (in place); mesh is
    the whole (pp, dp, tp) mesh, from which the groups sharing a key/value head are made."""
    tp_mesh = mesh["tp"]
    tp = tp_mesh.size()
    if not blocks:
        return
    share = kv_share(_kv_heads(blocks[0].attn), tp)
    kv_group = kv_share_group(mesh, share) if share > 1 else None
    for block in blocks:
        _make_tp_attention(block.attn, tp)
        _make_tp_mlp(block.mlp, tp)
        moe = isinstance(block.mlp, MoE)
        parallelize_module(block, tp_mesh, block_plan(sp, moe))  # type: ignore[arg-type]
        if moe and sp:
            block.mlp.sequence_sum = sum_over_group(tp_mesh.get_group())
        if kv_group is not None:  # after the plan's hooks, which hand on local tensors
            q_width = block.attn.n_head * block.attn.head_dim
            block.attn.c_attn.register_forward_hook(_gather_kv_hook(q_width, kv_group))


def apply_sequence_parallel_edges(model: nn.Module, tp_mesh: DeviceMesh) -> None:
    """Under SP: shard the sequence entering the first block, gather it before the head."""
    seq = Shard(1)
    plan = {
        "h.0": PrepareModuleInput(input_layouts=(Replicate(),), desired_input_layouts=(seq,)),
        "ln_f": SequenceParallel(),
        "lm_head": PrepareModuleInput(input_layouts=(seq,), desired_input_layouts=(Replicate(),),
                                      use_local_output=True),
    }
    parallelize_module(model, tp_mesh, plan)  # type: ignore[arg-type]


def apply_sequence_parallel_stage_edges(stage: nn.Module, tp_mesh: DeviceMesh, first: bool,
                                        last: bool) -> None:
    """SP on one pipeline stage: stages pass their local sequence shards to each other.

    The first stage shards the embeddings' output; a later stage wraps the shard it received
    as a Shard(1) DTensor; a stage that is not last hands its local shard on (each tp rank to
    the same tp rank of the next stage, as Megatron does); the last stage gathers the sequence
    before the head.
    """
    seq = Shard(1)
    entry = Replicate() if first else seq
    plan: dict[str, object] = {
        "h.0": PrepareModuleInput(input_layouts=(entry,), desired_input_layouts=(seq,)),
    }
    if last:
        plan["ln_f"] = SequenceParallel()
        plan["lm_head"] = PrepareModuleInput(input_layouts=(seq,),
                                             desired_input_layouts=(Replicate(),),
                                             use_local_output=True)
    parallelize_module(stage, tp_mesh, plan)  # type: ignore[arg-type]
    if not last:  # a second call: with one block per stage it is also h.0, whose hooks compose
        exit_plan = {f"h.{len(stage.h) - 1}": PrepareModuleOutput(
            output_layouts=(seq,), desired_output_layouts=(seq,), use_local_output=True)}
        parallelize_module(stage, tp_mesh, exit_plan)  # type: ignore[arg-type]
