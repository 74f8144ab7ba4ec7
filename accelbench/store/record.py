"""One immutable result: the full spec, the environment, metrics, raw times and a status."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from accelbench.config.record_kinds import (
    SCHEMA_VERSION,
    read_metrics,
    read_spec,
    undeclared_metrics,
)
from accelbench.store.jsontext import dumps, loads
from accelbench.store.migrate import upgrade

STATUSES = ("ok", "oom", "unsupported", "error", "diverged", "timeout", "interrupted")


@dataclass(frozen=True)
class Record:
    """A run or one cell of a sweep, as stored; never updated after it is written."""

    kind: str  # "block", "train", ...
    status: str
    spec: dict[str, Any]
    environment: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    run_id: str = ""
    created_utc: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    schema_version: int = SCHEMA_VERSION
    # unique across stores: an import or a retried write never stores a record twice; "" on
    # records written before uids existed
    uid: str = field(default_factory=lambda: uuid.uuid4().hex)
    id: int | None = None  # assigned by the store

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    @cached_property
    def typed(self) -> Any:
        """The metrics as the kind's frozen class (config.record_kinds.read_metrics: TrainMetrics,
        BlockReading, ...), built from the dict on the first read and kept (a record is never
        changed); ValueError for a kind that declares no metrics. The stored dict (`metrics`)
        is unchanged."""
        return read_metrics(self.kind, self.metrics)

    @cached_property
    def setup(self) -> Any:
        """The spec as the kind's frozen spec class (config.record_kinds.read_spec:
        TrainRecordSpec, BlockRecordSpec, ...), read as `typed` is; the stored dict (`spec`) is
        unchanged, and what hashes or stores a spec uses that dict."""
        return read_spec(self.kind, self.spec)

    @property
    def extra_metrics(self) -> dict[str, Any]:
        """The metric keys this record's kind does not declare (another tool's), with values."""
        return undeclared_metrics(self.kind, self.metrics)

    def to_json(self) -> str:
        """Strict JSON of everything but the store's id (non-finite floats tagged: jsontext)."""
        data = asdict(self)
        data.pop("id")
        return dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, record_id: int | None = None) -> Record:
        """Rebuild a record read back from the store, at the current schema version (an older
        record is upgraded in memory: store/migrate.py; the stored text is not changed)."""
        return cls.from_dict(loads(text), record_id)

    @classmethod
    def from_dict(cls, data: dict[str, Any], record_id: int | None = None) -> Record:
        """A record from its decoded JSON dict (a store row, an export, an unsaved line); an
        `id` in `data` is dropped for `record_id`, a missing uid reads as ""."""
        data = {key: value for key, value in upgrade(data).items() if key != "id"}
        data.setdefault("uid", "")
        return cls(**data, id=record_id)

    def flat(self) -> dict[str, Any]:
        """One flat row (spec.*, metrics.*, env.*) for CSV: a list or dict value (a per-rank
        list, the model's config) is one cell of compact JSON text; raw times stay out."""
        row: dict[str, Any] = {"id": self.id, "run_id": self.run_id, "kind": self.kind,
                               "status": self.status, "reason": self.reason,
                               "created_utc": self.created_utc, "uid": self.uid}
        for prefix, part in (("spec", self.spec), ("metrics", self.metrics),
                             ("env", self.environment)):
            for key, value in part.items():
                if isinstance(value, dict | list):
                    value = dumps(value, sort_keys=True, separators=(",", ":"))
                row[f"{prefix}.{key}"] = value
        return row


def metrics_of(record: Record) -> Any:
    """A record's metrics as its kind's frozen class (the same as `record.typed`)."""
    return record.typed


def new_run_id() -> str:
    """An id shared by the cells of one sweep."""
    return uuid.uuid4().hex[:12]


def content_uid(record: Record) -> str:
    """The uid of a record written before uids existed, from its content (its JSON with an empty
    uid): the same record gets the same uid wherever it is read, so importing or merging it twice
    stores it once."""
    return hashlib.sha256(replace(record, uid="").to_json().encode()).hexdigest()[:32]
