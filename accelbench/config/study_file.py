"""Study files: a TOML file of named experiments, each a workload with fixed options and swept
axes, and the size profiles it can run at (docs/study.md). This module reads and checks the
file's structure (no torch); bench/study_planner.py checks each experiment's options against its
workload's own option set and turns it into sweeps.

A study file:

    title = "..."                         # optional, as is description
    [profiles.full]                        # at least one profile; "auto" is not declared here
    description = "..."
    [experiments.NAME]
    workload = "train"                     # a registered workload (accelbench/workloads/)
    source = "table III"                   # what it reproduces, optional
    description = "..."                    # optional
    options = { model = "gpt2-xl", dtype = "bf16" }     # one value each
    sweep = { seq = [1024, 2048] }                      # a list each
    [experiments.NAME.quick]               # optional, per profile: options/sweep that replace
    options = { model = "gpt2-tiny" }      # the experiment's own for that profile

Every error names its key as a path (study.experiments.NAME.sweep.seq) with what is allowed.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.config.errors import ConfigError

BUILTIN_DIR = Path(__file__).resolve().parents[1] / "assets" / "studies"
STUDY_DIR_ENV = "ACCELBENCH_STUDIES"
AUTO = "auto"  # not a declared profile: picked at run time (accelerator or CPU)
AUTO_CHOICE = {"cpu": "quick", "accelerator": "full"}
ROOT = "study"  # the first part of every key path in an error

STUDY_KEYS = ("title", "description", "profiles", "experiments")
PROFILE_KEYS = ("description",)
EXPERIMENT_KEYS = ("workload", "source", "description", "options", "sweep")
SECTION_KEYS = ("options", "sweep")  # what a profile's section of an experiment may set
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
Scalar = str | int | float | bool


def key_path(*parts: str) -> str:
    """'study.experiments.seqlen.sweep.seq': where a value sits in the file."""
    return ".".join((ROOT, *parts))


@dataclass(frozen=True)
class Experiment:
    """One experiment at one profile: its options and axes as the file gives them, and where
    each key came from (its key path, for errors about its value)."""

    name: str
    workload: str
    source: str
    description: str
    options: dict[str, Scalar]
    sweep: dict[str, tuple[Scalar, ...]]
    where: dict[str, str] = field(default_factory=dict)

    def path(self, key: str) -> str:
        """The key path of an option or axis: where it was set, or where it would go."""
        return self.where.get(key) or key_path("experiments", self.name, "options", key)


@dataclass(frozen=True)
class Study:
    """A checked study file."""

    name: str
    path: Path
    text: str
    title: str
    description: str
    profiles: dict[str, str]  # name -> description
    raw: dict[str, dict]  # experiment name -> its table, checked

    def experiment_names(self) -> list[str]:
        """The experiments in file order."""
        return list(self.raw)

    def experiments(self, profile: str) -> list[Experiment]:
        """Every experiment with the profile's sections applied (a declared profile)."""
        require_profile(self, profile)
        return [_at_profile(name, table, profile) for name, table in self.raw.items()]


def require_profile(study: Study, profile: str) -> str:
    """A profile this study declares (ConfigError naming the declared ones)."""
    if profile not in study.profiles:
        raise ConfigError("profile", f"study {study.name!r} has no profile {profile!r}",
                          ", ".join([*study.profiles, AUTO]))
    return profile


def pick_profile(study: Study, profile: str, on_cpu: bool) -> str:
    """The declared profile to run: `auto` is quick on a CPU and full on an accelerator."""
    if profile != AUTO:
        return require_profile(study, profile)
    chosen = AUTO_CHOICE["cpu" if on_cpu else "accelerator"]
    if chosen not in study.profiles:
        where = "a CPU" if on_cpu else "an accelerator"
        raise ConfigError("profile", f"auto picks {chosen!r} on {where}, which study "
                          f"{study.name!r} does not declare", ", ".join(study.profiles))
    return chosen


def _at_profile(name: str, table: dict, profile: str) -> Experiment:
    """The experiment's options and axes with the profile's section laid over them: a key the
    section sets replaces the experiment's own, fixed or swept."""
    options: dict[str, Scalar] = dict(table.get("options", {}))
    sweep: dict[str, tuple] = {k: tuple(v) for k, v in table.get("sweep", {}).items()}
    where = {k: key_path("experiments", name, "options", k) for k in options}
    where |= {k: key_path("experiments", name, "sweep", k) for k in sweep}
    section = table.get(profile, {})
    for part in SECTION_KEYS:
        for key, value in section.get(part, {}).items():
            options.pop(key, None)
            sweep.pop(key, None)
            if part == "options":
                options[key] = value
            else:
                sweep[key] = tuple(value)
            where[key] = key_path("experiments", name, profile, part, key)
    return Experiment(name, table["workload"], table.get("source", ""),
                      table.get("description", ""), options, sweep, where)


# --- reading and checking a file -------------------------------------------------------------

def _type_name(value: Any) -> str:
    """TOML's name for a value's type, for errors."""
    for kind, name in ((bool, "a boolean"), (int, "an integer"), (float, "a float"),
                       (str, "a string"), (list, "a list"), (dict, "a table")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _require_table(value: Any, path: str, what: str = "a table") -> dict:
    if not isinstance(value, dict):
        raise ConfigError(path, f"must be {what}, got {_type_name(value)}", what)
    return value


def _require_str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(path, f"must be a string, got {_type_name(value)}", "a string")
    return value


def _refuse_unknown(table: dict, allowed: tuple[str, ...] | list[str], *parts: str) -> None:
    for key in table:
        if key not in allowed:
            raise ConfigError(key_path(*parts, key), "unknown key", ", ".join(allowed))


def _check_name(name: str, *parts: str) -> None:
    if not _NAME.fullmatch(name):
        raise ConfigError(key_path(*parts, name), "names letters, digits, '-' and '_' only",
                          "a name such as seqlen or gas-1")


def _check_scalar(value: Any, path: str) -> None:
    if isinstance(value, list):
        raise ConfigError(path, "a fixed option takes one value, got a list",
                          "one value; lists go under sweep")
    if not isinstance(value, Scalar):
        raise ConfigError(path, f"must be one value, got {_type_name(value)}",
                          "a string, number or boolean")


def _check_axis(value: Any, path: str) -> None:
    if not isinstance(value, list):
        raise ConfigError(path, f"a swept axis must be a list, got {_type_name(value)}",
                          "a list such as [1024, 2048]; one value goes under options")
    if not value:
        raise ConfigError(path, "a swept axis needs at least one value", "a non-empty list")
    for item in value:
        if not isinstance(item, Scalar):
            raise ConfigError(path, f"values must be strings, numbers or booleans, got "
                              f"{_type_name(item)}", "a list of strings, numbers or booleans")


def _check_section(table: Any, *parts: str) -> None:
    """An experiment's options and sweep tables, or a profile's section of them."""
    _require_table(table, key_path(*parts))
    _refuse_unknown(table, SECTION_KEYS, *parts)
    options = _require_table(table.get("options", {}), key_path(*parts, "options"))
    sweep = _require_table(table.get("sweep", {}), key_path(*parts, "sweep"))
    for key, value in options.items():
        _check_scalar(value, key_path(*parts, "options", key))
    for key, value in sweep.items():
        _check_axis(value, key_path(*parts, "sweep", key))
        if key in options:
            raise ConfigError(key_path(*parts, "sweep", key), "is both fixed (options) and "
                              "swept (sweep)", "one of the two")


def _check_experiment(name: str, table: Any, profiles: dict[str, str]) -> dict:
    parts = ("experiments", name)
    _check_name(name, "experiments")
    _require_table(table, key_path(*parts))
    _refuse_unknown(table, [*EXPERIMENT_KEYS, *profiles], *parts)
    if "workload" not in table:
        raise ConfigError(key_path(*parts, "workload"), "missing",
                          "block, train, genslm, scale")
    for key in ("workload", "source", "description"):
        if key in table:
            _require_str(table[key], key_path(*parts, key))
    _check_section({k: v for k, v in table.items() if k in SECTION_KEYS}, *parts)
    for profile in profiles:
        if profile in table:
            _check_section(table[profile], *parts, profile)
    return table


def _check_profiles(value: Any) -> dict[str, str]:
    profiles = _require_table(value, key_path("profiles"))
    if not profiles:
        raise ConfigError(key_path("profiles"), "declares no profile", "e.g. [profiles.full]")
    out = {}
    for name, table in profiles.items():
        _check_name(name, "profiles")
        if name == AUTO:
            raise ConfigError(key_path("profiles", AUTO), "auto is chosen when the study runs "
                              "(quick on a CPU, full on an accelerator), not declared",
                              "other profile names")
        if name in EXPERIMENT_KEYS:
            raise ConfigError(key_path("profiles", name), "is an experiment key",
                              "a name other than " + ", ".join(EXPERIMENT_KEYS))
        _require_table(table, key_path("profiles", name))
        _refuse_unknown(table, PROFILE_KEYS, "profiles", name)
        out[name] = _require_str(table.get("description", ""),
                                 key_path("profiles", name, "description"))
    return out


def parse_study(text: str, name: str, path: Path) -> Study:
    """A study from its TOML text; ConfigError on the first problem, naming its key."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(ROOT, f"{path} is not valid TOML: {err}") from None
    _refuse_unknown(data, STUDY_KEYS)
    for key in ("title", "description"):
        if key in data:
            _require_str(data[key], key_path(key))
    if "profiles" not in data:
        raise ConfigError(key_path("profiles"), "missing", "[profiles.NAME] tables")
    profiles = _check_profiles(data["profiles"])
    experiments = _require_table(data.get("experiments"), key_path("experiments"),
                                 "a table of [experiments.NAME] tables")
    if not experiments:
        raise ConfigError(key_path("experiments"), "has no experiment", "[experiments.NAME]")
    raw = {n: _check_experiment(n, t, profiles) for n, t in experiments.items()}
    return Study(name, path, text, data.get("title", name), data.get("description", ""),
                 profiles, raw)


# --- finding studies ---------------------------------------------------------------------------

def user_study_dir() -> Path:
    """Where a user's studies live: $ACCELBENCH_STUDIES, else
    $XDG_CONFIG_HOME/accelbench/studies (~/.config/accelbench/studies)."""
    if os.environ.get(STUDY_DIR_ENV):
        return Path(os.environ[STUDY_DIR_ENV]).expanduser()
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "accelbench" / "studies"


def study_files() -> dict[str, list[tuple[str, Path]]]:
    """Every study file by origin: 'built-in' (shipped with accelbench) and 'user'."""
    user = user_study_dir()
    return {"built-in": [(p.stem, p) for p in sorted(BUILTIN_DIR.glob("*.toml"))],
            "user": [(p.stem, p) for p in sorted(user.glob("*.toml"))] if user.is_dir() else []}


def find_study(name_or_file: str) -> Path:
    """A study's file: an existing path, else a built-in study of that name, else one in the
    user folder (ConfigError listing what there is)."""
    path = Path(name_or_file).expanduser()
    if path.is_file():
        return path
    if path.suffix == ".toml" or os.sep in name_or_file:
        raise ConfigError("study", f"no study file at {name_or_file!r}", "an existing .toml file")
    files = study_files()
    for origin in ("built-in", "user"):
        for stem, found in files[origin]:
            if stem == name_or_file:
                return found
    known = [stem for origin in files.values() for stem, _ in origin]
    raise ConfigError("study", f"no study named {name_or_file!r} (built-in, or in "
                      f"{user_study_dir()})", ", ".join(known) or "a .toml file")


def load_study(name_or_file: str) -> Study:
    """Find, read and check a study."""
    path = find_study(name_or_file)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError("study", f"cannot read {path}: {err}") from None
    return parse_study(text, path.stem, path)
