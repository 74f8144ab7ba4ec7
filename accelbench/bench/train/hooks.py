"""The one seam a feature plugs into the training runner by: a `StepHook`, built for a cell by
`hooks_for` and called by the build (bench/train/build.py) and the step loop (steps.py) at fixed
points, in this order:

  built(model)                  the whole model on the host, before it moves to the device
  prepare(model, device)        on the device, before placement (compile, FSDP2, TP wrap it after)
  placed(module)                after placement and the optimizer (a module or PipelineRunner)
  optimizing(optimizer)         right after placed: the optimizer the steps will call
  timed()                       before the first timed step (after the warm-up steps)
  after_optimizer_step(trainer) after every optimizer step, before the gradients are zeroed
  result(device)                after the last step, on every rank (may be a collective): the
                                hook's `RankResult` fields, by name

A feature is one hook class and one factory in FEATURE_HOOKS (a cell it does not apply to gets
None): sparsity (masks, 2:4 kernels, masked weights and moments kept zero, the measured level),
float8 (the blocks' conversion, the record's fp8 fields) and MoE (the expert load of the timed
steps). The trainer carries the tuple; nothing feature-specific is a trainer field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import torch
import torch.distributed as dist

from accelbench.bench.dtypes import fp8_mode
from accelbench.bench.gemm_peak import fp8_datasheet_peak
from accelbench.bench.train.bf16_weights import bf16_weights_hook
from accelbench.bench.train.compile_scope import compile_scope_hook
from accelbench.bench.train.loss_impl import loss_impl_hook
from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.config.layout import Layout
from accelbench.config.precision import Precision
from accelbench.models.float8 import convert_blocks
from accelbench.models.semi_structured import enable_two_four
from accelbench.models.weight_masks import SparseState, no_sparse_kernel_reason, sparsify
from accelbench.parallel.expert import rank_expert_load, reset_expert_load


class Stepped(Protocol):
    """What a hook sees of the trainer after an optimizer step (build.py's Trainer)."""

    module: object
    optimizer: torch.optim.Optimizer


class StepHook(Protocol):
    """What a feature does at each point of a cell's build and steps; every call is optional
    (a subclass inherits these no-ops)."""

    def built(self, model: torch.nn.Module) -> None:
        """The unplaced model on the host, weights loaded (initial checkpoint included)."""

    def prepare(self, model: torch.nn.Module, device: torch.device) -> None:
        """The unplaced model on the device, before compile and the parallel wrappers."""

    def placed(self, module: object) -> None:
        """The placed model (a module or PipelineRunner), its optimizer made."""

    def optimizing(self, optimizer: torch.optim.Optimizer) -> None:
        """The optimizer the steps call (bf16 weights: its fp32 masters, a pre-step hook)."""

    def timed(self) -> None:
        """The warm-up steps are over: what follows is measured."""

    def after_optimizer_step(self, trainer: Stepped) -> None:
        """An optimizer step has updated the weights (gradients not yet zeroed)."""

    def result(self, device: torch.device) -> dict[str, Any]:
        """This rank's notes for the record, as RankResult fields by name."""
        return {}


class SparsityHook(StepHook):
    """Weight sparsity: masks chosen on the host model (TP/FSDP/pipeline then shard the masked
    weights), each rank's masks read from its local shards, the 2:4 kernels where they run,
    masked weights and AdamW moments kept zero, and the level measured after the last step."""

    def __init__(self, spec: TrainSpec, cell: TrainCell, layout: Layout,
                 device: torch.device) -> None:
        self.spec, self.cell, self.layout, self.device = spec, cell, layout, device
        self.masked = False
        self.state: SparseState | None = None  # the masks of this rank's local shards
        self.kernel: str | None = None  # the 2:4 kernel the masked matrices run through
        self.reason: str | None = None  # why the cell runs masked dense

    def built(self, model: torch.nn.Module) -> None:
        spec = self.spec
        self.masked = bool(sparsify(model, self.cell.sparsity, spec.sparsity_pattern,
                                    spec.sparsity_mask, spec.seed))

    def placed(self, module: object) -> None:
        if not self.masked:
            return
        self.state = SparseState.from_placed(module)
        self.kernel, self.reason = self._kernel(module)

    def _kernel(self, module: object) -> tuple[str | None, str | None]:
        """The kernel the masked matrices run through, or why none (masked dense)."""
        spec, device = self.spec, self.device
        if spec.sparsity_pattern != "2:4":
            return None, no_sparse_kernel_reason(spec.sparsity_pattern, device.type)
        return enable_two_four(module, device, self.cell.dtype, self.layout.tp,
                               self.layout.zero, spec.compile)

    def after_optimizer_step(self, trainer: Stepped) -> None:
        if self.state is not None:
            self.state.keep(trainer.optimizer)

    def measured(self, device: torch.device) -> float | None:
        """Fraction of zeros in the sparse matrices, from the weights. On several ranks the
        local counts are summed: every sparse matrix is held the same number of times over the
        group (replicated over dp, or sharded), so the summed ratio is the model's."""
        if self.state is None:
            return None
        zeros, total = self.state.local_counts()
        if dist.is_initialized():
            counts = torch.tensor([zeros, total], dtype=torch.float64, device=device)
            dist.all_reduce(counts)
            zeros, total = counts.tolist()
        return zeros / total if total else None

    def result(self, device: torch.device) -> dict[str, Any]:
        return dict(sparsity_measured=self.measured(device), sparse_kernel=self.kernel,
                    sparse_kernel_reason=self.reason)


class Float8Hook(StepHook):
    """FP8 training: the blocks converted to float8 (emulated where the device has no float8
    units) before compile and FSDP2 wrap them; what was done, under the record's fp8 names."""

    def __init__(self, cell: TrainCell, layout: Layout, recipe: str) -> None:
        self.cell, self.layout, self.recipe = cell, layout, recipe
        self.done: dict[str, Any] | None = None

    def prepare(self, model: torch.nn.Module, device: torch.device) -> None:
        mode, reason = fp8_mode(device)
        # ZeRO-2/3 are FSDP2, whose float8 all-gather torchao offers for tensorwise scaling only
        all_gather = self.layout.zero >= 2 and self.recipe == "tensorwise"
        done = convert_blocks(model, self.recipe, mode == "emulated", all_gather,
                              tokens_per_micro_batch=self.cell.micro_batch * self.cell.seq_len)
        self.done = dict(fp8_mode=mode, fp8_mode_reason=reason,
                         fp8_linears_converted=done.converted, fp8_linears_kept=done.kept,
                         fp8_fsdp_float8_all_gather=done.fsdp_float8_all_gather,
                         fp8_peak_flops_per_s_per_device=fp8_datasheet_peak(device))

    def result(self, device: torch.device) -> dict[str, Any]:
        return dict(float8=self.done)


class MoEHook(StepHook):
    """Mixture of experts: the tokens routed and dropped per expert over the timed steps."""

    def __init__(self) -> None:
        self.module: object = None

    def placed(self, module: object) -> None:
        self.module = module

    def timed(self) -> None:
        reset_expert_load(self.module)

    def result(self, device: torch.device) -> dict[str, Any]:
        return dict(moe_load=rank_expert_load(self.module))  # this rank's tokens


HookFactory = Callable[[TrainSpec, TrainCell, Layout, Precision, torch.device], "StepHook | None"]


def _sparsity(spec: TrainSpec, cell: TrainCell, layout: Layout, precision: Precision,
              device: torch.device) -> StepHook | None:
    return SparsityHook(spec, cell, layout, device) if cell.sparsity else None


def _float8(spec: TrainSpec, cell: TrainCell, layout: Layout, precision: Precision,
            device: torch.device) -> StepHook | None:
    recipe = precision.fp8_scaling
    return Float8Hook(cell, layout, recipe) if recipe is not None else None


def _moe(spec: TrainSpec, cell: TrainCell, layout: Layout, precision: Precision,
         device: torch.device) -> StepHook | None:
    return MoEHook() if spec.model.is_moe else None


# the features, in the order their hooks are called at each point (sparsity masks the host
# model before float8 converts it on the device; results are gathered in this order too);
# the loss, bf16 weights and the compile scope: bench/train/loss_impl.py, bf16_weights.py,
# compile_scope.py
FEATURE_HOOKS: tuple[HookFactory, ...] = (
    _sparsity, _float8, _moe, lambda spec, *_: loss_impl_hook(spec.loss_impl),
    lambda spec, *_: bf16_weights_hook(spec.compute_weights),
    lambda spec, *_: compile_scope_hook(spec.compile_scope, spec.compile))


def hooks_for(spec: TrainSpec, cell: TrainCell, layout: Layout, precision: Precision,
              device: torch.device) -> tuple[StepHook, ...]:
    """The hooks of the features this cell uses, built afresh for one build."""
    made = (factory(spec, cell, layout, precision, device) for factory in FEATURE_HOOKS)
    return tuple(hook for hook in made if hook is not None)


def hook_results(hooks: tuple[StepHook, ...], device: torch.device) -> dict[str, Any]:
    """Every hook's RankResult fields; two hooks naming one field is a programming error."""
    out: dict[str, Any] = {}
    for hook in hooks:
        fields = hook.result(device)
        clash = out.keys() & fields.keys()
        if clash:
            raise ValueError(f"two step hooks set the RankResult fields {sorted(clash)}")
        out.update(fields)
    return out
