"""Energy: this machine reports 'unavailable' and nothing estimated; the arithmetic from
recorded counter readings (joules, watts, per token, the sum over ranks); RAPL's files and
their wrap-around; the report's energy to train a stated number of tokens."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from energy_replay import ManualClock, ReplayCounter

from accelbench.analytics.cell_energy import cell_energy
from accelbench.hardware.energy import EnergyMeter, Unavailable, open_meter, open_source
from accelbench.hardware.energy.amd import accumulated_j
from accelbench.hardware.energy.meter import window_from_samples
from accelbench.hardware.energy.nvml import normal_uuid
from accelbench.hardware.energy.rapl import open_rapl

NUMBERS = ("energy_j", "energy_per_token_j", "tokens_per_j", "avg_power_w_per_device",
           "peak_power_w_per_device", "energy_j_per_device", "energy_j_per_rank")


def test_this_machine_has_no_counter_and_says_why_without_an_estimate():
    if Path("/sys/class/powercap").exists():  # this VM has none; a machine with RAPL differs
        pytest.skip("this machine has /sys/class/powercap")
    source = open_source(torch.device("cpu"))
    assert isinstance(source, Unavailable) and "powercap" in source.reason
    with open_meter(torch.device("cpu")) as meter:
        meter.start()
        assert meter.stop() is None
        result = meter.result()
    assert result == {"unavailable": source.reason}
    fields = cell_energy([result], tokens=1000)
    assert fields.energy_note == f"unavailable: {source.reason}"
    assert all(getattr(fields, name) is None for name in NUMBERS)


def test_joules_watts_and_per_token_from_recorded_readings():
    clock = ManualClock(0.5)
    source = ReplayCounter([(0, 0.0), (1, 250.0), (2, 600.0), (3, 700.0)], clock)
    meter = EnergyMeter(source, clock=clock, sample_s=None)
    meter.start()  # 125 J at 0.5 s
    clock.now = 2.5  # 650 J
    window = meter.stop()
    assert window.energy_j_per_device == (525.0,) and window.duration_s == 2.0
    assert window.avg_power_w_per_device == (262.5,)
    assert window.peak_power_w_per_device == (262.5,)  # two samples: the one rate
    assert window.too_short is False  # 2 s is 20 updates of a 0.1 s counter
    fields = cell_energy([window.to_dict()], tokens=2100)
    assert fields.energy_j == 525.0 and fields.energy_j_per_rank == [525.0]
    assert fields.energy_per_token_j == pytest.approx(0.25)
    assert fields.tokens_per_j == pytest.approx(4.0)
    assert fields.energy_source == "replay" and fields.energy_note is None
    meter.close()
    assert source.closed


def test_a_window_under_ten_counter_updates_is_flagged():
    clock = ManualClock(0.0)
    source = ReplayCounter([(0, 0.0), (10, 1000.0)], clock, interval_s=0.1)
    meter = EnergyMeter(source, clock=clock, sample_s=None)
    meter.start()
    clock.now = 0.5
    fields = cell_energy([meter.stop().to_dict()], tokens=10)
    assert fields.energy_window_too_short is True
    assert "window too short" in fields.energy_note and fields.energy_j == 50.0


def test_peak_watts_are_the_highest_rate_between_samples_or_the_reported_power():
    class Source:
        name, interval_s, host_wide, devices = "x", 0.1, False, ("a", "b")

    samples = [(0.0, (0.0, 0.0), None), (1.0, (100.0, 10.0), None),
               (2.0, (400.0, 20.0), None), (4.0, (500.0, 60.0), None)]
    window = window_from_samples(Source(), "h", samples)
    assert window.energy_j_per_device == (500.0, 60.0)
    assert window.avg_power_w_per_device == (125.0, 15.0)
    assert window.peak_power_w_per_device == (300.0, 20.0)
    reported = [(0.0, (0.0, 0.0), (50.0, 5.0)), (1.0, (80.0, 8.0), (90.0, 7.0))]
    assert window_from_samples(Source(), "h", reported).peak_power_w_per_device == (90.0, 7.0)


def test_the_sampler_thread_reads_between_the_edges():
    start = time.perf_counter()
    source = ReplayCounter([(start, 0.0), (start + 1000, 100_000.0)], watts=100.0)  # 100 W
    with EnergyMeter(source, sample_s=0.05) as meter:
        meter.start()
        time.sleep(0.35)
        window = meter.stop()
    assert window.samples >= 3  # the edges and the thread's samples
    # the clock is read just before the counter: microseconds apart
    assert window.energy_j_per_device[0] == pytest.approx(100.0 * window.duration_s, rel=1e-3)
    assert window.avg_power_w_per_device[0] == pytest.approx(100.0, rel=1e-3)
    assert window.peak_power_w_per_device == (100.0,)
    assert source.closed


def test_a_counter_that_fails_at_an_edge_makes_the_cell_unavailable_not_failed():
    class Failing(ReplayCounter):
        def read_j(self):
            if len(self.reads) >= 1:
                raise OSError("counter went away")
            return super().read_j()

        def power_w(self):
            raise RuntimeError("this board reports no power")

    clock = ManualClock(0.0)
    with EnergyMeter(Failing([(0, 0.0), (10, 100.0)], clock), clock=clock,
                     sample_s=None) as meter:
        meter.start()
        clock.now = 5.0
        assert meter.stop() is None
        assert meter.result() == {"unavailable": "replay counter read failed: counter went "
                                                 "away"}


def _window(rank_j: float, host: str, source: str = "nvml", host_wide: bool = False,
            devices: tuple[str, ...] = ("GPU-0",)) -> dict:
    n = len(devices)
    return {"source": source, "interval_s": 0.1, "host": host, "host_wide": host_wide,
            "devices": devices, "duration_s": 10.0,
            "energy_j_per_device": tuple(rank_j / n for _ in devices),
            "avg_power_w_per_device": tuple(rank_j / n / 10.0 for _ in devices),
            "peak_power_w_per_device": tuple(rank_j / n / 5.0 for _ in devices),
            "samples": 100, "too_short": False}


def test_ranks_sum_and_keep_their_own_figures():
    fields = cell_energy([_window(300.0, "a"), _window(500.0, "a")], tokens=1000)
    assert fields.energy_j == 800.0 and fields.energy_j_per_rank == [300.0, 500.0]
    assert fields.energy_devices == ["rank0 GPU-0", "rank1 GPU-0"]
    assert fields.avg_power_w_per_device == [30.0, 50.0]
    assert fields.peak_power_w_per_device == [60.0, 100.0]
    assert fields.energy_per_token_j == pytest.approx(0.8)
    assert fields.tokens_per_j == pytest.approx(1.25)


def test_a_host_wide_counter_counts_once_per_host():
    rapl = dict(source="rapl", host_wide=True, devices=("package-0", "dram-0"))
    ranks = [_window(100.0, "a", **rapl), _window(100.0, "a", **rapl),
             _window(120.0, "b", **rapl)]
    fields = cell_energy(ranks, tokens=440)
    assert fields.energy_j == 220.0  # host a's counter once, host b's once
    assert fields.energy_j_per_rank == [100.0, 100.0, 120.0]
    assert fields.energy_devices == ["rank0 package-0", "rank0 dram-0", "rank2 package-0",
                                        "rank2 dram-0"]
    assert "counted once per host (2)" in fields.energy_note
    assert fields.energy_per_token_j == pytest.approx(0.5)


def test_one_rank_without_a_reading_leaves_the_cell_without_a_total():
    fields = cell_energy([_window(300.0, "a"), {"unavailable": "nvidia-ml-py is not "
                                                               "installed"}], tokens=1000)
    assert fields.energy_note == "unavailable: rank 1: nvidia-ml-py is not installed"
    assert all(getattr(fields, name) is None for name in NUMBERS)


def _zone(root: Path, name: str, label: str, uj: int, range_uj: int = 1_000_000) -> Path:
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "name").write_text(label + "\n")
    (zone / "energy_uj").write_text(f"{uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{range_uj}\n")
    return zone


def test_rapl_reads_packages_and_dram_and_undoes_the_wrap(tmp_path):
    package = _zone(tmp_path, "intel-rapl:0", "package-0", 900_000)
    _zone(tmp_path, "intel-rapl:0:0", "core", 5)  # part of the package: not counted again
    dram = _zone(tmp_path, "intel-rapl:0:1", "dram", 10_000)
    _zone(tmp_path, "intel-rapl:1", "psys", 7)  # the platform: would count the package twice
    source = open_rapl(tmp_path)
    assert source.devices == ("package-0", "dram-0") and source.host_wide
    assert source.read_j() == (0.0, 0.0)
    (package / "energy_uj").write_text("100000\n")  # wrapped past 1,000,000 uJ
    (dram / "energy_uj").write_text("60000\n")
    assert source.read_j() == pytest.approx((0.2, 0.05))
    (package / "energy_uj").write_text("400000\n")
    assert source.read_j() == pytest.approx((0.5, 0.05))


def test_rapl_without_powercap_or_zones_is_unavailable(tmp_path):
    assert "no " in open_rapl(tmp_path / "missing").reason
    assert "no package or dram zone" in open_rapl(tmp_path).reason


def test_device_libraries_units_and_names():
    assert normal_uuid("GPU-AB12cd34-0000-1111-2222-333344445555") == \
        "ab12cd34-0000-1111-2222-333344445555"
    assert normal_uuid(b"GPU-ab12") == normal_uuid("ab12")
    # amdsmi: count x resolution (microjoules); the key was 'power' before ROCm 6.2
    assert accumulated_j({"energy_accumulator": 2_000_000, "counter_resolution": 15.3}) == \
        pytest.approx(30.6)
    assert accumulated_j({"power": 1000, "counter_resolution": 1.0}) == pytest.approx(1e-3)
