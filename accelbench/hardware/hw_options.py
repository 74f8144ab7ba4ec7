"""The options of `accelbench hw`, declared once (config/option_fields.py `option`)."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.config.option_fields import DEVICE_HELP, WIDE_TABLE_HELP, option


@dataclass(frozen=True)
class HwOptions:
    """What `accelbench hw` is asked: which device, measured or not, shown how."""

    device: str = option("auto", DEVICE_HELP)
    measure: bool = option(False, "Measure GEMM peaks of this device.", "--measure")
    json_out: bool = option(False, "Print detection as JSON.", "--json")
    detect: bool = option(True, "Detect this machine's device (imports torch); --no-detect "
                          "prints the table alone.", "--detect/--no-detect")
    wide: bool = option(False, WIDE_TABLE_HELP, "--wide")
