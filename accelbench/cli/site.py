"""`accelbench site BUNDLE... --out DIR`: a static comparison site from many machines' bundles
(options in report/site_options.py, the work in report/site/; docs/exchange.md)."""

from __future__ import annotations

import typer

from accelbench.cli.common import console, out
from accelbench.cli.options import dataclass_command
from accelbench.report.site import build_site
from accelbench.report.site_options import SiteOptions


def site(options: SiteOptions) -> None:
    """Build a static site (no server, no network) ranking every machine on each identical
    workload, with intervals, verdicts against a baseline and trust marks."""
    built = build_site(options.bundles, options.out, options.baseline, options.figures)
    console.print(f"{built.pages} pages for {built.machines} machine(s) and {built.workloads} "
                  f"workload(s), largest {built.largest_bytes:,} bytes; open {built.index} in "
                  "any browser", markup=False, highlight=False, soft_wrap=True)
    out.print(str(built.index), markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add the site command."""
    app.command("site")(dataclass_command(site, SiteOptions, help=site.__doc__ or "",
                                          name="site"))
