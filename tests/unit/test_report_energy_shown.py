"""Energy is not shown for a window the counter cannot carry, with the reason: under 10 counter
updates (the H200's block windows: 1,390 W on a 700 W card), or an average power above the most
the device itself reported; a well-covered window is shown."""

from __future__ import annotations

from accelbench.report.energy import energy_per_token, energy_text, not_shown, why_none
from accelbench.store.record import Record


def _cell(**energy) -> Record:
    metrics = {"energy_source": "nvml", "energy_interval_s": 0.1, "energy_window_s": 5.0,
               "energy_window_too_short": False, "energy_j": 3500.0,
               "avg_power_w_per_device": [700.0], "peak_power_w_per_device": [712.0],
               "energy_per_token_j": 0.01, **energy}
    return Record("train", "ok", {"model_name": "gpt2"}, {}, metrics)


def test_a_well_covered_window_is_shown():
    cell = _cell()
    assert not_shown(cell) is None and energy_per_token(cell) == 0.01
    assert energy_text(cell, 3.6e8) == "1 kWh"


def test_a_window_under_ten_counter_updates_is_not_shown():
    cell = _cell(energy_window_too_short=True, energy_window_s=0.3)
    assert energy_per_token(cell) is None
    assert why_none(cell).startswith("not shown: the timed window (0.3 s) is under 10 updates "
                                     "of the nvml counter (0.1 s)")


def test_an_average_above_the_devices_own_highest_reading_is_not_shown():
    cell = _cell(avg_power_w_per_device=[1390.0], peak_power_w_per_device=[700.0])
    assert energy_per_token(cell) is None
    assert "average power 1,390 W is above the most the device reported (700 W)" in \
        energy_text(cell, 1e9)
