"""The `accelbench` command: parses arguments and hands them to the library; no logic here."""

from __future__ import annotations

import importlib
import signal
import sys
from pathlib import Path
from types import ModuleType
from typing import get_args

import typer

from accelbench.cli import interrupt
from accelbench.cli.options import dataclass_command
from accelbench.config.errors import ConfigError
from accelbench.config.global_options import GlobalOptions, quiet_third_party


def _options(options: GlobalOptions) -> None:
    """accelbench: measure, explain and predict how fast LLMs train on AI accelerators."""
    if not options.verbose:
        quiet_third_party()


# Each module defines `register(app)`; one line per command module. `workloads` adds a
# command for every registered workload (block, train, genslm, scale, calibrate, ...).
_COMMAND_MODULES = (
    "data",
    "hw",
    "workloads",
    "results",
    "sbatch",
    "plan",
    "report",
    "study",
    "check",
    "publish",
    "site",
)


def make_app() -> typer.Typer:
    """The typer app with every command (a workload registered later needs a new app)."""
    made = typer.Typer(
        help="accelbench: measure, explain and predict how fast LLMs train on AI accelerators.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    made.callback()(dataclass_command(_options, GlobalOptions, help=_options.__doc__ or "",
                                      name="accelbench"))
    for name in _COMMAND_MODULES:
        importlib.import_module(f"accelbench.cli.{name}").register(made)
    return made


interrupt.install()  # before the commands are imported: a Ctrl-C there is one line too
app = make_app()


def _parser_exceptions() -> list[ModuleType]:
    """The exception module of the click that typer runs: recent typer vendors its own copy
    (typer._click) and does not depend on click, older typer uses click itself. Only that one:
    a click installed beside a typer that vendors its own is never imported (it would cost
    every command its import time)."""
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            return [importlib.import_module(name)]
        except ImportError:
            continue
    return []


def _classes(name: str) -> tuple[type[BaseException], ...]:
    """Every parser exception class of this name (absent ones skipped)."""
    return tuple(getattr(m, name) for m in _parser_exceptions() if hasattr(m, name))


# A bare `accelbench` raises NoArgsIsHelpError, a UsageError carrying the help text. Recent
# typer raises its own Abort (typer.exceptions), older typer click's.
_NO_ARGS, _USAGE, _CLICK, _ABORT = (_classes(n) for n in (
    "NoArgsIsHelpError", "UsageError", "ClickException", "Abort"))
_ABORT += tuple(c for c in (getattr(importlib.import_module("typer.exceptions"), "Abort", None),)
                if c is not None and c not in _ABORT)


def main() -> None:
    """Entry point: bad input, ours or the parser's, becomes one line on stderr and exit 2; an
    interrupted command ends at once (cli/interrupt.py)."""
    try:
        _run()
    except SystemExit as stop:
        interrupt.ENDING.append(True)
        if stop.code in interrupt.INTERRUPTED and interrupt.is_program():
            interrupt.end_now(stop.code)  # type: ignore[arg-type]
        raise


def _run() -> None:
    """Run the command line; every refusal is one line on stderr and an exit code."""
    interrupt.install()
    try:
        code = app(standalone_mode=False)
    except ConfigError as err:
        _fail(f"error: {err}", 2)
    except _NO_ARGS as err:
        print(err.format_message())
        sys.exit(2)
    except _USAGE as err:  # wrong type, unknown option, missing value
        _fail(f"error: {err.format_message().rstrip('.')} ({_allowed(err)})", 2)
    except _CLICK as err:
        _fail(f"error: {err.format_message()}", err.exit_code)
    except _ABORT:
        _fail("aborted", 130)
    except KeyboardInterrupt:  # SIGINT where a command has not taken signals over
        _fail("interrupted by SIGINT", 128 + signal.SIGINT)
    if code == 128 + signal.SIGINT and interrupt.SEEN:  # typer's silent 130 for a Ctrl-C
        _fail("interrupted by SIGINT", code)
    sys.exit(code if isinstance(code, int) else 0)


# What a value of each of the parser's types may be (the type's name -> the allowed values).
_TYPE_ALLOWED = {"integer": "a whole number", "float": "a number (e.g. 0.5, 1e9)",
                 "boolean": "true or false", "path": "a path", "text": "text"}
_ANNOTATION_NAMES = {int: "integer", float: "float", bool: "boolean", str: "text", Path: "path"}


def _type_name(param: object) -> str:
    """The parser's name for a parameter's type: click's `type.name`, or what recent typer
    keeps instead (`type_descriptor.annotation`, None unwrapped)."""
    kind = getattr(param, "type", None)
    if kind is not None:
        return str(getattr(kind, "name", ""))
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    args = [a for a in get_args(annotation) if a is not type(None)] or [annotation]
    return _ANNOTATION_NAMES.get(args[0], "") if isinstance(args[0], type) else ""


def _allowed(err: Exception) -> str:
    """'allowed: ...' for a parser error: the parameter's choices, or what its type reads
    (with its default), then where the command's options are listed."""
    param = getattr(err, "param", None)
    help_hint = f"see '{_command(err)} --help'"
    choices = getattr(getattr(param, "type", None), "choices", None)
    allowed = (", ".join(str(c) for c in choices) if choices
               else _TYPE_ALLOWED.get(_type_name(param)) if param is not None else None)
    if allowed is None:
        return f"allowed: the options and values '{_command(err)} --help' lists"
    default = getattr(param, "default", None)
    if isinstance(default, int | float | str) and not isinstance(default, bool) and default != "":
        allowed += f", default {default}"
    return f"allowed: {allowed}; {help_hint}"


def _command(err: Exception) -> str:
    """The command line's command, for the hint after a usage error."""
    ctx = getattr(err, "ctx", None)
    return ctx.command_path if ctx is not None else "accelbench"


def _fail(line: str, code: int) -> None:
    """One line on stderr, then exit."""
    interrupt.ENDING.append(True)
    print(line.replace("\n", " "), file=sys.stderr)
    sys.exit(code)

if __name__ == "__main__":
    main()
