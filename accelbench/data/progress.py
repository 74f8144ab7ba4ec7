"""A rich progress bar for token preparation, or a silent stand-in when it is turned off."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text


class TokensPerSecondColumn(ProgressColumn):
    """Recent tokens per second, blank until rich has two samples."""

    def render(self, task: Task) -> Text:
        """Text such as '1,234,567 tok/s'."""
        speed = task.speed
        return Text("" if speed is None else f"{speed:,.0f} tok/s")


class TokenBar:
    """Advances a rich task by tokens and shows the shard count."""

    def __init__(self, progress: Progress | None, task: int | None) -> None:
        self._progress = progress
        self._task = task

    def advance(self, tokens: int, shards_done: int) -> None:
        """Count `tokens` more and show the number of shards written."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=tokens, shards=shards_done)


@contextlib.contextmanager
def token_progress(
    total_tokens: int | None, done_tokens: int, done_shards: int, *, enabled: bool = True
) -> Iterator[TokenBar]:
    """Bar over tokens written (indeterminate when the total is unknown), starting at what a
    resumed run already has."""
    if not enabled:
        yield TokenBar(None, None)
        return
    columns = (
        TextColumn("[bold]tokens"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.completed:,.0f} tokens, {task.fields[shards]} shards"),
        TokensPerSecondColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=False) as progress:
        task = progress.add_task("prepare", total=total_tokens, completed=done_tokens,
                                 shards=done_shards)
        yield TokenBar(progress, task)
