"""Names that say where they belong (issue 40): no two modules of accelbench share a base name in
different packages, except by one of three rules, each a shape repeated on purpose:
- a workload folder's parts (accelbench/workloads/<name>/options.py, runner.py, study_plan.py,
  report.py, ...: every folder the same shape, as optimum-benchmark's scenarios are);
- a command's body, cli/<command>.py, named as the command it runs;
- a record kind's schema module, config/records/<kind>.py, named as the kind.
The pairs still left from before are listed in KNOWN; that list may only shrink."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import accelbench

ROOT = Path(accelbench.__file__).parent
ROLE_PACKAGES = ("workloads/", "cli/", "config/records/")  # the three shapes above

# Base names still shared by modules of different packages that no rule allows: each is a
# rename left to do (the concept named for where it lives, as bench/study_planner.py).
KNOWN: frozenset[str] = frozenset()


def _role(path: str) -> bool:
    """Whether a module's place makes its name a role (a rule above) rather than a concept."""
    return path.startswith(ROLE_PACKAGES)


def shared_names(root: Path) -> dict[str, list[str]]:
    """Base name -> the modules (relative paths) that share it, where at least one of them is
    not in a role place (a role's name may not also be a concept's name elsewhere)."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        if path.name not in ("__init__.py", "__main__.py"):
            by_name[path.name].append(path.relative_to(root).as_posix())
    shared = {}
    for name, paths in by_name.items():
        if len(paths) > 1 and not all(_role(p) for p in paths):
            shared[name] = paths
    return shared


def test_no_new_name_is_shared_across_packages():
    new = {name: paths for name, paths in shared_names(ROOT).items() if name not in KNOWN}
    assert new == {}, f"rename by where it belongs (docs/architecture.md): {new}"


def test_the_known_list_holds_only_names_still_shared():
    done = sorted(KNOWN - set(shared_names(ROOT)))
    assert done == [], f"no longer shared: take off KNOWN: {done}"


def test_the_finder_finds_a_shared_name_and_allows_the_roles(tmp_path: Path):
    for rel in ("bench/timing.py", "report/timing.py", "workloads/a/runner.py",
                "workloads/b/runner.py", "cli/plan.py", "analytics/plan.py",
                "config/records/block.py", "cli/block.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert shared_names(tmp_path) == {
        "timing.py": ["bench/timing.py", "report/timing.py"],
        "plan.py": ["analytics/plan.py", "cli/plan.py"],
    }
