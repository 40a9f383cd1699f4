"""Docs and tutorials do not announce as future what works: remote measurement through
``autosched.rpc`` is there (docs/remote.md), so no page says it "comes with" it "until then"."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STALE = re.compile(r"comes\s+with\s+`+autosched\.rpc|until\s+then", re.IGNORECASE)


def test_no_page_promises_what_already_works():
    files = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")),
             *sorted((REPO / "docs").rglob("*.py"))]  # fmt: skip
    hits = [
        f"{path.relative_to(REPO)}:{text[: m.start()].count(chr(10)) + 1}: {m.group(0)!r}"
        for path in files
        if "site" not in path.relative_to(REPO).parts[:2]
        for text in [path.read_text(encoding="utf-8")]
        for m in STALE.finditer(text)
    ]
    assert not hits, "stale text:\n" + "\n".join(hits)


def test_the_pattern_catches_the_old_wording():
    old = "Remote measurement comes with\n``autosched.rpc``; until then this tutorial measures"
    assert len(STALE.findall(old)) == 2
