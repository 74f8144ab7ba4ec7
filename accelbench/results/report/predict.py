"""The planner's prediction beside a measurement, where the device is in the hardware table:
a training cell's tokens/s from the planner's step-time model for the same layout, a block's
TFLOPS from the compute rate the planner assumes (its efficiency times the dense peak)."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.analytics.published import validate_measured_runs
from accelbench.analytics.steptime import compute_efficiency
from accelbench.config.errors import ConfigError
from accelbench.config.model import ModelConfig
from accelbench.hardware.specs import get_spec
from accelbench.results.measured import measured_run
from accelbench.results.record import Record

NO_DATASHEET = "no datasheet: no prediction"


@dataclass(frozen=True)
class Prediction:
    """A predicted value (tokens/s per device, or TFLOPS) and its error against the measured
    one: (predicted - measured) / measured."""

    value: float
    measured: float

    @property
    def error(self) -> float:
        """Relative error of the prediction."""
        return (self.value - self.measured) / self.measured

    def text(self, fmt: str = ",.0f") -> str:
        """'1,234 (+12%)'."""
        return f"{self.value:{fmt}} ({100 * self.error:+.0f}%)"


def train_prediction(record: Record) -> Prediction | str:
    """The planner's tokens/s per device for the cell's model, layout, batch and precision on
    its device, or why there is none."""
    if not record.environment.get("device_spec_key"):
        return NO_DATASHEET
    run = measured_run(record)
    measured = record.metrics.get("tokens_per_s_per_device")
    if run is None or not measured:
        return "-"
    try:
        run["model"] = ModelConfig(**record.spec["model"])
        row = validate_measured_runs([run])[0]
    except (ConfigError, KeyError, TypeError, ValueError, ZeroDivisionError) as err:
        return f"no prediction: {err}"
    return Prediction(row.predicted_tokens_per_s_per_device, measured)


def block_prediction(record: Record, phase: str = "forward_backward") -> Prediction | str:
    """The TFLOPS the planner assumes a layer reaches on this device (its compute efficiency
    times the dense peak of the precision that ran), against the phase's measured TFLOPS."""
    key = record.environment.get("device_spec_key")
    if not key:
        return NO_DATASHEET
    measured = record.metrics.get(f"{phase}_tflops_per_device")
    precision = record.metrics.get("peak_precision") or record.spec.get("dtype")
    try:
        spec = get_spec(key)
    except ConfigError:
        return f"no prediction: {key} is not in the hardware table"
    peak = spec.peak_flops_per_s(precision)
    if not peak:
        return f"no prediction: no {precision} peak for {key}"
    if not measured:
        return "-"
    return Prediction(compute_efficiency(spec) * peak / 1e12, measured)


def prediction_text(prediction: Prediction | str, fmt: str = ",.0f") -> str:
    """A prediction's text, or the reason there is none."""
    return prediction.text(fmt) if isinstance(prediction, Prediction) else prediction
