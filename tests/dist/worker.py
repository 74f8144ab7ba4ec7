"""Run under torchrun: 5 AdamW steps of a tiny GPT per layout case, and the same steps in one
process (the reference), recorded per rank and written as JSON by rank 0.

Usage: torchrun --nproc-per-node N tests/dist/worker.py OUT.json case1 case2 ...
A case is 'name:layout' or 'name:layout:collectives' with the layout string of
accelbench.config.layout_parse.parse_layout; 'collectives' profiles every step and records the time
in collectives (the profiler costs several times a tiny step's CPU time: only where a test
reads it).
The name's first word picks the model (config_for): 'neox' GenSLM's GPT-NeoX form (rotary on a
quarter of each head, parallel attention and MLP, untied head), 'llama', 'mqa' and 'gqa8'
Llama-style forms with grouped-query attention, anything else GPT-2.
"""

from __future__ import annotations

import time
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from shared_launch import launched  # this folder: the script's own, on the path

from accelbench.config.layout_parse import RUNTIME_KEYS, parse_layout
from accelbench.config.layout_rules import validate_layout
from accelbench.config.presets import get_preset
from accelbench.models.gpt import GPT
from accelbench.parallel.apply import micro_batch_context, prepare_model
from accelbench.parallel.collective_time import profile_collectives
from accelbench.parallel.context import context_shard, placement, set_context
from accelbench.parallel.dist import make_mesh, mean_over_replicas
from accelbench.parallel.gather import gather_rank_results
from accelbench.parallel.optim import clip_grad_norm_, local_state_bytes, make_optimizer
from accelbench.parallel.pipeline import PipelineRunner

STEPS = 5
SEQ = 32
MICRO_BATCH = 2
GAS = 2  # micro-batches per step; a pipeline of pp > 2 stages gets pp (gas_for)
LR = 1e-2
# The Llama forms at 1e-2 are chaotic over 5 steps: even one process splitting its batch into
# micro-batches moves the 5th grad norm by 2e-4; at 1e-3 that stays at 1e-7, as GPT-2's at 1e-2.
LLAMA_LR = 1e-3
WEIGHT_DECAY = 0.1
MAX_NORM = 0.5  # below the tiny model's gradient norms, so clipping acts on every step
SEED = 1234
CFG = get_preset("gpt2-tiny").with_changes(name="tiny-test", n_layer=4, n_positions=64,
                                           vocab_size=1024)
NEOX_CFG = CFG.with_changes(name="tiny-neox-test", position="rotary", rotary_pct=0.25,
                            parallel_residual=True, tie_embeddings=False)
# Llama-style (RMSNorm, SwiGLU, rotary, untied, no biases): 4 query heads on 2 key/value heads
# (tp=2 splits them, tp=4 shares each over 2 ranks), one key/value head (shared by every tensor
# rank), and 8 query heads on 4 key/value heads (more key/value heads than tp=2)
LLAMA_CFG = get_preset("llama-tiny").with_changes(name="tiny-llama-test", n_layer=4,
                                                  n_positions=64, vocab_size=1024)
MODELS = {"neox": NEOX_CFG, "llama": LLAMA_CFG,
          "mqa": LLAMA_CFG.with_changes(name="tiny-mqa-test", n_kv_head=1),
          "gqa8": LLAMA_CFG.with_changes(name="tiny-gqa8-test", n_head=8, n_kv_head=4)}


def config_for(case_name: str):
    """The model a case trains: by the name's first word ('neox_...', 'llama_...', 'mqa_...',
    'gqa8_...'), else GPT-2."""
    return MODELS.get(case_name.split("_")[0], CFG)


def lr_for(cfg) -> float:
    """The learning rate a model's cases train at (LLAMA_LR for the SwiGLU forms)."""
    return LLAMA_LR if cfg.activation == "swiglu" else LR


def gas_for(layout_text: str) -> int:
    """Micro-batches per step of a case: GAS, or pp when more stages need filling."""
    return max(GAS, parse_layout(layout_text, RUNTIME_KEYS).pp)


def batches(global_batch: int) -> torch.Tensor:
    """(STEPS, global_batch, SEQ + 1) token ids, the same on every rank."""
    gen = torch.Generator().manual_seed(SEED + 1)
    return torch.randint(0, CFG.vocab_size, (STEPS, global_batch, SEQ + 1), generator=gen)


def reference(data: torch.Tensor, cfg=CFG) -> dict[str, list[float]]:
    """One process, the whole global batch at once: the losses every layout must reproduce."""
    torch.manual_seed(SEED)
    model = GPT(cfg)
    opt = torch.optim.AdamW(_groups(model), lr=lr_for(cfg), betas=(0.9, 0.95), eps=1e-8)
    losses, norms = [], []
    for step in range(STEPS):
        _, loss = model(data[step, :, :-1], data[step, :, 1:])
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)))
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    return {"loss": losses, "grad_norm": norms}


def _groups(model: torch.nn.Module) -> list[dict]:
    params = list(model.parameters())
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": WEIGHT_DECAY},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def run_case(layout_text: str, device: torch.device, cfg=CFG, profiled: bool = False) -> dict:
    """Train STEPS steps under a layout; losses, grad norms and state bytes of this rank, and
    with `profiled` the seconds in collectives of each step."""
    gas = gas_for(layout_text)
    layout = validate_layout(parse_layout(layout_text, RUNTIME_KEYS), cfg, layout_world(), gas,
                             SEQ)
    torch.manual_seed(SEED)
    model = GPT(cfg)
    if layout.cp > 1:  # context parallel: whole sequences in, this rank's tokens computed
        set_context(model, context_shard(layout))
    cp, layout = layout.cp, placement(layout)  # cp ranks hold the weights as dp ranks do
    mesh = make_mesh(layout, device)
    coords = {n: mesh.get_local_rank(n) for n in ("pp", "dp", "tp")}
    coords["dp"], coords["cp"] = divmod(coords["dp"], cp)
    replicas = layout.dp // cp
    data = batches(replicas * gas * MICRO_BATCH)
    rows = slice(coords["dp"] * gas * MICRO_BATCH, (coords["dp"] + 1) * gas * MICRO_BATCH)
    if layout.pp > 1:
        module = PipelineRunner(model, layout, mesh, gas, device)
    else:
        module = prepare_model(model, layout, mesh)
    context = model.context
    del model
    opt, _ = make_optimizer(module, layout, lr_for(cfg), WEIGHT_DECAY)
    out = {"loss": [], "grad_norm": [], "step_time_s": 0.0}
    for step in range(STEPS):
        x, y = data[step, rows, :-1], data[step, rows, 1:]
        t0 = time.perf_counter()
        with profile_collectives(device) if profiled else nullcontext() as comm:
            if layout.pp > 1:
                loss = module.step(x, y)
            else:
                loss, fwd_bytes = accumulate(module, x, context.shard(y) if context else y,
                                             gas)
        if profiled:
            out.setdefault("collective_s", []).append(comm.time_s)
        out["grad_norm"].append(float(clip_grad_norm_(module, MAX_NORM, layout)))
        opt.step()
        if step == 0:
            out["bytes"] = local_state_bytes(module, opt)
            if layout.pp == 1:
                out["bytes"]["param_bytes_after_forward"] = fwd_bytes
        opt.zero_grad(set_to_none=True)
        out["step_time_s"] += time.perf_counter() - t0
        out["loss"].append(mean_over_replicas(loss, layout, device))
    out.update(coords)
    return out


def accumulate(module: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, gas: int = GAS):
    """gas micro-batches of forward and backward; the mean loss and the parameter bytes held
    right after the last forward (where ZeRO-2 keeps gathered parameters and ZeRO-3 not)."""
    total = torch.zeros(())
    fwd_bytes = 0
    for i, (xs, ys) in enumerate(zip(x.chunk(gas), y.chunk(gas), strict=True)):
        with micro_batch_context(module, is_last=i == gas - 1):
            logits = module(xs)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), ys.reshape(-1)) / gas
            fwd_bytes = sum(_local(p).numel() * 4 for p in module.parameters())
            loss.backward()
        total += loss.detach()
    return total, fwd_bytes


def _local(p: torch.Tensor) -> torch.Tensor:
    return p.to_local() if hasattr(p, "to_local") else p


def layout_world() -> int:
    return torch.distributed.get_world_size()


def run(cases: list[str], device: torch.device) -> dict:
    """Every case in turn on the process group; on rank 0 the results by name ({} elsewhere)."""
    results, references = {}, {}
    rank0 = torch.distributed.get_rank() == 0
    for case in cases:
        name, layout_text, *flags = case.split(":")
        cfg = config_for(name)
        ranks = gather_rank_results(run_case(layout_text, device, cfg, "collectives" in flags))
        if rank0:  # one process's run, once per model and global batch (the same on any rank)
            dp = parse_layout(layout_text, RUNTIME_KEYS).dp  # cp ranks share their rows
            key = (cfg.name, dp * gas_for(layout_text) * MICRO_BATCH)
            if key not in references:
                references[key] = reference(batches(key[1]), cfg)
            results[name] = {"layout": layout_text, "ranks": ranks, "reference": references[key]}
    return results


def main() -> None:
    launched(run)


if __name__ == "__main__":
    main()
