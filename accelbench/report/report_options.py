"""The options of `accelbench report`, declared once (config/option_fields.py `option`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from accelbench.config.option_fields import REQUIRED, option
from accelbench.config.paths import default_db_path
from accelbench.report import DEFAULT_TOKENS


@dataclass(frozen=True)
class ReportOptions:
    """What `accelbench report` is asked: where to write, which databases, compared how."""

    out_dir: Path = option(REQUIRED, "Folder to write report.html, report.md and figures/ into "
                           "(made if missing).", "--out")
    db: list[Path] | None = option(None, "A results database; repeat for several machines "
                                   "(default: $ACCELBENCH_DB or XDG).", "--db")
    baseline: str | None = option(None, "The machine speedups are over: its number in the "
                                  "report (1 = the first) or its name (default: the first).")
    tokens: float = option(DEFAULT_TOKENS, "Tokens to train, for the time-to-train comparison "
                           "(e.g. 1e9).")
    study: str | None = option(None, "Only the records of this study (e.g. emani2023; default: "
                               "every record).")

    @property
    def paths(self) -> list[Path]:
        """The databases read: those given, else the default one."""
        return list(self.db) if self.db else [default_db_path()]
