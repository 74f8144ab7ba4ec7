"""The one build of a training cell, for any layout: the model (fp32 master weights, the same
seed and initial checkpoint on every rank), placed on the layout's mesh (TP -> recompute ->
compile -> DP/FSDP, or pipeline stages), its AdamW and the fp16 loss scaler.

One process with no process group and a layout that needs none (dp=tp=pp=1, zero 0) places the
model with no mesh: the same placement code, with nothing to split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.distributed as dist

from accelbench.bench.train.hooks import StepHook, hooks_for
from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.config.layout import Layout
from accelbench.config.precision import Precision
from accelbench.models.convert_hf import load_pretrained_weights
from accelbench.models.gpt import GPT
from accelbench.parallel.apply import prepare_model
from accelbench.parallel.context import context_shard, placement, set_context
from accelbench.parallel.dist import make_mesh, mesh_coords
from accelbench.parallel.optim import make_optimizer

H = TypeVar("H")


@dataclass
class Trainer:
    """What one rank steps: the placed model (module or PipelineRunner), its optimizer, the
    fp16 loss scaler (a no-op for other precisions), the optimizer's kernel and mesh position,
    and the step hooks of the features the cell uses (sparsity, float8, MoE)."""

    module: object
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    optimizer_label: str
    coords: dict[str, int]
    placed: Layout | None = None  # the layout the weights are placed by (cp folded into dp)
    precision: Precision | None = None  # the cell's, resolved once (spec.precision)
    hooks: tuple[StepHook, ...] = ()  # the features' seams (bench/train/hooks.py), in order

    def hook(self, kind: type[H]) -> H | None:
        """This trainer's hook of one kind (a feature's state), None when the cell has none."""
        return next((h for h in self.hooks if isinstance(h, kind)), None)


def needs_group(layout: Layout) -> bool:
    """Whether placing this layout needs a process group (a mesh)."""
    return layout.world_size > 1 or layout.zero > 0


def build_trainer(spec: TrainSpec, cell: TrainCell, layout: Layout,
                  device: torch.device) -> Trainer:
    """The model, loaded from the initial checkpoint on every rank before it is split, placed on
    the layout; its optimizer and loss scaler. The cell's feature hooks are called before the
    model moves to the device, before it is placed, and once it is placed."""
    torch.manual_seed(spec.seed)
    precision = spec.precision(cell, device.type)
    hooks = hooks_for(spec, cell, layout, precision, device)
    model = GPT(spec.model)
    if spec.init_checkpoint:
        load_pretrained_weights(model, spec.init_checkpoint)
    for hook in hooks:  # sparsity masks here, so TP/FSDP/pipeline shard the masked weights
        hook.built(model)
    model = model.to(device)
    for hook in hooks:  # float8 converts here, before compile and FSDP2 wrap the model
        hook.prepare(model, device)
    if layout.cp > 1:
        set_context(model, context_shard(layout))
    cp, layout = layout.cp, placement(layout)  # cp ranks hold the weights as dp ranks do
    mesh = make_mesh(layout, device) if dist.is_initialized() else None
    if layout.pp > 1:  # imported here: torch's pipelining imports Dynamo (~1 s a process)
        from accelbench.parallel.pipeline import PipelineRunner
        module = PipelineRunner(model, layout, mesh, cell.gas, device, cell.recompute,
                                spec.compile, spec.runtime_settings, cell.dtype)
    else:
        module = prepare_model(model, layout, mesh, cell.recompute, spec.compile,
                               spec.runtime_settings, cell.dtype)
    optimizer, label = make_optimizer(module, layout, spec.lr, spec.weight_decay)
    # fp16 runs only on data-parallel layouts (spec.cell_layout refuses it), where every gradient
    # is whole or an FSDP shard, so found-inf agrees on all ranks.
    scaler = torch.amp.GradScaler(device.type, enabled=precision.loss_scaling)
    coords = mesh_coords(mesh) if mesh is not None else {"pp": 0, "dp": 0, "tp": 0}
    if cp > 1:  # the cp ranks of a replica read the same batches (its dp index)
        coords = {**coords, "dp": coords["dp"] // cp, "cp": coords["dp"] % cp}
    for hook in hooks:  # sparsity: the local shards' masks and the 2:4 kernels
        hook.placed(module)
        hook.optimizing(optimizer)  # bf16 weights: the fp32 masters stay the optimizer's
    return Trainer(module, optimizer, scaler, label, coords, placed=layout, precision=precision,
                   hooks=hooks)
