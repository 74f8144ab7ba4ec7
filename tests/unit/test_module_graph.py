"""The package's import graph: no cycles (lazy imports inside functions count too), and each
layer imports only from the layers above it (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import accelbench

ROOT = Path(accelbench.__file__).parent
LAYERS = ("config", "hardware", "analytics", "store", "models", "data", "parallel", "bench",
          "report", "workloads", "cli")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _targets(node: ast.AST, modules: dict[str, Path]) -> set[str]:
    """accelbench modules an import statement loads (a 'from package import module' names the
    module; otherwise the package or module named)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in modules}
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        out = set()
        for alias in node.names:
            full = f"{node.module}.{alias.name}"
            if full in modules:
                out.add(full)
            elif node.module in modules:
                out.add(node.module)
        return out
    return set()


def import_graph() -> dict[str, set[str]]:
    """Module -> the accelbench modules it imports anywhere in its body."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        graph[name] = set().union(*(_targets(n, modules) for n in ast.walk(tree))) - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_module_graph_has_no_cycles():
    assert _cycles(import_graph()) == []


def test_the_cycle_finder_finds_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_each_layer_imports_only_from_the_layers_above():
    wrong = sorted(f"{m} -> {t}" for m, targets in import_graph().items() for t in targets
                   if _layer(m) is not None and _layer(t) is not None
                   and _layer(t) > _layer(m))
    assert wrong == []


def test_every_module_is_in_a_layer():
    loose = sorted(m for m in _modules() if m.count(".") >= 1 and _layer(m) is None
                   and m not in ("accelbench.__main__",))
    assert loose == []


def test_the_kits_never_import_a_workload():
    """bench/ and report/ find workloads only through the registry (config/workload.py)."""
    wrong = sorted(f"{m} -> {t}" for m, targets in import_graph().items() for t in targets
                   if _layer(m) is not None and _layer(m) < LAYERS.index("workloads")
                   and t.startswith("accelbench.workloads"))
    assert wrong == []


def test_a_workload_folder_imports_only_its_own_and_train():
    """A workload is one folder: it imports the kits and its own modules (and the training
    workload's plan and declaration, which genslm, scale and noise build on), no other's."""
    wrong = []
    for m, targets in import_graph().items():
        if not m.startswith("accelbench.workloads."):
            continue
        own = m.split(".")[2]
        for t in targets:
            if t.startswith("accelbench.workloads.") and t.split(".")[2] not in (own, "train"):
                wrong.append(f"{m} -> {t}")
    assert sorted(wrong) == []


def test_analytics_and_config_never_import_torch():
    for path in [*(ROOT / "analytics").rglob("*.py"), *(ROOT / "config").rglob("*.py")]:
        tree = ast.parse(path.read_text())
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                 for a in n.names}
        names |= {n.module.split(".")[0] for n in ast.walk(tree)
                  if isinstance(n, ast.ImportFrom) and n.module}
        assert "torch" not in names, path
