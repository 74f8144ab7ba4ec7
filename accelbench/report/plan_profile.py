"""The machine profile `accelbench plan --profile` names: a record of a results store (its id,
or `latest`), or a file holding a profile record as `accelbench calibrate --json` prints it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from accelbench.analytics.machine_profile import MachineProfile, profile_from_metrics
from accelbench.config.errors import ConfigError
from accelbench.config.paths import default_db_path
from accelbench.config.record_kinds import read_metrics
from accelbench.report.stored_profile import PROFILE_KIND, load_profile
from accelbench.store.dbfile import check_path
from accelbench.store.store import ResultStore

PROFILE_CHOICES = "a profile record id, 'latest', or a JSON file from 'accelbench calibrate --json'"


def _record_from_file(path: Path) -> dict[str, Any]:
    """The one profile record of a JSON file (a record, or a list holding one)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as why:
        raise ConfigError("profile", f"cannot read {str(path)!r}: {why}", PROFILE_CHOICES) from None
    records = data if isinstance(data, list) else [data]
    found = [r for r in records if isinstance(r, dict) and r.get("kind") == PROFILE_KIND
             and isinstance(r.get("metrics"), dict)]
    if len(found) != 1:
        raise ConfigError("profile", f"{str(path)!r} holds {len(found)} profile records, not one",
                          PROFILE_CHOICES)
    return found[0]


def resolve_profile(text: str, db: Path | None) -> MachineProfile:
    """The profile `text` names: 'latest' (the store's newest), a record id, or a file."""
    if text == "latest" or text.isdigit():
        path = check_path(default_db_path() if db is None else db, write=False)
        if not path.is_file():
            raise ConfigError("profile", f"no results store at '{path}'",
                              "--db FILE where 'accelbench calibrate' has run")
        return load_profile(ResultStore(path, write=False),
                            None if text == "latest" else int(text))
    path = Path(text).expanduser()
    if not path.is_file():
        raise ConfigError("profile", f"{text!r} is not a record id, 'latest' or a file",
                          PROFILE_CHOICES)
    record = _record_from_file(path)
    return profile_from_metrics(read_metrics(PROFILE_KIND, record["metrics"]),
                                record.get("environment") or {},
                                f"measured ({path.name})")
