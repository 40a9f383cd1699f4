"""MkDocs hooks: render the lessons and tutorials (Python scripts) as pages with their output.

For every ``lessons/NN_x.py`` and ``tutorials/x.py`` the site gets a page ``NN_x.md`` holding the
script's docstring as the introduction, its code, and what it printed:

- a lesson is run (``AUTOSCHED_LESSON_QUICK=1``, as CI runs it), unless
  ``AUTOSCHED_DOCS_OUTPUT=golden``: then its golden output from ``tests/docs/golden/`` is shown
  (the deterministic part of a real run, which ``tests/docs/test_lessons.py`` keeps current);
- a tutorial tunes a whole network (minutes), so its page shows the output recorded in
  ``tutorials/output/x.txt`` (a real run, with the command that made it at its top).

``mkdocs build --strict`` (``tests/docs/test_site.py``) builds the site.
"""

from __future__ import annotations

import ast
import logging
import os
import subprocess
import sys
from pathlib import Path

from mkdocs.structure.files import File

log = logging.getLogger("mkdocs.hooks.autosched")
SCRIPT_DIRS = ("lessons", "tutorials")


def _intro_and_code(source: str) -> tuple[str, str]:
    """The module docstring (as Markdown) and the code after it."""
    tree = ast.parse(source)
    doc = ast.get_docstring(tree) or ""
    if doc and tree.body and isinstance(tree.body[0], ast.Expr):
        code = "\n".join(source.splitlines()[tree.body[0].end_lineno :]).strip("\n")
    else:
        code = source
    return doc, code


def _run(script: Path, repo: Path) -> str:
    env = dict(os.environ, AUTOSCHED_LESSON_QUICK="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, cwd=repo, timeout=600)  # fmt: skip
    if proc.returncode != 0:
        log.warning("%s failed (exit %d): %s", script.name, proc.returncode, proc.stderr[-500:])
    return proc.stdout


def _output(kind: str, script: Path, docs: Path) -> tuple[str, str]:
    """(what the output is, the output text)."""
    repo = docs.parent
    if kind == "tutorials":
        recorded = docs / "tutorials" / "output" / f"{script.stem}.txt"
        if not recorded.is_file():
            log.warning("no recorded output %s for the tutorial %s", recorded, script.name)
            return "No recorded output yet.", ""
        return "Output recorded from a real run (the command is on its first line):", (
            recorded.read_text()
        )
    if os.environ.get("AUTOSCHED_DOCS_OUTPUT") == "golden":
        golden = repo / "tests" / "docs" / "golden" / f"{script.stem}.txt"
        return (
            "Output (`AUTOSCHED_LESSON_QUICK=1`; measured lines, which start with `~`, left out):",
            golden.read_text(),
        )
    return "Output (`AUTOSCHED_LESSON_QUICK=1`):", _run(script, repo)


def _page(kind: str, script: Path, docs: Path) -> str:
    intro, code = _intro_and_code(script.read_text())
    title, _, rest = intro.partition("\n")
    what, output = _output(kind, script, docs)
    return (
        f"# {title or script.stem}\n\n{rest.strip()}\n\n"
        f"Source: `docs/{kind}/{script.name}`\n\n```python\n{code}\n```\n\n"
        f"{what}\n\n```text\n{output.rstrip()}\n```\n"
    )


def on_files(files, config):
    """Add one generated page per lesson / tutorial script; leave the scripts out of the site."""
    docs = Path(config["docs_dir"])
    for kind in SCRIPT_DIRS:
        for script in sorted((docs / kind).glob("*.py")):
            existing = files.get_file_from_path(f"{kind}/{script.name}")
            if existing is not None:
                files.remove(existing)
            uri = f"{kind}/{script.stem}.md"
            files.append(File.generated(config, uri, content=_page(kind, script, docs)))
    return files
