"""Text sources for token shards: files, folders, Hugging Face datasets (OpenWebText), and a
built-in offline corpus.

A corpus is anything with a `description` (stored in the shard index) and `documents()`, an
iterator of document strings in a deterministic order; deterministic order is what lets
`prepare` resume a killed run. The shard writer accepts any such object (a genome source can be
added beside these without touching them).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from accelbench.config.errors import ConfigError

TEXT_SUFFIXES = (".txt", ".jsonl", ".parquet")
OPENWEBTEXT_HF_NAME = "Skylion007/openwebtext"
# Folders of the standard library that hold tests, vendored or generated data, not documentation.
_STDLIB_SKIP_DIRS = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}


@runtime_checkable
class Corpus(Protocol):
    """A named, deterministic stream of documents."""

    @property
    def description(self) -> str: ...

    def documents(self) -> Iterator[str]: ...


@dataclass(frozen=True)
class IterableCorpus:
    """Wrap any re-iterable collection of strings (a list, a generator factory's result)."""

    items: Iterable[str]
    description: str = "in-memory documents"

    def documents(self) -> Iterator[str]:
        """Yield the items as they are."""
        yield from self.items


def _read_txt(path: Path) -> Iterator[str]:
    """A .txt file is one document (GPT-2 style: one web page, one book, one file); it must be
    UTF-8 text (a binary file is refused, not tokenized as replacement characters)."""
    yield _utf8_text(path, path.read_bytes())


def _utf8_text(path: Path, data: bytes) -> str:
    """The bytes as UTF-8 text, or a one-line refusal naming the file and the first bad byte."""
    allowed = "UTF-8 text (.txt, .jsonl) or a Parquet file"
    if b"\x00" in data:
        raise ConfigError("source", f"{path} holds NUL bytes at byte {data.index(0)}: a binary "
                          "file, not text", allowed)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError("source", f"{path} is not UTF-8 text (byte {err.start} is "
                          f"0x{data[err.start]:02x})", allowed) from None


def _read_jsonl(path: Path, text_field: str) -> Iterator[str]:
    """One document per JSON line, taken from `text_field`; blank lines are skipped."""
    with open(path, "rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            line = _utf8_text(Path(f"{path}:{line_no}"), raw)
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ConfigError("source", f"{path}:{line_no} is not JSON ({err.msg})") from err
            if not isinstance(record, dict) or not isinstance(record.get(text_field), str):
                raise ConfigError(
                    "text-field",
                    f"{path}:{line_no} has no string field {text_field!r}",
                    "a field holding the document text, e.g. --text-field text",
                )
            yield record[text_field]


def _read_parquet(path: Path, text_column: str) -> Iterator[str]:
    """One document per row of `text_column`, read in record batches (pyarrow needed)."""
    try:
        import pyarrow.parquet as pq
    except ImportError as err:
        raise ConfigError(
            "source", f"reading {path.name} needs the package 'pyarrow' (pip install pyarrow)"
        ) from err
    try:
        parquet = pq.ParquetFile(path)
    except Exception as err:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError, ...
        raise ConfigError("source", f"{path} is not a Parquet file "
                          f"({str(err).splitlines()[0] if str(err) else type(err).__name__})",
                          ".parquet files written by pyarrow, pandas, Spark ...") from None
    if text_column not in parquet.schema_arrow.names:
        raise ConfigError(
            "text-field",
            f"{path} has no column {text_column!r}",
            ", ".join(parquet.schema_arrow.names),
        )
    for batch in parquet.iter_batches(columns=[text_column], batch_size=1024):
        for value in batch.column(0).to_pylist():
            if value:
                yield value


@dataclass(frozen=True)
class FileCorpus:
    """A .txt, .jsonl or .parquet file, or a folder searched recursively for them (sorted)."""

    path: Path
    text_field: str = "text"

    @property
    def description(self) -> str:
        """Absolute path, kind and text field."""
        kind = "folder" if self.path.is_dir() else self.path.suffix.lstrip(".")
        return f"{kind}:{self.path.resolve()} text_field={self.text_field}"

    def files(self) -> list[Path]:
        """The files read, in the order read."""
        if self.path.is_dir():
            found = sorted(
                p for p in self.path.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES
            )
            if not found:
                raise ConfigError(
                    "source", f"folder {self.path} holds no text file", ", ".join(TEXT_SUFFIXES)
                )
            return found
        if not self.path.is_file():
            raise ConfigError("source", f"{self.path} does not exist")
        if self.path.suffix not in TEXT_SUFFIXES:
            raise ConfigError(
                "source", f"{self.path} is not a supported file", ", ".join(TEXT_SUFFIXES)
            )
        return [self.path]

    def documents(self) -> Iterator[str]:
        """Documents of every file in turn."""
        for path in self.files():
            if path.suffix == ".txt":
                yield from _read_txt(path)
            elif path.suffix == ".jsonl":
                yield from _read_jsonl(path, self.text_field)
            else:
                yield from _read_parquet(path, self.text_field)


@dataclass(frozen=True)
class HFDatasetCorpus:
    """A Hugging Face `datasets` dataset (a hub name, cached by `datasets`, or a local folder of
    data files), streamed in its own order; OpenWebText is the study's."""

    hf_name: str = OPENWEBTEXT_HF_NAME
    split: str = "train"
    text_field: str = "text"
    streaming: bool = True

    @property
    def description(self) -> str:
        """Dataset name, split and column, as `datasets` knows them."""
        return f"hf-datasets:{self.hf_name} split={self.split} field={self.text_field}"

    def documents(self) -> Iterator[str]:
        """The dataset's text column, one document a row."""
        datasets = _import_datasets()
        try:
            rows = datasets.load_dataset(self.hf_name, split=self.split, streaming=self.streaming)
        except (FileNotFoundError, ValueError, ConnectionError) as err:
            raise ConfigError("source", f"datasets could not open {self.hf_name!r} split "
                              f"{self.split!r}: {err}".splitlines()[0]) from err
        for row in rows:
            if self.text_field not in row:
                raise ConfigError("text-field", f"{self.hf_name} has no column "
                                  f"{self.text_field!r}", ", ".join(sorted(row)))
            yield row[self.text_field]


def _import_datasets():
    """The `datasets` package, or a one-line error saying how to get it."""
    try:
        import datasets
    except ImportError as err:
        raise ConfigError("source", "Hugging Face sources need the package 'datasets' "
                          "(pip install 'accelbench[datasets]')") from err
    return datasets


def _stdlib_files(stdlib: Path) -> Iterator[Path]:
    """Standard-library .py files in sorted path order, never entering tests or site-packages."""
    for folder, dirs, files in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if d not in _STDLIB_SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(folder) / name


def module_docstrings(source: str) -> str:
    """All docstrings of a module (module, classes, functions), in source order, one block each."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ""
    nodes = [tree] + [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    nodes.sort(key=lambda node: getattr(node, "lineno", 0))
    docs = (ast.get_docstring(node, clean=True) for node in nodes)
    return "\n\n".join(doc for doc in docs if doc and len(doc) >= 20)


def pydoc_topics(source: str) -> list[str]:
    """The language-reference topics that pydoc_data/topics.py carries (help("if") text)."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "topics":
            topics = ast.literal_eval(node.value)
            return [topics[key] for key in sorted(topics)]
    return []


@dataclass(frozen=True)
class StdlibDocstringCorpus:
    """Built-in offline corpus: the docstrings of this Python's standard library, one module a doc,
    plus the language-reference topics of pydoc_data (about 2.3 MB of text on Python 3.11).

    It stands in for OpenWebText so that training runs anywhere without a download: English
    prose about software, with code examples, far smaller (a few MB, depending on the Python
    version) and narrower than web text. Losses on it are not comparable with OpenWebText's.
    """

    stdlib: Path | None = None

    def root(self) -> Path:
        """The standard library folder of the running interpreter (sysconfig's "stdlib")."""
        return self.stdlib or Path(sysconfig.get_paths()["stdlib"])

    @property
    def description(self) -> str:
        """Names the interpreter version, since the docstrings change with it."""
        version = ".".join(str(v) for v in sys.version_info[:3])
        return f"default:python-{version}-stdlib-docstrings:{self.root()}"

    def documents(self) -> Iterator[str]:
        """One document per module that has docstrings, and one per pydoc reference topic."""
        for path in _stdlib_files(self.root()):
            source = path.read_text(encoding="utf-8", errors="replace")
            if path.parent.name == "pydoc_data" and path.name == "topics.py":
                yield from pydoc_topics(source)
                continue
            text = module_docstrings(source)
            if text:
                yield text


def first_document(corpus: Corpus) -> str | None:
    """The first document with any non-blank text, or None when the corpus has none (an empty
    file, a FASTA of headers only): read before anything is written, so unreadable or empty
    input is refused first."""
    for doc in corpus.documents():
        if doc.strip():
            return doc
    return None


SOURCE_KEYWORDS = ("default", "openwebtext")
HF_PREFIX = "hf:"


def parse_hf_source(source: str) -> tuple[str, str]:
    """'hf:NAME[@SPLIT]' to (NAME, SPLIT); NAME is a hub id or a local dataset folder."""
    name, _, split = source[len(HF_PREFIX):].partition("@")
    if not name:
        raise ConfigError("source", f"{source!r} names no dataset",
                          "hf:NAME or hf:NAME@SPLIT (a hub id or a local dataset folder)")
    return name, split or "train"


def resolve_source(source: str, text_field: str = "text") -> Corpus:
    """Map a --source value (default, openwebtext, hf:NAME[@SPLIT], or a path) to a corpus."""
    if source == "default":
        return StdlibDocstringCorpus()
    if source == "openwebtext" or source.startswith(HF_PREFIX):
        if importlib.util.find_spec("datasets") is None:
            _import_datasets()
        if source == "openwebtext":
            return HFDatasetCorpus(text_field=text_field)
        name, split = parse_hf_source(source)
        if name.startswith(("/", ".", "~")) and not Path(name).expanduser().is_dir():
            raise ConfigError("source", f"{name} is not a folder",
                              "hf:NAME with a hub id or an existing local dataset folder")
        return HFDatasetCorpus(str(Path(name).expanduser()) if name[0] in "/.~" else name,
                               split, text_field)
    path = Path(source).expanduser()
    if not path.exists():
        raise ConfigError(
            "source", f"{source!r} is neither a keyword nor an existing path",
            "default, openwebtext, hf:NAME[@SPLIT], or a .txt/.jsonl/.parquet file or folder",
        )
    corpus = FileCorpus(path, text_field)
    corpus.files()  # fail now, not halfway, on a folder with nothing to read
    return corpus
