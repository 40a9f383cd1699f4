"""The four packages import one way only: tensorir <- codegen <- autosched -> runtime."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tensorir", "codegen", "runtime", "autosched")
ALLOWED = {
    "tensorir": set(),
    "codegen": {"tensorir"},
    "runtime": set(),
    "autosched": {"tensorir", "codegen", "runtime"},
}


def _imports(path: Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


def test_no_upward_imports():
    bad = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for lineno, top in _imports(path):
                if top in PACKAGES and top != pkg and top not in ALLOWED[pkg]:
                    bad.append(f"{path.relative_to(ROOT)}:{lineno} imports {top}")
    assert not bad, "upward or sideways imports:\n" + "\n".join(bad)


def test_layering_test_sees_a_violation(tmp_path):
    # The checker itself must flag an upward edge, or the test above proves nothing.
    p = tmp_path / "m.py"
    p.write_text("import autosched\nfrom codegen import llvm\n")
    assert [top for _, top in _imports(p)] == ["autosched", "codegen"]


# ----------------------------------------------------------------------------- import cycles

# An IR module and its own printer, imported lazily for ``__str__``, may import each other.
ALLOWED_CYCLES = {
    frozenset({"tensorir.expr", "tensorir.printer"}),
    frozenset({"tensorir.schedule", "tensorir.state_printer"}),
    frozenset({"tensorir.loops", "tensorir.loops_printer"}),
    frozenset({"tensorir.graph.ir", "tensorir.graph.printer"}),
}


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(root: Path, packages=PACKAGES) -> dict[str, set[str]]:
    """Module -> modules of its own package it imports, counting imports inside functions."""
    files = {_module_name(root, p): p for pkg in packages for p in (root / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    here = here[: len(here) - (node.level - 1)]
                    base = ".".join(here + ([node.module] if node.module else []))
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base
                    for alias in node.names
                ]
            else:
                continue
            for target in targets:
                while target and target not in files:  # longest known module prefix
                    target = target.rpartition(".")[0]
                if target and target != mod and target.split(".")[0] == mod.split(".")[0]:
                    graph[mod].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_no_import_cycles_inside_a_package():
    graph = _import_graph(ROOT)
    bad = [c for c in _cycles(graph) if c not in ALLOWED_CYCLES]
    lines = [
        " <-> ".join(sorted(c)) + "  (" + "; ".join(
            f"{m} -> {', '.join(sorted(graph[m] & c))}" for m in sorted(c)
        ) + ")"
        for c in bad
    ]  # fmt: skip
    assert not bad, "import cycles (break them; see docs/architecture.md):\n" + "\n".join(lines)


def test_cycle_check_sees_a_planted_cycle(tmp_path):
    # A cycle through an import inside a function, two packages deep, must be found.
    pkg = tmp_path / "autosched" / "sub"
    pkg.mkdir(parents=True)
    (tmp_path / "autosched" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from ..sub.a import g\n")
    (tmp_path / "autosched" / "c.py").write_text("from .sub import a\n")
    graph = _import_graph(tmp_path, ("autosched",))
    assert graph["autosched.sub.b"] == {"autosched.sub.a"}
    assert _cycles(graph) == [frozenset({"autosched.sub.a", "autosched.sub.b"})]


def test_architecture_doc_names_only_existing_files():
    text = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`((?:[\w]+/)+[\w]+\.py|(?:[\w]+/)+)`", text))
    # Paths from the repository root (bare names in a package's table are relative to it).
    named = {p for p in named if p.split("/")[0] in (*PACKAGES, "docs", "tests", "benchmarks")}
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"
