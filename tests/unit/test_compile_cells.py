"""--compile compiles every cell of an in-process sweep: Dynamo's cache is keyed on the one
Block.forward all blocks share, so without a reset between cells each dtype, recompute mode or
shape adds a recompile until Dynamo's limit (8) and later cells ran eager while their records
said compile=True. A counting backend stands in for inductor (the cache and its limit are
Dynamo's, whatever the backend)."""

from __future__ import annotations

import pytest
import torch

from accelbench.config.layout import Layout
from accelbench.config.presets import resolve_model
from accelbench.config.vocab import RECOMPUTE_KINDS
from accelbench.models.gpt import GPT
from accelbench.parallel.apply import prepare_model
from accelbench.workloads.block.runner import BlockSpec, time_block

CFG = resolve_model("gpt2-tiny:n_layer=1,d_model=32,n_head=2,vocab_size=64,n_positions=16")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@pytest.fixture
def compiles(monkeypatch):
    """How many graphs Dynamo hands its backend: torch.compile (Module.compile goes through
    it too) gets a counting backend in place of inductor."""
    count = [0]

    def backend(gm, example_inputs):
        count[0] += 1
        return gm.forward

    original = torch.compile

    def counted(model=None, **kwargs):
        return original(model, backend=backend)

    monkeypatch.setattr(torch, "compile", counted)
    torch._dynamo.reset()
    yield count
    torch._dynamo.reset()


def _train_cell(dtype: str, recompute: str) -> None:
    """One cell's build and a forward and backward, as the runner does with --compile."""
    torch.manual_seed(0)
    model = prepare_model(GPT(CFG), Layout(), None, recompute, compile=True)
    idx = torch.randint(0, CFG.vocab_size, (2, 8))
    with torch.autocast("cpu", dtype=DTYPES[dtype], enabled=dtype != "fp32"):
        _, loss = model(idx, idx)
    loss.backward()


@pytest.mark.slow  # Dynamo compiles every training cell (~2 s)
def test_every_training_cell_compiles_past_dynamos_recompile_limit(compiles):
    cells = [(d, r) for d in DTYPES for r in RECOMPUTE_KINDS] + [("fp32", "none")]
    assert len(cells) > 8
    for dtype, recompute in cells:
        before = compiles[0]
        _train_cell(dtype, recompute)
        assert compiles[0] > before, f"cell {dtype}/{recompute} ran eager"


@pytest.mark.slow  # Dynamo compiles every block cell (~5 s)
def test_every_block_cell_compiles_past_dynamos_recompile_limit(compiles):
    # Dynamo's own patch, not monkeypatch: undoing a monkeypatch of its config module left
    # automatic_dynamic_shapes missing for a later compile in the same process (CI: the feature
    # check's compile probe failed "torch._dynamo.config.automatic_dynamic_shapes does not exist")
    spec = BlockSpec(CFG, compile=True, warmup=1, repeats=1)
    with torch._dynamo.config.patch(automatic_dynamic_shapes=False):
        for seq in range(4, 4 + 9):  # 9 static shapes: a recompile each without a reset
            before = compiles[0]
            time_block(CFG, seq, 1, "fp32", torch.device("cpu"), spec)
            assert compiles[0] > before, f"block cell at seq {seq} ran eager"
