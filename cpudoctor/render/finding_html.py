"""One finding as HTML, for every surface that shows HTML: the export page, the PDF, the window's panes.

A :class:`~cpudoctor.render.finding_view.FindingView` holds the words; :func:`finding_html`
lays them out once. Three styles of the same markup:

- ``page``: the HTML export, styled by its stylesheet (classes; ``<details>`` for the evidence);
- ``print``: the PDF (Qt's QTextDocument with the print stylesheet): the same, snippets sized so that
  every command line stays whole (:func:`print_snippet`);
- ``widget``: Qt's rich text in the window (the Advisor's details, the Inspector's findings), which has
  no stylesheet: the severity's colour inline, a coloured bar, headings instead of ``<details>``,
  and a copy link under the snippet.
"""

from __future__ import annotations

from typing import Literal

from cpudoctor.kits.escape import html_escape as e
from cpudoctor.render.finding_view import DETAILS, EVIDENCE, FIX, WHY, FindingView, Snippet

Style = Literal["page", "print", "widget"]
# The severities' colours where no stylesheet gives them (the window's rich text).
WIDGET_COLOURS = {"error": "#d9534f", "warning": "#e0a030", "info": "#4a90c2", "ok": "#3fa36b"}


def finding_html(view: FindingView, style: Style = "page", *, title: bool = True, snippet: bool = True,
                 evidence: bool = True, copy_href: str | None = None) -> str:
    """``view`` as one block: its severity, title and rule, why, fix, snippet, evidence and rule link.

    ``title`` False: a surface that shows the title above the block (the Advisor's details); ``snippet``
    False: one that shows the snippet in an editor of its own (with its shell switch); ``evidence``
    False: a compact list (the Inspector); ``copy_href``: a link under the snippet that copies it.
    """
    sev = view.severity
    colour = WIDGET_COLOURS.get(sev.key, "#888") if style == "widget" else None
    tint = f' style="color:{colour}"' if colour else ""
    head = (f'<span class="mark sev-{sev.key}"{tint}>{e(view.bracketed())}</span> '
            f'<span class="sev-{sev.key}"{tint}><b>{e(sev.name)}</b></span> · {e(view.category)}')
    if title:
        head += f' · <span class="title"><b>{e(view.title)}</b></span>'
    head += f'&nbsp;&nbsp;<span class="code">{e(view.code)} {e(view.symbol)}</span>'
    parts = [f"<p>{head}</p>"]
    if view.why:
        parts.append(f"<p><b>{WHY}:</b> {e(view.why)}</p>")
    if view.fix:
        parts.append(f"<p><b>{FIX}:</b> {e(view.fix)}</p>")
    if snippet and view.snippet:
        parts.append(snippet_html(view.snippet, style))
        if copy_href:
            what = "command" if view.snippet.shell else "code"
            parts.append(f'<p><a href="{e(copy_href)}">Copy {what}</a></p>')
    if evidence and view.evidence:
        rows = "".join(f"<tr><th><code>{e(line.key)}</code></th><td>{e(line.value)}</td></tr>"
                       for line in view.evidence)
        label = (f"<h4>{EVIDENCE}</h4>" if style == "widget" else f"<details><summary>{EVIDENCE}</summary>")
        parts.append(label + f"<table cellspacing=\"4\">{rows}</table>" + ("" if style == "widget" else "</details>"))
    docs = f' · <a href="{e(view.docs_url)}">{e(view.docs_label)}</a>' if view.docs_url else ""
    note = ' style="color:gray"' if style == "widget" else ""
    parts.append(f'<p class="note"{note}>{DETAILS}: <code>{e(view.explain)}</code>{docs}</p>')
    body = "".join(parts)
    if style == "widget":           # Qt's rich text has no border-left: a one-cell bar in the severity's colour
        return (f'<table width="100%" cellspacing="0" cellpadding="4" style="margin-bottom: 8px;"><tr>'
                f'<td width="4" bgcolor="{colour}"></td><td>{body}</td></tr></table>')
    return f'<div class="finding {sev.key}">{body}</div>'


# Printed snippets: the PDF's text width and DejaVu Sans Mono's advance (0.602 em), so a command is
# laid out on whole lines that copy and paste back into a shell (Qt would break a long line anywhere).
PRINT_SNIPPET_WIDTH_PX = 630           # the PDF's 680 px text width less the finding's bar and the block's padding
PRINT_SNIPPET_POINTS = (8.0, 7.0, 6.0)
MONO_ADVANCE_EM = 0.602
SHELL_LANGS = frozenset({"bash", "sh", "zsh", "fish"})


def _chars_per_line(points: float) -> int:
    return int(PRINT_SNIPPET_WIDTH_PX / (MONO_ADVANCE_EM * points * 96 / 72))


def _shell_words(line: str) -> list[str]:
    """``line`` cut at the spaces that are outside quotes (the places a shell line may continue)."""
    words, current, quote = [], "", ""
    for ch in line:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == " ":
            words.append(current)
            current = ""
            continue
        current += ch
    return words + [current]


def _continue_lines(line: str, width: int) -> list[str]:
    """A long shell line as ``part \\`` continuation lines no wider than ``width`` where the words allow."""
    words = _shell_words(line)
    if len(line) <= width or line.lstrip().startswith("#") or max(len(w) for w in words) + 4 > width:
        return [line]             # fits, a comment, or a word no continuation can make fit: a smaller font must
    indent = "  "
    out, current = [], ""
    for word in words:
        candidate = f"{current} {word}" if current else word
        if current and len(candidate) + 2 > width:
            out.append(current + " \\")
            current = indent + word
        else:
            current = candidate
    return out + [current]


def print_snippet(text: str, lang: str) -> tuple[str, float]:
    """(text, font size in points) for a snippet in the PDF: every line whole, a command never cut mid-word.

    Shell lines longer than the page continue with `` \\`` at a space outside
    quotes (still one command when pasted); a word that is itself too long
    (an ``OMP_PLACES`` list) makes the block's font smaller, down to 6 pt.
    """
    for points in PRINT_SNIPPET_POINTS:
        width = _chars_per_line(points)
        lines = text.splitlines()
        if lang in SHELL_LANGS:
            lines = [part for line in lines for part in _continue_lines(line, width)]
        if all(len(line) <= width for line in lines):
            return "\n".join(lines), points
    return text, PRINT_SNIPPET_POINTS[-1]


def snippet_html(snippet: Snippet, style: Style = "page") -> str:
    """A snippet as a code block: whole lines sized for the page in ``print``, wrapped in a ``widget``."""
    lang = e(snippet.lang)
    if style == "widget":          # Qt's rich text: a narrow pane wraps rather than scrolls
        return f'<pre style="white-space: pre-wrap; margin-top: 4px;"><code class="language-{lang}">{e(snippet.text)}</code></pre>'
    if style == "page":
        return f'<pre><code class="language-{lang}">{e(snippet.text)}</code></pre>'
    text, points = print_snippet(snippet.text, snippet.lang)
    fits = all(len(line) <= _chars_per_line(points) for line in text.splitlines())
    # white-space:pre keeps each line whole; only a line no size can fit may still wrap (pre-wrap)
    return (f'<pre style="font-size:{points:g}pt;white-space:{"pre" if fits else "pre-wrap"}">'
            f'<code class="language-{lang}">{e(text)}</code></pre>')
