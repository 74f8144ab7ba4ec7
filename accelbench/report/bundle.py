"""A result bundle: one file that carries a database's records (or some runs') with everything
needed to judge them away from the machine, and a checksum of its contents.

The file is JSON (gzip-compressed when its name ends in .gz): a header (format, bundle version,
record schema version, accelbench version, when written, what it holds: `measured` records or
the paper's `reference` figures), a summary derived from the records (each machine with its
environment, peaks and their provenance, noise floor; each workload fingerprint with what it
identifies), the records as their stored JSON text, byte for byte, and `sha256` over the
canonical JSON of everything else. Reading checks it all before a record is used: size, depth,
format, version, checksum and every record (store/validate.py); any problem is one ConfigError
line. The summary is for a person reading the file: a reader derives its own from the records
(as this build derives it), so a bundle from an older accelbench whose summary was derived
another way still reads, and no figure is ever taken from a summary. Nothing read from a bundle
is ever used as a path. docs/exchange.md describes the format.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from accelbench import __version__
from accelbench.config.errors import ConfigError
from accelbench.config.record_kinds import SCHEMA_VERSION
from accelbench.report.bundle_summary import published_problem, summary
from accelbench.store.fingerprint import canonical_json
from accelbench.store.record import Record
from accelbench.store.unsaved import MAX_FILE_BYTES, with_uid
from accelbench.store.validate import (
    MAX_RECORD_CHARS,
    RecordProblem,
    parse_json,
    record_from_text,
)

FORMAT = "accelbench-bundle"
BUNDLE_VERSION = 1  # the layout of this file; the records carry their own schema_version
CONTENTS = ("measured", "reference")
GZIP_MAGIC = b"\x1f\x8b"
READABLE = "a bundle written by 'accelbench publish'"
_HEADER_DEPTH = 12  # the header nests shallowly: records are carried as text
HEADER: dict[str, type] = {"format": str, "bundle_version": int, "contents": str,
                           "schema_version": int, "accelbench": str, "created_utc": str,
                           "machines": list, "workloads": dict, "records": list,
                           "published": list, "sha256": str}


@dataclass(frozen=True)
class Bundle:
    """A bundle as read: its header, its records (read as the store reads them) and their
    stored text, the reference figures of a reference bundle, and its checksum. Its summary
    (`header`'s machines and workloads) is the file's, for a person: never read for a figure."""

    name: str  # the file's name, shown as text; never opened again
    header: dict[str, Any]
    records: tuple[Record, ...]
    texts: tuple[str, ...]
    published: tuple[dict[str, Any], ...] = ()
    sha256: str = ""

    @property
    def contents(self) -> str:
        """measured or reference."""
        return self.header["contents"]


def checksum(body: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of a bundle less its `sha256` field."""
    rest = {k: v for k, v in body.items() if k != "sha256"}
    return hashlib.sha256(canonical_json(rest).encode()).hexdigest()


def bundle_body(texts: Sequence[str], contents: str = "measured",
                published: Sequence[dict[str, Any]] = (), created_utc: str | None = None
                ) -> dict[str, Any]:
    """A bundle's whole content from records' stored JSON texts (or a reference's figures),
    checksum included."""
    records = [Record.from_dict(record_from_text(t)) for t in texts]
    machines, workloads = summary(records)
    body = {"format": FORMAT, "bundle_version": BUNDLE_VERSION, "contents": contents,
            "schema_version": SCHEMA_VERSION, "accelbench": __version__,
            "created_utc": created_utc or datetime.now(UTC).isoformat(),
            "machines": machines, "workloads": workloads, "records": list(texts),
            "published": list(published)}
    return body | {"sha256": checksum(body)}


def bundle_bytes(body: dict[str, Any], compress: bool) -> bytes:
    """The file's bytes: indented JSON, gzip-compressed (with no time stamp) when asked."""
    text = canonical_json(body).encode() if compress else _pretty(body).encode()
    return gzip.compress(text, mtime=0) if compress else text


def _pretty(body: dict[str, Any]) -> str:
    import json

    return json.dumps(body, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write_bundle(path: Path, body: dict[str, Any]) -> int:
    """Write the bundle (gzip when the name ends in .gz); its size in bytes. The file is
    written whole beside its place and renamed, so a reader never sees half of one."""
    data = bundle_bytes(body, path.name.endswith(".gz"))
    partial = path.with_name(path.name + ".partial")
    try:
        partial.write_bytes(data)
        partial.replace(path)
    except OSError as err:
        raise ConfigError("out", f"'{path}' cannot be written ({err.strerror or err})",
                          "a file in a folder this user can write in") from err
    return len(data)


def _problem(name: str, problem: str) -> ConfigError:
    return ConfigError("BUNDLE", f"'{name}' {problem}", READABLE)


def _file_text(path: Path) -> str:
    """The bundle's text, gunzipped where it is compressed, within MAX_FILE_BYTES."""
    name = path.name
    if not path.is_file():
        raise _problem(name, "is not a file")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise _problem(name, f"is {size:,} bytes; at most {MAX_FILE_BYTES:,} are read")
    try:
        data = path.read_bytes()
        if data[:2] == GZIP_MAGIC:
            data = _gunzip(name, data)
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise _problem(name, f"cannot be read ({err})") from err


def _gunzip(name: str, data: bytes) -> bytes:
    """gzip data expanded to at most MAX_FILE_BYTES (a small file that expands without end is
    refused, not followed)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, MAX_FILE_BYTES + 1)
    except zlib.error as err:
        raise _problem(name, f"is not valid gzip ({err})") from err
    if len(out) > MAX_FILE_BYTES or inflater.unconsumed_tail:
        raise _problem(name, f"expands past {MAX_FILE_BYTES:,} bytes")
    return out


def _header(name: str, body: Any) -> dict[str, Any]:
    """The header checked: format, version, types, checksum."""
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise _problem(name, f"is not an accelbench bundle (no \"format\": \"{FORMAT}\")")
    for key, kind in HEADER.items():
        if not isinstance(body.get(key), kind) or isinstance(body.get(key), bool):
            raise _problem(name, f"field {key} is missing or not a {kind.__name__}")
    extra = sorted(set(body) - set(HEADER))
    if extra:
        raise _problem(name, f"has an unknown field {extra[0][:40]!r}")
    _versions(name, body)
    if body["contents"] not in CONTENTS:
        raise _problem(name, f"holds {body['contents'][:40]!r}; allowed: {', '.join(CONTENTS)}")
    if checksum(body) != body["sha256"]:
        raise _problem(name, "was altered: its sha256 does not match its contents")
    return body


def _versions(name: str, body: dict[str, Any]) -> None:
    for key, ours in (("bundle_version", BUNDLE_VERSION), ("schema_version", SCHEMA_VERSION)):
        if body[key] > ours:
            raise _problem(name, f"has {key} {body[key]}, written by a newer accelbench "
                           f"({body['accelbench'][:40]}); this one reads up to {ours}: "
                           "upgrade accelbench")
        if body[key] < 1:
            raise _problem(name, f"has {key} {body[key]}; allowed: 1 to {ours}")


def _records(name: str, texts: list[Any]) -> tuple[list[Record], list[str]]:
    records = []
    for n, text in enumerate(texts, 1):
        if not isinstance(text, str):
            raise _problem(name, f"record {n} is not JSON text")
        try:
            records.append(Record.from_dict(record_from_text(text)))
        except (RecordProblem, TypeError, ValueError) as err:
            raise _problem(name, f"record {n} is not a record: {err}") from err
    return records, texts


def read_bundle(path: Path) -> Bundle:
    """A bundle read and checked whole (module docstring); ConfigError, one line, on any
    problem."""
    name = Path(path).name
    try:
        text = _file_text(Path(path))  # its records are strings: each checked as a record
        body = _header(name, parse_json(text, _HEADER_DEPTH, MAX_RECORD_CHARS))
    except RecordProblem as err:
        raise _problem(name, f"is {err}") from err
    records, texts = _records(name, body["records"])
    published = body["published"]
    problem = published_problem(published, body["contents"], records)
    if problem:
        raise _problem(name, problem)
    header = {k: v for k, v in body.items() if k != "records"}  # the records are kept once
    return Bundle(name, header, tuple(records), tuple(texts), tuple(published), body["sha256"])


def is_bundle(path: Path) -> bool:
    """Whether a file to import is a bundle (gzip, or JSON naming the bundle format early)
    rather than records (JSON lines, a JSON array); read_bundle then checks it whole."""
    try:
        with Path(path).open("rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return head[:2] == GZIP_MAGIC or re.search(rb'"format"\s*:\s*"' + FORMAT.encode(),
                                               head) is not None


def bundle_records(path: Path) -> list[Record]:
    """The records of a measured bundle, for `results import` (a record from before uids
    gets its content uid, as from any file); a reference bundle is refused."""
    bundle = read_bundle(path)
    if bundle.contents == "reference":
        raise _problem(bundle.name, "is a reference bundle (the paper's figures): it is read "
                       "by 'accelbench site', never stored as measurements")
    return [with_uid(r) for r in bundle.records]


PARALLEL_FROM = 16  # bundles: from this many, read on every core (each is checked whole)


def _read_one(path: Path) -> tuple[Bundle | None, tuple[str, str, str | None] | None]:
    """A bundle, or its refusal's parts (a worker process hands back no exception object)."""
    try:
        return read_bundle(path), None
    except ConfigError as err:
        return None, (err.field, err.problem, err.allowed)


def _read_all(paths: Sequence[Path]) -> list[tuple[Bundle | None, tuple | None]]:
    cores = min(os.cpu_count() or 1, 8)
    if len(paths) < PARALLEL_FROM or cores < 2:
        return [_read_one(p) for p in paths]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(cores) as pool:
        return list(pool.map(_read_one, paths, chunksize=8))


def read_bundles(paths: Sequence[Path]) -> list[Bundle]:
    """Every bundle read and checked (on every core where there are many), in order; the first
    refused is one ConfigError; the same bundle (by checksum) given twice is kept once."""
    if not paths:
        raise ConfigError("BUNDLE", "no bundle given", READABLE)
    seen: dict[str, Bundle] = {}
    for bundle, refused in _read_all([Path(p) for p in paths]):
        if refused is not None:
            raise ConfigError(*refused)
        seen.setdefault(bundle.sha256, bundle)
    return list(seen.values())
