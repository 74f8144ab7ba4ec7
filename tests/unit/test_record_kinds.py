"""Every record kind the code writes is declared with its metrics class; an undeclared kind
is an error, not another kind's names (metric_names once fell back to train's for any kind,
and the scale and seq-search kinds were written from literal dicts)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from accelbench.config import records
from accelbench.config.record_kinds import METRICS_BY_KIND, metric_names, record_kinds
from accelbench.config.records.scale import ScaleMetrics
from accelbench.config.records.seq_search import SeqSearchMetrics

ROOT = Path(__file__).resolve().parents[2] / "accelbench"


def _outcome_kinds() -> set[str]:
    """The literal kinds of every Outcome(...) and Outcome(kind=...) built in the package,
    constants resolved where they are module-level string assignments."""
    kinds: set[str] = set()
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text())
        consts = {t.id: n.value.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                  and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
                  for t in n.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Outcome":
                first = node.args[0] if node.args else next(
                    (k.value for k in node.keywords if k.arg == "kind"), None)
                if isinstance(first, ast.Constant):
                    kinds.add(first.value)
                elif isinstance(first, ast.Name) and first.id in consts:
                    kinds.add(consts[first.id])
    return kinds


def test_every_kind_written_is_declared():
    written = _outcome_kinds()
    assert {"train", "block", "scale", "seq-search"} <= written
    assert written <= set(METRICS_BY_KIND), written - set(METRICS_BY_KIND)


def test_an_undeclared_kind_is_an_error():
    with pytest.raises(ValueError, match="'inference' declares no metrics"):
        metric_names("inference")


def test_scale_and_seq_search_names():
    assert metric_names("scale") == ("rows", "baseline_devices")
    assert metric_names("seq-search")[0] == "fits"
    assert METRICS_BY_KIND["scale"] is ScaleMetrics
    assert METRICS_BY_KIND["seq-search"] is SeqSearchMetrics


def test_the_kind_table_is_assembled_from_the_schema_modules_alone():
    """Each schema module of config/records/ declares its kinds (KINDS); the table is their
    union, read without importing any workload (config imports no workload: test_module_graph)."""
    declared: set[str] = set()
    for path in sorted((ROOT / "config" / "records").glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "KINDS"
                                                    for t in node.targets):
                declared |= {k.value for k in node.value.keys}
    assert declared == set(METRICS_BY_KIND) == set(record_kinds())
    assert list(record_kinds()) == sorted(declared)


def test_a_kind_two_schema_modules_declare_is_an_error(monkeypatch, tmp_path):
    (tmp_path / "train_again.py").write_text(
        "from accelbench.config.records.base import RecordKind\n"
        "from accelbench.config.records.train import TrainMetrics\n"
        "KINDS = {'train': RecordKind(TrainMetrics)}\n")
    monkeypatch.setattr(records, "__path__", [*records.__path__, str(tmp_path)])
    try:
        with pytest.raises(ValueError, match="'train' is declared twice: in "
                                             "accelbench.config.records.train and "
                                             "accelbench.config.records.train_again"):
            record_kinds()
    finally:
        sys.modules.pop("accelbench.config.records.train_again", None)
        if hasattr(records, "train_again"):
            delattr(records, "train_again")
