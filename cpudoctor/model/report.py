"""The one Report that carries everything, and its schema-versioned JSON form.

The advisor is a pure function of a Report, so a report saved on a colleague's
machine can be diagnosed here. Keys documented in resources/report.schema.json
are a public contract: add fields, never rename or remove them without bumping
SCHEMA_VERSION.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cpudoctor.model.cpu import CpuInfo
from cpudoctor.model.serde import to_data
from cpudoctor.model.software import Software
from cpudoctor.model.topology import Topology

SCHEMA_VERSION = 1
REPORT_KIND = "cpudoctor-report"
# The values of Finding.severity, least to most severe (cpudoctor.render.words says them in words).
SEVERITIES: tuple[str, ...] = ("ok", "info", "warning", "error")
SEVERITY_RANK: dict[str, int] = {s: i for i, s in enumerate(SEVERITIES)}
# The values of Finding.category, in the order findings are grouped (cpudoctor.render.words titles them).
CATEGORIES: tuple[str, ...] = ("isa", "torch", "threads", "blas", "topology", "os", "memory", "environment",
                               "precision", "inference", "allocator", "known", "myth", "evidence", "internal")


@dataclass
class Finding:
    """One advisor result. Data only: the GUI, CLI and exporters render it."""

    code: str                              # stable, e.g. ISA001
    symbol: str                            # readable, e.g. avx512-not-usable
    category: str                          # isa, torch, threads, blas, topology, os, memory, myth, ...
    severity: str                          # ok | info | warning | error
    title: str
    why: str = ""
    fix: str = ""
    snippet: str = ""                      # what to type (bash unless snippet_lang says otherwise)
    snippet_lang: str = "bash"
    docs: str = ""                         # docs anchor, e.g. docs/rules.md#isa001
    evidence: dict[str, Any] = field(default_factory=dict)   # report field path -> value used
    fields_used: list[str] = field(default_factory=list)
    snippet_bash: str = ""                 # the bash a JSON output translated for its --shell (and old reports' PowerShell)


@dataclass
class BenchRun:
    """A finished lab job (train, gemm, sweep, quant) with its settings and figures."""

    kind: str
    settings: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    status: str = "ok"                     # ok | cancelled | crashed | error
    started_at: str | None = None
    note: str = ""


@dataclass
class ThreadRecommendation:
    """The thread sweep's best setting; the advisor prefers it over heuristics."""

    threads: int
    interop_threads: int | None = None
    cpus: list[int] | None = None          # pinning set, None = no pinning
    variant: str = ""                      # e.g. "one CCX", "NUMA node 0", "all cores, no SMT"
    samples_per_s: float | None = None
    default_samples_per_s: float | None = None
    model: str | None = None


@dataclass
class Meta:
    kind: str = REPORT_KIND
    generated_at: str = ""                 # ISO 8601, UTC
    tool_version: str = ""
    root: str = "/"                        # the filesystem root the probes read
    platform: str = ""                     # sys.platform of the machine that made it
    redacted: bool = True                  # identifying details replaced by placeholders


@dataclass
class Report:
    schema_version: int = SCHEMA_VERSION
    meta: Meta = field(default_factory=Meta)
    cpu: CpuInfo = field(default_factory=CpuInfo)
    topology: Topology = field(default_factory=Topology)
    software: Software | None = None
    findings: list[Finding] = field(default_factory=list)
    benchmarks: list[BenchRun] = field(default_factory=list)
    recommendation: ThreadRecommendation | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return to_data(self)

    def to_json(self, indent: int | None = 2) -> str:
        """Strict JSON (see :func:`json_text`)."""
        return json_text(self.to_dict(), indent)


# What JSON may carry as text but no file should hold raw: DEL, the C1 controls (U+009B is a terminal's CSI),
# the bidirectional marks, embeddings, overrides and isolates, the line and paragraph separators, and lone
# surrogates (not encodable as UTF-8), and U+FFFE/U+FFFF (noncharacters the text sinks strip): what
# cpudoctor.kits.escape strips beyond the C0 controls JSON escapes anyway, so a sink loses none of it.
JSON_UNSAFE = "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff"
_JSON_UNSAFE_RE = re.compile(f"[{JSON_UNSAFE}]")


def json_text(data: Any, indent: int | None = 2) -> str:
    """Strict JSON for a file or a terminal: a non-finite number (a diverged loss) is null, never NaN; the
    characters of :data:`JSON_UNSAFE` are written as ``\\uXXXX`` escapes (the data is unchanged), every
    other character as itself (a brand's ® stays readable)."""
    text = json.dumps(_finite(data), indent=indent, sort_keys=False, ensure_ascii=False, allow_nan=False)
    return _JSON_UNSAFE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _finite(data: Any) -> Any:
    """NaN and infinities as null: jq, JavaScript and most JSON readers reject Python's NaN/Infinity."""
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_finite(v) for v in data]
    return data


def worst(findings: Iterable[Finding]) -> str:
    """The most severe severity among ``findings`` ("ok" when there are none)."""
    return max((f.severity for f in findings), key=lambda s: SEVERITY_RANK.get(s, 0), default="ok")


class ReportError(ValueError):
    """A report could not be read; the message says why and what to do."""


def utc_now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
