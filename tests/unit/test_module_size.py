"""No module of accelbench is over MAX_LINES lines (issue 40): a longer one holds more than one
concept and is split by concept (docs/architecture.md), never into arbitrary halves."""

from __future__ import annotations

from pathlib import Path

import accelbench

ROOT = Path(accelbench.__file__).parent
MAX_LINES = 400

# Modules still over the limit while issue 40's other work is in flight, each with who splits
# it. The lead empties this list when that work is done; a module that is under the limit or
# gone fails test_the_allow_list_holds_only_modules_still_over, so the list only shrinks.
IN_FLIGHT: dict[str, str] = {
}


def line_counts(root: Path) -> dict[str, int]:
    """Lines of every .py file under `root`, by path relative to it (posix)."""
    return {path.relative_to(root).as_posix(): len(path.read_text().splitlines())
            for path in sorted(root.rglob("*.py"))}


def over_limit(root: Path, limit: int = MAX_LINES) -> dict[str, int]:
    """The modules under `root` longer than `limit` lines, with their counts."""
    return {name: n for name, n in line_counts(root).items() if n > limit}


def test_no_module_is_over_the_limit():
    over = {name: n for name, n in over_limit(ROOT).items() if name not in IN_FLIGHT}
    assert over == {}, f"modules over {MAX_LINES} lines (split them by concept): {over}"


def test_the_allow_list_holds_only_modules_still_over():
    over = over_limit(ROOT)
    done = sorted(name for name in IN_FLIGHT if name not in over)
    assert done == [], f"no longer over {MAX_LINES} lines (or moved): take off IN_FLIGHT: {done}"


def test_the_counter_finds_a_long_module(tmp_path: Path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * MAX_LINES)
    assert over_limit(tmp_path) == {"pkg/long.py": MAX_LINES + 1}
