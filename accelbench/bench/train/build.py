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

from accelbench.bench.dtypes import fp8_mode
from accelbench.bench.peak import fp8_datasheet_peak
from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.config.layout import Layout
from accelbench.config.precision import Precision
from accelbench.models.convert_hf import load_pretrained_weights
from accelbench.models.float8 import convert_blocks
from accelbench.models.gpt import GPT
from accelbench.models.semi_structured import enable_two_four
from accelbench.models.sparsity import SparseState, no_sparse_kernel_reason, sparsify
from accelbench.parallel.apply import prepare_model
from accelbench.parallel.context import context_shard, placement, set_context
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
    sparse_kernel: str | None = None  # the 2:4 kernel the masked matrices run through
    sparse_kernel_reason: str | None = None  # why a sparse cell runs masked dense
    float8: dict | None = None  # an fp8 cell's float8 conversion, as the record's fp8 fields
    placed: Layout | None = None  # the layout the weights are placed by (cp folded into dp)
    precision: Precision | None = None  # the cell's, resolved once (spec.precision)


def _to_float8(precision: Precision, cell: TrainCell, layout: Layout, model: GPT,
               device: torch.device) -> dict | None:
    """An fp8 cell's blocks converted to float8 training (emulated where the device has no
    float8 units), and what was done, under the record's fp8 field names; None otherwise."""
    recipe = precision.fp8_scaling
    if recipe is None:
        return None
    mode, reason = fp8_mode(device)
    # ZeRO-2/3 are FSDP2, whose float8 all-gather torchao offers for tensorwise scaling only
    all_gather = layout.zero >= 2 and recipe == "tensorwise"
    done = convert_blocks(model, recipe, mode == "emulated", all_gather,
                          tokens_per_micro_batch=cell.micro_batch * cell.seq_len)
    return dict(fp8_mode=mode, fp8_mode_reason=reason, fp8_linears_converted=done.converted,
                fp8_linears_kept=done.kept,
                fp8_fsdp_float8_all_gather=done.fsdp_float8_all_gather,
                fp8_peak_flops_per_s_per_device=fp8_datasheet_peak(device))


def needs_group(layout: Layout) -> bool:
    """Whether placing this layout needs a process group (a mesh)."""
    return layout.world_size > 1 or layout.zero > 0


def build_trainer(spec: TrainSpec, cell: TrainCell, layout: Layout,
                  device: torch.device) -> Trainer:
    """The model, loaded from the initial checkpoint on every rank before it is split, placed on
    the layout; its optimizer and loss scaler."""
    torch.manual_seed(spec.seed)
    precision = spec.precision(cell, device.type)
    model = GPT(spec.model)
    if spec.init_checkpoint:
        load_pretrained_weights(model, spec.init_checkpoint)
    # masked before placement, so TP/FSDP/pipeline shard the masked weights
    masks = sparsify(model, cell.sparsity, spec.sparsity_pattern, spec.sparsity_mask, spec.seed)
    model = model.to(device)
    float8 = _to_float8(precision, cell, layout, model, device)  # before compile and FSDP2 wrap it
    if layout.cp > 1:
        set_context(model, context_shard(layout))
    cp, layout = layout.cp, placement(layout)  # cp ranks hold the weights as dp ranks do
    mesh = make_mesh(layout, device) if dist.is_initialized() else None
    if layout.pp > 1:
        module = PipelineRunner(model, layout, mesh, cell.gas, device, cell.recompute,
                                spec.compile)
    else:
        module = prepare_model(model, layout, mesh, cell.recompute, spec.compile)
    optimizer, label = make_optimizer(module, layout, spec.lr, spec.weight_decay)
    # fp16 runs only on data-parallel layouts (spec.cell_layout refuses it), where every gradient
    # is whole or an FSDP shard, so found-inf agrees on all ranks.
    scaler = torch.amp.GradScaler(device.type, enabled=precision.loss_scaling)
    coords = mesh_coords(mesh) if mesh is not None else {"pp": 0, "dp": 0, "tp": 0}
    if cp > 1:  # the cp ranks of a replica read the same batches (its dp index)
        coords = {**coords, "dp": coords["dp"] // cp, "cp": coords["dp"] % cp}
    sparse = SparseState.from_placed(module) if masks else None
    kernel, reason = _sparse_kernel(spec, cell, layout, module, device) if masks else (None, None)
    return Trainer(module, optimizer, scaler, label, coords, sparse, kernel, reason, float8,
                   layout, precision)


def _sparse_kernel(spec: TrainSpec, cell: TrainCell, layout: Layout, module: object,
                   device: torch.device) -> tuple[str | None, str]:
    """The kernel a sparse cell's masked matrices run through, or why none (masked dense)."""
    if spec.sparsity_pattern != "2:4":
        return None, no_sparse_kernel_reason(spec.sparsity_pattern, device.type)
    return enable_two_four(module, device, cell.dtype, layout.tp, layout.zero, spec.compile)
