"""The fairness section's GPU clock: the SM clock at a timed window's edges and NVML's reasons,
read from where a block record (raw.disturbance) and a launched or one-process training record
(raw.rank0.disturbance) keep them, as the H200 run stored them (docs/gpu-runs/)."""

from __future__ import annotations

from accelbench.report.fairness import differences, gpu_clock
from accelbench.store.record import Record


def _gpu(start_mhz: int, end_mhz: int, *reasons: str) -> dict:
    edge = {"other_pids": [], "pids_comparable": True, "slowdown": []}
    return {"start": {**edge, "sm_clock_mhz": start_mhz, "clock_reasons": list(reasons)},
            "end": {**edge, "sm_clock_mhz": end_mhz, "clock_reasons": list(reasons)}}


def _record(kind: str, raw: dict) -> Record:
    return Record(kind, "ok", {"dtype": "bf16"}, {"device_type": "cuda"}, {}, raw)


def test_the_clock_and_its_reasons_of_a_block_and_a_training_record():
    block = _record("block", {"disturbance": {"disturbed": False, "gpu": _gpu(1980, 1980)}})
    train = _record("train", {"rank0": {"disturbance": {
        "disturbed": False, "gpu": _gpu(1485, 1470, "sw_power_cap")}}})
    assert gpu_clock(block) == "1,980 to 1,980 MHz"
    assert gpu_clock(train) == "1,485 to 1,470 MHz (sw_power_cap)"


def test_no_gpu_reading_is_a_dash():
    cpu = _record("train", {"rank0": {"disturbance": {"disturbed": False, "gpu": None}}})
    unread = _record("block", {"disturbance": {"gpu": {"start": {"unavailable": "NVML: x"},
                                                       "end": {"unavailable": "NVML: x"}}}})
    assert gpu_clock(cpu) == gpu_clock(unread) == gpu_clock(_record("block", {})) == "-"


class _Best:
    def __init__(self, record: Record) -> None:
        self.record = record


def test_fairness_lists_a_power_capped_card_beside_a_free_one():
    capped = _record("train", {"rank0": {"disturbance": {"gpu": _gpu(1500, 1800,
                                                                     "sw_power_cap")}}})
    free = _record("train", {"rank0": {"disturbance": {"gpu": _gpu(1980, 1980)}}})
    found = dict(differences([_Best(capped), _Best(free)]))
    assert found["GPU SM clock at the window's edges"] == [
        "1,500 to 1,800 MHz (sw_power_cap)", "1,980 to 1,980 MHz"]
