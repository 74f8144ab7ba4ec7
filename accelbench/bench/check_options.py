"""The options of `accelbench check` (no torch: the command lists them instantly), declared
once (config/option_fields.py `option`), and their check."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from accelbench.config.errors import require_choice
from accelbench.config.option_fields import DB_HELP, DEVICE_HELP, option
from accelbench.config.vocab import COMPILE_BACKENDS


@dataclass(frozen=True)
class CheckOptions:
    """What `accelbench check` is asked: the device, the compile probe's backend, where the
    record goes."""

    device: str = option("auto", DEVICE_HELP)
    compile_backend: str = option("inductor", "torch.compile backend of the compile probe: "
                                  "inductor, aot_eager, eager.")
    db: Path | None = option(None, DB_HELP)
    json_out: bool = option(False, "Print the check record as JSON.", "--json")


def check_check_options(given: CheckOptions) -> None:
    """A known compile backend (ConfigError naming it, before the device is touched)."""
    require_choice("compile-backend", given.compile_backend, COMPILE_BACKENDS)
