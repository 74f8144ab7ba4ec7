"""`accelbench publish --out FILE`: one bundle of results to send elsewhere (options and the
work in report/bundle_publish.py; docs/exchange.md)."""

from __future__ import annotations

import typer

from accelbench.cli.common import console, out
from accelbench.cli.options import dataclass_command
from accelbench.report.bundle_publish import PublishOptions, publish


def publish_(options: PublishOptions) -> None:
    """Write a database's records (or some runs') as one self-describing, checksummed bundle
    for 'accelbench site' and 'results import' elsewhere; --reference: the paper's figures."""
    done = publish(options)
    console.print(f"{done.records} records of {done.machines} machine(s), {done.size_bytes:,} "
                  f"bytes, sha256 {done.sha256}", markup=False, highlight=False)
    out.print(str(done.path), markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add the publish command."""
    app.command("publish")(dataclass_command(publish_, PublishOptions,
                                             help=publish_.__doc__ or "", name="publish"))
