"""The planner's prediction beside a measurement, where the device is in the hardware table:
a training cell's tokens/s from the planner's step-time model for the same layout, a block's
TFLOPS from the compute rate the planner assumes (its efficiency times the dense peak). Each
with the 80% interval `plan` gives the same prediction (analytics.confidence), an estimate."""

from __future__ import annotations

from dataclasses import dataclass, replace

from accelbench.analytics.compute_rates import compute_efficiency
from accelbench.analytics.confidence import prediction_interval
from accelbench.analytics.intervals import Interval
from accelbench.analytics.measured_runs import validate_measured_runs
from accelbench.config.errors import ConfigError
from accelbench.config.model import ModelConfig
from accelbench.hardware.specs import get_spec
from accelbench.report.measured import measured_run
from accelbench.store.record import Record

NO_DATASHEET = "no datasheet: no prediction"
INTERVAL_NOTE = ("(lo-hi) after a planner figure: its 80% prediction interval, an estimate from "
                 "the shipped published runs' leave-one-source-out residuals, the interval "
                 "accelbench plan gives the same prediction (docs/planner.md); 'outside': the "
                 "measured value is not in it")
HEADER = "(80% interval, est.) error"  # after "planner <unit> " in a column's name


@dataclass(frozen=True)
class Prediction:
    """A predicted value (tokens/s per device, or TFLOPS), its error against the measured
    one ((predicted - measured) / measured) and its 80% interval (multipliers, as plan's)."""

    value: float
    measured: float
    interval: Interval | None = None

    @property
    def error(self) -> float:
        """Relative error of the prediction."""
        return (self.value - self.measured) / self.measured

    @property
    def bounds(self) -> tuple[float, float] | None:
        """The interval's low and high value, or None without one."""
        return None if self.interval is None else self.interval.throughput(self.value)

    @property
    def inside(self) -> bool | None:
        """Whether the measured value lies in the interval (None without one)."""
        bounds = self.bounds
        return None if bounds is None else bounds[0] <= self.measured <= bounds[1]

    def text(self, fmt: str = ",.0f") -> str:
        """'1,234 (1,050-1,480) +12%', and ', outside' when the measurement is not in the
        interval; '1,234 +12%' without one."""
        error = f"{100 * self.error:+.0f}%"
        if self.bounds is None:
            return f"{self.value:{fmt}} {error}"
        low, high = self.bounds
        outside = "" if self.inside else ", outside"
        return f"{self.value:{fmt}} ({low:{fmt}}-{high:{fmt}}) {error}{outside}"


def train_prediction(record: Record) -> Prediction | str:
    """The planner's tokens/s per device for the cell's model, layout, batch and precision on
    its device, or why there is none."""
    if not record.environment.get("device_spec_key"):
        return NO_DATASHEET
    run = measured_run(record)
    measured = record.typed.tokens_per_s_per_device
    if run is None or not measured:
        return "-"
    try:
        exact = replace(run, model=ModelConfig(**record.setup.model))  # the record's shape
        row = validate_measured_runs([exact])[0]
    except (ConfigError, KeyError, TypeError, ValueError, ZeroDivisionError) as err:
        return f"no prediction: {err}"
    interval = prediction_interval(row.device, row.dtype, row.limiter, row.n_devices)
    return Prediction(row.predicted_tokens_per_s_per_device, measured, interval)


def block_prediction(record: Record, phase: str = "forward_backward") -> Prediction | str:
    """The TFLOPS the planner assumes a layer reaches on this device (its compute efficiency
    times the dense peak of the precision that ran), against the phase's measured TFLOPS; its
    interval is plan's for one compute-limited device of this class and precision."""
    key = record.environment.get("device_spec_key")
    if not key:
        return NO_DATASHEET
    measured = record.typed.phase(phase).tflops_per_device
    precision = record.typed.peak_precision or record.setup.dtype
    try:
        spec = get_spec(key)
    except ConfigError:
        return f"no prediction: {key} is not in the hardware table"
    peak = spec.peak_flops_per_s(precision)
    if not peak:
        return f"no prediction: no {precision} peak for {key}"
    if not measured:
        return "-"
    interval = prediction_interval(spec.key, str(precision), "compute", 1)
    return Prediction(compute_efficiency(spec) * peak / 1e12, measured, interval)


def prediction_text(prediction: Prediction | str, fmt: str = ",.0f") -> str:
    """A prediction's text, or the reason there is none."""
    return prediction.text(fmt) if isinstance(prediction, Prediction) else prediction
