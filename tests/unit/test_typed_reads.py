"""A record's spec is read as typed as its metrics (`record.setup.seq_len`, not
`record.spec["seq_len"]`), and what differs by record kind is found through the kind table or the
registry, not by `kind == "..."` tests scattered over the package (issue 40). This scans the
package with `ast`:

- a spec read by key: `x.spec[...]`, `x.spec.get(...)`, `... in x.spec`, the same on a name bound
  to `x.spec` in that module (`s = r.spec`, `s, m = r.spec, r.typed`), and on a dict named `spec`;
- a record-kind test: `kind` or `x.kind` compared (==, !=, in, not in) with a declared record
  kind's name, written as a literal or as a module-level constant holding one (or a tuple, list
  or set of them: `kind in PEAK_KINDS`).

The schema (config/records/, config/record_kinds.py), the store's migration and validation (they
read the stored dict before any typed read exists) and the registry (config/workload.py) may;
nothing else in the package does. What differs by kind is a fact its declaration states
(RecordKind's `cell`, `compared`, `condition`, `machine_context`; `carries(kind, group)` for a
field group or a kind's metrics class) or a Workload part."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from accelbench.config.record_kinds import METRICS_BY_KIND

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "accelbench"
ALLOWED_PREFIXES = ("accelbench/config/records/",)
ALLOWED = {"accelbench/config/record_kinds.py", "accelbench/config/workload.py",
           "accelbench/store/migrate.py", "accelbench/store/validate.py"}



def _is_spec(node: ast.AST, aliases: set[str]) -> bool:
    """`x.spec`, a name bound to one, or a dict named `spec`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "spec"
    return isinstance(node, ast.Name) and (node.id == "spec" or node.id in aliases)


def _bound(target: ast.AST, value: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """(name, value) pairs of one assignment, a tuple unpacked pairwise (`s, m = a, b`)."""
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and \
            len(target.elts) == len(value.elts):
        return list(zip(target.elts, value.elts, strict=True))
    return [(target, value)]


def _aliases(tree: ast.AST) -> set[str]:
    """Names assigned `x.spec` anywhere in the module (`s = record.spec`, `s, m = r.spec, ...`)."""
    return {name.id for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets
            for name, value in _bound(t, n.value) if isinstance(name, ast.Name)
            and isinstance(value, ast.Attribute) and value.attr == "spec"}


def spec_reads(text: str) -> list[int]:
    """Lines of each spec read by key in `text`."""
    tree = ast.parse(text)
    aliases = _aliases(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_spec(node.value, aliases):
            found.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "get" and _is_spec(node.func.value, aliases)):
            found.append(node.lineno)
        elif isinstance(node, ast.Compare) and any(
                isinstance(op, ast.In | ast.NotIn) and _is_spec(right, aliases)
                for op, right in zip(node.ops, node.comparators, strict=True)):
            found.append(node.lineno)
    return sorted(found)


def _holds_a_kind(value: ast.AST, kinds: set[str]) -> bool:
    """A literal record kind, or a tuple, list or set holding one."""
    if isinstance(value, ast.Tuple | ast.List | ast.Set):
        return any(_holds_a_kind(e, kinds) for e in value.elts)
    return isinstance(value, ast.Constant) and value.value in kinds


def kind_constants(sources: dict[str, str], kinds: set[str]) -> set[str]:
    """Names of module-level constants, anywhere in the package, holding a record kind (or a
    tuple, list or set of them)."""
    return {t.id for text in sources.values() for n in ast.parse(text).body
            if isinstance(n, ast.Assign) and _holds_a_kind(n.value, kinds)
            for t in n.targets if isinstance(t, ast.Name)}


def _names_a_kind(node: ast.AST, kinds: set[str], constants: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in kinds
    if isinstance(node, ast.Name):
        return node.id in constants
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_a_kind(e, kinds, constants) for e in node.elts)
    return False


def _is_kind(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "kind") or (
        isinstance(node, ast.Name) and node.id == "kind")


def kind_tests(text: str, kinds: set[str], constants: set[str]) -> list[int]:
    """Lines of each record-kind test in `text`."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        if any(_is_kind(s) for s in sides) and any(_names_a_kind(s, kinds, constants)
                                                   for s in sides):
            found.append(node.lineno)
    return found


def package_sources() -> dict[str, str]:
    return {path.relative_to(ROOT).as_posix(): path.read_text()
            for path in sorted(PACKAGE.rglob("*.py"))}


def _allowed(path: str) -> bool:
    return path in ALLOWED or path.startswith(ALLOWED_PREFIXES)


def counts(sources: dict[str, str]) -> tuple[Counter, Counter]:
    """(spec reads, kind tests) per file outside the allowed modules."""
    kinds = set(METRICS_BY_KIND)
    constants = kind_constants(sources, kinds)
    reads, tests = Counter(), Counter()
    for path, text in sources.items():
        if _allowed(path):
            continue
        reads[path] = len(spec_reads(text))
        tests[path] = len(kind_tests(text, kinds, constants))
    return +reads, +tests


def test_the_scanners_find_what_is_planted():
    text = ("X_KIND = 'train'\n"
            "X_KINDS = ('block', 'train')\n"
            "def f(r, spec):\n"
            "    s = r.spec\n"
            "    a = r.spec['seq_len'] + s.get('gas') + spec.get('batch')\n"
            "    b = 'seq_search' in r.spec or r.setup.seq_len\n"
            "    return r.kind == 'block' or r.kind in ('train',) or r.kind != X_KIND\n"
            "def g(device, r):\n"
            "    t, m = r.spec, r.typed\n"
            "    return device.kind == 'cpu' or device.spec_key or t['gas'] or r.kind in X_KINDS\n")
    assert spec_reads(text) == [5, 5, 5, 6, 10]
    constants = kind_constants({"x.py": text}, {"train", "block"})
    assert constants == {"X_KIND", "X_KINDS"}
    assert kind_tests(text, {"train", "block"}, constants) == [7, 7, 7, 10]


def test_no_spec_read_by_key_outside_the_schema():
    found = counts(package_sources())[0]
    assert not found, f"spec reads by key (read record.setup's fields instead): {dict(found)}"


def test_no_record_kind_test_outside_the_registry():
    found = counts(package_sources())[1]
    assert not found, ("record-kind tests (dispatch on what the kind declares: RecordKind's "
                       f"facts, carries(kind, group), a Workload part): {dict(found)}")
