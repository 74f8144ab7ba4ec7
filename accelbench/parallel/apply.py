"""Place a model on a mesh in the order that composes: TP (+SP) -> recompute -> compile -> DP.

Data parallelism by ZeRO stage (Rajbhandari et al.):
- zero=0: DDP (gradients all-reduced, everything replicated); with tp > 1, whose DTensor
  parameters DDP does not take, DataParallelGradSync (one flat all-reduce per step).
- zero=1: DDP plus ZeroRedundancyOptimizer (optimizer state sharded; each rank updates its share
  of the parameters and broadcasts them). FSDP2 has no "shard the optimizer only" mode, so DDP +
  ZeroRedundancyOptimizer is the torch-native ZeRO-1.
- zero=2: FSDP2 fully_shard with reshard_after_forward=False (parameters stay gathered from the
  forward to the backward; gradients and optimizer state sharded).
- zero=3: FSDP2 fully_shard with reshard_after_forward=True (parameters gathered per block again
  in the backward).
FSDP2 shards each block as its own unit, then the root (embeddings, final norm, tied head).
Expert parallelism (ep > 1): each rank keeps its E / ep experts of every MoE layer
(parallel/expert.py); at zero 0 DataParallelGradSync takes DDP's place, averaging dense
gradients over dp and expert gradients over the expert-data-parallel group; at zero 2/3 the
experts are FSDP2-sharded over the expert-data-parallel group, the rest over dp.
Sequence parallelism with MoE layers: each tp rank routed its own sequence shard, so the MoE
parameters' gradients are summed over tp (parallel/tp.py): by DataParallelGradSync at zero 0,
by FSDP2's all-reduce hook of each MoE layer (its own unit) and of its experts at zero 2/3.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.nn.parallel import DistributedDataParallel

from accelbench.config.layout import Layout
from accelbench.config.runtime_settings import (
    DDP,
    FSDP,
    GRAD_SYNC,
    LEAN,
    NONE,
    RuntimeSettings,
    dp_wrapper,
    mixed_precision,
)
from accelbench.models.gpt import GPT, Block, compile_blocks, set_recompute
from accelbench.models.moe import MoE
from accelbench.parallel.dist import ExpertGroups
from accelbench.parallel.expert import place_experts, shard_experts
from accelbench.parallel.grad_sync import DataParallelGradSync

if TYPE_CHECKING:
    from torch.distributed.fsdp import MixedPrecisionPolicy

# FSDP2 and the tensor-parallel plans (DTensor, ~0.6 s of CPU to import) are imported by the
# layouts that use them (parallel/dtensors.py)


def fsdp_policy(settings: RuntimeSettings, layout: Layout,
                precision: str) -> MixedPrecisionPolicy:
    """FSDP2's mixed-precision policy: bf16 parameters for compute and gradients reduced in
    `settings.reduce` where the cell is bf16 and fsdp_mp is on; else torch's default (the
    parameters' own fp32 for both)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if not mixed_precision(settings, layout, precision):
        return MixedPrecisionPolicy()
    reduce = torch.bfloat16 if settings.reduce == "bf16" else torch.float32
    return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce)


def _fully_shard(module: nn.Module, blocks: list[Block], layout: Layout, mesh: DeviceMesh,
                 experts: ExpertGroups | None, policy: MixedPrecisionPolicy) -> nn.Module:
    """ZeRO 2/3: FSDP2 per block then root over dp; under ep the experts first, over their
    expert-data-parallel group; under sp an MoE layer is a unit of its own whose (and whose
    experts') reduce-scattered gradients are summed over tp by an all-reduce hook."""
    from torch.distributed.fsdp import fully_shard

    from accelbench.parallel.tp import sum_over_tp_hook

    reshard = layout.zero == 3
    tp_sum = sum_over_tp_hook(mesh.get_group("tp")) if layout.sp else None
    if experts is not None:
        shard_experts(blocks, layout, experts, next(module.parameters()).device.type, tp_sum,
                      policy)
    for block in blocks:
        if tp_sum is not None and isinstance(block.mlp, MoE):
            fully_shard(block.mlp, mesh=mesh["dp"], reshard_after_forward=reshard,
                        mp_policy=policy)
            block.mlp.set_all_reduce_hook(tp_sum)
        fully_shard(block, mesh=mesh["dp"], reshard_after_forward=reshard, mp_policy=policy)
    fully_shard(module, mesh=mesh["dp"], reshard_after_forward=reshard, mp_policy=policy)
    return module


def wrap_data_parallel(module: nn.Module, blocks: list[Block], layout: Layout,
                       mesh: DeviceMesh, experts: ExpertGroups | None = None,
                       settings: RuntimeSettings = LEAN, precision: str = "fp32") -> nn.Module:
    """DDP (zero 0/1; zero 0 with tp or ep: DataParallelGradSync) or FSDP2 per block then root
    (zero 2/3) over the dp mesh dimension, as config.runtime_settings.dp_wrapper decides; DDP
    keeps its gradients as bucket views and FSDP2 gathers bf16 in bf16 cells unless `settings`
    turn them off."""
    sequence = []  # sp: tp ranks' own tokens
    if layout.sp:
        from accelbench.parallel.tp import moe_sequence_params

        sequence = moe_sequence_params(blocks)
    wrapper = dp_wrapper(layout, moe=bool(sequence))
    if wrapper == FSDP:
        return _fully_shard(module, blocks, layout, mesh, experts,
                            fsdp_policy(settings, layout, precision))
    if wrapper == GRAD_SYNC:  # DDP would average different ranks' experts together, and
        # does not take tp's DTensor parameters
        module.grad_sync = DataParallelGradSync(
            module, mesh.get_group("dp"), layout.dp,
            experts.edp_group if experts is not None else None,
            sequence, mesh.get_group("tp") if sequence else None)
        return module
    if wrapper == NONE:
        return module
    assert wrapper == DDP, wrapper
    device = next(module.parameters()).device
    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(module, device_ids=ids, process_group=mesh.get_group("dp"),
                                   gradient_as_bucket_view=settings.ddp_views)


def prepare_model(model: GPT, layout: Layout, mesh: DeviceMesh | None,
                  recompute: str = "none", compile: bool = False,
                  settings: RuntimeSettings = LEAN, precision: str = "fp32") -> nn.Module:
    """The module a training loop calls as module(x, y) -> (logits, loss), placed on the mesh.

    model must be built identically on every rank (same seed) and already on this rank's device;
    for pp > 1 use accelbench.parallel.pipeline.PipelineRunner instead. The returned module
    carries `parallel_mesh`, `parallel_layout`, `expert_groups` (None at ep 1) and
    `runtime_settings` for make_optimizer and clip_grad_norm_. `precision`: the cell's (bf16
    cells get FSDP2's mixed-precision policy unless `settings` turn it off).
    With no process group (mesh None) the layout must split nothing: one device, zero 0.
    """
    if layout.pp > 1:
        raise ValueError("pp > 1: build a PipelineRunner, prepare_model places pp=1 layouts")
    blocks = list(model.h)
    if layout.tp > 1:
        from accelbench.parallel.tp import apply_sequence_parallel_edges, apply_tensor_parallel

        apply_tensor_parallel(blocks, mesh, layout.sp)
        if layout.sp:
            apply_sequence_parallel_edges(model, mesh["tp"])
    experts = place_experts(model, layout, mesh)  # ep > 1: this rank's experts, all-to-all
    set_recompute(blocks, recompute)
    if compile:
        compile_blocks(blocks)
    if mesh is None:
        if layout.world_size > 1 or layout.zero > 0:
            raise ValueError(f"layout {layout.label()} needs a process group (a mesh)")
        wrapped = model
    else:
        wrapped = wrap_data_parallel(model, blocks, layout, mesh, experts, settings, precision)
    wrapped.parallel_mesh = mesh
    wrapped.runtime_settings = settings
    wrapped.parallel_layout = layout
    wrapped.expert_groups = experts  # ZeRO-1 under ep shards the experts' state over edp
    return wrapped


def micro_batch_context(module: nn.Module, is_last: bool) -> AbstractContextManager:
    """Wrap each micro-batch's forward+backward: DDP skips its all-reduce except on the last
    micro-batch of a step (one gradient all-reduce per step, as the analytics count it); FSDP2
    reduce-scatters every micro-batch (ZeRO-2/3 keep no unsharded gradient to accumulate into)."""
    if isinstance(module, DistributedDataParallel) and not is_last:
        return module.no_sync()
    grad_sync = getattr(module, "grad_sync", None)
    if grad_sync is not None and not is_last:
        return grad_sync.no_sync()
    return nullcontext()
