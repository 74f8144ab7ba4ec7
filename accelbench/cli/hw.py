"""`accelbench hw`: the device table, and what this machine is. Options from
hardware/hw_options.py, detection in bench/gemm_peak.py, the table in report/hw_table.py."""

from __future__ import annotations

import json
from dataclasses import asdict

import typer

from accelbench.cli.common import out
from accelbench.cli.options import dataclass_command
from accelbench.hardware.hw_options import HwOptions
from accelbench.hardware.specs import SPECS
from accelbench.report.hw_table import detected_lines, spec_table


def hw(options: HwOptions) -> None:
    """Print the device table and what accelbench detected here."""
    if not options.detect:
        if options.json_out:
            print(json.dumps({k: asdict(s) for k, s in SPECS.items()}, indent=2))
        else:
            out.widened(options.wide).print(spec_table())
        return
    from accelbench.bench.gemm_peak import detect_here  # imports torch

    detected = detect_here(options.device, options.measure)
    if options.json_out:
        print(json.dumps(detected, indent=2))
        return
    # the table and what was found here are this command's output
    out.widened(options.wide).print(spec_table())
    for line in detected_lines(detected):
        out.print(line)


def register(app: typer.Typer) -> None:
    """Add the hw command."""
    app.command("hw")(dataclass_command(hw, HwOptions, help=hw.__doc__ or "", name="hw"))
