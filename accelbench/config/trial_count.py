"""How many independent trials a cell gets (`--trials`, a study's `trials` key): checked here,
before anything runs, without torch; bench/trials.py runs them (docs/metrics.md, "Trials")."""

from __future__ import annotations

from typing import Any

from accelbench.config.errors import ConfigError, require_count

AUTO = "auto"
MIN_INTERVAL_TRIALS = 6  # the fewest whose median has a 95% interval (analytics/stats.py)
# Trials a cell gets when --trials is auto: on an accelerator MIN_INTERVAL_TRIALS; on a CPU
# fewer, so that the built-in quick study stays within about ten minutes on a loaded 2-core
# machine (docs/metrics.md, "Trials", has the timings behind the choice).
AUTO_TRIALS = {"cpu": 3, "accelerator": MIN_INTERVAL_TRIALS}
# The most trials a cell may be given: a 95% interval needs 6, a tight one a few dozen; past
# this a sweep would run for days (each trial builds the model anew and runs its warm-up).
MAX_TRIALS = 1000
_TRIALS_ALLOWED = (f"1 to {MAX_TRIALS:,} ({MIN_INTERVAL_TRIALS} or more for a 95% interval), "
                   f"or {AUTO}")


def parse_trials(value: object) -> int | None:
    """A --trials value: 'auto' (None: chosen per device when the sweep runs) or a whole number
    >= 1; anything else (0, -1, nan, 2.5, text) is a ConfigError naming `trials`."""
    if value is None or (isinstance(value, str) and value.strip().lower() == AUTO):
        return None
    number: Any = value
    if isinstance(value, bool):
        number = None
    elif isinstance(value, str) and value.strip().lstrip("+").isdigit():
        number = int(value.strip())
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise ConfigError("trials", f"must be a whole number >= 1 or {AUTO}, got {value!r}",
                          _TRIALS_ALLOWED)
    if number > MAX_TRIALS:
        raise ConfigError("trials", f"{number:,} is over the bound of {MAX_TRIALS:,}",
                          _TRIALS_ALLOWED)
    return number


def require_trials(trials: object) -> int:
    """A spec's trials: a whole number from 1 to MAX_TRIALS (auto is resolved before a
    sweep's cells run)."""
    return require_count("trials", trials, MAX_TRIALS)


def auto_trials(device_type: str) -> int:
    """The trials --trials auto gives a cell on this kind of device."""
    return AUTO_TRIALS["cpu" if device_type == "cpu" else "accelerator"]


TRIAL_VALUES = "trial_values"  # raw: each timed figure's per-trial values (bench/trials.py)


def trial_samples(raw: dict[str, Any], figure: str) -> list[float] | None:
    """A cell's independent samples of one timed figure (each trial's median), or None where it
    ran one trial or a value is missing: a comparison then has no interval, and says so."""
    values = (raw.get(TRIAL_VALUES) or {}).get(figure)
    if not values or len(values) < 2 or any(v is None for v in values):
        return None
    return [float(v) for v in values]
