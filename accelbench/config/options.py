"""Options dataclasses' fields: each is a command-line option (its help, its flag, its
choices) and a study file's key, declared once (cli/options.py turns them into options)."""

from __future__ import annotations

from dataclasses import Field, field, fields
from typing import Any


def option(default: Any, help: str, flag: str | None = None,
           choices: tuple[str, ...] | None = None) -> Any:
    """A dataclass field that is also an option: `flag` names it on the command line
    ('--json', '--compile/--no-compile'; default: the field's name with dashes), `choices`
    are listed in the help."""
    return field(default=default, metadata={"help": help, "flag": flag, "choices": choices})


def own_fields_first(cls: type) -> list[Field]:
    """A dataclass's fields, those it declares itself before those it inherits (a command's
    own options are listed before the shared ones)."""
    own = cls.__dict__.get("__annotations__", {})
    every = list(fields(cls))
    return [f for f in every if f.name in own] + [f for f in every if f.name not in own]
