"""The command-line form of the one training option set (bench.train.options.TrainOptions):
a command declares only its own extra options; the shared ones are added from the dataclass."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from accelbench.bench.train.options import TrainOptions, option_fields, with_defaults

RERUN_HELP = ("Measure every cell again, also those already finished on this machine (default: "
              "skip them and show their stored records).")

WIDE_HELP = ("Every column of the tables, wider than the terminal if need be (default: the "
             "least important are left out to fit, and named below the table).")

OUTPUT_PARAMS = {
    "db": (Path | None, typer.Option(None, help="SQLite results file (default: $ACCELBENCH_DB "
                                     "or XDG).")),
    "json_out": (bool, typer.Option(False, "--json", help="Print the records as JSON.")),
    "csv_out": (bool, typer.Option(False, "--csv", help="Print the records as CSV.")),
    "output": (Path | None, typer.Option(None, help="Write JSON/CSV here instead of stdout.")),
    "quiet": (bool, typer.Option(False, "--quiet", help="No per-step lines.")),
    "rerun": (bool, typer.Option(False, "--rerun", help=RERUN_HELP)),
    "wide": (bool, typer.Option(False, "--wide", help=WIDE_HELP)),
}


def _option_param(f, default: Any) -> inspect.Parameter:
    """One TrainOptions field as a typer option with the command's default."""
    flag = f.metadata.get("flag")
    option = (typer.Option(default, flag, help=f.metadata["help"]) if flag
              else typer.Option(default, help=f.metadata["help"]))
    annotation = {"int": int, "float": float, "bool": bool, "str": str,
                  "float | None": float | None}[str(f.type)]
    return inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=option,
                             annotation=annotation)


def training_command(skip: tuple[str, ...] = (), **defaults: Any) -> Callable:
    """Decorate `fn(options: TrainOptions, db, json_out, csv_out, output, quiet, rerun, wide,
    **own)`:
    the command then takes every shared option (but `skip`), with `defaults` overriding ours."""
    base = with_defaults(**defaults)

    def wrap(fn: Callable) -> Callable:
        own = [p for name, p in inspect.signature(fn).parameters.items()
               if name not in ("options", *OUTPUT_PARAMS)]
        shared = [_option_param(f, getattr(base, f.name)) for f in option_fields()
                  if f.name not in skip]
        outputs = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d, annotation=a)
                   for n, (a, d) in OUTPUT_PARAMS.items()]

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            values = {f.name: kwargs.pop(f.name) for f in option_fields() if f.name in kwargs}
            outs = {n: kwargs.pop(n) for n in OUTPUT_PARAMS}
            return fn(options=TrainOptions(**{**vars(base), **values}), **outs, **kwargs)

        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
        signature = inspect.Signature(params + shared + outputs)
        command.__signature__ = signature
        command.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
        del command.__wrapped__
        return command

    return wrap
