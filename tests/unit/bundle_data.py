"""Bundles for the bundle, site and hostile-input tests: made from the committed H200 records
(real records: a 3-trial GPT-2 XL training cell, the block and training cells of a study), moved
to other hosts and device classes, slower or faster, written by the library's own writer; and
bundles forged from them (a field changed, the checksum recomputed or not)."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path

from accelbench.report.bundle import bundle_body, checksum, write_bundle

ROOT = Path(__file__).parents[2]
RUN = ROOT / "docs" / "gpu-runs" / "2026-11-27-h200-2"
H200_DB = RUN / "results.db"  # 24 records: block, train, check, profile
TRIALS_DB = RUN / "train-mb32-3trials.db"  # one train cell of 3 trials
FIRST_H200_DB = ROOT / "docs" / "gpu-runs" / "2026-11-27-h200" / "results.db"
V1_DB = ROOT / "tests" / "data" / "results_v1.db"


def stored_texts(db: Path) -> list[str]:
    """Every row's record JSON, as stored, oldest first."""
    with sqlite3.connect(db) as conn:
        return [t for t, in conn.execute("SELECT record_json FROM results ORDER BY id")]


def template() -> dict:
    """The 3-trial training cell, decoded."""
    return json.loads(stored_texts(TRIALS_DB)[0])


def _scale_times(metrics: dict, factor: float) -> None:
    for key, value in metrics.items():
        if "time_s" in key and isinstance(value, float):
            metrics[key] = value * factor
        elif "time_s" in key and isinstance(value, list):
            metrics[key] = [v * factor if isinstance(v, float) else v for v in value]


def variant(host: str, device_name: str = "NVIDIA H200", factor: float = 1.0,
            seq_len: int | None = None, disturbed: bool | None = None, **environment) -> str:
    """The training cell on another machine (host, device), its times times `factor`, at
    another sequence length if given (another workload), with a new uid."""
    r = template()
    r["environment"] |= {"host": host, "device_name": device_name, **environment}
    _scale_times(r["metrics"], factor)
    values = r["raw"]["trial_values"]
    values["step_time_s_median"] = [v * factor for v in values["step_time_s_median"]]
    if seq_len is not None:
        r["spec"]["seq_len"] = seq_len
    if disturbed is not None:
        r["metrics"]["disturbed"] = disturbed
    r["spec"].pop("workload_id", None)
    r["spec"].pop("fingerprint", None)
    r["uid"], r["run_id"] = uuid.uuid4().hex, uuid.uuid4().hex[:12]
    return json.dumps(r, sort_keys=True)


def with_fields(text: str, **changes: object) -> str:
    """A record's JSON text with top-level fields replaced (a new uid unless given)."""
    r = json.loads(text)
    r.update({"uid": uuid.uuid4().hex, **changes})
    return json.dumps(r, sort_keys=True)


def bundle_file(folder: Path, name: str, texts: list[str], contents: str = "measured",
                published: tuple = ()) -> Path:
    """A bundle written by the library's writer."""
    path = folder / name
    write_bundle(path, bundle_body(texts, contents, list(published)))
    return path


def forged(source: Path, target: Path, change: Callable[[dict], None],
           recompute: bool = True) -> Path:
    """A copy of an uncompressed bundle with `change` applied, its checksum recomputed (a
    consistent forgery) or not (an altered file)."""
    body = json.loads(source.read_text())
    change(body)
    if recompute:
        body["sha256"] = checksum(body)
    target.write_text(json.dumps(body))
    return target
