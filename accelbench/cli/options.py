"""The one option mechanism of the commands: a command's options are generated from options
dataclasses whose fields carry their help, flag and choices (config/option_fields.py `option`), so
the dataclass is the one source of the command's options, a study file's keys and their
validation; the command function gets the dataclass built, never loose arguments."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import Field, dataclass, fields, replace
from pathlib import Path
from typing import Any

import typer

from accelbench.config.errors import require_choice
from accelbench.config.option_fields import (
    DB_HELP,
    REMEASURE_PEAK_HELP,
    RERUN_HELP,
    flag_name,
    option,
    own_fields_first,
)
from accelbench.config.workload import OUTPUTS, Workload

WIDE_HELP = ("Every column of the tables, wider than the terminal if need be (default: the "
             "least important are left out to fit, and named below the table).")


@dataclass(frozen=True)
class Outputs:
    """Where a measuring command's records go and how they are shown (Workload.outputs names
    those a command takes; the others keep these defaults)."""

    db: Path | None = option(None, DB_HELP)
    json_out: bool = option(False, "Print the records as JSON.", "--json")
    csv_out: bool = option(False, "Print the records as CSV.", "--csv")
    output: Path | None = option(None, "Write JSON/CSV here instead of stdout.")
    quiet: bool = option(False, "No per-step lines.", "--quiet")
    rerun: bool = option(False, RERUN_HELP, "--rerun")
    remeasure_peak: bool = option(False, REMEASURE_PEAK_HELP, "--remeasure-peak")
    wide: bool = option(False, WIDE_HELP, "--wide")


# a field's declared type (text, under `from __future__ import annotations`) -> the parser's;
# a list is a repeated option, or an argument that takes every remaining value
_TYPES = {"int": int, "float": float, "bool": bool, "str": str, "float | None": float | None,
          "int | None": int | None, "str | None": str | None, "Path | None": Path | None,
          "Path": Path, "list[Path] | None": list[Path], "list[Path]": list[Path],
          "list[str]": list[str], "list[str] | None": list[str]}


def _parameter(f: Field, default: Any) -> inspect.Parameter:
    """One field as a typer option (its flag, else its name) or argument, with its help and
    choices."""
    meta = f.metadata
    help_text = meta.get("help", "")
    if meta.get("choices"):
        help_text = f"{help_text} One of: {', '.join(meta['choices'])}.".strip()
    if meta.get("argument"):
        shown = {"metavar": meta["metavar"]} if meta.get("metavar") else {}
        made = typer.Argument(default, help=help_text, **shown)
    else:
        made = typer.Option(default, *((meta["flag"],) if meta.get("flag") else ()),
                            help=help_text)
    return inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=made,
                             annotation=_TYPES[str(f.type)])


def _check_choices(options: Any, shown: Iterable[Field]) -> None:
    """A field with declared choices holds one of them (ConfigError, exit 2)."""
    for f in shown:
        if f.metadata.get("choices"):
            require_choice(flag_name(f), getattr(options, f.name), f.metadata["choices"])


def dataclass_command(body: Callable[..., Any], options: type, *, help: str,
                      name: str, defaults: Mapping[str, Any] | None = None,
                      skip: tuple[str, ...] = (),
                      outputs: tuple[str, ...] | None = None,
                      context: bool = False) -> Callable:
    """A typer command whose options are the fields of `options` (own fields first, `skip`
    left out, `defaults` over the dataclass's) and of `Outputs` named in `outputs`; it calls
    `body(options_instance)`, or `body(options_instance, Outputs(...))` when `outputs` is
    given, or `body(options_instance, ctx)` with the parser's context when `context` (a
    command that parses another command's options: sbatch)."""
    base = replace(options(), **dict(defaults or {}))
    shown = [f for f in own_fields_first(options) if f.name not in skip]
    outs = [f for f in fields(Outputs) if f.name in (outputs or ())]

    def command(ctx: typer.Context | None = None, **kwargs: Any) -> Any:
        values = replace(base, **{f.name: kwargs[f.name] for f in shown})
        _check_choices(values, shown)
        if context:
            return body(values, ctx)
        if outputs is None:
            return body(values)
        return body(values, Outputs(**{f.name: kwargs[f.name] for f in outs}))

    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=typer.Context)] if context else []
    params += [_parameter(f, getattr(base, f.name)) for f in shown]
    params += [_parameter(f, f.default) for f in outs]
    command.__signature__ = inspect.Signature(params)
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__name__ = command.__qualname__ = name.replace("-", "_")
    command.__doc__ = help
    return command


def workload_command(workload: Workload, body: Callable[..., Any]) -> Callable:
    """The command of a registered workload, from its options dataclass and outputs."""
    return dataclass_command(
        lambda options, outputs: body(workload, options, outputs), workload.options,
        help=workload.help, name=workload.name, defaults=workload.defaults,
        skip=workload.skip, outputs=tuple(o for o in OUTPUTS if o in workload.outputs))
