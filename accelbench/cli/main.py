"""The `accelbench` command: parses arguments and hands them to the library; no logic here."""

from __future__ import annotations

import importlib
import sys

import typer

from accelbench.config.errors import ConfigError

app = typer.Typer(
    help="accelbench: measure, explain and predict how fast LLMs train on AI accelerators.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module defines `register(app)`; one line per command module.
_COMMAND_MODULES = (
    "data",
    "hw",
    "block",
    "results",
    "train",
    "scale",
    "sbatch",
    "plan",
    "genslm",
)

for _name in _COMMAND_MODULES:
    importlib.import_module(f"accelbench.cli.{_name}").register(app)


def main() -> None:
    """Entry point: bad input becomes one line on stderr and exit code 2."""
    try:
        app()  # standalone: click reports usage errors itself (exit 2)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)

if __name__ == "__main__":
    main()
