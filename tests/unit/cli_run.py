"""Run the `accelbench` command in this process, as a user would, for the CLI tests."""

from __future__ import annotations

import sys

import pytest

from accelbench.cli.main import main


def run_main(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `accelbench ARGS` (main always exits)."""
    monkeypatch.setattr(sys, "argv", ["accelbench", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err
