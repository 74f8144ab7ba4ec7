"""The options of `accelbench study list | show | run` and of the main job `accelbench run`,
declared once (config/option_fields.py `option`: the commands are generated from them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from accelbench.config.errors import ConfigError
from accelbench.config.option_fields import (
    DB_HELP,
    DEVICE_HELP,
    REMEASURE_PEAK_HELP,
    REQUIRED,
    RERUN_HELP,
    WIDE_TABLES_HELP,
    argument,
    option,
)
from accelbench.config.study_file import AUTO

MAIN_STUDY = "emani2023"  # what `accelbench run` runs
PROFILE_HELP = ("A profile the study declares (emani2023: full, quick), or auto: quick on a "
                "CPU, full on an accelerator.")


@dataclass(frozen=True)
class StudyListOptions:
    """`study list`."""

    wide: bool = option(False, WIDE_TABLES_HELP, "--wide")


@dataclass(frozen=True)
class StudyShowOptions:
    """`study show NAME`."""

    study: str = argument(REQUIRED, "A study's name or a .toml file.")


@dataclass(frozen=True)
class StudyRunOptions:
    """`study run NAME`: which study at which profile, on which device, into which store."""

    study: str = argument(REQUIRED, "A study's name (accelbench study list) or a .toml file.")
    profile: str = option(AUTO, PROFILE_HELP)
    dry_run: bool = option(False, "List every cell with its estimated memory, fit and time; "
                           "run nothing, open no database.", "--dry-run")
    rerun: bool = option(False, RERUN_HELP, "--rerun")
    remeasure_peak: bool = option(False, REMEASURE_PEAK_HELP, "--remeasure-peak")
    retry_disturbed: int = option(0, "Measure the cells flagged disturbed (other work used the "
                                  "machine in a timed window) again, up to N more passes; every "
                                  "record is kept and the report reads a cell's latest.")
    db: Path | None = option(None, DB_HELP)
    device: str = option("auto", DEVICE_HELP)
    wide: bool = option(False, WIDE_TABLES_HELP, "--wide")


@dataclass(frozen=True)
class MainJobOptions:
    """`accelbench run`: the built-in study, then its report."""

    out_dir: Path = option(Path("accelbench-report"), "Folder for the report (report.html, "
                           "report.md, figures/).", "--out")
    profile: str = option(AUTO, PROFILE_HELP)
    db: Path | None = option(None, DB_HELP)
    device: str = option("auto", DEVICE_HELP)
    rerun: bool = option(False, RERUN_HELP, "--rerun")
    wide: bool = option(False, WIDE_TABLES_HELP, "--wide")


MAX_RETRY_PASSES = 10  # each pass measures every disturbed cell again: a noisy machine stays so


def check_retry(retry_disturbed: object) -> int:
    """--retry-disturbed: a whole number from 0 to MAX_RETRY_PASSES (ConfigError naming it,
    before anything runs)."""
    if not isinstance(retry_disturbed, int) or isinstance(retry_disturbed, bool) \
            or not 0 <= retry_disturbed <= MAX_RETRY_PASSES:
        raise ConfigError("retry-disturbed", f"must be a whole number from 0 to "
                          f"{MAX_RETRY_PASSES}, got {retry_disturbed!r}",
                          f"0 to {MAX_RETRY_PASSES}")
    return retry_disturbed
