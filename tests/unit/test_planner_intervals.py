"""The planner's 80% prediction intervals, extrapolation flags and memory headroom (issue 27):
intervals in every output form, the two flagged cases, and the refusals. How the intervals are
made (the source as a level, issue 41) is tests/unit/test_planner_source_intervals.py."""

from __future__ import annotations

import json
import re
import sys

import pytest
from typer.testing import CliRunner

from accelbench.analytics.envelope import Envelope, ValidatedRun
from accelbench.analytics.machine_profile import Point, point_dict
from accelbench.analytics.measured_step_runs import missing_precision, step_run_of
from accelbench.analytics.plan_input import resolve_plan_input, run_plan
from accelbench.analytics.plan_options import PlanOptions
from accelbench.cli.main import app, main
from accelbench.config.model import ModelConfig

GPT3_1024 = ["plan", "--model", "gpt3-175b", "--device", "a100-80gb", "--nodes", "128"]
MIXTRAL_32 = ["plan", "--model", "mixtral-8x7b", "--device", "h100-sxm", "--nodes", "4",
              "--global-batch", "512", "--seq", "4096"]
MIXTRAL_98 = "dp=16,tp=1,pp=2,vp=2,ep=4,mb=1,zero=3,recompute=none"  # 98% of usable memory


def _plan_json(*args: str) -> dict:
    out = CliRunner().invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_every_planned_layout_carries_its_interval_in_json() -> None:
    data = _plan_json("plan", "--model", "llama3-8b", "--device", "h100-sxm", "--nodes", "2",
                      "--global-batch", "64", "--seq", "4096", "--top", "3")
    assert data["memory_headroom"] == 0.9
    for row in data["best"]:
        interval, step = row["interval"], row["step"]
        assert interval["estimate"] is True and interval["coverage"] == 0.8
        assert interval["n_residuals"] == 46  # every shipped run: an unseen stack's
        n = 16
        low, high = interval["tokens_per_s_per_device"]
        assert low < step["tokens_per_s"] / n < high
        assert interval["mfu"][0] < step["mfu"] < interval["mfu"][1]
        assert interval["step_s"][0] < step["step_s"] < interval["step_s"][1]
        assert interval["days"][0] < interval["days"][1]
        assert isinstance(row["flags"], list) and "within_envelope" in row


def test_the_table_shows_compact_ranges_and_says_what_they_are() -> None:
    out = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--device", "h100-sxm",
                                   "--nodes", "2", "--global-batch", "64", "--seq", "4096",
                                   "--top", "2"])
    assert out.exit_code == 0, out.output
    assert re.search(r"\d+k \(\d+-\d+k\)", out.stdout)  # tokens/s: '152k (131-170k)'
    assert re.search(r"\d+\.\d% \(\d+-\d+\)", out.stdout)  # MFU
    assert "80% prediction intervals" in out.stdout and "estimates" in out.stdout


def test_gpt3_on_1024_a100_above_every_comparable_published_run_is_flagged() -> None:
    data = _plan_json(*GPT3_1024, "--top", "3")
    top = data["best"][0]
    assert top["step"]["mfu"] > 0.6
    kinds = {f["kind"]: f for f in top["flags"]}
    assert "mfu" in kinds and top["within_envelope"] is False
    assert "56.0%" in kinds["mfu"]["reason"]  # the best validated A100 run of its size
    out = CliRunner().invoke(app, [*GPT3_1024, "--top", "1"])
    assert "! mfu (#1 MFU 6" in out.stdout


@pytest.mark.slow  # a planner search over a large model (~1.6 s)
def test_mixtral_layout_at_98_percent_of_memory_is_flagged_and_does_not_lead() -> None:
    data = _plan_json(*MIXTRAL_32, "--top", "3")
    assert data["over_headroom"] > 0
    for row in data["best"]:  # the leaders are within the headroom
        assert row["memory"]["total_bytes"] <= 0.9 * row["memory"]["usable_bytes"]
    given = _plan_json(*MIXTRAL_32, "--layout", MIXTRAL_98)["best"][0]
    assert given["memory"]["total_bytes"] > 0.95 * given["memory"]["usable_bytes"]
    assert "memory" in {f["kind"] for f in given["flags"]}
    # without the headroom it would have led, faster than the leader shown above
    assert given["step"]["tokens_per_s"] > data["best"][0]["step"]["tokens_per_s"]
    loose = _plan_json(*MIXTRAL_32, "--top", "1", "--memory-headroom", "1")
    assert loose["best"][0]["step"]["tokens_per_s"] >= given["step"]["tokens_per_s"]


def test_envelope_flags_size_scale_sequence_precision_and_device() -> None:
    run = ValidatedRun("r", "a100", "16-bit", 7e9, 64, 2048, 0.5)
    envelope = Envelope((run,))
    kinds = {f.kind for f in envelope.flags("a100", "fp8", 70e9, 4096, 32768, 0.4)}
    assert kinds == {"precision", "model size", "scale", "sequence"}
    assert {f.kind for f in envelope.flags("b200", "bf16", 7e9, 64, 2048, 0.9)} == {"device"}
    assert [f.kind for f in envelope.flags("a100", "bf16", 7e9, 64, 2048, 0.51)] == ["mfu"]
    assert envelope.flags("a100", "bf16", 7e9, 64, 2048, 0.49) == []


def test_validate_reports_each_runs_interval_and_the_coverage(tmp_path) -> None:
    db = str(tmp_path / "none.db")
    data = _plan_json("plan", "--validate", "--db", db)
    report = data["intervals"]
    assert len(report["runs"]) == len(data["leave_one_source_out"])
    overall = report["unseen"]["overall"]
    assert overall["runs"] == len(report["runs"]) == 46 and overall["sources"] == 7
    assert overall["inside"] == sum(r["inside"] for r in report["runs"])
    # each source weighs once: the mean of the per-source fractions, with its spread
    by_source = overall["by_source"]
    assert overall["coverage_per_source"] == pytest.approx(sum(by_source.values()) / 7)
    low, high = overall["coverage_per_source_90"]
    assert low <= overall["coverage_per_source"] <= high
    assert set(report["unseen"]) >= {"generation", "precision", "overall", "runs"}
    out = CliRunner().invoke(app, ["plan", "--validate", "--db", db])
    assert out.exit_code == 0
    assert "80% interval" in out.stdout and "coverage per source" in out.stdout
    assert (f"Shipped runs inside their unseen-stack interval: {overall['inside']} of "
            f"{overall['runs']}") in out.stdout


def _cpu_profile_file(tmp_path, environment: dict) -> str:
    points = [Point("gemm", f"gemm:fp32:{p}", "", "fp32", f, f, f / (e * 1e11), 0, 0, 0, 5)
              for p in ("forward", "input_grad", "weight_grad") for f, e in ((1e8, 0.3),
                                                                             (1e11, 0.6))]
    points += [Point("attention", f"attention:fp32:{d}:d32", "", "fp32", 128, 1e9,
                     1e9 / (0.4 * 1e11), 0, 0, 0, 5) for d in ("forward", "backward")]
    points.append(Point("memory", "memory:copy", "", "fp32", 1e8, 1e8, 1e-2, 0, 0, 0, 5))
    record = {"kind": "profile", "status": "ok", "environment": environment,
              "metrics": {"points": [point_dict(p) for p in points],
                          "peak_flops_per_s_by_dtype": {"fp32": 1e11, "bf16": 1e11}}}
    path = tmp_path / "profile.json"
    path.write_text(json.dumps([record]))
    return str(path)


@pytest.mark.parametrize("environment,device,says", [
    ({"device_type": "cpu", "device_name": "AMD EPYC"}, "a100-80gb",
     "error: profile: measured on cpu (AMD EPYC), cannot time a100-80gb"),
    ({"device_type": "cuda", "device_spec_key": "h100-sxm"}, "a100-80gb",
     "error: profile: measured on h100-sxm cuda, cannot time a100-80gb"),
])
def test_a_profile_of_another_device_is_refused_in_one_line(monkeypatch, capsys, tmp_path,
                                                            environment, device, says) -> None:
    path = _cpu_profile_file(tmp_path, environment)
    code, out, err = _main(monkeypatch, capsys, "plan", "--model", "gpt2", "--device", device,
                           "--global-batch", "8", "--seq", "512", "--profile", path)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(says) and "(allowed: " in lines[0]


@pytest.mark.parametrize("value", ["0", "1.5", "nan"])
def test_a_bad_memory_headroom_is_one_line_and_exit_2(monkeypatch, capsys, value: str) -> None:
    code, out, err = _main(monkeypatch, capsys, *GPT3_1024, "--memory-headroom", value)
    assert code == 2 and out == ""
    assert err.strip().startswith("error: memory-headroom: ")
    assert len(err.strip().splitlines()) == 1


def _main(monkeypatch, capsys, *argv: str) -> tuple[int | str | None, str, str]:
    """The command line as `accelbench` runs it (ConfigError: one line, exit 2)."""
    monkeypatch.setattr(sys, "argv", ["accelbench", *argv])
    monkeypatch.setattr(sys.modules["__main__"], "__package__", None, raising=False)
    code: int | str | None = None
    try:
        main()
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_run_plan_gives_one_confidence_per_result() -> None:
    request = resolve_plan_input(PlanOptions(model="llama3-8b", device="h100-sxm", nodes=1,
                                           global_batch=16, seq=2048, top=2))
    outcome = run_plan(request)
    assert len(outcome.confidence) == len(outcome.results) == 2


def _fp16_cell() -> dict:
    return {"kind": "block", "model": ModelConfig("tiny", 2, 2, 64, 100, 128), "seq_len": 128,
            "micro_batch": 2, "dtype": "fp16", "threads": 2, "measured_s": 0.1,
            "record_id": 7}


def test_validate_over_fp16_cells_without_an_fp16_curve_says_so_and_goes_on(
        monkeypatch, tmp_path) -> None:
    import accelbench.report.plan_validation as plan_validation
    from accelbench.report.plan_profile import resolve_profile

    profile = resolve_profile(_cpu_profile_file(tmp_path, {"device_type": "cpu"}), None)
    assert "no fp16 GEMM curve" in (missing_precision(_fp16_cell(), {2: profile}) or "")
    monkeypatch.setattr(plan_validation, "profiles_by_threads", lambda store: {2: profile})
    fp32 = {**_fp16_cell(), "dtype": "fp32", "record_id": 8}
    runs = [step_run_of(_fp16_cell()), step_run_of(fp32)]  # what the store's reader gives
    monkeypatch.setattr(plan_validation, "measured_step_runs", lambda store: runs)
    out = CliRunner().invoke(app, ["plan", "--validate", "--db", str(tmp_path / "r.db")])
    assert out.exit_code == 0, out.output
    assert "record 7: a fp16 block cell" in out.stdout
    assert "not predicted" in out.stdout
    data = _plan_json("plan", "--validate", "--db", str(tmp_path / "r.db"))
    assert [r["record_id"] for r in data["measured_steps"]] == [8]  # the fp32 cell is
    assert any("record 7" in line for line in data["measured_steps_left_out"])
    # the predicted cell is a source of its own, judged apart, against an unseen stack on a
    # device class never validated (as plan --profile gives it)
    [cell] = data["intervals"]["own"]["runs"]
    assert cell["source"].startswith("profile: ") and cell["generation"] == "measured profile"
    assert cell["group"].startswith("unseen stack on a device class never validated")
    assert not any(r["source"].startswith("profile: ") for r in data["intervals"]["runs"])
    out = CliRunner().invoke(app, ["plan", "--validate", "--db", str(tmp_path / "r.db")])
    assert "own cells, profile: " in out.stdout


def test_a_device_class_never_validated_takes_the_wider_unseen_class_interval() -> None:
    def top(device: str) -> dict:
        return _plan_json("plan", "--model", "llama3-8b", "--device", device, "--nodes", "2",
                          "--global-batch", "64", "--seq", "4096", "--top", "1")["best"][0]
    seen, unseen = top("a100-80gb"), top("b200")
    assert "device" in {f["kind"] for f in unseen["flags"]}
    evidence = [f for f in unseen["flags"] if f["kind"] == "evidence"]
    assert evidence and evidence[0]["value"] == "0 sources"
    assert unseen["interval"]["group"].startswith("unseen stack on a device class never")
    width = {name: row["interval"]["high_factor"] / row["interval"]["low_factor"]
             for name, row in (("seen", seen), ("unseen", unseen))}
    # the residuals of each class predicted without its own runs spread wider
    assert width["unseen"] > width["seen"]
