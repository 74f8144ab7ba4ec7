"""Options dataclasses' fields: each is a command-line option (its help, its flag, its
choices) or argument, and a study file's key, declared once (cli/options.py turns them into
a command's parameters)."""

from __future__ import annotations

from dataclasses import Field, field, fields
from typing import Any

REQUIRED: Any = ...  # the default of an option or argument the command line must give

# The wording several commands share, one text each.
DB_HELP = "SQLite results file (default: $ACCELBENCH_DB or XDG)."
DEVICE_HELP = "auto, cpu, cuda, cuda:N, xpu, mps."
RERUN_HELP = ("Measure every cell again, also those already finished on this machine (default: "
              "skip them and show their stored records).")
REMEASURE_PEAK_HELP = ("Measure this machine's GEMM peak again (default: a device without a "
                       "datasheet peak reuses the one it stored, so MFUs of its sweeps compare).")
WIDE_TABLE_HELP = "Every column of the table, wider than the terminal if need be."
WIDE_TABLES_HELP = "Every column of the tables, wider than the terminal if need be."


def option(default: Any, help: str, flag: str | None = None,
           choices: tuple[str, ...] | None = None) -> Any:
    """A dataclass field that is also an option: `flag` names it on the command line
    ('--json', '--compile/--no-compile'; default: the field's name with dashes), `choices`
    are listed in the help; REQUIRED as the default makes it one the command needs."""
    return field(default=default, metadata={"help": help, "flag": flag, "choices": choices})


def argument(default: Any, help: str, metavar: str | None = None) -> Any:
    """A dataclass field that is a command's positional argument (REQUIRED: one must be
    given; a list field takes every remaining one), shown as `metavar` if given."""
    return field(default=default, metadata={"help": help, "argument": True,
                                            "metavar": metavar})


def flag_name(f: Field) -> str:
    """What an error calls a field: its flag without the dashes ('format' for a field `fmt`
    declared '--format'), else its name with dashes."""
    flag = f.metadata.get("flag")
    return flag.split("/")[0].removeprefix("--") if flag else f.name.replace("_", "-")


def own_fields_first(cls: type) -> list[Field]:
    """A dataclass's fields, those it declares itself before those it inherits (a command's
    own options are listed before the shared ones)."""
    own = cls.__dict__.get("__annotations__", {})
    every = list(fields(cls))
    return [f for f in every if f.name in own] + [f for f in every if f.name not in own]
