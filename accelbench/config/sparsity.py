"""Weight sparsity's vocabulary and input rules, shared by the runtime (models/weight_masks.py) and
the planner; no torch."""

from __future__ import annotations

import math
from collections.abc import Iterable

from accelbench.config.errors import ConfigError

PATTERNS = ("unstructured", "2:4")
MASK_KINDS = ("magnitude", "random")


def parse_sparsity_list(text: str) -> tuple[float, ...]:
    """'0,0.6,0.8,0.9' -> (0.0, 0.6, 0.8, 0.9); ConfigError on anything that is not a number."""
    values = []
    for item in text.split(","):
        item = item.strip()
        try:
            values.append(float(item))
        except ValueError:
            raise ConfigError("sparsity", f"{item!r} is not a number",
                              "levels in [0, 1), comma-separated") from None
    return tuple(values)


def validate_sparsity(levels: Iterable[float], pattern: str, mask_kind: str,
                      d_model: int) -> None:
    """Levels in [0, 1), a known pattern and mask, 2:4 only at level 0 or 0.5."""
    if pattern not in PATTERNS:
        raise ConfigError("sparsity-pattern", f"unknown value {pattern!r}", ", ".join(PATTERNS))
    if mask_kind not in MASK_KINDS:
        raise ConfigError("sparsity-mask", f"unknown value {mask_kind!r}",
                          ", ".join(MASK_KINDS))
    for level in levels:
        if not (isinstance(level, (int, float)) and math.isfinite(level) and 0 <= level < 1):
            raise ConfigError("sparsity", f"must be in [0, 1), got {level!r}", "0 <= level < 1")
        if pattern == "2:4" and level not in (0, 0.5):
            raise ConfigError("sparsity", f"2:4 keeps exactly half the weights, got {level}",
                              "0 or 0.5 with --sparsity-pattern 2:4")
    if pattern == "2:4" and d_model % 4:
        raise ConfigError("sparsity-pattern", f"2:4 (4 x 4 transposable tiles) needs a hidden "
                          f"size divisible by 4, got {d_model}", "unstructured")
