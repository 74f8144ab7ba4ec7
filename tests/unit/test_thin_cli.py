"""The command line stays thin (docs/architecture.md, cli row): every command's options are
generated from an options dataclass by cli/options.py `dataclass_command`, so no module of
cli/ declares a typer.Option or typer.Argument by hand, and no function there is longer than
about 30 lines (a longer one holds logic that belongs in the library)."""

from __future__ import annotations

import ast
from pathlib import Path

import accelbench.cli

CLI = Path(accelbench.cli.__file__).parent
MAX_LINES = 30

# The genuine exceptions, each with its reason.
HAND_DECLARED = {
    # the one option mechanism: it turns dataclass fields into typer.Option / typer.Argument
    "options.py",
}
LONGER = {
    # the mechanism itself (signature, choices, outputs, the parser's context), not a command
    ("options.py", "dataclass_command"),
}


def _functions() -> list[tuple[str, ast.FunctionDef]]:
    found = []
    for path in sorted(CLI.glob("*.py")):
        tree = ast.parse(path.read_text())
        found += [(path.name, node) for node in ast.walk(tree)
                  if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    return found


def _hand_declared(path: Path) -> list[int]:
    """Lines where typer.Option or typer.Argument is called (or imported by name)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Attribute) and node.attr in ("Option", "Argument")
                and isinstance(node.value, ast.Name) and node.value.id == "typer"):
            lines.append(node.lineno)
        if isinstance(node, ast.ImportFrom) and node.module == "typer" and any(
                a.name in ("Option", "Argument") for a in node.names):
            lines.append(node.lineno)
    return lines


def test_no_option_is_declared_by_hand() -> None:
    found = {p.name: _hand_declared(p) for p in sorted(CLI.glob("*.py"))
             if p.name not in HAND_DECLARED}
    assert not {name: lines for name, lines in found.items() if lines}, (
        "declare the option as a field of the command's options dataclass "
        "(config/option_fields.py option/argument) and build the command with dataclass_command")


def test_no_function_in_cli_is_long() -> None:
    long = {f"{name}:{node.name}": node.end_lineno - node.lineno + 1
            for name, node in _functions()
            if node.end_lineno - node.lineno + 1 > MAX_LINES and (name, node.name) not in LONGER}
    assert not long, f"over {MAX_LINES} lines (move the logic to the library): {long}"


def test_the_exceptions_are_still_needed() -> None:
    """A named exception that no longer applies is removed from the list."""
    lengths = {(name, node.name): node.end_lineno - node.lineno + 1 for name, node in _functions()}
    assert all(lengths.get(key, 0) > MAX_LINES for key in LONGER)
    assert all(_hand_declared(CLI / name) for name in HAND_DECLARED)
