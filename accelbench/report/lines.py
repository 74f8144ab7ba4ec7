"""One-line texts of a running sweep (per-step lines), from the runner's structured reports."""

from __future__ import annotations

from accelbench.bench.train.cell_metrics import StepReport
from accelbench.config.vocab import GIB


def step_line(r: StepReport, token_unit: str = "token") -> str:
    """Time, tokens/s (codons/s for GenSLM), samples/s, TFLOPS, MFU, memory so far, loss,
    learning rate and data wait of one step."""
    mfu = "    -" if r.mfu is None else f"{100 * r.mfu:5.1f}%"
    mem = "   -" if r.mem_added_bytes is None else f"{r.mem_added_bytes / GIB:6.2f}"
    return (f"step {r.step:>4}/{r.steps}  {r.step_time_s * 1e3:9.1f} ms  "
            f"{r.tokens_per_s_global:12,.0f} {token_unit}s/s  "
            f"{r.samples_per_s_global:8.2f} samples/s  {r.tflops_per_device:7.2f} TFLOPS  "
            f"MFU {mfu}  mem {mem} GiB  loss {r.loss:.4f}  lr {r.lr:.2e}  "
            f"data wait {r.data_wait_s * 1e3:.1f} ms")
