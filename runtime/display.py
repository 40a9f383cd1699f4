"""HTML forms of runtime values for notebooks: generated source and timing results.

The runtime imports neither tensorir nor autosched, so it has its own few lines of
highlighting (pygments when installed, a plain ``<pre>`` otherwise).
"""

from __future__ import annotations

import html

__all__ = ["SourceCode", "highlighted", "timing_html"]

# Module.lang -> pygments lexer name (pygments has no OpenCL lexer; OpenCL C is C).
_LEXERS = {"llvm": "llvm", "cuda": "cuda", "opencl": "c", "c": "c"}


def highlighted(code: str, lang: str) -> str:
    """``code`` as highlighted HTML (inline styles), or escaped in a ``<pre>``."""
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import get_lexer_by_name
    except ImportError:
        return f"<pre>{html.escape(code)}</pre>"
    lexer = get_lexer_by_name(_LEXERS.get(lang, "text"))
    return highlight(code, lexer, HtmlFormatter(noclasses=True, nobackground=True))


class SourceCode(str):
    """Generated code: a ``str`` (print it, write it, search it) that a notebook shows
    highlighted for its language."""

    lang: str

    def __new__(cls, code: str, lang: str) -> SourceCode:
        obj = super().__new__(cls, code)
        obj.lang = lang
        return obj

    def __reduce__(self):
        return SourceCode, (str(self), self.lang)

    def _repr_html_(self) -> str:
        return highlighted(str(self), self.lang)


def timing_html(result) -> str:
    """A ``TimingResult`` as the "Execution time summary" table in milliseconds."""
    titles = ("mean (ms)", "median (ms)", "max (ms)", "min (ms)", "std (ms)", "repeats")
    values = [f"{v * 1e3:.4f}" for v in (result.mean, result.median, result.max, result.min,
                                           result.std)] + [str(len(result.results))]  # fmt: skip
    cell = "border:1px solid #ccc;padding:2px 6px"
    head = "".join(f'<th style="{cell}">{t}</th>' for t in titles)
    row = "".join(f'<td style="{cell}">{v}</td>' for v in values)
    return (
        "<div><b>Execution time summary</b>"
        '<table style="border-collapse:collapse;font-family:monospace;font-size:12px">'
        f"<tr>{head}</tr><tr>{row}</tr></table></div>"
    )
