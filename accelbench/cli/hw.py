"""`accelbench hw`: the device table, and what this machine is."""

from __future__ import annotations

import json
from dataclasses import asdict

import typer
from rich.table import Table

from accelbench.cli.common import out
from accelbench.config.vocab import DTYPES, PEAK_PRECISIONS
from accelbench.hardware.specs import SPECS
from accelbench.report.fit import KEY
from accelbench.report.table import add_plain_row, plain_table


def _spec_table() -> Table:

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


def hw(
    device: str = typer.Option("auto", help="auto, cpu, cuda, cuda:N, xpu, mps."),
    measure: bool = typer.Option(False, "--measure", help="Measure GEMM peaks of this device."),
    json_out: bool = typer.Option(False, "--json", help="Print detection as JSON."),
    detect: bool = typer.Option(True, "--detect/--no-detect", help="Detect this machine's "
                                "device (imports torch); --no-detect prints the table alone."),
    wide: bool = typer.Option(False, "--wide", help="Every column of the table, wider than the "
                              "terminal if need be."),
) -> None:
    """Print the device table and what accelbench detected here."""
    if not detect:
        if json_out:
            print(json.dumps({k: asdict(s) for k, s in SPECS.items()}, indent=2))
        else:
            out.widened(wide).print(_spec_table())
        return
    from accelbench.bench.peak import resolve_peak
    from accelbench.hardware.detect import detect_spec, device_name, resolve_device
    from accelbench.hardware.environment import environment

    dev = resolve_device(device)
    spec = detect_spec(dev)
    detected = {"device": str(dev), "name": device_name(dev), "spec": spec.key if spec else None,
                "environment": environment(dev)}
    if measure or spec is None:
        peaks = {d: resolve_peak(spec, dev, d, tf32=False, measure=measure) for d in
                 DTYPES}
        detected["peaks"] = {d: {"tflops": p.flops_per_s and p.flops_per_s / 1e12,
                                 "label": p.label} for d, p in peaks.items()}
    if json_out:
        print(json.dumps(detected, indent=2))
        return
    # the table and what was found here are this command's output
    out.widened(wide).print(_spec_table())
    out.print(f"detected: {detected['name']} ({dev}) -> "
              f"{detected['spec'] or 'no spec: MFU uses a measured GEMM peak (--measure)'}")
    for d, p in detected.get("peaks", {}).items():
        tflops = "-" if p["tflops"] is None else f"{p['tflops']:.3f}"
        out.print(f"  {d}: {tflops} TFLOPS ({p['label']})")


def register(app: typer.Typer) -> None:
    """Add the hw command."""
    app.command("hw")(hw)
