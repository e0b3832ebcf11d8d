"""The rule registry and the loop that runs rules over a Report.

A rule is a small pure function ``fn(report) -> list[Finding]`` registered with
``@rule(code, symbol, category=..., severity=..., title=...)``. Codes are
stable and never reused: a renamed or merged rule keeps answering to its old
code through :data:`REDIRECTS` (the way ruff handles renamed rules), so a
``--only`` list or a docs link written last year still works.

Rules build findings through :class:`Facts`, which reads report fields by their
dotted path and records each one it read, so every finding says which report
fields (and values) it was decided from. The engine then stamps the rule's code,
symbol, category and docs anchor on every finding, so a rule cannot mislabel
its own output.

Each rule's docstring has three fixed sections, ``What it checks:``, ``Why it
matters:`` and ``Fix:``; registration fails without them, and ``cpudoctor
explain CODE`` prints them.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from cpudoctor.report import Finding, Report
from cpudoctor.serde import to_data

SEVERITIES: tuple[str, ...] = ("ok", "info", "warning", "error")
SEVERITY_RANK: dict[str, int] = {s: i for i, s in enumerate(SEVERITIES)}

# Display order and names of the categories (doctor groups by these).
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
    "allocator": "Memory allocator",
    "myth": "Myths from tuning guides",
    "internal": "CPU Doctor itself",
}

DOC_SECTIONS: tuple[str, ...] = ("What it checks", "Why it matters", "Fix")

# Old code -> current code. Codes are never reused; when a rule is renamed or
# merged into another, its old code is added here instead of being deleted.
REDIRECTS: dict[str, str] = {}

_CODE_RE = re.compile(r"^[A-Z]{2,6}\d{3}$")
_SYMBOL_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_SECTION_RE = re.compile(r"^(What it checks|Why it matters|Fix):\s*$", re.MULTILINE)


class RuleDefinitionError(ValueError):
    """A rule was registered wrongly (bad or reused code, missing doc section)."""


class UnknownRuleError(KeyError):
    """No rule answers to this code or symbol; ``str()`` lists what exists."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want a sentence
        return str(self.args[0]) if self.args else "unknown rule"


@dataclass(frozen=True)
class Rule:
    code: str
    symbol: str
    category: str
    severity: str                      # the worst severity this rule can report
    title: str
    func: Callable[[Report], list[Finding]]
    doc: str

    @property
    def docs_anchor(self) -> str:
        return f"docs/rules.md#{self.code.lower()}"

    def sections(self) -> dict[str, str]:
        return doc_sections(self.doc)


_REGISTRY: dict[str, Rule] = {}


def doc_sections(doc: str) -> dict[str, str]:
    """Split a rule docstring into its fixed sections (missing ones are absent)."""
    doc = inspect.cleandoc(doc or "")
    matches = list(_SECTION_RE.finditer(doc))
    out: dict[str, str] = {}
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(doc)
        body = inspect.cleandoc(doc[m.end():end])
        out[m.group(1)] = " ".join(body.split()) if body else ""
    return out


def rule(code: str, symbol: str, *, category: str, severity: str, title: str) -> Callable:
    """Register ``fn`` as rule ``code`` / ``symbol``; see the module docstring."""

    def register(fn: Callable[[Report], list[Finding]]) -> Callable[[Report], list[Finding]]:
        if not _CODE_RE.match(code):
            raise RuleDefinitionError(f"{code}: a rule code is 2-6 capitals and 3 digits, e.g. ISA001")
        if not _SYMBOL_RE.match(symbol):
            raise RuleDefinitionError(f"{code}: symbol {symbol!r} must be lower-case words joined by '-'")
        if code in _REGISTRY and _REGISTRY[code].func.__qualname__ != fn.__qualname__:
            raise RuleDefinitionError(f"{code} is already used by {_REGISTRY[code].symbol}; codes are never reused")
        if code in REDIRECTS:
            raise RuleDefinitionError(f"{code} was retired (redirects to {REDIRECTS[code]}); pick a new code")
        clash = [r.code for r in _REGISTRY.values() if r.symbol == symbol and r.code != code]
        if clash:
            raise RuleDefinitionError(f"{code}: symbol {symbol!r} is already used by {clash[0]}")
        if category not in CATEGORIES:
            raise RuleDefinitionError(f"{code}: unknown category {category!r}; known: {', '.join(CATEGORIES)}")
        if severity not in SEVERITIES:
            raise RuleDefinitionError(f"{code}: severity must be one of {', '.join(SEVERITIES)}")
        sections = doc_sections(fn.__doc__ or "")
        missing = [s for s in DOC_SECTIONS if not sections.get(s)]
        if missing:
            raise RuleDefinitionError(f"{code}: the docstring lacks the section(s) {', '.join(missing)}")
        _REGISTRY[code] = Rule(code, symbol, category, severity, title, fn, inspect.cleandoc(fn.__doc__ or ""))
        return fn

    return register


def registry() -> list[Rule]:
    """Every registered rule, in category order then code order."""
    _load_rules()
    order = {c: i for i, c in enumerate(CATEGORIES)}
    return sorted(_REGISTRY.values(), key=lambda r: (order.get(r.category, 99), r.code))


def resolve(code_or_symbol: str) -> Rule:
    """The rule for a code (any case, redirects followed) or a symbol."""
    _load_rules()
    key = code_or_symbol.strip()
    code = key.upper()
    seen = set()
    while code in REDIRECTS and code not in seen:
        seen.add(code)
        code = REDIRECTS[code]
    if code in _REGISTRY:
        return _REGISTRY[code]
    for r in _REGISTRY.values():
        if r.symbol == key.lower():
            return r
    close = sorted(r.code for r in _REGISTRY.values() if r.code[:2] == code[:2]) or sorted(_REGISTRY)[:8]
    raise UnknownRuleError(f"no rule {key!r}; known codes include {', '.join(close)} (see `cpudoctor doctor --list-rules`)")


def resolve_only(codes: Iterable[str] | None) -> set[str] | None:
    """Turn user-given codes/symbols/category names into a set of rule codes."""
    if codes is None:
        return None
    _load_rules()
    out: set[str] = set()
    for item in codes:
        item = item.strip()
        if not item:
            continue
        if item.lower() in CATEGORIES:
            out.update(r.code for r in _REGISTRY.values() if r.category == item.lower())
            continue
        out.add(resolve(item).code)
    return out


def run_rules(report: Report, only: set[str] | None = None, *, strict: bool = False) -> list[Finding]:
    """Run the (selected) rules over ``report``.

    A rule that raises becomes one ``internal`` finding naming it, so one bug
    never hides the other findings; ``strict`` re-raises instead (tests).
    """
    rules = registry()
    wanted = resolve_only(only) if only is not None else None
    findings: list[Finding] = []
    for r in rules:
        if wanted is not None and r.code not in wanted:
            continue
        try:
            produced = list(r.func(report) or [])
        except Exception as exc:  # noqa: BLE001 - a broken rule must not hide the others
            if strict:
                raise
            findings.append(Finding(
                code=r.code, symbol=r.symbol, category="internal", severity="info",
                title=f"Rule {r.code} ({r.symbol}) could not run",
                why=f"{type(exc).__name__}: {exc}. This is a bug in CPU Doctor, not a problem of your machine.",
                fix="Please report it with the saved report attached (cpudoctor report --format json).",
                docs=r.docs_anchor,
            ))
            continue
        for f in produced:
            if f.severity not in SEVERITIES:
                raise RuleDefinitionError(f"{r.code} produced severity {f.severity!r}")
            if SEVERITY_RANK[f.severity] > SEVERITY_RANK[r.severity]:
                raise RuleDefinitionError(f"{r.code} produced {f.severity} but is registered as at most {r.severity}")
            findings.append(dataclasses.replace(f, code=r.code, symbol=r.symbol, category=r.category, docs=r.docs_anchor))
    return findings


class Facts:
    """Read report fields by dotted path and remember which ones were read.

    ``get("software.torch.status")`` walks attributes (and dict keys), returns
    None for anything missing on the way, and records the path and a JSON-ready
    copy of the value. Findings made with :meth:`finding` carry that record as
    ``evidence`` and ``fields_used``.
    """

    MAX_ITEMS = 16

    def __init__(self, report: Report):
        self.report = report
        self.used: dict[str, Any] = {}

    def get(self, path: str, default: Any = None, *, record: bool = True) -> Any:
        obj: Any = self.report
        for part in path.split("."):
            if obj is None:
                break
            obj = obj.get(part) if isinstance(obj, dict) else getattr(obj, part, None)
        value = default if obj is None else obj
        if record:
            self.record(path, obj)
        return value

    def record(self, path: str, value: Any) -> None:
        data = to_data(value)
        if isinstance(data, list) and len(data) > self.MAX_ITEMS:
            data = f"{len(data)} items"
        elif isinstance(data, list) and data and isinstance(data[0], dict):
            data = f"{len(data)} items"
        self.used[path] = data

    def finding(self, severity: str, title: str, *, why: str = "", fix: str = "", snippet: str = "",
                snippet_lang: str = "bash") -> Finding:
        return Finding(
            code="", symbol="", category="", severity=severity, title=title, why=why, fix=fix,
            snippet=snippet, snippet_lang=snippet_lang, evidence=dict(self.used), fields_used=list(self.used),
        )


_loaded = False


def _load_rules() -> None:
    """Import the rule modules once (registration happens at their import)."""
    global _loaded
    if not _loaded:
        _loaded = True
        import cpudoctor.advisor.rules  # noqa: F401  (registers every rule)


def worst(findings: Iterable[Finding]) -> str:
    """The most severe severity among ``findings`` ("ok" when there are none)."""
    return max((f.severity for f in findings), key=lambda s: SEVERITY_RANK.get(s, 0), default="ok")
