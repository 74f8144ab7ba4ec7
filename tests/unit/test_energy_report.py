"""The report compares machines by energy to train a stated number of tokens only where every
machine measured it; otherwise it says 'unavailable' with each machine's reason."""

from __future__ import annotations

from accelbench.report.compare import compare_section
from accelbench.report.energy import NOT_RECORDED
from accelbench.report.machines import group_machines
from accelbench.report.table import train_table
from accelbench.store.record import Record

CPU = {"device_type": "cpu", "device_name": "AMD EPYC", "device_count": 1, "cpu": "AMD EPYC",
       "cpu_count": 2, "torch": "2.13.0+cpu", "host": "vm"}
GPU = {**CPU, "device_type": "cuda", "device_name": "NVIDIA H100 80GB HBM3",
       "torch": "2.11.0+cu128", "host": "gpu1"}
SPEC = {"model_name": "gpt2-tiny", "seq_len": 32, "dtype": "bf16", "micro_batch": 2, "gas": 1,
        "recompute": "none"}
UNAVAILABLE = "unavailable: no /sys/class/powercap (no powercap driver, or a VM that hides it)"


def _cell(env: dict, tokens_per_s: float, per_token_j: float | None, source: str | None,
          note: str | None = None) -> tuple[str, Record]:
    metrics = {"n_devices": 1, "tokens_per_step_global": 1000,
               "step_time_s_median": 1000 / tokens_per_s, "energy_per_token_j": per_token_j,
               "tokens_per_j": 1 / per_token_j if per_token_j else None,
               "avg_power_w_per_device": [per_token_j * tokens_per_s] if per_token_j else None,
               "energy_source": source, "energy_note": note}
    return ("x.db", Record("train", "ok", SPEC, env, metrics))


def _tables(section):
    return {t.title: t for t in section.tables}


def test_energy_to_train_the_stated_tokens_when_every_machine_has_it():
    machines = group_machines([_cell(CPU, 2000, 0.5, "rapl"), _cell(GPU, 50_000, 0.01, "nvml")])
    section = compare_section(machines, machines[0], tokens=3.6e9)
    table = _tables(section)["Energy to train 3.6e+09 tokens"]
    rapl, nvml = table.rows
    assert rapl[3] == "rapl" and nvml[3] == "nvml"
    assert rapl[7] == "500" and nvml[7] == "10"  # kWh: J/token x 3.6e9 / 3.6e6
    assert nvml[8] == "1.00x" and rapl[8] == "50.00x"
    assert rapl[6] == "1,000" and nvml[6] == "500"  # average W per device
    time_rows = _tables(section)["Time to train 3.6e+09 tokens"].rows
    assert [r[-1] for r in time_rows] == ["500 kWh", "10 kWh"]


def test_a_machine_without_energy_leaves_the_table_out_and_says_why():
    machines = group_machines([_cell(CPU, 2000, None, None, UNAVAILABLE),
                               _cell(GPU, 50_000, 0.01, "nvml")])
    section = compare_section(machines, machines[0], tokens=1e9)
    assert not any(t.title.startswith("Energy") for t in section.tables)
    assert any(UNAVAILABLE in p and p.startswith("Energy: unavailable") for p in
               section.paragraphs)
    time_rows = _tables(section)["Time to train 1e+09 tokens"].rows
    assert time_rows[0][-1] == UNAVAILABLE
    assert time_rows[1][-1] == "2.78 kWh"  # 0.01 J/token x 1e9 tokens


def test_a_record_from_before_energy_metering_says_so():
    old = ("old.db", Record("train", "ok", SPEC, CPU, {"n_devices": 1,
                                                      "tokens_per_step_global": 1000,
                                                      "step_time_s_median": 0.5}))
    machines = group_machines([old])
    rows = _tables(compare_section(machines, machines[0], tokens=1e9))["Time to train 1e+09 "
                                                                       "tokens"].rows
    assert rows[0][-1] == NOT_RECORDED


def test_the_terminal_table_shows_j_per_token_or_why_not():
    measured = _cell(GPU, 50_000, 0.0123, "nvml")[1]
    table = train_table([measured])
    column = [c for c in table.columns if c.header == "J/token"]
    assert len(column) == 1 and [str(c) for c in column[0].cells] == ["0.0123"]
    assert table.caption.plain.endswith("J/token over the timed steps, from nvml")
    none = train_table([_cell(CPU, 2000, None, None, UNAVAILABLE)[1]])
    assert not [c for c in none.columns if c.header == "J/token"]
    assert none.caption.plain.endswith(f"energy {UNAVAILABLE}")
