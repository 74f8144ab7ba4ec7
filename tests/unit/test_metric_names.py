"""Metric names are written once, in the schema modules (config/records/): code reads a
record's metrics as attributes (`record.typed.mfu`), so a typo fails instead of showing '-'.
This scans the package with `ast` for string literals equal to a metric name outside the schema
and the migration (store/migrate.py names the old and new keys on purpose).

One narrow rule spares a word that is a metric name and also names a setting: a field of a
settings dataclass (a class named *Spec, *Options, *Settings, *Input or *Setup), e.g. `threads`
(calibrate's option and a peak's metric) or `optimizer` (the planner's input and a train
cell's metric). There the literal names the setting (an error's field, a column header), not a
record's key. No file is exempt as a whole."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from accelbench.config.record_kinds import METRICS_BY_KIND, metric_names
from accelbench.config.records.block import PhaseFields, PhaseTimed
from accelbench.config.records.seq_search import FITS, SeqSearchMetrics
from accelbench.config.records.train import ORACLE_KINDS, StepTimed, TrainFigure, TrainMetrics

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "accelbench"
SCHEMA = "accelbench/config/records/"  # the schema modules: where the names are declared
DECLARING = {"accelbench/store/migrate.py"}
SETTINGS_SUFFIXES = ("Spec", "Options", "Settings", "Input", "Setup")

# The literals not yet migrated, per file: none are left (a file listed here may only fall).
REMAINING: dict[str, int] = {}


def all_metric_names() -> set[str]:
    """Every key a record of a declared kind carries (a block's phase keys included)."""
    return {name for kind in METRICS_BY_KIND for name in metric_names(kind)}


def setting_names(sources: dict[str, str]) -> set[str]:
    """The fields of the settings dataclasses in `sources` (path -> text)."""
    names = set()
    for text in sources.values():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.name.endswith(SETTINGS_SUFFIXES):
                names |= {s.target.id for s in node.body if isinstance(s, ast.AnnAssign)
                          and isinstance(s.target, ast.Name)}
    return names


def metric_literals(text: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, literal) of each string constant of `text` that is one of `names`."""
    return sorted((node.lineno, node.value) for node in ast.walk(ast.parse(text))
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and node.value in names)


def package_sources() -> dict[str, str]:
    return {path.relative_to(ROOT).as_posix(): path.read_text()
            for path in sorted(PACKAGE.rglob("*.py"))}


def flagged(sources: dict[str, str]) -> dict[str, list[tuple[int, str]]]:
    """Metric-name literals outside the declaring modules, settings' names spared."""
    names = all_metric_names() - setting_names(sources)
    found = {path: metric_literals(text, names) for path, text in sources.items()
             if path not in DECLARING and not path.startswith(SCHEMA)}
    return {path: hits for path, hits in found.items() if hits}


def test_the_scanner_finds_a_planted_literal():
    planted = {"accelbench/report/new.py": 'def mfu(m):\n    return m.get("mfu")\n',
               "accelbench/config/records/train.py": 'X = "mfu"\n'}
    assert flagged(planted) == {"accelbench/report/new.py": [(2, "mfu")]}
    typed = {"accelbench/report/new.py": "def mfu(record):\n    return record.typed.mfu\n"}
    assert flagged(typed) == {}


def test_a_setting_of_the_same_name_is_spared_and_only_it():
    sources = {"accelbench/bench/x.py": ("from dataclasses import dataclass\n@dataclass\n"
                                         "class XOptions:\n    threads: int = 0\n"
                                         "E = ('threads', 'mfu', 'forward_backward_mfu')\n")}
    assert flagged(sources) == {"accelbench/bench/x.py": [(5, "forward_backward_mfu"),
                                                          (5, "mfu")]}


def test_no_metric_name_literal_outside_the_schema():
    counts = Counter({path: len(hits) for path, hits in flagged(package_sources()).items()})
    grown = {path: (n, REMAINING.get(path, 0)) for path, n in counts.items()
             if n > REMAINING.get(path, 0)}
    assert not grown, f"metric-name literals (read record.typed.<name>): {grown}"
    shrunk = {path: (counts.get(path, 0), n) for path, n in REMAINING.items()
              if counts.get(path, 0) < n}
    assert not shrunk, f"fewer literals than REMAINING says: lower it {shrunk}"


def test_the_names_declared_for_use_outside_records_are_metrics():
    """TrainFigure (oracle kinds, flags, the published csv's column) and StepTimed (the
    figures with an interval) name TrainMetrics fields, PhaseTimed PhaseFields ones, and the
    verdict word FITS the seq-search metric: a rename breaks here."""
    assert {str(f) for f in TrainFigure} <= set(TrainMetrics.__dataclass_fields__)
    assert {str(f) for f in StepTimed} <= set(TrainMetrics.__dataclass_fields__)
    assert {str(f) for f in PhaseTimed} <= set(PhaseFields.__dataclass_fields__)
    assert set(ORACLE_KINDS) <= set(TrainFigure)
    assert FITS in SeqSearchMetrics.__dataclass_fields__
