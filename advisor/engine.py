"""The rule machinery: a :class:`RuleSet` registers rules and runs them over one input.

A rule is a small pure function ``fn(input) -> list[Finding]`` registered with
``@ruleset.rule(code, symbol, category=..., severity=..., title=...)``. Two sets
share this machinery: :data:`REPORT_RULES` judge a :class:`~cpudoctor.model.report.Report`
(``cpudoctor doctor``; registered with :func:`rule`, defined in
:mod:`cpudoctor.advisor.rules`), and ``PROCESS_RULES`` in
:mod:`cpudoctor.advisor.process_rules` judge one running process
(``cpudoctor inspect``). ``cpudoctor explain CODE`` knows both.

Codes are stable and never reused: a renamed or merged rule keeps answering to
its old code through the set's redirects (the way ruff handles renamed rules),
so a ``--only`` list or a docs link written last year still works.

Report rules build findings through :class:`Facts`, which reads report fields
by their dotted path and records each one it read, so every finding says which
report fields (and values) it was decided from. The set then stamps the rule's
code, symbol, category and docs anchor on every finding, so a rule cannot
mislabel its own output, and refuses a finding worse than the rule's
registered worst severity.

Each rule's docstring has three fixed sections, ``What it checks:``, ``Why it
matters:`` and ``Fix:``; registration fails without them, and ``cpudoctor
explain CODE`` prints them.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from cpudoctor.model import CATEGORIES, SEVERITIES, SEVERITY_RANK, Finding, Report, worst
from cpudoctor.model.serde import to_data

# The severities and categories are the report model's (their words are cpudoctor.render.words');
# the advisor validates rules against both and re-exports them.
__all__ = ["CATEGORIES", "DOC_SECTIONS", "REDIRECTS", "REPORT_RULES", "SEVERITIES", "SEVERITY_RANK", "Facts",
           "MovedRuleError", "Rule", "RuleDefinitionError", "RuleSet", "UnknownRuleError", "doc_sections", "registry", "resolve",
           "resolve_only", "rule", "run_rules", "worst"]
DOC_SECTIONS: tuple[str, ...] = ("What it checks", "Why it matters", "Fix")

# Old code -> current code for the report rules. Codes are never reused; when a
# rule is renamed or merged into another, its old code is added here instead of
# being deleted. A target in another rule set (the evidence rules) is followed there
# by :func:`cpudoctor.advisor.find_rule`.
REDIRECTS: dict[str, str] = {
    "ISA010": "EVID007",      # kernels below the CPU: one family for a lab job's kernels and a run's
    "PREC003": "EVID008",     # a dtype computed without its instructions: the same
}

_SYMBOL_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_SECTION_RE = re.compile(r"^(What it checks|Why it matters|Fix):\s*$", re.MULTILINE)

In = TypeVar("In")


class RuleDefinitionError(ValueError):
    """A rule was registered wrongly (bad or reused code, missing doc section)."""


class UnknownRuleError(KeyError):
    """No rule answers to this code or symbol; ``str()`` lists what exists."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want a sentence
        return str(self.args[0]) if self.args else "unknown rule"


class MovedRuleError(UnknownRuleError):
    """A retired code of this set whose rule lives in another set now: ``target`` is its code there."""

    def __init__(self, message: str, target: str):
        super().__init__(message)
        self.target = target


@dataclass(frozen=True)
class Rule:
    code: str
    symbol: str
    category: str
    severity: str                      # the worst severity this rule can report
    title: str
    func: Callable[[Any], list[Finding]]
    doc: str
    docs_page: str = "docs/rules.md"   # the generated page that documents it

    @property
    def docs_anchor(self) -> str:
        return f"{self.docs_page}#{self.code.lower()}"

    def sections(self) -> dict[str, str]:
        return doc_sections(self.doc)


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


class RuleSet(Generic[In]):
    """One registry of rules that all take the same input ``In``.

    ``noun`` names the rules in messages ("rule", "process rule"); ``prefix``,
    when given, is the only code prefix allowed (``PROC``); ``docs_page`` is the
    generated page the findings link to; ``load`` is a module (or several) imported
    on first use, whose import registers the rules; ``group_by_category`` orders rules
    by :data:`CATEGORIES` (else by code); ``scope``, a line under the category in
    ``explain`` text, says what runs them; ``crash_hint`` is what to
    attach when reporting a rule that crashed; ``list_hint`` where to look up
    the known codes.
    """

    def __init__(self, noun: str, *, docs_page: str, crash_hint: str, scope: str = "", prefix: str | None = None,
                 load: str | tuple[str, ...] | None = None, redirects: dict[str, str] | None = None,
                 group_by_category: bool = True, list_hint: str | None = None):
        self.noun = noun
        self.docs_page = docs_page
        self.scope = scope
        self.crash_hint = crash_hint
        self.group_by_category = group_by_category
        self.redirects: dict[str, str] = {} if redirects is None else redirects
        self._list_hint = list_hint or docs_page
        self._load = load
        self._code_re = re.compile(rf"^{prefix}\d{{3}}$" if prefix else r"^[A-Z]{2,6}\d{3}$")
        self._code_form = (f"{prefix} and 3 digits, e.g. {prefix}001" if prefix
                           else "2-6 capitals and 3 digits, e.g. ISA001")
        self._rules: dict[str, Rule] = {}

    # -- registration ---------------------------------------------------------------------------

    def rule(self, code: str, symbol: str, *, category: str, severity: str, title: str) -> Callable:
        """Register the decorated function as rule ``code`` / ``symbol`` of this set."""

        def register(fn: Callable[[In], list[Finding]]) -> Callable[[In], list[Finding]]:
            self._check_definition(code, symbol, category, severity, fn)
            self._rules[code] = Rule(code, symbol, category, severity, title, fn, inspect.cleandoc(fn.__doc__ or ""),
                                     self.docs_page)
            return fn

        return register

    def _check_definition(self, code: str, symbol: str, category: str, severity: str, fn: Callable) -> None:
        known = self._rules
        if not self._code_re.match(code):
            raise RuleDefinitionError(f"{code}: a {self.noun} code is {self._code_form}")
        if not _SYMBOL_RE.match(symbol):
            raise RuleDefinitionError(f"{code}: symbol {symbol!r} must be lower-case words joined by '-'")
        if code in known and known[code].func.__qualname__ != fn.__qualname__:
            raise RuleDefinitionError(f"{code} is already used by {known[code].symbol}; codes are never reused")
        if code in self.redirects:
            raise RuleDefinitionError(f"{code} was retired (redirects to {self.redirects[code]}); pick a new code")
        clash = [r.code for r in known.values() if r.symbol == symbol and r.code != code]
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

    def _loaded(self) -> dict[str, Rule]:
        """The registered rules, after importing the module that registers them (once)."""
        if self._load is not None:
            modules, self._load = self._load, None
            for module in (modules,) if isinstance(modules, str) else modules:
                importlib.import_module(module)
        return self._rules

    # -- lookup ---------------------------------------------------------------------------------

    def all(self) -> list[Rule]:
        """Every rule: in category order then code order, or code order alone."""
        order = {c: i for i, c in enumerate(CATEGORIES)}
        rules = self._loaded().values()
        if self.group_by_category:
            return sorted(rules, key=lambda r: (order.get(r.category, 99), r.code))
        return sorted(rules, key=lambda r: r.code)

    def resolve(self, code_or_symbol: str) -> Rule:
        """The rule for a code (any case, redirects followed) or a symbol; UnknownRuleError if none."""
        rules = self._loaded()
        key = code_or_symbol.strip()
        code = key.upper()
        seen = set()
        while code in self.redirects and code not in seen:
            seen.add(code)
            code = self.redirects[code]
        if code in rules:
            return rules[code]
        if seen:
            raise MovedRuleError(f"{key.upper()} is now {code}, not a {self.noun}", code)
        for r in rules.values():
            if r.symbol == key.lower():
                return r
        close = sorted(c for c in rules if c[:2] == code[:2]) or sorted(rules)[:8]
        raise UnknownRuleError(f"no {self.noun} {key!r}; known codes include {', '.join(close)} "
                               f"(see {self._list_hint})")

    def resolve_only(self, codes: Iterable[str] | None) -> set[str] | None:
        """Turn user-given codes/symbols/category names into a set of rule codes."""
        if codes is None:
            return None
        rules = self._loaded()
        out: set[str] = set()
        for item in codes:
            item = item.strip()
            if not item:
                continue
            if item.lower() in CATEGORIES:
                out.update(r.code for r in rules.values() if r.category == item.lower())
                continue
            try:
                out.add(self.resolve(item).code)
            except MovedRuleError:
                raise                  # its rule lives in another set: the caller follows it there
            except UnknownRuleError as exc:
                # --only takes categories too: the error names them, not just the codes.
                used = [c for c in CATEGORIES if any(r.category == c for r in rules.values())]
                message = str(exc.args[0]).replace(f"no {self.noun} ", f"no {self.noun} or category ", 1)
                raise UnknownRuleError(message.replace(" (see ", f"; categories: {', '.join(used)} (see ", 1)) \
                    from None
        return out

    # -- running --------------------------------------------------------------------------------

    def run(self, subject: In, only: Iterable[str] | None = None, *, strict: bool = False) -> list[Finding]:
        """Run the (selected) rules over ``subject``, in :meth:`all` order.

        A rule that raises becomes one ``internal`` finding naming it, so one bug
        never hides the other findings; ``strict`` re-raises instead (tests).
        """
        wanted = self.resolve_only(only)
        findings: list[Finding] = []
        for r in self.all():
            if wanted is not None and r.code not in wanted:
                continue
            try:
                produced = list(r.func(subject) or [])
            except Exception as exc:  # noqa: BLE001 - a broken rule must not hide the others
                if strict:
                    raise
                findings.append(_crash_finding(r, exc, self.crash_hint))
                continue
            findings += [self._stamp(r, f) for f in produced]
        return findings

    @staticmethod
    def _stamp(r: Rule, f: Finding) -> Finding:
        """``f`` labelled as rule ``r``'s, after checking its severity against the registered worst."""
        if f.severity not in SEVERITIES:
            raise RuleDefinitionError(f"{r.code} produced severity {f.severity!r}")
        if SEVERITY_RANK[f.severity] > SEVERITY_RANK[r.severity]:
            raise RuleDefinitionError(f"{r.code} produced {f.severity} but is registered as at most {r.severity}")
        return dataclasses.replace(f, code=r.code, symbol=r.symbol, category=r.category, docs=r.docs_anchor)


def _crash_finding(r: Rule, exc: Exception, hint: str) -> Finding:
    return Finding(
        code=r.code, symbol=r.symbol, category="internal", severity="info",
        title=f"Rule {r.code} ({r.symbol}) could not run",
        why=f"{type(exc).__name__}: {exc}. This is a bug in CPU Doctor, not a problem of your machine.",
        fix=f"Please report it with {hint} attached.",
        docs=r.docs_anchor,
    )


# The report rules: `cpudoctor doctor`, the Advisor page, every saved report.
REPORT_RULES: RuleSet[Report] = RuleSet(
    "rule", docs_page="docs/rules.md", load="cpudoctor.advisor.rules", redirects=REDIRECTS,
    crash_hint="the saved report (cpudoctor report --format json)", list_hint="`cpudoctor doctor --list-rules`",
)

# The module-level API of the report rules (older than RuleSet; kept for callers and tests).
rule = REPORT_RULES.rule
registry = REPORT_RULES.all
resolve = REPORT_RULES.resolve
resolve_only = REPORT_RULES.resolve_only


def run_rules(report: Report, only: set[str] | None = None, *, strict: bool = False) -> list[Finding]:
    """Run the (selected) report rules over ``report``; see :meth:`RuleSet.run`."""
    return REPORT_RULES.run(report, only, strict=strict)


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
