"""Megatron tensor parallelism of our GPT through DTensor's parallelize_module.

Attention: c_attn (fused QKV) column-parallel, c_proj row-parallel; MLP: c_fc column-parallel,
c_proj row-parallel: one all-reduce after each row-parallel layer in forward, one in backward.
The fused QKV weight is laid out [q | k | v]; a plain column split would give rank 0 all of q and
half of k. Its rows are therefore reordered to [q_0 k_0 v_0 | q_1 k_1 v_1 | ...] so that each
rank's column shard holds whole heads of q, k and v, and each attention module runs with its
local head count. Sequence parallelism (Korthikanti et al.) shards the norms and the residual
stream along the sequence: all-gather before the column-parallel layers, reduce-scatter after the
row-parallel ones. Embeddings and the output head stay replicated.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from accelbench.models.gpt import Attention, Block


def qkv_rank_order(d_model: int, tp: int) -> torch.Tensor:
    """Row permutation of a fused [q | k | v] weight that puts each rank's q, k, v together."""
    return torch.arange(3 * d_model).view(3, tp, d_model // tp).transpose(0, 1).reshape(-1)


def _make_tp_attention(attn: Attention, tp: int) -> None:
    """Reorder the fused QKV rows so each rank holds whole heads, and count local heads."""
    d_model = attn.c_proj.out_features
    order = qkv_rank_order(d_model, tp)
    with torch.no_grad():
        attn.c_attn.weight.copy_(attn.c_attn.weight[order])
        if attn.c_attn.bias is not None:
            attn.c_attn.bias.copy_(attn.c_attn.bias[order])
    attn.n_head = attn.n_head // tp  # Attention.forward then runs this rank's heads


def block_plan(sp: bool) -> dict[str, object]:
    """parallelize_module plan of one Block (module paths relative to the block)."""
    if not sp:
        return {"attn.c_attn": ColwiseParallel(), "attn.c_proj": RowwiseParallel(),
                "mlp.c_fc": ColwiseParallel(), "mlp.c_proj": RowwiseParallel()}
    seq = Shard(1)
    return {
        "ln_1": SequenceParallel(),
        "attn.c_attn": ColwiseParallel(input_layouts=seq),
        "attn.c_proj": RowwiseParallel(output_layouts=seq, use_local_output=False),
        "ln_2": SequenceParallel(),
        "mlp.c_fc": ColwiseParallel(input_layouts=seq),
        "mlp.c_proj": RowwiseParallel(output_layouts=seq, use_local_output=False),
    }


def apply_tensor_parallel(blocks: list[Block], tp_mesh: DeviceMesh, sp: bool) -> None:
    """Split every block's attention and MLP over the tp mesh (in place)."""
    tp = tp_mesh.size()
    for block in blocks:
        _make_tp_attention(block.attn, tp)
        parallelize_module(block, tp_mesh, block_plan(sp))  # type: ignore[arg-type]


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
