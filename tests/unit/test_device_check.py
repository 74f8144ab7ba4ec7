"""scripts/device-check: bad input is one line and exit 2 before any file is written, and the
whole GPU acceptance run is rehearsed on this CPU at tiny sizes through the same code path
(install into a --target folder with a wheel folder, preflight, check, the gpu-accept study's
dry run, calibrate --quick, the study, the report), so the first GPU call cannot fail on a
flag, an import or a path."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import subprocess
import sys
import zipfile
from importlib.machinery import SourceFileLoader
from pathlib import Path

import pytest

from accelbench.store.store import ResultStore

SCRIPT = Path(__file__).parents[2] / "scripts" / "device-check"
_LOADER = SourceFileLoader("device_check", str(SCRIPT))
script = importlib.util.module_from_spec(importlib.util.spec_from_loader("device_check", _LOADER))
sys.modules["device_check"] = script  # dataclasses look their module up there
_LOADER.exec_module(script)


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout)


def _wheel(folder: Path, name: str = "acb_demo", version: str = "0.1") -> Path:
    """A minimal valid pure-Python wheel, as pip download would bring one."""
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": "VALUE = 1\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}

    def digest(text: str) -> str:
        raw = hashlib.sha256(text.encode()).digest()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    record = "".join(f"{p},sha256={digest(c)},{len(c.encode())}\n" for p, c in files.items())
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for p, c in files.items():
            archive.writestr(p, c)
        archive.writestr(f"{info}/RECORD", record + f"{info}/RECORD,,\n")
    return path


@pytest.mark.parametrize("args, line", [
    (("--device", "tpu"), "error: device: unknown device 'tpu' (allowed: auto, cpu, cuda"),
    (("--wheels", "missing"), "error: wheels: 'missing' is not a folder"),
    (("--time-budget", "0"), "error: time-budget: must be a positive number of seconds"),
    (("--time-budget", "soon"), "error: time-budget: must be a positive number of seconds"),
    (("--profile", "huge"), "error: profile: unknown value 'huge' (allowed: auto, full, quick)"),
    (("--compile-backend", "tvm"), "error: compile-backend: unknown value 'tvm'"),
    (("--fast",), "error: option: unknown option '--fast'"),
    (("--device",), "error: device: needs a value"),
])
def test_bad_input_is_one_line_exit_2_and_no_file(tmp_path, args, line):
    out = tmp_path / "out"
    done = _run(str(out), *(a if a != "missing" else str(tmp_path / a) for a in args))
    if args[-1] == "missing":
        line = line.replace("'missing'", repr(str(tmp_path / "missing")))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(line) and done.stderr.count("\n") == 1, done.stderr
    assert not out.exists()


def test_an_out_dir_that_is_a_file_is_refused(tmp_path):
    target = tmp_path / "taken"
    target.write_text("x")
    done = _run(str(target))
    assert done.returncode == 2
    assert done.stderr == f"error: OUT_DIR: {str(target)!r} is a file (allowed: a folder, new " \
                          "or existing)\n"


@pytest.mark.parametrize("content, why", [(b"not a zip", "is not a readable wheel"),
                                          (None, "has no .dist-info/METADATA")])
def test_a_broken_wheel_is_refused_before_anything_is_installed(tmp_path, content, why):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    broken = wheels / "broken-1.0-py3-none-any.whl"
    if content is None:
        with zipfile.ZipFile(broken, "w") as archive:
            archive.writestr("broken/__init__.py", "")
    else:
        broken.write_bytes(content)
    done = _run(str(tmp_path / "out"), "--wheels", str(wheels))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"error: wheels: broken-1.0-py3-none-any.whl {why}")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # starts the script, which starts Python
def test_a_device_not_present_is_one_line_on_stderr(tmp_path):
    done = _run(str(tmp_path / "out"), "--device", "cuda:1", "--no-install")
    assert done.returncode == 2
    assert done.stderr == ("error: device: cuda requested but not available here "
                           "(allowed: auto, cpu)\n")


def test_install_is_offline_and_skips_wheels_already_installed(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels)
    _wheel(wheels, "pytest", "99.0")  # installed here already: not installed again
    opts = script.parse_args([str(tmp_path / "out"), "--wheels", str(wheels)])
    (name, wheel_call), (_, own_call) = script.install_commands(opts)
    assert name == "install wheels"
    assert "--no-index" in wheel_call and "--find-links" in wheel_call
    assert [Path(a).name for a in wheel_call if a.endswith(".whl")] == [
        "acb_demo-0.1-py3-none-any.whl"]
    assert own_call[-2:] == ["-e", str(script.REPO)] and "--no-index" in own_call


@pytest.mark.slow
def test_the_cpu_rehearsal_runs_every_stage_into_at_most_eight_files(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels)
    out, site = tmp_path / "out", tmp_path / "site"
    done = _run(str(out), "--device", "cpu", "--profile", "quick", "--wheels", str(wheels),
                "--target", str(site), "--compile-backend", "aot_eager", "--time-budget", "900",
                timeout=1000)
    log = (out / "device-check.log").read_text()
    assert done.returncode == 0, log[-3000:]
    assert sorted(p.name for p in out.iterdir()) == sorted(script.OUT_FILES)
    assert len(script.OUT_FILES) <= 8
    assert (site / "acb_demo" / "__init__.py").is_file()  # the wheel, offline
    assert (site / "accelbench" / "assets" / "studies" / "gpu-accept.toml").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] and [s["name"] for s in summary["stages"]] == [
        "install wheels", "install accelbench", "check", "dry run", "calibrate", "study",
        "report"]
    (check,) = json.loads((out / "check.json").read_text())
    assert check["kind"] == "check" and check["metrics"]["features_failed"] == 0
    store = ResultStore(out / "results.db", write=False)
    records = store.query()
    store.close()
    assert {"check", "profile", "block", "train"} <= {r.kind for r in records}
    models = {str(r.spec.get("model_name")) for r in records if r.kind == "train"}
    assert {"gpt2-tiny", "genslm-25m"} <= models
    assert all(r.status == "ok" for r in records), [(r.kind, r.reason) for r in records]
    assert "study gpu-accept, profile quick on cpu: 13 cells" in (out / "dry-run.txt").read_text()
    assert "Feature check, M1" in (out / "report.md").read_text()


def test_every_full_profile_cell_but_the_h200_one_is_estimated_to_fit_an_80_gib_h100():
    """The acceptance profile at the paper's sizes, planned here (memory is arithmetic): every
    cell's estimate is under an H100's 80 GB (81,559 MiB as nvidia-smi reports it), so none is
    refused as 'does not fit' there, but the one meant for an H200 (micro-batch 32), which is
    refused there and fits the H200's 141 GB; the compiled micro-batch 16 cells are the
    closest to an H100's memory."""
    from accelbench.bench.study_planner import plan_study
    from accelbench.config.study_file import load_study

    plan = plan_study(load_study("gpu-accept"), "full", "cpu")
    assert len(plan.cells) == 23
    h100_bytes, h200_bytes = 81559 * 2**20, 143771 * 2**20
    by_experiment = {e.experiment.name: e.cells for e in plan.experiments}
    h200_only = by_experiment.pop("train-largest")
    rest = [c for cells in by_experiment.values() for c in cells]
    assert len(h200_only) == 1 and h100_bytes < h200_only[0].mem_bytes < 0.95 * h200_bytes
    assert all(0 < cell.mem_bytes < 0.95 * h100_bytes for cell in rest), [
        (cell.label, cell.mem_bytes) for cell in rest]
    assert max(cell.mem_bytes for cell in rest) > 0.85 * h100_bytes  # mb 16: the largest
