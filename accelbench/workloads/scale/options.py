"""`accelbench scale`'s options: the training options (but SCALE_SKIPS) and the device counts,
turned into a checked ScaleSpec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelbench.bench.train.train_options import TrainOptions, build_spec
from accelbench.config.option_fields import option as _opt
from accelbench.config.units import parse_int_list

if TYPE_CHECKING:  # the scaling runner imports torch: not needed to list the options
    from accelbench.workloads.scale.runner import ScaleSpec


@dataclass(frozen=True)
class ScaleOptions(TrainOptions):
    """`accelbench scale`: the training options (but SCALE_SKIPS) and the device counts."""

    devices: str = _opt("1,2", "Device (process) counts, comma-separated.")
    mode: str = _opt("weak", "weak (same micro-batch per device) or strong (same global "
                     "batch).")
    zero: int = _opt(0, "ZeRO stage of the data-parallel layout (0-3).")


SCALE_DEFAULTS = {"model": "gpt2"}  # scale's own defaults over TrainOptions'
# scale lays out each count itself, in launched processes (a launch a trial)
SCALE_SKIPS = ("nproc", "layout", "max_micro_batch", "verify_fit")


def build_scale_spec(options: ScaleOptions) -> ScaleSpec:
    """A scaling study's spec: the base cell and its device counts, checked."""
    from accelbench.workloads.scale.runner import ScaleSpec, validate_scale

    base = build_spec(options)
    return validate_scale(ScaleSpec(base, parse_int_list("devices", options.devices),
                                    options.mode, options.zero))
