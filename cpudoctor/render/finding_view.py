"""What one finding says, worded once for every surface.

A :class:`~cpudoctor.model.Finding` is data the advisor made. :func:`finding_view`
turns it into a :class:`FindingView`: the title, the severity in the app's words,
the why, the fix, the snippet written for one shell, the ``explain`` command, the
link into the rule reference and the evidence in words. The text, Markdown and
HTML reports, the doctor page, ``inspect`` and the window's Advisor page only lay
a view out (marks, indentation, markup, escaping): none of them reads a finding's
fields for words of its own, so a wording fixed here is fixed on every surface
(``tests/test_finding_view.py`` renders one finding everywhere and checks).

Snippets: the advisor writes shell snippets in bash (a Windows rule writes its
own PowerShell where bash has no form), and the snippet's shell is chosen here,
once, from what the surface asks for (a :class:`ShellChoice`): ``doctor`` and
``report --shell`` the user's shell, the window its shell switch, an export of a
report the shell of the machine it describes (PowerShell for Windows).
:func:`shell_snippet` writes the same commands for zsh, fish, PowerShell or cmd
through :func:`cpudoctor.advisor.snippets.translate`, with the report's
topology so Windows launches use its CPU numbers and processor groups. No
finding is rewritten for a shell; :func:`finding_data` gives the JSON surfaces
a finding with its snippet in the chosen shell. Snippets in another language
(Python, an ini file) are the same for every shell.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cpudoctor import docs_url
from cpudoctor.advisor import snippets, winshell
from cpudoctor.model import Finding, Report, Topology
from cpudoctor.render.words import Severity, bracketed, category_title, severity

# The names of a finding's parts, the same on every surface.
WHY = "Why"
FIX = "Fix"
EVIDENCE = "Evidence"
DETAILS = "Details"
# An evidence value longer than this is cut with an ellipsis (a list of 200 packages is not evidence).
EVIDENCE_LIMIT = 300
# The language a code block in each shell is highlighted as (GitHub's and the HTML page's names).
SHELL_LANGS: dict[str, str] = {"bash": "bash", "zsh": "zsh", "fish": "fish", "powershell": "powershell",
                               "cmd": "bat"}
DEFAULT_SHELL = "bash"       # what the advisor writes its shell snippets in


@dataclass(frozen=True)
class ShellChoice:
    """The shell a surface shows snippets in, and the machine they are typed on.

    ``shell`` None: as the advisor wrote them (bash; a Windows rule's own PowerShell). ``topology``, the
    report's, makes a pinned launch exact on Windows (its CPU numbers and processor groups).
    """

    shell: str | None = None
    topology: Topology | None = None

    def __post_init__(self) -> None:
        if self.shell is not None:
            object.__setattr__(self, "shell", snippets.normalise_shell(self.shell))   # ValueError for tcsh

    @classmethod
    def for_report(cls, report: Report, shell: str | None = None) -> "ShellChoice":
        """``shell`` (what the user asked for), else the shell of the machine the report describes where it is not
        bash's (PowerShell for Windows); the report's topology either way."""
        if shell is None and snippets.report_os(report) == "windows":
            shell = snippets.default_shell(report)
        return cls(shell, report.topology)

    @classmethod
    def of(cls, shell: "str | ShellChoice | None") -> "ShellChoice":
        return shell if isinstance(shell, ShellChoice) else cls(shell)


@dataclass(frozen=True)
class Snippet:
    """What to type: ``text`` in ``lang``, written for ``shell`` (None: not a shell snippet, e.g. Python)."""

    text: str
    lang: str
    shell: str | None

    def __bool__(self) -> bool:
        return bool(self.text)


@dataclass(frozen=True)
class EvidenceLine:
    """One fact the rule read: the report field (``topology.affinity.usable_cpus``) and its value in words."""

    key: str
    value: str


@dataclass(frozen=True)
class FindingView:
    """Everything a surface shows of one finding, in words; see the module docstring."""

    code: str
    symbol: str
    category: str                  # the category's title ("Thread counts")
    severity: Severity             # its name ("Warning"), group, marks and emoji
    title: str
    why: str
    fix: str
    snippet: Snippet
    explain: str                   # "cpudoctor explain THR002"
    docs_url: str                  # the rule's page in the rule reference ("" when the rule has none)
    docs_label: str                # "THR002 in the rule reference"
    evidence: tuple[EvidenceLine, ...]

    def mark(self, ascii_only: bool = False) -> str:
        """``!``: the severity's mark (``ascii_only`` for a terminal without Unicode)."""
        return self.severity.ascii_mark if ascii_only else self.severity.mark

    def bracketed(self, ascii_only: bool = False) -> str:
        """``[!]``: the flutter-doctor mark."""
        return bracketed(self.severity.key, ascii_only)

    @property
    def detailed(self) -> bool:
        """True for what must be fixed (warnings, problems): pages that keep suggestions short show these in full."""
        return self.severity.key in ("warning", "error")

    def evidence_text(self) -> str:
        """``key=value, key=value``: the evidence on one line (the doctor's verbose page)."""
        return ", ".join(f"{line.key}={line.value}" for line in self.evidence)


def finding_view(finding: Finding, shell: str | ShellChoice | None = None) -> FindingView:
    """The words of ``finding``, its snippet written for ``shell`` (bash, zsh, fish, powershell, cmd, or a
    :class:`ShellChoice` with the report's topology).

    ``shell`` None: the snippet as the advisor wrote it. Raises ValueError for a shell CPU Doctor does not
    write for.
    """
    return FindingView(
        code=finding.code,
        symbol=finding.symbol,
        category=category_title(finding.category),
        severity=severity(finding.severity),
        title=finding.title,
        why=finding.why,
        fix=finding.fix,
        snippet=finding_snippet(finding, shell),
        explain=f"cpudoctor explain {finding.code}",
        docs_url=docs_url(finding.docs) if finding.docs else "",
        docs_label=f"{finding.code} in the rule reference",
        evidence=tuple(EvidenceLine(str(key), evidence_value(value, EVIDENCE_LIMIT))
                       for key, value in finding.evidence.items()),
    )


def _bash_form(finding: Finding) -> str:
    """The bash a finding's shell snippet was written in (``snippet_bash``: a report saved by an older CPU Doctor,
    which wrote a Windows machine's snippets in PowerShell and kept the bash beside them)."""
    return finding.snippet_bash or (finding.snippet if finding.snippet_lang == "bash" else "")


def finding_snippet(finding: Finding, shell: str | ShellChoice | None = None) -> Snippet:
    """``finding``'s snippet as typed in ``shell``; None: as written (its ``snippet_lang``)."""
    choice = ShellChoice.of(shell)
    lang = finding.snippet_lang
    bash = _bash_form(finding)
    if choice.shell is None:
        if lang in SHELL_LANGS:
            return Snippet(finding.snippet, SHELL_LANGS[lang], lang)
        return Snippet(finding.snippet, lang, None)
    if bash and finding.snippet:
        return shell_snippet(bash, "bash", choice.shell, choice.topology)
    if lang == "powershell" and finding.snippet:  # PowerShell a Windows rule wrote itself: cmd's words if it has them
        shown = shell_snippet(finding.snippet, lang, choice.shell, choice.topology)
        if shown.shell == "cmd":
            return shown
    return finding_snippet(finding, None)         # Python, or that PowerShell as written


def finding_data(finding: Finding, shell: str | ShellChoice | None = None) -> dict[str, Any]:
    """``finding`` as JSON data with its snippet as typed in ``shell`` (``doctor``/``run``/``report`` JSON):
    ``snippet_lang`` names that shell, and ``snippet_bash`` keeps the bash it was written in when the shell
    is another. The finding itself is not changed."""
    from cpudoctor.model.serde import to_data

    data = to_data(finding)
    shown = finding_snippet(finding, shell)
    bash = _bash_form(finding)
    if shown.shell is not None and finding.snippet:
        data["snippet"], data["snippet_lang"] = shown.text, shown.shell
        data["snippet_bash"] = bash if shown.shell != "bash" and bash else ""
    return data


def shell_snippet(text: str, lang: str, shell: str = DEFAULT_SHELL, topology=None) -> Snippet:
    """A snippet as typed in ``shell``: a bash snippet translated, any other language (Python, ini) as it is
    (but a Windows rule's own PowerShell in cmd's words under cmd, when every line has a cmd form).

    ``topology`` (the report's) makes pinned launches exact on Windows: its CPU numbers and processor groups.
    """
    shell = snippets.normalise_shell(shell)
    if lang == "powershell" and shell == "cmd":
        as_cmd = winshell.powershell_as_cmd(text)     # a Windows rule's own PowerShell, when cmd can say it
        if as_cmd is not None:
            return Snippet(as_cmd, SHELL_LANGS["cmd"], "cmd")
    if lang != "bash":
        return Snippet(text, lang, None)
    if text and shell != DEFAULT_SHELL:
        text = snippets.translate(text, shell, topology)
    return Snippet(text, SHELL_LANGS[shell], shell)


def evidence_value(value: Any, limit: int = 200) -> str:
    """An evidence value in words: None is "not set / unknown", True "yes", [] "none".

    Evidence keys are JSON paths of the report; the values are shown the way a
    reader of a bug report understands them, not as Python reprs (``None``,
    ``True``, ``[]``).
    """
    from cpudoctor.kits.format import number

    if value is None:
        text = "not set / unknown"
    elif isinstance(value, int) and not isinstance(value, bool):
        text = str(value)
    elif isinstance(value, (bool, float)):
        text = number(value)
    elif isinstance(value, (list, tuple)):
        text = ", ".join(evidence_value(v, limit) for v in value) if value else "none"
    elif isinstance(value, dict):
        text = ", ".join(f"{k}={evidence_value(v, limit)}" for k, v in value.items()) if value else "none"
    else:
        text = str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
