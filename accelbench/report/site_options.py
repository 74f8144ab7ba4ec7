"""The options of `accelbench site`, declared once (config/option_fields.py `option`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from accelbench.config.option_fields import REQUIRED, argument, option


@dataclass(frozen=True)
class SiteOptions:
    """What `accelbench site` is asked: which bundles, where, compared against which machine."""

    bundles: list[Path] = argument(REQUIRED, "Bundles written by 'accelbench publish' (any "
                                   "number, from any machines; a reference bundle too).",
                                   "BUNDLE")
    out: Path = option(REQUIRED, "Folder to write the site into (made if missing).", "--out")
    baseline: str | None = option(None, "The machine verdicts are against: its number on the "
                                  "index (1 = the first) or its name (default: the first).")
    figures: bool = option(True, "Draw the study's figures across machines (matplotlib).",
                           "--figures/--no-figures")
