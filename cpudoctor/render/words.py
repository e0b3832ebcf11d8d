"""CPU Doctor's vocabulary for people: severity names and marks, category titles, counts.

One table serves the terminal (``doctor``, ``report``, ``inspect``), the
window (Advisor groups, Overview, status bar) and the exports (Markdown,
HTML, PDF), so a finding is a "Warning" with a ``!`` everywhere and a count
reads "2 warnings, 4 suggestions, 9 checks passed" wherever it is shown.

The severity *keys* (``ok``, ``info``, ``warning``, ``error``) are data of the
report (:data:`cpudoctor.model.report.SEVERITIES`); this module only says them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from cpudoctor.kits.format import DASH, UNKNOWN  # noqa: F401 - re-exported with the words
from cpudoctor.kits.plural import plural  # noqa: F401 - the one plural helper, re-exported with the words
from cpudoctor.advisor.ranking import category_order, finding_order, severity_order  # noqa: F401 - the reading order
from cpudoctor.model import CATEGORIES as CATEGORY_KEYS
from cpudoctor.model import SEVERITIES



@dataclass(frozen=True)
class Severity:
    """How people see one severity: its name, group heading, count noun and marks."""

    key: str                # ok | info | warning | error (Finding.severity)
    name: str               # "Warning": a finding's label
    group: str              # "Warnings": the Advisor's group heading
    noun: tuple[str, str]   # ("warning", "warnings"): counts ("2 warnings")
    mark: str               # "!": terminal and Markdown marks, "[!]" in brackets
    ascii_mark: str         # the mark for a terminal that cannot print the Unicode one
    emoji: str              # the mark GitHub renders in colour (doctor --format md)


# Worst first: the order findings are listed and counted in.
SEVERITY: dict[str, Severity] = {
    "error": Severity("error", "Problem", "Problems", ("problem", "problems"), "✗", "x", "❌"),
    "warning": Severity("warning", "Warning", "Warnings", ("warning", "warnings"), "!", "!", "⚠️"),
    "info": Severity("info", "Suggestion", "Suggestions", ("suggestion", "suggestions"), "i", "i", "ℹ️"),
    "ok": Severity("ok", "Passed", "Passed", ("check passed", "checks passed"), "✓", "+", "✅"),
}
assert set(SEVERITY) == set(SEVERITIES), "every severity of the report model needs its words"

# Neutral mark: a feature that is simply absent, neither good nor bad (the ISA table's "not present").
NEUTRAL_MARK = "-"

# Display order and titles of the advisor's categories (doctor and the Advisor page group by these).
CATEGORIES: dict[str, str] = {
    "isa": "CPU instruction sets",
    "torch": "PyTorch build",
    "threads": "Thread counts",
    "blas": "BLAS and OpenMP runtimes",
    "topology": "Topology and pinning",
    "os": "Operating system",
    "memory": "Memory and swap",
    "environment": "WSL, VMs and containers",
    "precision": "Precision (bf16, int8)",
    "inference": "Inference latency (measured)",
    "allocator": "Memory allocator",
    "known": "Known problems by version",
    "myth": "Myths from tuning guides",
    "evidence": "Evidence from the running job",
    "internal": "CPU Doctor itself",
}
assert tuple(CATEGORIES) == CATEGORY_KEYS, "every category of the report model needs its title, in the model's order"


class _HasSeverity(Protocol):
    severity: str


class _Finding(_HasSeverity, Protocol):
    code: str


def severity(key: str) -> Severity:
    """The words of severity ``key``; an unknown key (a newer report) reads as a suggestion."""
    return SEVERITY.get(key, SEVERITY["info"])


def bracketed(key: str, ascii_only: bool = False) -> str:
    """``[!]``: the flutter-doctor mark of a severity, as the terminal and the reports print it."""
    s = severity(key)
    return f"[{s.ascii_mark if ascii_only else s.mark}]"


def category_title(category: str) -> str:
    return CATEGORIES.get(category, category)






def severity_counts(findings: Iterable[_HasSeverity]) -> dict[str, int]:
    """How many findings of each severity, worst first (zeros included)."""
    counts = dict.fromkeys(SEVERITY, 0)
    for f in findings:
        counts[f.severity if f.severity in counts else "info"] += 1
    return counts


def counts_text(findings: Iterable[_HasSeverity], *, passed: bool = True) -> str:
    """``1 problem, 2 warnings, 7 suggestions, 20 checks passed`` (zeros left out; "" for none)."""
    parts = [plural(n, *severity(key).noun) for key, n in severity_counts(findings).items()
             if n and (passed or key != "ok")]
    return ", ".join(parts)


def to_fix(findings: Iterable[_HasSeverity]) -> int:
    """How many findings are worth fixing (warnings and problems; suggestions are optional)."""
    return sum(1 for f in findings if f.severity in ("warning", "error"))


def status_text(findings: list[_HasSeverity]) -> str:
    """One line for a status bar: ``Nothing to fix — 7 suggestions, 20 checks passed``."""
    if not findings:
        return "No checks ran"
    n = to_fix(findings)
    head = "Nothing to fix" if n == 0 else plural(n, "thing to fix", "things to fix")
    return f"{head} — {counts_text(findings)}"


def yes_no(value: bool | None, unknown: str = UNKNOWN) -> str:
    """True/False/None as a reader says them: yes, no, unknown."""
    return unknown if value is None else ("yes" if value else "no")


NO_REASON = "no reason was given"


def reason_of(exc: BaseException) -> str:
    """Why something was refused, in words a person can act on (a message box, the status bar).

    CPU Doctor's own errors (a report that is damaged, a Python that cannot be used) and the operating
    system's (a missing file, no permission) are written for people and are said as they are; any other
    exception is a bug in CPU Doctor, named as one (``'list' object has no attribute 'get'`` means nothing
    to the reader), and an empty message is said to be one.
    """
    from cpudoctor.kits.escape import one_line

    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return one_line(f"{exc.strerror}{where}")
    ours = type(exc).__module__.split(".", 1)[0] == "cpudoctor" or isinstance(exc, OSError)
    text = one_line(str(exc)).strip()
    if not ours:
        return "an internal error in CPU Doctor (a bug, not your setup); please report it"
    return text or NO_REASON


# Notes a page of the window shows at once; the rest are counted (every one is in the exported report).
MAX_SHOWN_NOTES = 12


def shown_notes(notes: Iterable[str], limit: int = MAX_SHOWN_NOTES) -> list[str]:
    """``notes`` without repeats, at most ``limit`` of them, then a line counting the rest: a word-wrapped
    label of 65,536 notes took the window minutes to lay out (issue 29)."""
    unique = list(dict.fromkeys(notes))
    if len(unique) <= limit:
        return unique
    return unique[:limit] + [f"… and {len(unique) - limit} more (all of them are in the exported report)"]
