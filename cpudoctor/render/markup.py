"""Escaping report data for Markdown and HTML: data never turns into markup.

CPU brand strings, distro names, package names, notes and finding texts come
from the machine (or from someone else's saved report): every renderer, the
window's rich text included, escapes them here and nowhere else.
"""

from __future__ import annotations

from html import escape as _html_escape
from typing import Any

_MD_SPECIAL = "\\`*_[]<>|#"


def md_escape(text: Any) -> str:
    """Report data as literal Markdown text (tables included): every markup character escaped, one line."""
    s = "" if text is None else str(text)
    for ch in _MD_SPECIAL:
        s = s.replace(ch, "\\" + ch)
    return s.replace("\r", " ").replace("\n", " ")


def md_code(text: Any, table: bool = False, limit: int | None = None) -> str:
    """Report data for inside a Markdown code span (`` `...` ``): no backtick can end it, one line,
    at most ``limit`` characters; in a table cell (``table``) no pipe can end the cell either."""
    s = "" if text is None else str(text)
    s = s.replace("`", "'").replace("\r", " ").replace("\n", " ")
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + "…"
    return s.replace("|", "\\|") if table else s


def html_escape(value: Any) -> str:
    """Anything as HTML text or attribute value (``None`` is empty)."""
    return _html_escape("" if value is None else str(value), quote=True)
