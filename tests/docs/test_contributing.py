"""docs/contributing.md's recipes name real files: every backticked repository path in the page
(a name with a '/', or ending in .py / .md) exists, so a moved or renamed file fails here instead
of sending the next engineer to a file that is not there. Generic: any recipe added to the page
is checked the same way."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "contributing.md"
PATH = re.compile(r"^[\w./-]+$")  # a path-like token: no spaces, calls or globs


def named_paths(text: str) -> list[str]:
    """The backticked tokens of ``text`` that name repository paths."""
    out = []
    for token in re.findall(r"`([^`]+)`", text):  # a code span may wrap a line
        token = token.strip()
        if PATH.match(token) and ("/" in token or token.endswith((".py", ".md"))):
            out.append(token)
    return out


def _exists(token: str) -> bool:
    if "/" in token:
        return (REPO / token).exists()
    # A bare file name: somewhere in the tree (the recipe names its folder nearby).
    return any(p for p in REPO.rglob(token) if ".git" not in p.parts)


def test_every_path_named_in_the_recipes_exists():
    paths = named_paths(PAGE.read_text(encoding="utf-8"))
    assert len(paths) > 30  # the recipes name their files; the pattern must find them
    missing = sorted({p for p in paths if not _exists(p)})
    assert not missing, f"docs/contributing.md names paths that do not exist: {missing}"


def test_links_to_other_pages_resolve():
    text = PAGE.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert links
    missing = [link for link in links if not (PAGE.parent / link).exists()]
    assert not missing


def test_the_recipes_are_there_and_the_site_lists_the_page():
    headings = re.findall(r"^## (.+)$", PAGE.read_text(encoding="utf-8"), re.MULTILINE)
    assert {"Recipe: a new op", "Recipe: a new sketch rule"} <= set(headings)
    assert "contributing.md" in (REPO / "mkdocs.yml").read_text()


def test_the_path_pattern():
    text = "see `autosched/search/sketch.py`, `kernel.py`, `a(b/c)`, `x / y` and `OPS`"
    assert named_paths(text) == ["autosched/search/sketch.py", "kernel.py"]
    assert not _exists("autosched/no_such_module.py")
