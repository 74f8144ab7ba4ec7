"""`accelbench data`: turn a corpus into token shards, and show what a shard folder holds.
Options from data/prepare_options.py (PrepareOptions, InfoOptions), whose `prepare_job` checks
a prepare before anything is written; here only the calls and the printing."""

from __future__ import annotations

import json

import typer

from accelbench.cli.common import console, out
from accelbench.cli.options import dataclass_command
from accelbench.data.prepare_options import InfoOptions, PrepareOptions, prepare_job
from accelbench.data.shard_format import open_shards
from accelbench.data.shards import prepare
from accelbench.report.shard_info import shards_table


def prepare_cmd(options: PrepareOptions) -> None:
    """Tokenize a corpus into shards; rerun the same command to resume after a kill."""
    job = prepare_job(options)  # bad input: exit 2 before anything is written
    index = prepare(job.corpus, job.tokenizer, job.out, shard_tokens=job.shard_tokens,
                    max_tokens=job.max_tokens, workers=job.workers,
                    chunk_chars=job.chunk_chars, progress=job.progress)
    console.print(f"{index['total_tokens']:,} tokens in {len(index['shards'])} shards "
                  f"({index['dtype']}, {index['tokenizer']['name']}) in {job.out}", markup=False)


def info_cmd(options: InfoOptions) -> None:
    """Validate a shard folder, then show its index (bad shards: one line and exit code 2,
    before any listing)."""
    index = open_shards(options.directory, verify_hashes=options.verify).index
    if options.json_out:
        print(json.dumps(index, indent=1))
    else:
        out.print(shards_table(options.directory, index))  # the listing on stdout
    console.print(f"ok: {len(index['shards'])} shards present"
                  + (", sha256 and token ids verified" if options.verify else ", sizes checked"))


def register(app: typer.Typer) -> None:
    """Add the `data` command group."""
    data_app = typer.Typer(help="Corpora to token shards (uint16 memmaps + index), and what a "
                           "shard folder holds.", no_args_is_help=True)
    for name, body, options in (("prepare", prepare_cmd, PrepareOptions),
                                ("info", info_cmd, InfoOptions)):
        data_app.command(name)(dataclass_command(body, options, help=body.__doc__ or "",
                                                 name=name))
    app.add_typer(data_app, name="data")
