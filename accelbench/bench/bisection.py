"""The largest value that fits: doubling from a start, then bisection between fit and miss.

Shared by the largest-micro-batch and the longest-sequence searches. `fits` is asked about each
value at most once, so a probe that costs real training steps on an accelerator is never repeated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Search:
    """The outcome of a search: the largest fitting value (0: none) and every probe in order."""

    largest: int
    probes: list[tuple[int, bool]] = field(default_factory=list)

    def tried(self) -> dict[str, bool]:
        """Probes as {value: fits}, in the order tried (JSON keys are strings)."""
        return {str(value): ok for value, ok in self.probes}


def largest_that_fits(fits: Callable[[int], bool], *, start: int = 1, limit: int,
                      multiple: int = 1) -> Search:
    """Largest multiple of `multiple` in [multiple, limit] that fits, assuming fitting is monotone.

    Doubles from `start` (a fit) until a miss or `limit`, then bisects between the last fit and
    the first miss down to `multiple`. When `start` does not fit, bisects between 0 and `start`.
    `start` and `limit` are rounded down to multiples of `multiple`.
    """
    if multiple < 1 or limit < multiple:
        raise ValueError(f"need 1 <= multiple <= limit, got multiple {multiple}, limit {limit}")
    limit = limit // multiple * multiple
    start = min(max(start // multiple * multiple, multiple), limit)
    search = Search(largest=0)

    def probe(value: int) -> bool:
        ok = fits(value)
        search.probes.append((value, ok))
        return ok

    low, high = 0, start
    while probe(high):
        low = high
        if high >= limit:
            search.largest = low
            return search
        high = min(high * 2, limit)
    while high - low > multiple:
        mid = low + (high - low) // multiple // 2 * multiple
        low, high = (mid, high) if probe(mid) else (low, mid)
    search.largest = low
    return search
