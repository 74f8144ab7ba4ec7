"""Run under torchrun: expert-parallel dispatch against every expert in one process, and MoE
training under ep layouts against one process; rank 0 writes what it found as JSON.

Usage: torchrun --nproc-per-node N tests/dist/expert_worker.py OUT.json [case ...]
On 2 ranks the dispatch checks first; a case is 'name:layout' (parse_layout's string) or
'name:layout:collectives', trained STEPS steps on moe-tiny and compared with one process that runs
the same micro-batches (computed by rank 0, once per model and dp). 'collectives' profiles the
last step and records its time in each collective by name (the profiler costs several times a
tiny step's CPU time: only where a test reads it).
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.distributed as dist
from shared_launch import launched  # this folder: the script's own, on the path

from accelbench.config.layout import Layout
from accelbench.config.layout_parse import RUNTIME_KEYS, parse_layout
from accelbench.config.layout_rules import validate_layout
from accelbench.config.presets import get_preset
from accelbench.models.gpt import GPT
from accelbench.models.moe import expert_load, moe_layers
from accelbench.models.moe_routing import Experts, Routing, local_dispatch
from accelbench.parallel.apply import micro_batch_context, prepare_model
from accelbench.parallel.collective_time import profile_collectives
from accelbench.parallel.dist import make_mesh, mean_over_replicas
from accelbench.parallel.expert import (
    ExpertParallelDispatch,
    is_expert_param,
    placed_moe_layers,
    rank_expert_load,
    reset_expert_load,
)
from accelbench.parallel.gather import gather_rank_results
from accelbench.parallel.optim import clip_grad_norm_, local_state_bytes, make_optimizer
from accelbench.parallel.pipeline import PipelineRunner

D_MODEL, N_EXPERTS = 16, 4
STEPS, SEQ, MICRO_BATCH, GAS = 4, 32, 2, 2
LR, WEIGHT_DECAY, MAX_NORM, SEED = 1e-3, 0.1, 0.5, 1234
AUX_COEF = 0.1  # 'aux...' cases: a load-balancing loss whose gradient shows in the norms
MOE_CFG = get_preset("moe-tiny").with_changes(name="moe-tiny-test", n_positions=64,
                                              vocab_size=1024)
# (tokens of this rank, the expert of each assignment): rank 1 sends every row to rank 0's
# experts and none to its own; expert 3 gets no row from anyone; rank 0 has 5 tokens, rank 1 3
ASSIGNMENTS = {0: (5, [(0, 0), (1, 1), (1, 2), (2, 0), (3, 2), (4, 1), (4, 0)]),
               1: (3, [(0, 1), (1, 0), (2, 1), (2, 0)])}
# one rank routes nothing at all: rank 1's three tokens all dropped
EMPTY = {0: (4, [(0, 3), (1, 2), (2, 3), (3, 0)]), 1: (3, [])}


def routing_of(n_tokens: int, pairs: list[tuple[int, int]], seed: int) -> Routing:
    """A Routing from explicit (token, expert) assignments, sorted by expert, random gates."""
    pairs = sorted(pairs, key=lambda te: (te[1], te[0]))
    token = torch.tensor([t for t, _ in pairs], dtype=torch.long)
    expert = torch.tensor([e for _, e in pairs], dtype=torch.long)
    gate = torch.rand(len(pairs), generator=torch.Generator().manual_seed(seed))
    counts = torch.bincount(expert, minlength=N_EXPERTS)
    return Routing(token, expert, gate, counts, torch.zeros_like(counts), n_tokens)


def dispatch_check(assignments: dict, group: dist.ProcessGroup) -> dict:
    """The ep=2 dispatch's output, input gradient and expert gradients against all experts run
    here (each expert's gradient summed over the ranks whose tokens it saw)."""
    rank = dist.get_rank()
    cfg = get_preset("llama-tiny").with_changes(d_model=D_MODEL, n_experts=N_EXPERTS, d_ff=24)
    torch.manual_seed(7)
    full = Experts(cfg)
    n_tokens, pairs = assignments[rank]
    routing = routing_of(n_tokens, pairs, seed=rank)
    x = torch.randn(n_tokens, D_MODEL, generator=torch.Generator().manual_seed(10 + rank))
    x_ref, x_ep = x.clone().requires_grad_(), x.clone().requires_grad_()
    weight = torch.randn(n_tokens, D_MODEL, generator=torch.Generator().manual_seed(20 + rank))
    (local_dispatch(x_ref, routing, full) * weight).sum().backward()
    sharded = Experts(cfg)
    sharded.load_state_dict(full.state_dict())
    n_local = N_EXPERTS // 2
    sharded.shard(rank * n_local, n_local)
    y_ep = ExpertParallelDispatch(group, 2)(x_ep, routing, sharded)
    (y_ep * weight).sum().backward()
    ref_grad = full.w_fc.grad.clone()
    dist.all_reduce(ref_grad, group=group)
    mine = slice(rank * n_local, (rank + 1) * n_local)
    return {"out_err": float((y_ep - local_dispatch(x, routing, full)).abs().max()),
            "x_grad_err": float((x_ep.grad - x_ref.grad).abs().max()),
            "w_grad_err": float((sharded.w_fc.grad - ref_grad[mine]).abs().max()),
            "w_grad_norm": float(ref_grad[mine].norm()),
            "rows_received": int(sum(sum(1 for _, e in pairs if e // n_local == rank)
                                     for _, pairs in assignments.values()))}


def cfg_for(case: str):
    """moe-tiny, shortened; a case named 'capacity...' routes with capacity factor 1 (drops),
    'aux...' weighs the load-balancing loss AUX_COEF, 'noaux...' trains without it."""
    if case.startswith("capacity"):
        return MOE_CFG.with_changes(capacity_factor=1.0)
    if case.startswith("aux"):
        return MOE_CFG.with_changes(aux_loss_coef=AUX_COEF)
    return MOE_CFG.with_changes(aux_loss_coef=0.0) if case.startswith("noaux") else MOE_CFG


def router_grad_sq(modules) -> float:
    """Sum of squares of the router weights' gradients held here (a shard's under zero 2/3)."""
    grads = [m.router.weight.grad for module in modules for m in moe_layers(module)]
    return sum(float((g.to_local() if hasattr(g, "to_local") else g).pow(2).sum())
               for g in grads if g is not None)


def data(global_batch: int) -> torch.Tensor:
    """(STEPS, global_batch, SEQ + 1) token ids, the same on every rank."""
    gen = torch.Generator().manual_seed(SEED + 1)
    return torch.randint(0, MOE_CFG.vocab_size, (STEPS, global_batch, SEQ + 1), generator=gen)


def reference(cfg, dp: int) -> dict:
    """One process, the dp x GAS micro-batches the ranks see, accumulated: the losses, grad
    norms and per-expert load every ep layout must reproduce (routing, capacity and the
    auxiliary loss are per micro-batch, so the same micro-batches give the same step)."""
    torch.manual_seed(SEED)
    model = GPT(cfg)
    opt, _ = make_optimizer(prepare_model(model, Layout(), None), Layout(), LR, WEIGHT_DECAY)
    batch = data(dp * GAS * MICRO_BATCH)
    out: dict = {"loss": [], "grad_norm": [], "router_grad_sq": []}
    for step in range(STEPS):
        if step == 1:  # as the load after the first step (see train_case)
            reset_expert_load(model)
        total = 0.0
        for xs in batch[step].chunk(dp * GAS):
            _, loss = model(xs[:, :-1], xs[:, 1:])
            (loss / (dp * GAS)).backward()
            total += float(loss.detach()) / (dp * GAS)
        out["router_grad_sq"].append(router_grad_sq([model]))
        out["grad_norm"].append(float(torch.nn.utils.clip_grad_norm_(model.parameters(),
                                                                     MAX_NORM)))
        opt.step()
        opt.zero_grad(set_to_none=True)
        out["loss"].append(total)
    routed, dropped = expert_load(model)
    return {**out, "routed": routed, "dropped": dropped}


def _step(module, layout, batch: torch.Tensor) -> torch.Tensor | None:
    """Forward and backward of this rank's GAS micro-batches: a pipeline's schedule, or the
    micro-batch loop; the step's loss (None on a pipeline stage that holds none)."""
    if layout.pp > 1:
        return module.step(batch[:, :-1], batch[:, 1:])
    total = torch.zeros(())
    for i, xs in enumerate(batch.chunk(GAS)):
        with micro_batch_context(module, is_last=i == GAS - 1):
            _, loss = module(xs[:, :-1], xs[:, 1:])
            (loss / GAS).backward()
        total += loss.detach() / GAS
    return total


def count_expert_rows(module) -> list[int]:
    """[rows this rank's experts have computed], counted by a hook on each MoE layer's Experts
    (under sp each tp rank's shard only; under ep the rows its peers sent it)."""
    rows = [0]

    def hook(_experts, args, _out) -> None:
        rows[0] += args[0].shape[0]
    for moe in placed_moe_layers(module):
        moe.experts.register_forward_hook(hook)
    return rows


def train_case(text: str, device: torch.device, cfg, profiled: bool = False) -> dict:
    """STEPS AdamW steps under an ep layout: this rank's view (losses, grad norms, load, and
    with `profiled` the time in each collective of the last step) gathered on rank 0."""
    layout = validate_layout(parse_layout(text, RUNTIME_KEYS), cfg, dist.get_world_size(), GAS)
    mesh = make_mesh(layout, device)
    torch.manual_seed(SEED)
    if layout.pp > 1:
        module = PipelineRunner(GPT(cfg), layout, mesh, GAS, device)
    else:
        module = prepare_model(GPT(cfg), layout, mesh)
    opt, _ = make_optimizer(module, layout, LR, WEIGHT_DECAY)
    rows = count_expert_rows(module)
    d = mesh.get_local_rank("dp")
    batch = data(layout.dp * GAS * MICRO_BATCH)[:, d * GAS * MICRO_BATCH:][:, :GAS * MICRO_BATCH]
    out: dict = {"loss": [], "grad_norm": [], "router_grad_sq": []}
    for step in range(STEPS):
        if step == 1:  # a pipeline's first step also runs its shape inference's forward
            reset_expert_load(module)
            rows[0] = 0
        last = step == STEPS - 1
        with profile_collectives(device) if profiled and last else nullcontext() as comm:
            total = _step(module, layout, batch[step])
        held = module.modules if isinstance(module, PipelineRunner) else [module]
        out["router_grad_sq"].append(router_grad_sq(held))
        out["grad_norm"].append(float(clip_grad_norm_(module, MAX_NORM, layout)))
        opt.step()
        opt.zero_grad(set_to_none=True)
        out["loss"].append(mean_over_replicas(total, layout, device))
    if profiled:
        out["comm_by_name"] = comm.by_name_s
    out.update(moe_load=rank_expert_load(module),
               **{name: mesh.get_local_rank(name) for name in ("pp", "dp", "tp")},
               expert_params=sum(p.numel() for p in module.parameters()
                                 if is_expert_param(p)),
               state_bytes=local_state_bytes(module, opt), expert_rows=rows[0])
    return {"ranks": gather_rank_results(out), "dp": layout.dp}


def run(cases: list[str], device: torch.device) -> dict:
    """On 2 ranks the dispatch checks, then every case in turn; on rank 0 the results by name
    ({} elsewhere)."""
    results: dict = {}
    if dist.get_world_size() == 2:
        group = dist.new_group([0, 1])
        for name, assignments in (("uneven", ASSIGNMENTS), ("empty", EMPTY)):
            results[name] = gather_rank_results(dispatch_check(assignments, group))
    references: dict = {}
    for case in cases:
        name, text, *flags = case.split(":")
        cfg = cfg_for(name)
        results[name] = train_case(text, device, cfg, "collectives" in flags)
        if dist.get_rank() == 0:  # one process's run, once per model and dp (rank 0 alone)
            key = (cfg, results[name]["dp"])
            if key not in references:
                references[key] = reference(cfg, key[1])
            results[name]["reference"] = references[key]
    return results if dist.get_rank() == 0 else {}


def main() -> None:
    launched(run)


if __name__ == "__main__":
    main()
