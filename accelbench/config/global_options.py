"""Third-party output the user cannot act on, kept out of accelbench's output unless asked for.

torchao logs each compiled CUDA extension a CPU wheel cannot load, and torch warns of
deprecated registrations torchao makes; under torch.compile, dynamo and inductor log their own
notes. `accelbench --verbose` shows them all; our own lines and every error are unaffected.
"""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass

from accelbench.config.option_fields import option

THIRD_PARTY_LOGGERS = ("torchao", "torch.utils._pytree", "torch._dynamo", "torch._inductor")
QUIET_ENV = "ACCELBENCH_QUIET_THIRD_PARTY"  # set by the CLI; launched ranks inherit it


@dataclass(frozen=True)
class GlobalOptions:
    """The options of `accelbench` itself, before any command."""

    verbose: bool = option(False, "Show the warnings and log lines of third-party packages "
                           "(torch, torchao) that are hidden by default.", "--verbose")


def quiet_third_party() -> None:
    """Raise the third-party loggers to ERROR and ignore their packages' warnings, in this
    process and (through QUIET_ENV) in the ranks it launches."""
    os.environ[QUIET_ENV] = "1"
    for name in THIRD_PARTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    for module in ("torchao", "torch"):
        warnings.filterwarnings("ignore", module=module)


def quiet_if_asked() -> None:
    """A launched rank: as quiet as the command that launched it."""
    if os.environ.get(QUIET_ENV) == "1":
        quiet_third_party()
