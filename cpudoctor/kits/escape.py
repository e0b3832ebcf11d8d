"""Making report data safe to show: in a terminal, in Markdown, in a code span.

Brand strings, notes, package names and flags come from the machine (or a
captured tree, or a saved report from someone else). Shown raw they could:

* drive the terminal: ``ESC [ 2 J`` clears the screen, an OSC 8 sequence
  hides a link behind innocent text, OSC 52 writes the clipboard;
* turn into Markdown or HTML markup (``<img src=…>``, ``[link](…)``);
* break out of a code span: a backtick in a flag ends ```flag``` early.

This is the one place that escapes report data: every renderer, the window's
rich text included, escapes through it.

:func:`strip_controls` removes escape sequences and control characters (and
the bidirectional overrides of "Trojan Source"); every renderer's escaping
helper starts with it, so every format benefits. :func:`md_code` and
:func:`md_fence` choose a backtick run longer than any in the text, the way
CommonMark defines code spans and fences.
"""

from __future__ import annotations

import re
from html import escape as _html_escape
from typing import Any

# CSI (ESC [ ... final byte), OSC/DCS/SOS/PM/APC strings (ended by BEL or ESC \ or the C1 ST, an unended one at
# its line's end: a lone SOS byte in a lab run's name once took the rest of the whole report, notes and all),
# then any other two-byte escape; the C1 forms (0x9B CSI, 0x9D OSC) likewise.
_ESCAPE_SEQ = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\n]*?(?:\x07|\x1b\\|\x9c|(?=\n)|$)"
    r"|\x1b[ -/]*[0-~]?",
    re.DOTALL,
)
# C0 controls but tab and newline, DEL, C1 controls, the bidi marks (ALM, LRM, RLM) and embeddings/overrides/
# isolates, lone surrogates (no UTF-8 encodes them) and U+FFFE/U+FFFF (not characters; XML forbids them).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                      r"\ud800-\udfff\ufffe\uffff]")
# The line and paragraph separators end a line in some viewers (and JavaScript): a space, like a tab in one line.
_SEPARATORS = str.maketrans({"\u2028": " ", "\u2029": " "})


def strip_controls(text: Any, keep_newlines: bool = True) -> str:
    """``text`` without escape sequences or control characters (tab and newline kept unless told).

    The one sanitiser of every text sink: the terminal, ``-o`` files, exports, Markdown, HTML and SVG
    (which escape after it), so a brand string cannot drive a terminal, reorder a line or break a file.
    """
    s = "" if text is None else str(text)
    if not s or (s.isprintable() and "\x1b" not in s):
        return s
    if not keep_newlines:
        s = s.replace("\r\n", " ").replace("\n", " ").replace("\r", " ").replace("\t", " ")
    return _CONTROL.sub("", _ESCAPE_SEQ.sub("", s)).translate(_SEPARATORS)


def one_line(text: Any) -> str:
    """An error message as one line: control characters (a newline in a file name) written as ``\\n``, ``\\x1b``."""
    s = "" if text is None else str(text)
    if s.isprintable():
        return s
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in s)


def terminal_safe(text: str) -> str:
    """Text about to be written to a terminal: no escape sequences, no control characters but tab/newline."""
    return strip_controls(text)


def md_escape(text: Any) -> str:
    """One line of report data as Markdown text: controls stripped, markup characters escaped."""
    s = strip_controls(text, keep_newlines=False)
    for ch in "\\`*_[]<>|#":
        s = s.replace(ch, "\\" + ch)
    return s


def md_code(text: Any, table: bool = False) -> str:
    """``text`` as one inline code span that no backtick inside can end early.

    CommonMark: the span is delimited by a backtick run that does not occur in
    the text, and one space is stripped from each end when both are present.
    In a GFM table cell a ``|`` still ends the cell, so it is escaped there.
    """
    s = strip_controls(text, keep_newlines=False)
    if table:
        s = s.replace("|", "\\|")
    if not s:
        return "` `"
    longest = max((len(run) for run in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or (s.startswith(" ") and s.endswith(" ")) else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def md_fence(text: Any, lang: str = "", indent: str = "") -> list[str]:
    """``text`` as a fenced code block (lines), the fence longer than any backtick run inside."""
    body = strip_controls(text)
    longest = max((len(run) for run in re.findall(r"`{3,}", body)), default=0)
    fence = "`" * max(3, longest + 1)
    lang = re.sub(r"[^A-Za-z0-9_+-]", "", lang or "")
    return [f"{indent}{fence}{lang}", *(f"{indent}{line}" for line in body.splitlines()), f"{indent}{fence}"]


def html_escape(value: Any) -> str:
    """Anything as HTML or XML text or attribute value (``None`` is empty), control characters stripped: what
    it returns is well-formed inside an SVG (XML 1.0 allows no C0 control, surrogate or U+FFFE even escaped)."""
    return _html_escape(strip_controls(value), quote=True)


def shell_quote(text: Any) -> str:
    """One word for a POSIX shell that reads back as ``text`` exactly, shown safely on a terminal.

    :func:`shlex.quote` when ``text`` has nothing to hide; else bash's ``$'...'`` quoting with every
    unsafe character as the bytes of its name (``\\x1b``, ``\\xe2\\x80\\xae``: the same in any locale):
    a command suggested for a file whose name holds a control character names that file, not one with
    the character stripped (which may not exist).
    """
    import shlex

    s = "" if text is None else str(text)
    if not _CONTROL.search(s) and not _UNSAFE_WORD.search(s):
        return shlex.quote(s)
    out = []
    for ch in s:
        if ch in "\\'":
            out.append("\\" + ch)
        elif _CONTROL.match(ch) or _UNSAFE_WORD.match(ch):
            out.extend(f"\\x{byte:02x}" for byte in _file_name_bytes(ch))
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


def _file_name_bytes(ch: str) -> bytes:
    """The bytes a file name holds for ``ch`` (a surrogate from ``os.fsdecode`` is the byte it stands for)."""
    try:
        return ch.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return ch.encode("utf-8", "surrogatepass")


# Characters a quoted shell word must not show raw besides _CONTROL: tab, newline, the line separators.
_UNSAFE_WORD = re.compile(r"[\t\n\u2028\u2029]")
