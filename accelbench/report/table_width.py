"""Tables that fit the width they are printed at (docs/results.md, "Tables and widths").

The width: on a terminal, the terminal's (rich reads it; COLUMNS first); off one (a pipe, a
file, a test), COLUMNS when set, else PIPE_WIDTH, wide enough for every column of the widest
table. `output_width` is the one place that decides it, and `FitConsole` the console that asks it
at each print.

A `FitTable` lays itself out at the width it is given: a cell of a whole column (a number, a
status) is never broken across lines; the words of a text column wrap. When its columns do not
fit, it leaves out the ones of lowest priority (each column declares one; KEY columns, the
table's key and main metric, are always kept) and says below the table which, and that --wide
shows them. Printed wide (`FitConsole.wide`, or `FitTable.wide`) it keeps every column and is as
wide as they need, past the console's width if it must.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from typing import IO, Any

from rich.console import Console, ConsoleDimensions, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

PIPE_WIDTH = 200  # off a terminal without COLUMNS: the planner's 21 columns fit in one line
KEY = 0  # the priority of a column never left out; 1, 2, ...: left out from the largest up
TEXT_MIN = 16  # a text column (a note, a reason) narrows to this at least, or its longest word
LEFT_OUT = "--wide shows them"  # the note's hint: every command that prints these has --wide


def output_width(stream: IO[str] | Any, environ: Mapping[str, str] = os.environ) -> int | None:
    """The width to render for `stream`: None on a terminal (rich reads it, COLUMNS first), else
    COLUMNS when it is a positive number, else PIPE_WIDTH."""
    isatty = getattr(stream, "isatty", None)
    try:
        if isatty is not None and isatty():
            return None
    except ValueError:  # a closed stream
        pass
    columns = environ.get("COLUMNS", "").strip()
    return int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH


class FitConsole(Console):
    """A rich Console whose width is output_width's at every print (so COLUMNS set after it
    was made counts), and whose FitTables keep every column when it is `wide`."""

    def __init__(self, *, wide: bool = False, **options: Any) -> None:
        super().__init__(**options)
        self.wide, self._options = wide, options

    @property
    def size(self) -> ConsoleDimensions:
        width = output_width(self.file)
        size = super().size
        return size if width is None else ConsoleDimensions(width, size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size

    def widened(self, wide: bool = True) -> FitConsole:
        """This console (same stream and markup), wide or not."""
        return self if wide == self.wide else FitConsole(wide=wide, **self._options)

    def print(self, *objects: Any, **options: Any) -> None:
        """As rich's print; wide, lines longer than the console are kept whole (not cropped)."""
        if self.wide:
            options.setdefault("crop", False)
        super().print(*objects, **options)


def _cell_text(console: Console, cell: Any) -> str | None:
    """The plain text of a cell (None for a renderable that is not text)."""
    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        return console.render_str(cell).plain
    return None


def _extent(console: Console, options: ConsoleOptions, cell: Any) -> tuple[int, int]:
    """(longest word, longest line) of a cell, in terminal cells."""
    plain = _cell_text(console, cell)
    if plain is None:
        measured = Measurement.get(console, options, cell)
        return measured.minimum, measured.maximum
    from rich.cells import cell_len

    lines = plain.splitlines() or [""]
    return (max((cell_len(w) for w in plain.split()), default=0),
            max(cell_len(line) for line in lines))


def _widths(console: Console, options: ConsoleOptions, column: Column) -> tuple[int, int]:
    """(need, natural) of a column's content: the narrowest it may be (a whole column: its
    longest cell, and its header's longest word; a text column: its longest word, at most
    TEXT_MIN) and the width of its longest line."""
    header_word, header_line = _extent(console, options, column.header)
    cells = [_extent(console, options, c) for c in column.cells]
    natural = max([header_line, *(line for _, line in cells)])
    if getattr(column, "whole", False):
        need = max([header_word, *(line for _, line in cells)])
    else:
        need = min(max([header_word, *(word for word, _ in cells)]), max(TEXT_MIN, header_word))
    return need, natural


def _empty(column: Column) -> bool:
    """Whether no cell of the column says anything ('-' or blank)."""
    return all(str(getattr(c, "plain", c)).strip() in ("", "-") for c in column.cells)


class FitTable(Table):
    """A rich Table that fits the width it is rendered at (see the module's docstring)."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.wide = False

    def add_column(self, header: Any = "", *args: Any, priority: int = KEY,
                   whole: bool | None = None, **options: Any) -> None:
        """A column with its priority (KEY: always kept; else left out from the largest up,
        the rightmost first) and whether its cells are whole (never broken; default: the
        right-justified ones, numbers)."""
        super().add_column(header, *args, **options)
        column = self.columns[-1]
        column.priority = priority  # type: ignore[attr-defined]
        column.whole = (column.justify == "right") if whole is None else whole  # type: ignore[attr-defined]

    def _overhead(self, count: int) -> int:
        """Borders and padding of `count` columns (an upper bound: every column padded)."""
        edges = (2 if self.show_edge else 0) + max(count - 1, 0) if self.box else 0
        _, right, _, left = self.padding
        return edges + count * (left + right)

    def _drop_order(self) -> list[int]:
        """Indexes of the columns that may be left out, in the order they go: empty ones
        first, then by priority, the rightmost first."""
        optional = [i for i, c in enumerate(self.columns) if getattr(c, "priority", KEY) != KEY]
        return sorted(optional, key=lambda i: (not _empty(self.columns[i]),
                                               -self.columns[i].priority, -i))

    def layout(self, console: Console, options: ConsoleOptions,
               wide: bool) -> tuple[list[int], list[int], int]:
        """(kept column indexes, their content widths, total width) at options.max_width; wide,
        every column, as wide as their figures and headers need if that is more."""
        sizes = [_widths(console, options, c) for c in self.columns]
        kept = list(range(len(self.columns)))

        def total(indexes: list[int], which: int) -> int:
            return sum(sizes[i][which] for i in indexes) + self._overhead(len(indexes))

        budget = options.max_width
        if wide:  # whole columns at their natural width (headers on one line), text wraps
            budget = max(budget, self._overhead(len(kept)) + sum(
                natural if getattr(self.columns[i], "whole", False) else need
                for i, (need, natural) in enumerate(sizes)))
        for i in self._drop_order():
            if total(kept, 0) <= budget:
                break
            kept.remove(i)
        widths = [sizes[i][0] for i in kept]
        slack = budget - total(kept, 0)
        for j in sorted(range(len(kept)), key=lambda j: sizes[kept[j]][1] - widths[j]):
            more = min(max(sizes[kept[j]][1] - widths[j], 0), max(slack, 0))
            widths[j] += more
            slack -= more
        return kept, widths, min(budget, total(kept, 1))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        wide = self.wide or getattr(console, "wide", False)
        kept, widths, width = self.layout(console, options, wide)
        fitted = copy.copy(self)
        fitted.columns = []
        for index, (i, w) in enumerate(zip(kept, widths, strict=True)):
            column = copy.copy(self.columns[i])
            column.width, column._index = w, index
            if not getattr(column, "whole", False) and column.overflow == "ellipsis":
                column.overflow = "fold"  # a word longer than a text column: folded, kept
            fitted.columns.append(column)
        yield from Table.__rich_console__(fitted, console, options.update_width(
            max(width, options.max_width) if wide else options.max_width))
        left = [str(getattr(self.columns[i].header, "plain", self.columns[i].header))
                for i in range(len(self.columns)) if i not in kept]
        if left:
            yield Text(f"left out to fit {options.max_width} columns: {', '.join(left)} "
                       f"({LEFT_OUT})")


def set_wide(renderable: Any, wide: bool = True) -> Any:
    """Mark a FitTable (or each of a Group's) wide; the renderable, for chaining."""
    if isinstance(renderable, FitTable):
        renderable.wide = wide
    for child in getattr(renderable, "renderables", ()):
        set_wide(child, wide)
    return renderable
