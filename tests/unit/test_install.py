"""`pip install .` with no extras gives a working `accelbench` in a fresh virtual environment.

How torch gets there: downloading it again is GBs for a CUDA build, and even the local CPU wheel
takes long to unpack on 2 cores, so the fresh venv borrows the torch already installed for this
test run. torch's own distributions (torch and everything it requires, recursively, as installed
here) are linked into one folder outside the venv, and a .pth file in the venv names that folder.
Nothing else of this environment is visible: the venv is made from the base interpreter, so it
does not see this venv's site-packages (click, pytest, transformers...). pip then installs a copy
of the project with no extras and without --no-deps: torch counts as installed and satisfied, the
other declared dependencies come from the package index as a user's would, and a module-level
import that pyproject.toml does not declare fails here as it would for the user. (pip never
uninstalls from the linked folder: it is outside the new venv, and pip leaves such
distributions alone.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.metadata import Distribution, PackageNotFoundError, distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
PROJECT_FILES = ("pyproject.toml", "README.md", "accelbench")

# one test process (xdist group) makes the fresh environment every test uses
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_install")]


def _closure(name: str) -> list[Distribution]:
    """The installed distribution `name` and, recursively, what it requires here (extras and
    requirements whose markers are false on this platform left out)."""
    found: dict[str, Distribution] = {}
    todo = [name]
    while todo:
        key = canonicalize_name(todo.pop())
        if key in found:
            continue
        try:
            found[key] = dist = distribution(key)
        except PackageNotFoundError:
            continue  # an optional requirement that is not installed
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(found.values())


def _link_distributions(dists: list[Distribution], folder: Path) -> None:
    """Symlink each distribution's top-level entries (packages, modules, .dist-info) into
    `folder`; a namespace folder shared by several distributions is linked once."""
    folder.mkdir()
    for dist in dists:
        if dist.files is None:
            pytest.skip(f"cannot list the files of {dist.metadata['Name']} (no RECORD)")
        site = Path(dist.locate_file(""))
        tops = {f.parts[0] for f in dist.files if f.parts[0] not in ("..", "__pycache__")}
        for top in sorted(tops):
            source, link = site / top, folder / top
            if source.exists() and not link.exists():
                link.symlink_to(source, target_is_directory=source.is_dir())


def _run(cmd: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def fresh_install(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A fresh venv holding the borrowed torch and `pip install <copy of the project>`."""
    root = tmp_path_factory.mktemp("install")
    venv, links, project = root / "venv", root / "torch-links", root / "project"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONNOUSERSITE")}
    env["PYTHONNOUSERSITE"] = "1"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                env).stdout.strip()
    _link_distributions(_closure("torch"), links)
    Path(site, "borrowed_torch.pth").write_text(f"{links}\n")
    # A copy, so that the build leaves no build/ or egg-info in the checkout.
    project.mkdir()
    for name in PROJECT_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, project / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, project / name)
    installed = _run([sys.executable, "-m", "pip", "--python", str(python), "install",
                      "--disable-pip-version-check", "--no-input", str(project)], env)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return venv, env


def test_fresh_install_has_no_undeclared_packages(fresh_install):
    """Only torch came from this environment; click (not a dependency) is not there."""
    venv, env = fresh_install
    probe = _run([str(venv / "bin" / "python"), "-c",
                  "import importlib.util as u, torch; "
                  "print(torch.__version__, u.find_spec('click') is None)"], env)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split()[1] == "True", "click is visible: the venv is not isolated"


def test_fresh_install_help_and_hw_run(fresh_install):
    venv, env = fresh_install
    exe = str(venv / "bin" / "accelbench")
    helped = _run([exe, "--help"], env, timeout=120)
    assert helped.returncode == 0, helped.stderr
    assert "Usage" in helped.stdout and "block" in helped.stdout and "results" in helped.stdout
    hw = _run([exe, "hw", "--device", "cpu"], env, timeout=120)
    assert hw.returncode == 0, hw.stderr
    assert "Dense peak TFLOPS" in hw.stdout and "detected:" in hw.stdout


def test_fresh_install_parser_errors_without_click(fresh_install):
    """The parser's errors are caught from the click typer runs (its vendored copy here)."""
    venv, env = fresh_install
    exe = str(venv / "bin" / "accelbench")
    bad = _run([exe, "block", "--bogus"], env, timeout=120)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("error: No such option") and bad.stderr.count("\n") == 1
    bare = _run([exe], env, timeout=120)
    assert bare.returncode == 2 and "Usage" in bare.stdout and bare.stderr == ""
