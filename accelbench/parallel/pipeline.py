"""Pipeline parallelism of our GPT with torch.distributed.pipelining.

The model is cut into pp x vp stages: token (and position) embeddings go with the first, the
blocks are divided as stage_layer_counts says (evenly, or pp_first / pp_last layers on the first
and last stage, Megatron's uneven split), the final norm and output head go with the last. Stage
s lives on pipeline rank s mod pp (the placement interleaved 1F1B expects). Each stage module
gets TP, recompute like a whole model does under prepare_model; data parallelism at zero 0 and 1
averages the gradients over dp with one all-reduce after the schedule has run all micro-batches,
and at zero 2/3 FSDP2 shards each stage module (the schedule defers its reduce-scatter). A tied
output head (GPT-2) is a second copy on the last stage whose gradient is summed with the
embedding's after every step, as Megatron's embedding group does.

Context parallelism (parallel/context.py) runs inside the stages: the runner is built on the
placed layout (cp ranks folded into dp), every stage's attention gathers over its cp group,
each rank feeds its own tokens (so stages send activations of the local length) and the last
stage's loss is the mean over them; gradients are averaged over dp x cp as without pp.

The MoE load-balancing loss: each MoE layer's AuxLossAutoScaler (models/moe.py) backpropagates
coef / L x 1 / n_micro into its aux loss during its stage's backward (what the one-process
loss, cross-entropy plus coef x the mean over the L MoE layers, averaged over the
micro-batches, gives it), so earlier stages train their routers without seeing the loss. The
returned loss means what one process's does: the last stage's mean cross-entropy plus coef x
the mean of every stage's aux losses, summed over the pp group with one all-reduce per step.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.pipelining import (
    PipelineStage,
    Schedule1F1B,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
)

from accelbench.config.layer_split import stage_layer_counts
from accelbench.config.layout import Layout
from accelbench.config.model import moe_layer_count
from accelbench.config.runtime_settings import LEAN, RuntimeSettings
from accelbench.models.gpt import (
    GPT,
    Block,
    embed_tokens,
    fresh_compile_cache,
    set_recompute,
    vocab_logits,
)
from accelbench.models.moe import logged_aux_loss_sum, set_aux_grad_scale, start_aux_log
from accelbench.parallel.apply import wrap_data_parallel
from accelbench.parallel.dist import expert_groups
from accelbench.parallel.dtensors import local_tensor
from accelbench.parallel.expert import apply_expert_parallel, is_expert_param
from accelbench.parallel.grad_sync import average_grads
from accelbench.parallel.optim import TIED_COPY_ATTR
from accelbench.parallel.tp import (
    apply_sequence_parallel_stage_edges,
    apply_tensor_parallel,
    moe_sequence_params,
)

_SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B,
              "interleaved_1f1b": ScheduleInterleaved1F1B}


class GPTStage(nn.Module):
    """A contiguous slice of the GPT: [embeddings] blocks [final norm, head]."""

    def __init__(self, model: GPT, layers: range, first: bool, last: bool) -> None:
        super().__init__()
        self.wte = model.wte if first else None
        self.wpe = model.wpe if first else None
        self.context = model.context if first else None  # cp: the positions of this rank's tokens
        self.h = nn.ModuleList(model.h[i] for i in layers)
        self.ln_f = model.ln_f if last else None
        self.lm_head = model.lm_head if last else None
        self.cfg = model.cfg
        if last and model.cfg.tie_embeddings:
            self.lm_head.weight = nn.Parameter(model.lm_head.weight.detach().clone())
            setattr(self.lm_head.weight, TIED_COPY_ATTR, True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Token ids (first stage; under cp this rank's tokens) or hidden states in; hidden
        states or logits out."""
        if self.wte is not None:
            positions = (self.context.positions(x.shape[1], x.device)
                         if self.context is not None else None)
            x = embed_tokens(self.wte, self.wpe, x, positions)
        for block in self.h:
            x = block(x)
        if self.lm_head is not None:
            x = vocab_logits(self.lm_head(self.ln_f(x)), self.cfg)
        return x


def stage_layers(layout: Layout, n_layer: int, stage: int) -> range:
    """Block indices of one stage, contiguous, in the counts of stage_layer_counts (which
    validate_layout has checked divide)."""
    counts = stage_layer_counts(layout, n_layer)
    if counts is None:
        raise ValueError(f"layout {layout.label()} does not split {n_layer} layers into stages")
    start = sum(counts[:stage])
    return range(start, start + counts[stage])


def _loss_fn(n_micro: int):
    """Mean token cross-entropy of one micro-batch over n_micro: gradients sum to the mean."""
    def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        flat = logits.reshape(-1, logits.size(-1)).float()
        return F.cross_entropy(flat, targets.reshape(-1)) / n_micro
    return loss


def _make_schedule(stages: list[PipelineStage], layout: Layout, n_micro: int):
    """The layout's schedule; torch's own gradient scaling is turned off (the loss scales)."""
    cls = _SCHEDULES[layout.pp_schedule]
    kwargs = {"loss_fn": _loss_fn(n_micro)}
    if "scale_grads" in inspect.signature(cls.__init__).parameters:
        kwargs["scale_grads"] = False
    target = stages if layout.pp_schedule == "interleaved_1f1b" else stages[0]
    return cls(target, n_micro, **kwargs)


class PipelineRunner:
    """This rank's pipeline stages and schedule; step() replaces forward + backward of a step."""

    def __init__(self, model: GPT, layout: Layout, mesh: DeviceMesh, n_microbatches: int,
                 device: torch.device, recompute: str = "none", compile: bool = False,
                 settings: RuntimeSettings = LEAN, precision: str = "fp32") -> None:
        self.layout, self.parallel_layout, self.parallel_mesh = layout, layout, mesh
        self.runtime_settings, self.precision = settings, precision  # FSDP2's policy (zero 2/3)
        self.n_microbatches = n_microbatches
        self.pp_rank = mesh.get_local_rank("pp")
        n_stages = layout.n_stages
        self.stage_ids = list(range(self.pp_rank, n_stages, layout.pp))
        self.is_first = 0 in self.stage_ids
        self.is_last = n_stages - 1 in self.stage_ids
        self.tied = model.cfg.tie_embeddings
        self.device = device
        self.context = model.context  # cp: each rank's share of every sequence (context.py)
        self.aux_loss_coef = model.cfg.aux_loss_coef if model.cfg.is_moe else 0.0
        self.n_moe_layers = moe_layer_count(model.cfg)
        self.modules: list[nn.Module] = []
        # ep > 1: the groups made once on every rank; each stage keeps its E / ep experts
        self.experts = expert_groups(layout, mesh) if layout.ep > 1 else None
        self.expert_groups = self.experts  # as prepare_model's module carries them
        stages = []
        if compile:
            fresh_compile_cache()
        for s in self.stage_ids:
            module = GPTStage(model, stage_layers(layout, model.cfg.n_layer, s),
                              s == 0, s == n_stages - 1)
            module = self._place(module, recompute, compile)
            self.modules.append(module)
            stages.append(PipelineStage(module, s, n_stages, device,
                                        group=mesh.get_group("pp")))
        self.schedule = _make_schedule(stages, layout, n_microbatches)
        self._tied_group = _tied_group(mesh, layout.pp) if self.tied else None

    def _place(self, module: GPTStage, recompute: str, compile: bool) -> nn.Module:
        """TP -> recompute -> compile -> DP on one stage module."""
        blocks: list[Block] = list(module.h)
        if self.experts is not None:
            apply_expert_parallel(module, self.layout, self.experts)
        if self.layout.tp > 1:
            tp_mesh = self.parallel_mesh["tp"]
            apply_tensor_parallel(blocks, self.parallel_mesh, sp=self.layout.sp)
            if self.layout.sp:
                apply_sequence_parallel_stage_edges(module, tp_mesh, module.wte is not None,
                                                    module.lm_head is not None)
        set_recompute(blocks, recompute)
        if compile:  # the cache was emptied once for the cell, before the first stage
            for block in blocks:
                block.compile()
        if self.layout.zero >= 2:  # FSDP2 on the stage: the schedule defers its reduce-scatter
            tied_copy = getattr(module.lm_head, "weight", None) if module.lm_head else None
            marked = tied_copy is not None and getattr(tied_copy, TIED_COPY_ATTR, False)
            module = wrap_data_parallel(module, blocks, self.layout, self.parallel_mesh,
                                        self.experts, self.runtime_settings, self.precision)
            if marked:  # fully_shard swaps in new (DTensor) parameters: mark the copy again
                setattr(module.lm_head.weight, TIED_COPY_ATTR, True)
            return module
        return module  # zero 0/1: gradients averaged after the schedule (DDP's bucket
        # bookkeeping does not follow the schedule's split backward)

    def parameters(self) -> Iterator[nn.Parameter]:
        """Parameters of this rank's stages (for the optimizer)."""
        for module in self.modules:
            yield from module.parameters()

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor | None:
        """Forward and backward of this dp rank's batch in n_microbatches micro-batches.

        inputs and targets: (batch, seq) with batch divisible by n_microbatches, the same on
        every rank of a pipeline (and of a cp group). Under cp each rank feeds and scores its
        own tokens (ContextShard.shard), so stages send local-length activations and the loss
        is the mean over this rank's share, as without pp. Returns the mean loss on the last
        stage, None elsewhere.
        """
        if self.context is not None:
            inputs, targets = self.context.shard(inputs), self.context.shard(targets)
        losses: list[torch.Tensor] = []
        args = (inputs,) if self.is_first else ()
        kwargs = {"target": targets, "losses": losses} if self.is_last else {}
        if self.aux_loss_coef > 0:  # each micro-batch's loss is divided by n_micro (_loss_fn)
            set_aux_grad_scale(self.modules, 1.0 / self.n_microbatches)
            start_aux_log(self.modules)
        self.schedule.step(*args, **kwargs)
        self._average_dp_grads()
        self._sync_tied_grads()
        aux_term = self._aux_loss_term() if self.aux_loss_coef > 0 else None
        if not self.is_last:
            return None
        loss = torch.stack([loss.detach() for loss in losses]).sum()
        return loss if aux_term is None else loss + aux_term

    def _aux_loss_term(self) -> torch.Tensor:
        """coef x the mean over the model's MoE layers and the micro-batches of their aux
        losses, for the logged loss: each rank sums its layers' last n_micro values (the first
        step's shape inference runs one forward more, before the micro-batches), and one
        all-reduce over pp adds the other stages'."""
        total = logged_aux_loss_sum(self.modules, self.n_microbatches, self.device)
        dist.all_reduce(total, group=self.parallel_mesh.get_group("pp"))
        return self.aux_loss_coef * total / (self.n_moe_layers * self.n_microbatches)

    def _average_dp_grads(self) -> None:
        """zero 0/1: one all-reduce of all this rank's gradients over dp, then the average;
        under ep the experts' over the expert-data-parallel group (grad_sync.py's rule); under
        sp the MoE layers' summed over tp first (each tp rank routed its sequence shard)."""
        if self.layout.sp and self.layout.zero < 2:
            average_grads(moe_sequence_params(self.modules), self.parallel_mesh.get_group("tp"), 1)
        if self.layout.dp == 1 or self.layout.zero >= 2:
            return
        params = list(self.parameters())
        dense = [p for p in params if self.experts is None or not is_expert_param(p)]
        average_grads(dense, self.parallel_mesh.get_group("dp"), self.layout.dp)
        if self.experts is not None:
            average_grads([p for p in params if is_expert_param(p)], self.experts.edp_group,
                          self.layout.dp)

    def _sync_tied_grads(self) -> None:
        """Sum the embedding's and the head copy's gradients between the first and last stage."""
        if self._tied_group is None or not (self.is_first or self.is_last):
            return
        module = self.modules[0] if self.is_first else self.modules[-1]
        weight = module.wte.weight if self.is_first else module.lm_head.weight
        grad = weight.grad
        local = local_tensor(grad)
        dist.all_reduce(local, group=self._tied_group)


def _tied_group(mesh: DeviceMesh, pp: int) -> dist.ProcessGroup | None:
    """This rank's {first stage, last stage} group; every rank creates all of them in order."""
    ranks = mesh.mesh  # (pp, dp, tp) global ranks
    mine = None
    me = dist.get_rank()
    for d in range(ranks.shape[1]):
        for t in range(ranks.shape[2]):
            pair = [int(ranks[0, d, t]), int(ranks[pp - 1, d, t])]
            group = dist.new_group(pair) if pp > 2 else None
            if me in pair:
                mine = group if pp > 2 else mesh.get_group("pp")
    return mine
