"""MFU beside the clock (issue 39): the datasheet peaks' own SM clocks (hardware/specs.py,
checked against the peaks they are derived from), the meter's mean SM clock over a timed window
from a source that reads clocks (NVML's, stood in for here), a cell's mean over its devices,
and the MFU against the peak at the measured clock."""

from __future__ import annotations

import pytest
from energy_replay import ManualClock, ReplayCounter

from accelbench.analytics.cell_energy import cell_energy
from accelbench.analytics.throughput import at_measured_clock
from accelbench.bench.gemm_peak import Peak
from accelbench.bench.train.cell_metrics import _at_clock
from accelbench.bench.train.rank_result import RankResult
from accelbench.hardware.energy import EnergyMeter
from accelbench.hardware.specs import get_spec


@pytest.mark.parametrize("key, sms, flop_per_clock", [
    ("h100-sxm", 132, 4096), ("h200", 132, 4096), ("a100-80gb", 108, 2048),
    ("a100-40gb", 108, 2048)])
def test_each_peak_clock_gives_back_its_dense_bf16_peak(key, sms, flop_per_clock):
    spec = get_spec(key)
    rebuilt = sms * flop_per_clock * spec.peak_clock_mhz * 1e6
    assert rebuilt == pytest.approx(spec.peak_flops_per_s("bf16"), rel=2e-3)
    assert spec.peak_clock_source.startswith("derived:")


def test_a_device_without_a_known_clock_has_none():
    assert get_spec("mi300x").peak_clock_mhz is None  # left out, never guessed


def test_mfu_at_the_measured_clock_is_the_peak_scaled_by_the_clock():
    # the H200's micro-batch 32 cell: 50.5% of 989.4 TFLOPS (at 1,830 MHz); had its clock
    # averaged 1,530 MHz, the peak there is 827.2 TFLOPS and the same work is 60.4% of it
    assert at_measured_clock(0.505, 1830, 1530) == pytest.approx(0.505 * 1830 / 1530)
    assert at_measured_clock(0.505, 1830, 1530) == pytest.approx(0.6040, abs=1e-4)
    assert at_measured_clock(0.40, 1830, 1980) == pytest.approx(0.3697, abs=1e-4)  # above it
    assert at_measured_clock(0.5, 1830, 1830) == 0.5
    assert at_measured_clock(None, 1830, 1500) is None
    assert at_measured_clock(0.5, None, 1500) is None and at_measured_clock(0.5, 1830, None) \
        is None


class _Clocked(ReplayCounter):
    """A replayed counter that also reports an SM clock per reading, as NvmlSource does."""

    def __init__(self, readings, clock, mhz):
        super().__init__(readings, clock)
        self.mhz = list(mhz)

    def sm_clock_mhz(self):
        return (self.mhz.pop(0),)


def test_the_meter_keeps_the_mean_sm_clock_of_its_samples():
    clock = ManualClock(0.0)
    source = _Clocked([(0, 0.0), (10, 7000.0)], clock, [1500, 1800])
    meter = EnergyMeter(source, clock=clock, sample_s=None)
    meter.start()
    clock.now = 10.0
    window = meter.stop()
    assert window.mean_sm_clock_mhz_per_device == (1650.0,)
    fields = cell_energy([window.to_dict(), window.to_dict()], tokens=1000)
    assert fields.sm_clock_mhz_mean_per_device == [1650.0, 1650.0]
    assert fields.sm_clock_mhz_mean == 1650.0
    assert fields.avg_power_w_per_device == [700.0, 700.0]  # the window's mean power beside


def test_a_source_without_clocks_leaves_them_empty():
    clock = ManualClock(0.0)
    meter = EnergyMeter(ReplayCounter([(0, 0.0), (10, 100.0)], clock), clock=clock,
                        sample_s=None)
    meter.start()
    clock.now = 10.0
    window = meter.stop()
    assert window.mean_sm_clock_mhz_per_device is None
    assert cell_energy([window.to_dict()], 10).sm_clock_mhz_mean is None


def _rank(energy):
    return RankResult(0, [1.0], [1.0], energy=energy)


def test_a_cell_records_the_peak_clock_and_its_mfu_at_the_clock_it_ran():
    datasheet = Peak(989.4e12, "bf16", "datasheet dense (h200)", clock_mhz=1830)
    ran = {"mean_sm_clock_mhz_per_device": (1500.0,)}
    assert _at_clock(0.5, datasheet, [_rank(ran)]) == dict(
        peak_clock_mhz=1830, mfu_at_measured_clock=pytest.approx(0.61))
    # a rank without clocks (no NVML): no clock-scaled figure rather than a partial mean
    assert _at_clock(0.5, datasheet, [_rank(ran), _rank({"unavailable": "x"})])[
        "mfu_at_measured_clock"] is None
    measured = Peak(1e12, "fp32", "measured peak (GEMM n=1024)")
    assert _at_clock(0.5, measured, [_rank(ran)]) == dict(peak_clock_mhz=None,
                                                          mfu_at_measured_clock=None)


def test_a_cell_of_several_trials_keeps_the_trials_mean_clock_and_its_combined_mfu_there():
    """combine_train_trials: the cell's MFU is over the median step time of its trials, and its
    clock the mean of the trials' window means: the clock-scaled MFU is that MFU at that clock
    (the first trial's own would not match the combined MFU)."""
    from accelbench.bench.train.cell_trials import clock_over_trials
    from accelbench.config.records.train import TrainMetrics

    trials = [TrainMetrics(sm_clock_mhz_mean=1500.0), TrainMetrics(sm_clock_mhz_mean=1600.0)]
    combined = TrainMetrics(mfu=0.5, peak_clock_mhz=1830)
    assert clock_over_trials(trials, combined) == dict(
        sm_clock_mhz_mean=1550.0, mfu_at_measured_clock=pytest.approx(0.5 * 1830 / 1550))
    assert clock_over_trials([TrainMetrics(), *trials], combined) == {}


def test_a_block_cell_s_forward_and_backward_mfu_at_its_trials_clock():
    from accelbench.config.records.block import BlockReading, PhaseFields
    from accelbench.workloads.block.runner import block_at_clock

    trials = [BlockReading(sm_clock_mhz_mean=1800.0), BlockReading(sm_clock_mhz_mean=1600.0)]
    combined = BlockReading(peak_clock_mhz=1830, forward_backward=PhaseFields(mfu=0.6))
    assert block_at_clock(trials, combined) == dict(
        sm_clock_mhz_mean=1700.0, mfu_at_measured_clock=pytest.approx(0.6 * 1830 / 1700))
    assert block_at_clock([BlockReading()], combined) == {}
