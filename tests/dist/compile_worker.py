"""Run under torchrun (tests/dist/shared_launch.py): a small training cell eager and with
`--compile` on one layout, through the runtime's own step loop, and what Dynamo compiled.

A case is 'name:layout:backend' ('inductor', what `--compile` runs, or 'aot_eager': the same
Dynamo capture and AOTAutograd graphs through the process groups' collectives, without
inductor's C++ code generation, which takes minutes a layout on 2 CPU cores). Rank 0 returns
each case's eager and compiled losses, the graphs Dynamo compiled, its graph breaks, and the
error if the compiled cell failed.
"""

from __future__ import annotations

import torch
from shared_launch import launched  # this folder: the script's own, on the path
from torch import nn
from torch._dynamo.utils import counters

from accelbench.bench.train.spec import TrainSpec
from accelbench.bench.train.steps import run_rank_steps
from accelbench.config.layout_parse import RUNTIME_KEYS, parse_layout
from accelbench.config.layout_rules import validate_layout
from accelbench.config.presets import get_preset
from accelbench.models.gpt import Block

STEPS = 3
VOCAB = 1024  # the head is not what compiles: GPT-2's 50,257 rows were most of a step's work


def _cell(layout_text: str, compile: bool) -> tuple[TrainSpec, object]:
    """gpt2-tiny (moe-tiny under ep) with a VOCAB-wide head at sequence 32, micro-batch 2, fp32,
    3 steps."""
    layout = parse_layout(layout_text, RUNTIME_KEYS)
    gas = 2 if layout.pp > 1 else 1
    model = get_preset("moe-tiny" if layout.ep > 1 else "gpt2-tiny").with_changes(
        vocab_size=VOCAB)
    spec = TrainSpec(model, seq_lens=(32,), micro_batches=(2,), gas=(gas,), dtypes=("fp32",),
                     steps=STEPS, warmup_steps=1, device="cpu", compile=compile,
                     layout=layout_text)
    return spec, validate_layout(layout, model, torch.distributed.get_world_size(), gas)


def _losses(layout_text: str, compile: bool, device: torch.device) -> list[float]:
    """The cell's per-step global losses."""
    spec, layout = _cell(layout_text, compile)
    return run_rank_steps(spec, spec.cells()[0], layout, device, None, None).loss


def _with_backend(backend: str):
    """Block.compile as the runtime calls it, with this backend."""
    def compile_block(self: Block, *args, **kwargs) -> None:
        nn.Module.compile(self, *args, **{**kwargs, "backend": backend})
    return compile_block


def run_case(layout_text: str, backend: str, device: torch.device) -> dict:
    """Eager, then compiled; Dynamo's counters from the compiled run alone."""
    eager = _losses(layout_text, False, device)
    counters.clear()
    original = Block.compile
    if backend != "inductor":
        Block.compile = _with_backend(backend)
    try:
        compiled, error = _losses(layout_text, True, device), None
    except Exception as err:  # a layout that cannot compile: the test names it
        compiled, error = None, f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
    finally:
        Block.compile = original
    return {"eager": eager, "compiled": compiled, "error": error,
            "graphs": counters["stats"]["unique_graphs"],
            "graph_breaks": sum(counters["graph_break"].values())}


def run(cases: list[str], device: torch.device) -> dict:
    """Every case in turn on the process group; rank 0's results by name."""
    results = {}
    for case in cases:
        name, layout_text, backend = case.split(":")
        results[name] = run_case(layout_text, backend, device)
    return results if torch.distributed.get_rank() == 0 else {}


def main() -> None:
    launched(run)


if __name__ == "__main__":
    main()
