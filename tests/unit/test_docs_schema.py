"""docs/results.md's schema tables list exactly the schema modules' metric names, so they cannot
drift from what records carry."""

import re
from collections import defaultdict
from pathlib import Path

from accelbench.config.record_kinds import metric_names
from accelbench.config.records.block import BLOCK_PHASES

DOC = Path(__file__).parents[2] / "docs" / "results.md"
KINDS = ("train", "block", "peak", "profile", "check", "noise")


def _documented() -> dict[str, list[str]]:
    """Names in the first column of each table under '## Record schema', by the kinds named in
    the parentheses of their '### ... (kind, kind)' heading; '<phase>_' expands to each phase."""
    section = DOC.read_text().split("## Record schema", 1)[1].split("\n## ", 1)[0]
    names: dict[str, list[str]] = defaultdict(list)
    kinds: tuple[str, ...] = ()
    for line in section.splitlines():
        heading = re.match(r"### .*\(([a-z, ]+)\)\s*$", line)
        if line.startswith("### "):
            kinds = tuple(k.strip() for k in heading.group(1).split(",")) if heading else ()
        cell = re.match(r"\| `([a-z0-9_<>]+)` \|", line)  # fp8_mode has a digit
        if cell and kinds:
            name = cell.group(1)
            expanded = ([name.replace("<phase>", p) for p in BLOCK_PHASES]
                        if "<phase>" in name else [name])
            for kind in kinds:
                names[kind].extend(expanded)
    return names


def test_the_schema_tables_list_exactly_the_declared_names():
    documented = _documented()
    assert set(documented) == set(KINDS)
    for kind in KINDS:
        listed = documented[kind]
        assert len(listed) == len(set(listed)), f"{kind}: a name listed twice"
        assert set(listed) == set(metric_names(kind)), (
            kind, set(metric_names(kind)) - set(listed), set(listed) - set(metric_names(kind)))
