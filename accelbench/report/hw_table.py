"""What `accelbench hw` shows: the device table, and what was detected on this machine."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from accelbench.config.vocab import PEAK_PRECISIONS
from accelbench.hardware.specs import SPECS
from accelbench.report.table import add_plain_row, plain_table
from accelbench.report.table_width import KEY


def spec_table() -> Table:
    """Every datasheet row: dense peaks per precision, memory, bandwidth, links, source."""
    table = plain_table("Dense peak TFLOPS per dtype (no sparsity), memory, links")
    priorities = {"key": KEY, "name": 3, "fp32": 1, "tf32": 2, "fp16": 2, "bf16": KEY,
                  "fp8": 1, "mem GB": 1, "mem GB/s": 2, "link GB/s/dir": 2, "source": 4}
    for column in ("key", "name", *PEAK_PRECISIONS, "mem GB", "mem GB/s", "link GB/s/dir",
                   "source"):
        table.add_column(column, overflow="fold", priority=priorities.get(column, 2),
                         whole=column not in ("name", "source"))
    for spec in SPECS.values():
        peaks = [f"{spec.peak_tflops[d]:g}" if d in spec.peak_tflops else "-"
                 for d in PEAK_PRECISIONS]
        add_plain_row(table, spec.key, spec.name, *peaks, f"{spec.memory_gb or '-'}",
                      f"{spec.memory_bw_gb_per_s or '-'}",
                      f"{spec.link_gb_per_s_per_direction or '-'}", spec.source)
    return table


def detected_lines(detected: dict[str, Any]) -> list[str]:
    """'detected: NAME (DEVICE) -> KEY' and a line per measured or resolved peak."""
    lines = [f"detected: {detected['name']} ({detected['device']}) -> "
             f"{detected['spec'] or 'no spec: MFU uses a measured GEMM peak (--measure)'}"]
    for d, p in detected.get("peaks", {}).items():
        tflops = "-" if p["tflops"] is None else f"{p['tflops']:.3f}"
        lines.append(f"  {d}: {tflops} TFLOPS ({p['label']})")
    return lines
