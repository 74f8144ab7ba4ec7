"""Run under torchrun: per case, one step of the training benchmark's own code path
(accelbench.bench.train.steps) under the profiler; every rank records the buffers of the gloo
collectives it ran and what comm_calls_per_step says it runs; rank 0 writes both as JSON.

Usage: torchrun --nproc-per-node N tests/dist/comm_worker.py OUT.json name:dtype:layout ...
Every process group in the cases has 2 ranks, so an all-gather's whole buffer is twice the
shard the profiler records. A case 'name:moe:dtype:layout' is tests/dist/comm_moe_worker.py's
(moe-tiny), run in the same launch (tests/dist/launch_cases.py).
"""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from pathlib import Path

import torch
from shared_launch import launched  # this folder: the script's own, on the path
from torch.profiler import ProfilerActivity, profile

from accelbench.bench.train.build import build_trainer
from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.bench.train.steps import _forward_backward, _optimizer_step
from accelbench.config.layout_parse import RUNTIME_KEYS, parse_layout
from accelbench.config.layout_rules import validate_layout
from accelbench.config.presets import get_preset
from accelbench.parallel.collectives import comm_calls_per_step
from accelbench.parallel.gather import gather_rank_results

CFG = get_preset("gpt2-tiny").with_changes(n_layer=2, n_positions=64, vocab_size=1024)
# A case named 'mqa...' trains a Llama-style model with one key/value head, which the two
# tensor ranks share (gathered in forward, its gradient reduced in backward)
MQA_CFG = get_preset("llama-tiny").with_changes(n_positions=64, vocab_size=1024, n_kv_head=1)
SEQ, MICRO_BATCH, GAS, GROUP = 32, 2, 2, 2
# Left out of the accounting: all-reduces of scalars (loss, norm) and SP's of norm and bias
# gradients (h values each), and DDP's integer bookkeeping broadcasts.
MIN_ALL_REDUCE_BYTES = 1024
SIZES = {"float": 4, "double": 8, "c10::BFloat16": 2, "c10::Half": 2}


def profiled_buffers(trace: dict) -> dict[str, float]:
    """Bytes of whole buffers by collective, from the gloo records of a chrome trace."""
    out: dict[str, float] = defaultdict(float)
    for event in trace["traceEvents"]:
        name = event.get("name", "")
        if not name.startswith("gloo:") or name == "gloo:recv":
            continue
        args = event["args"]
        if args["Input type"][0] not in SIZES:
            continue
        numel = 1
        for dim in args["Input Dims"][0]:
            numel *= dim
        size = numel * SIZES[args["Input type"][0]] * (GROUP if name == "gloo:all_gather" else 1)
        op = name.removeprefix("gloo:")
        if op != "all_reduce" or size >= MIN_ALL_REDUCE_BYTES:
            out[op] += size
    return dict(out)


def accounted_buffers(cfg, layout, dtype: str, pp_rank: int) -> dict[str, float]:
    """comm_calls_per_step by collective; gloo runs a reduce-scatter as an all-reduce."""
    out: dict[str, float] = defaultdict(float)
    for call in comm_calls_per_step(cfg, layout, SEQ, MICRO_BATCH, GAS, dtype, "none", pp_rank):
        op = "all_reduce" if call.op == "reduce_scatter" else call.op
        out[op] += call.buffer_bytes * call.calls
    return dict(out)


def profiled_step(cfg, dtype: str, layout_text: str, device: torch.device):
    """Two steps as the runner runs them, the second profiled: (its chrome trace, the layout,
    this rank's mesh coordinates)."""
    world = torch.distributed.get_world_size()
    layout = validate_layout(parse_layout(layout_text, RUNTIME_KEYS), cfg, world, GAS)
    spec = TrainSpec(cfg, seq_lens=(SEQ,), micro_batches=(MICRO_BATCH,), gas=(GAS,),
                     dtypes=(dtype,), device="cpu")
    cell = TrainCell(SEQ, MICRO_BATCH, GAS, dtype, "none")
    trainer = build_trainer(spec, cell, layout, device)
    x = torch.randint(0, cfg.vocab_size, (MICRO_BATCH * GAS, SEQ + 1))
    _forward_backward(trainer, cell, layout, x[:, :-1], x[:, 1:], device)  # first-step set-up
    _optimizer_step(trainer, layout, 1.0)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        _forward_backward(trainer, cell, layout, x[:, :-1], x[:, 1:], device)
        _optimizer_step(trainer, layout, 1.0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
    return trace, layout, trainer.coords


def run_case(cfg, dtype: str, layout_text: str, device: torch.device) -> dict:
    """Both accounts of this rank's profiled step."""
    trace, layout, coords = profiled_step(cfg, dtype, layout_text, device)
    return {"rank": torch.distributed.get_rank(), **coords,
            "profiled": profiled_buffers(trace),
            "accounted": accounted_buffers(cfg, layout, dtype, coords["pp"])}


def run(cases: list[str], device: torch.device) -> dict:
    """Every case in turn on the process group; on rank 0 the results by name ({} elsewhere)."""
    results = {}
    for case in cases:
        name, *model, dtype, layout_text = case.split(":")
        if model == ["moe"]:
            from comm_moe_worker import run_case as run_moe_case  # it imports this module

            result = run_moe_case(dtype, layout_text, device)
        else:
            cfg = MQA_CFG if name.startswith("mqa") else CFG
            result = run_case(cfg, dtype, layout_text, device)
        results[name] = gather_rank_results(result)
    return results if torch.distributed.get_rank() == 0 else {}


def main() -> None:
    launched(run)


if __name__ == "__main__":
    main()
