"""The four packages import one way only: tensorir <- codegen <- autosched -> runtime; inside
autosched/, the layer table of docs/architecture.md (one source, parsed here) orders its modules."""

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


def _import_edges(root: Path, packages=PACKAGES) -> list[tuple[str, int, str]]:
    """``(module, line, imported module)`` for every import of a module of its own package,
    relative imports resolved and imports inside functions counted."""
    files = {_module_name(root, p): p for pkg in packages for p in (root / pkg).rglob("*.py")}
    edges = []
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
                    edges.append((mod, node.lineno, target))
    return list(dict.fromkeys(edges))  # `from x import a, b`: one edge


def _import_graph(root: Path, packages=PACKAGES) -> dict[str, set[str]]:
    """Module -> modules of its own package it imports, counting imports inside functions."""
    files = {_module_name(root, p) for pkg in packages for p in (root / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, _, target in _import_edges(root, packages):
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


# ----------------------------------------------------------------------------- autosched layers

LAYER_TABLE_HEADER = "| layer | modules | job |"


def _layer_table(text: str) -> list[tuple[str, list[str]]]:
    """``[(layer, [entry, ...]), ...]`` top to bottom, from the layer table of
    docs/architecture.md (entries: ``rpc/`` for a package, ``task.py`` for a module)."""
    lines = text.splitlines()
    start = lines.index(LAYER_TABLE_HEADER) + 2  # past the header and its --- row
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        layer, modules = (cell.strip() for cell in line.strip("|").split("|")[:2])
        rows.append((layer, re.findall(r"`([^`]+)`", modules)))
    return rows


def _entry_of(rel: Path) -> str:
    """The table entry of a file under autosched/: its top-level package or the file itself."""
    return f"{rel.parts[0]}/" if len(rel.parts) > 1 else rel.name


def _layer_problems(root: Path, text: str) -> list[str]:
    """What breaks the layer table: entries that do not exist or repeat, modules of autosched/
    in no row, and imports of a higher layer (each naming both modules and both layers)."""
    rows = _layer_table(text)
    level = {}
    problems = []
    for i, (layer, entries) in enumerate(rows):
        for entry in entries:
            if entry in level:
                problems.append(f"{entry} is in two layers: {rows[level[entry]][0]!r}, {layer!r}")
            level[entry] = i
            if not (root / "autosched" / entry).exists():
                problems.append(f"layer {layer!r} names autosched/{entry}, which does not exist")
    paths = {
        _module_name(root, path): path.relative_to(root)
        for path in sorted((root / "autosched").rglob("*.py"))
    }
    entry_of = {mod: _entry_of(rel.relative_to("autosched")) for mod, rel in paths.items()}
    for mod, entry in entry_of.items():
        if entry not in level:
            problems.append(
                f"{paths[mod]} belongs to no layer: give {entry} a row of the layer table in "
                "docs/architecture.md"
            )
            level[entry] = -1  # reported once
    for mod, lineno, target in _import_edges(root, ("autosched",)):
        here, there = level[entry_of[mod]], level[entry_of[target]]
        if 0 <= there < here:
            problems.append(
                f"{paths[mod]}:{lineno}: {mod} (layer {rows[here][0]!r}) imports {target} of "
                f"the higher layer {rows[there][0]!r}"
            )
    return problems


def test_every_autosched_module_has_a_layer_and_imports_no_higher_one():
    text = (ROOT / "docs" / "architecture.md").read_text()
    problems = _layer_problems(ROOT, text)
    assert not problems, "the autosched layer table (docs/architecture.md):\n" + "\n".join(problems)


def test_layer_check_sees_an_upward_import_inside_a_function(tmp_path):
    pkg = tmp_path / "autosched"
    (pkg / "high").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "high" / "__init__.py").write_text("from ..low import f\n")
    (pkg / "low.py").write_text("def f():\n    from .high import g\n")
    (pkg / "stray.py").write_text("")
    table = (
        f"{LAYER_TABLE_HEADER}\n| --- | --- | --- |\n"
        "| top | `__init__.py`, `high/` | x |\n| bottom | `low.py`, `gone.py` | y |\n"
    )
    problems = _layer_problems(tmp_path, table)
    assert problems == [
        "layer 'bottom' names autosched/gone.py, which does not exist",
        "autosched/stray.py belongs to no layer: give stray.py a row of the layer table in "
        "docs/architecture.md",
        "autosched/low.py:2: autosched.low (layer 'bottom') imports autosched.high of the "
        "higher layer 'top'",
    ]
