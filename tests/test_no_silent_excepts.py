"""No error vanishes (issue 31 §4): every ``except Exception`` / ``except BaseException`` /
bare ``except`` in the four packages re-raises, logs, hands the error to
``autosched.suppressed.suppressed`` (counted, logged at DEBUG, raised under AUTOSCHED_STRICT=1),
or turns it into a value that carries it (a result's error text, a worker's reply)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("autosched", "tensorir", "codegen", "runtime")
BROAD = {"Exception", "BaseException"}
LOGGING = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log"}
# (file, function) -> why the handler keeps the error although the rules above do not see it.
ALLOWED = {
    ("autosched/workers/protocol.py", "picklable_error"): "replaces the error that does not "
    "pickle by a RuntimeError with its type, message and traceback (workers/ may import "
    "no other autosched module)",
}


def _broad(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(t, ast.Name) and t.id in BROAD for t in types)


def _keeps_the_error(handler: ast.ExceptHandler) -> bool:
    for node in ast.walk(ast.Module(body=handler.body, type_ignores=[])):
        if isinstance(node, ast.Raise):
            return True
        if isinstance(node, ast.Call):
            func = ast.unparse(node.func)
            if func.rsplit(".", 1)[-1] in LOGGING and "." in func:
                return True  # a logger's call
            if func == "suppressed" or func.startswith(("traceback.", "sys.exc_info")):
                return True
        if handler.name and isinstance(node, ast.Name) and node.id == handler.name:
            return True  # the bound exception is read: its text goes somewhere
    return False


def _handlers(tree: ast.AST, where: str = "<module>"):
    """``(handler, innermost enclosing function name)`` of every except clause."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _handlers(node, node.name)
            continue
        if isinstance(node, ast.ExceptHandler):
            yield node, where
        yield from _handlers(node, where)


def silent_handlers(root: Path = ROOT) -> list[str]:
    """``path:line (function)`` of each broad handler that drops the error."""
    out = []
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            for node, name in _handlers(ast.parse(path.read_text(), filename=rel)):
                if _broad(node) and not _keeps_the_error(node) and (rel, name) not in ALLOWED:
                    out.append(f"{rel}:{node.lineno} ({name})")
    return out


def test_no_broad_except_drops_the_error():
    silent = silent_handlers()
    assert not silent, (
        "broad except blocks that neither re-raise, log nor call suppressed(site): "
        f"{silent}; catch the expected exception by name and call "
        "autosched.suppressed.suppressed(site) for the rest"
    )


def test_the_check_sees_a_silent_handler(tmp_path):
    pkg = tmp_path / "autosched"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        "def f():\n"
        "    try:\n        g()\n    except Exception:\n        return None\n"
        "    try:\n        g()\n    except Exception:\n        suppressed('site')\n"
        "    try:\n        g()\n    except Exception as e:\n        return str(e)\n"
        "    try:\n        g()\n    except:\n        _log.debug('x')\n"
        "    try:\n        g()\n    except ValueError:\n        pass\n"
    )
    assert silent_handlers(tmp_path) == ["autosched/m.py:4 (f)"]
