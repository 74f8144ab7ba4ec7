"""Run under torchrun: per case, one step of the training benchmark's own code path on moe-tiny
under the profiler (as tests/dist/comm_worker.py does for dense models); every rank records
the gloo collectives it ran, by op, and what comm_calls_per_step says it runs.

Usage: torchrun --nproc-per-node N tests/dist/comm_moe_worker.py OUT.json name:dtype:layout ...
(the tests run its cases in comm_worker.py's launch, as 'name:moe:dtype:layout').
Buffers are compared as gloo records them: an all-gather's input is the shard, so the
accounted whole buffer is divided by its group's size; a reduce-scatter runs as an all-reduce.
All-to-alls: 'all_to_all_counts' the per-expert counts (int64), 'all_to_all' the routed rows,
whose bytes per rank depend on the routing (the test sums them over the ranks), and their
calls by op under 'calls'.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import torch
from comm_worker import GAS, MICRO_BATCH, MIN_ALL_REDUCE_BYTES, SEQ, SIZES, profiled_step

from accelbench.config.presets import get_preset
from accelbench.parallel.collectives import INT64_BYTES, comm_calls_per_step
from accelbench.parallel.dist import init_distributed, teardown
from accelbench.parallel.gather import gather_rank_results

# comm_worker: this folder, on the path as the script's own (torchrun runs it as a script)
MOE_CFG = get_preset("moe-tiny").with_changes(n_positions=64, vocab_size=1024)
TYPE_BYTES = {**SIZES, "long int": INT64_BYTES}


def _op(name: str, type_name: str) -> str:
    """The accounting's op name of a gloo record (the counts exchange apart from the rows)."""
    op = name.removeprefix("gloo:")
    return "all_to_all_counts" if op == "all_to_all" and type_name == "long int" else op


def profiled(trace: dict) -> tuple[dict[str, float], dict[str, int]]:
    """(bytes of the recorded input buffers, calls) by op, from a chrome trace's gloo records;
    scalar and small all-reduces left out as comm_calls_per_step leaves them out."""
    size: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    for event in trace["traceEvents"]:
        name = event.get("name", "")
        if not name.startswith("gloo:") or name == "gloo:recv":
            continue
        type_name, dims = event["args"]["Input type"][0], event["args"]["Input Dims"][0]
        if type_name not in TYPE_BYTES:
            continue
        numel = 1
        for dim in dims:
            numel *= dim
        op, nbytes = _op(name, type_name), numel * TYPE_BYTES[type_name]
        if op != "all_reduce" or nbytes >= MIN_ALL_REDUCE_BYTES:
            size[op] += nbytes
            calls[op] += 1
    return dict(size), dict(calls)


def accounted(cfg, layout, dtype: str, pp_rank: int) -> tuple[dict[str, float], dict[str, int]]:
    """comm_calls_per_step in the profiler's terms: (bytes, calls) by op."""
    size: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    for call in comm_calls_per_step(cfg, layout, SEQ, MICRO_BATCH, GAS, dtype, "none", pp_rank):
        op = "all_reduce" if call.op == "reduce_scatter" else call.op
        buffer = call.buffer_bytes / (call.group_size if op == "all_gather" else 1)
        if op == "all_to_all" and call.buffer_bytes == INT64_BYTES * cfg.n_experts:
            op = "all_to_all_counts"
        size[op] += buffer * call.calls
        calls[op] += int(call.calls)
    return dict(size), dict(calls)


def run_case(dtype: str, layout_text: str, device: torch.device) -> dict:
    """Both accounts of this rank's profiled step (comm_worker.profiled_step)."""
    trace, layout, coords = profiled_step(MOE_CFG, dtype, layout_text, device)
    seen, seen_calls = profiled(trace)
    expected, expected_calls = accounted(MOE_CFG, layout, dtype, coords["pp"])
    return {"rank": torch.distributed.get_rank(), **coords, "profiled": seen,
            "profiled_calls": seen_calls, "accounted": expected,
            "accounted_calls": expected_calls}


def main() -> None:
    torch.set_num_threads(1)
    out_path, cases = sys.argv[1], sys.argv[2:]
    _, device = init_distributed("cpu", timeout_s=120)
    results = {}
    for case in cases:
        name, dtype, layout_text = case.split(":")
        results[name] = gather_rank_results(run_case(dtype, layout_text, device))
    if torch.distributed.get_rank() == 0:
        Path(out_path).write_text(json.dumps(results))
    teardown(together=True)


if __name__ == "__main__":
    main()
