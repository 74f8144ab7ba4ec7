"""The one build of a training cell, for any layout: the model (fp32 master weights, the same
seed and initial checkpoint on every rank), placed on the layout's mesh (TP -> recompute ->
compile -> DP/FSDP, or pipeline stages), its AdamW and the fp16 loss scaler.

One process with no process group and a layout that needs none (dp=tp=pp=1, zero 0) places the
model with no mesh: the same placement code, with nothing to split.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.config.layout import Layout
from accelbench.models.convert_hf_gpt2 import load_checkpoint_dir, load_hf_gpt2_state_dict
from accelbench.models.gpt import GPT
from accelbench.models.sparsity import SparseState, sparsify
from accelbench.parallel.apply import prepare_model
from accelbench.parallel.dist import make_mesh, mesh_coords
from accelbench.parallel.optim import make_optimizer
from accelbench.parallel.pipeline import PipelineRunner


@dataclass
class Trainer:
    """What one rank steps: the placed model (module or PipelineRunner), its optimizer, the
    fp16 loss scaler (a no-op for other precisions), the optimizer's kernel and mesh position."""

    module: object
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    optimizer_label: str
    coords: dict[str, int]
    sparsity: SparseState | None = None  # the masks of a sparse cell's local shards


def needs_group(layout: Layout) -> bool:
    """Whether placing this layout needs a process group (a mesh)."""
    return layout.world_size > 1 or layout.zero > 0


def build_trainer(spec: TrainSpec, cell: TrainCell, layout: Layout,
                  device: torch.device) -> Trainer:
    """The model, loaded from the initial checkpoint on every rank before it is split, placed on
    the layout; its optimizer and loss scaler."""
    torch.manual_seed(spec.seed)
    model = GPT(spec.model)
    if spec.init_checkpoint:
        load_hf_gpt2_state_dict(model, load_checkpoint_dir(spec.init_checkpoint))
    # masked before placement, so TP/FSDP/pipeline shard the masked weights
    masks = sparsify(model, cell.sparsity, spec.sparsity_pattern, spec.sparsity_mask, spec.seed)
    model = model.to(device)
    mesh = make_mesh(layout, device) if dist.is_initialized() else None
    if layout.pp > 1:
        module = PipelineRunner(model, layout, mesh, cell.gas, device, cell.recompute,
                                spec.compile)
    else:
        module = prepare_model(model, layout, mesh, cell.recompute, spec.compile)
    optimizer, label = make_optimizer(module, layout, spec.lr, spec.weight_decay)
    # fp16 runs only on data-parallel layouts (sweep.check_layout_options), where every gradient
    # is whole or an FSDP shard, so found-inf agrees on all ranks.
    scaler = torch.amp.GradScaler(device.type, enabled=cell.dtype == "fp16")
    coords = mesh_coords(mesh) if mesh is not None else {"pp": 0, "dp": 0, "tp": 0}
    sparse = SparseState.from_placed(module) if masks else None
    return Trainer(module, optimizer, scaler, label, coords, sparse)
