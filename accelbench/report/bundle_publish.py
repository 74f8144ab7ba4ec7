"""`accelbench publish`: a database's records (or some runs', with their machines' peaks and
noise checks) written as one bundle (report/bundle.py), or the paper's published figures as
a labelled reference bundle. Options declared once (config/option_fields.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from accelbench.config.errors import ConfigError
from accelbench.config.option_fields import DB_HELP, REQUIRED, option
from accelbench.config.record_kinds import record_kinds
from accelbench.report.bundle import bundle_body, write_bundle
from accelbench.report.bundle_summary import paper_figures
from accelbench.report.export import check_output
from accelbench.store.fingerprint import machine_fingerprint
from accelbench.store.record import Record
from accelbench.store.store import ResultStore


@dataclass(frozen=True)
class PublishOptions:
    """What `accelbench publish` is asked: which records, into which file."""

    out: Path = option(REQUIRED, "The bundle file to write (gzip-compressed when it ends in "
                       ".gz).", "--out")
    db: Path | None = option(None, DB_HELP)
    run: list[str] | None = option(None, "Only this sweep (a run id from 'results list'); "
                                   "repeat for several. Its machines' peaks and noise checks "
                                   "come with it. Default: every record.", "--run")
    reference: bool = option(False, "Write the paper's published figures (Emani et al. 2023) "
                             "as a reference bundle instead: no database is read.",
                             "--reference")


@dataclass(frozen=True)
class Published:
    """What publish wrote."""

    path: Path
    records: int
    machines: int
    size_bytes: int
    sha256: str


def _machine_context(kind: str) -> bool:
    """A record a bundle of any run of its machine carries (its kind says so: peaks, noise
    checks and their conditions)."""
    declared = record_kinds().get(kind)
    return declared is not None and declared.machine_context


def _selected(rows: list[tuple[int, str]], runs: list[str]) -> list[str]:
    """The stored texts of the runs asked, with their machines' peaks and noise checks."""
    records = [(text, Record.from_json(text)) for _, text in rows]
    present = {r.run_id for _, r in records}
    missing = [run for run in runs if run not in present]
    if missing:
        raise ConfigError("run", f"no run {missing[0]!r} in the database",
                          "a run id from 'accelbench results list'")
    chosen = [r for _, r in records if r.run_id in runs]
    machines = {machine_fingerprint(r.environment) for r in chosen}
    return [text for text, r in records if r.run_id in runs or (
        _machine_context(r.kind) and machine_fingerprint(r.environment) in machines)]


def publish(given: PublishOptions) -> Published:
    """Write the bundle; ConfigError (one line) before anything is written on bad input."""
    check_output(given.out, "out")
    if given.reference:
        if given.run or given.db:
            raise ConfigError("reference", "takes no --db or --run: it carries the paper's "
                              "figures, never measurements", "--reference --out FILE")
        body = bundle_body([], "reference", paper_figures())
    else:
        store = ResultStore(given.db, write=False)
        if not store.path.is_file():
            raise ConfigError("db", f"no results database at {store.path}",
                              "an existing .db file")
        rows = store.stored_texts()
        texts = _selected(rows, list(given.run)) if given.run else [t for _, t in rows]
        if not texts:
            raise ConfigError("db", f"'{store.path}' holds no records to publish",
                              "a database with records")
        body = bundle_body(texts)
    size = write_bundle(given.out, body)
    return Published(given.out, len(body["records"]), len(body["machines"]), size,
                     body["sha256"])
