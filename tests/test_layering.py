"""The four packages import one way only: tensorir <- codegen <- autosched -> runtime."""

import ast
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
