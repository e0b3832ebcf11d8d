"""Reading a saved report that anyone may have made: bounded, checked, one line when it is bad.

A report opened with ``doctor --from-report``, ``compare``, the window's
*File > Open* or ``cpudoctor-gui FILE`` may come from another machine, another
version, an editor or an attacker. Before any of CPU Doctor touches it:

1. **Read, bounded.** Only a regular file of at most :data:`MAX_REPORT_BYTES`
   (a FIFO never blocks, ``/dev/zero`` never fills the memory).
2. **Parse, bounded.** Numbers are kept as text until they are checked (an
   integer of 5,000 digits, ``10**400`` or ``NaN`` never becomes a Python number
   that overflows later), and nesting deeper than :data:`MAX_DEPTH` is refused.
3. **Limits.** Depth, string length, list length and number size, each named
   by the JSON path at fault.
4. **Schema.** ``resources/report.schema.json`` (generated from the dataclasses)
   with ``fastjsonschema``, which compiles the schema to a Python function:
   a report of a 65536-CPU machine validates in 0.3 s against 15 s with
   ``jsonschema`` (measured here), and opening a report happens on the
   window's UI thread. The schema declares draft 2020-12 but uses only
   keywords that mean the same in draft 7, which fastjsonschema implements
   (``$defs`` is reached as a JSON pointer); an ``anyOf`` failure is explained
   by validating the one alternative meant for that kind of value, so the
   message names the innermost path at fault.

Every failure is a :class:`~cpudoctor.model.report.ReportError` whose message is one
line: ``$.meta: expected an object, got null``.
"""

from __future__ import annotations

import errno
import json
import math
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from cpudoctor.kits.cpulist import MAX_NUMA_NODES  # noqa: F401 - the schema's bound, re-exported
from cpudoctor.kits.rooted import read_bytes_checked
from cpudoctor.model.report import REPORT_KIND, SCHEMA_VERSION, Report, ReportError
from cpudoctor.model.serde import SchemaError, from_data

# A report of an 8192-CPU machine with every benchmark is a few MB; 32 MiB is far beyond any real one.
MAX_REPORT_BYTES = 32 << 20
# Real reports nest about 8 deep (findings > evidence > value); 64 leaves room, stays far from recursion limits.
MAX_DEPTH = 64
# The longest real strings are launch scripts of a few kB; a 1 MB brand string took the window minutes.
MAX_STRING = 64 << 10
# Lists: no list in a report is longer than the number of CPUs a kernel can number (65536).
MAX_ITEMS = 1 << 16
# Every number a probe writes fits a signed 64-bit integer (byte counts, cgroup limits in bytes);
# larger ones (10**400, 5,000 digits) are damage, and would overflow CPU Doctor's float arithmetic.
MAX_NUMBER = 2 ** 63 - 1
# Notes per list: probes write a few (cap_notes keeps repeats out); 65,536 of them took the window minutes to draw.
MAX_NOTES = 1024


class _BadNumber:
    """A JSON number kept as text because it is not a number CPU Doctor accepts."""

    __slots__ = ("text", "why")

    def __init__(self, text: str, why: str):
        self.text, self.why = text, why


def _parse_int(text: str) -> int | _BadNumber:
    digits = len(text.lstrip("-"))
    if digits > 19:
        return _BadNumber(text, f"an integer of {digits} digits is out of range (at most {MAX_NUMBER})")
    value = int(text)
    return value if abs(value) <= MAX_NUMBER else _BadNumber(text, f"{value} is out of range (at most {MAX_NUMBER})")


def _parse_float(text: str) -> float | _BadNumber:
    if len(text) > 40:
        return _BadNumber(text, f"a number written with {len(text)} characters is out of range")
    value = float(text)
    if not math.isfinite(value) or abs(value) > MAX_NUMBER:
        return _BadNumber(text, f"{_clip(text)} is out of range (at most {MAX_NUMBER})")
    return value


def _parse_constant(text: str) -> _BadNumber:
    return _BadNumber(text, f"{text} is not a number JSON allows")


def _clip(text: str, limit: int = 40) -> str:
    text = "".join(ch if ch.isprintable() else "?" for ch in text[: limit + 1])
    return text if len(text) <= limit else text[:limit] + "…"


def read_report_text(path: Path | str) -> str:
    """The text of a report file: a regular file, at most MAX_REPORT_BYTES, UTF-8."""

    path = Path(path)
    try:
        data = read_bytes_checked(path, MAX_REPORT_BYTES)
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            raise ReportError(f"{path.name} is larger than {MAX_REPORT_BYTES >> 20} MiB, far more than any "
                              "report: not read") from None
        raise ReportError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ReportError(f"{path.name} is not a text file, so not a CPU Doctor report") from None


def parse(text: str) -> Any:
    """JSON text to data; numbers out of range stay :class:`_BadNumber` for :func:`check_limits` to name."""

    if len(text) > MAX_REPORT_BYTES:
        raise ReportError(f"$: the text is larger than {MAX_REPORT_BYTES >> 20} MiB, far more than any report")
    try:
        return json.loads(text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)
    except json.JSONDecodeError as exc:
        raise ReportError(f"not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None
    except RecursionError:
        raise ReportError(f"{_too_deep_path(text)}: nested deeper than {MAX_DEPTH} levels") from None


_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:,]|[^\s"\[\]{}:,]+', re.DOTALL)


def _too_deep_path(text: str) -> str:
    """The JSON path where nesting first goes past MAX_DEPTH (only run when the parser gave up)."""
    stack: list[list[Any]] = []          # per open container: [kind, key or index, expecting_key]
    last_string = ""
    for m in _TOKEN_RE.finditer(text):
        tok = m.group(0)
        if tok in "[{":
            if len(stack) >= MAX_DEPTH:
                return _path_of(stack)
            stack.append(["[", 0, False] if tok == "[" else ["{", "", True])
        elif tok in "]}":
            if stack:
                stack.pop()
        elif tok == ",":
            if stack and stack[-1][0] == "[":
                stack[-1][1] += 1
            elif stack:
                stack[-1][2] = True
        elif tok == ":":
            if stack and stack[-1][0] == "{":
                stack[-1][1], stack[-1][2] = last_string, False
        elif tok.startswith('"'):
            try:
                last_string = json.loads(tok)
            except ValueError:
                last_string = tok.strip('"')
    return _path_of(stack)


def _path_of(stack: list[list[Any]]) -> str:
    steps = [f"[{k}]" if kind == "[" else _key(k) for kind, k, _ in stack]
    if len(steps) > 6:              # the top and the bottom say where; 64 "[0]" say nothing more
        return "$" + "".join(steps[:4]) + f"…({len(steps) - 6} levels)…" + "".join(steps[-2:])
    return "$" + "".join(steps)


def _key(name: Any) -> str:
    name = str(name)
    return f".{name}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", name) else f"[{json.dumps(_clip(name))}]"


def check_limits(data: Any) -> None:
    """Depth, string length, list length and numbers; ReportError naming the first path at fault."""

    todo: list[tuple[Any, str, int]] = [(data, "$", 0)]
    while todo:
        value, path, depth = todo.pop()
        if isinstance(value, _BadNumber):
            raise ReportError(f"{path}: {value.why}")
        if isinstance(value, str):
            if len(value) > MAX_STRING:
                raise ReportError(f"{path}: a string of {len(value):,} characters, more than the "
                                  f"{MAX_STRING:,} any report field holds")
            continue
        if isinstance(value, (dict, list)):
            if depth >= MAX_DEPTH:
                raise ReportError(f"{path}: nested deeper than {MAX_DEPTH} levels")
            if len(value) > MAX_ITEMS:
                raise ReportError(f"{path}: {len(value):,} entries, more than the {MAX_ITEMS:,} any report holds")
            if isinstance(value, dict):
                for k, v in value.items():
                    if len(k) > MAX_STRING:
                        raise ReportError(f"{path}: a key of {len(k):,} characters")
                    todo.append((v, path + _key(k), depth + 1))
            else:
                todo.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value))


def _schema() -> dict[str, Any]:
    from cpudoctor import resources

    return resources.load_json("report.schema.json")


@lru_cache(maxsize=None)
def _compiled(fragment: str | None = None):
    """The schema (or one of its fragments, JSON text, with the shared $defs) compiled by fastjsonschema.

    Compiled once per process and cached (the whole schema also across processes, in
    the user's cache folder): validating is then a plain Python function, fast enough
    for the window's UI thread.
    """
    import fastjsonschema

    schema = _schema()
    if fragment is None:
        # The draft keywords used are the same in draft 7 and 2020-12; $defs is reached as a JSON pointer.
        # The whole schema is compiled once per machine (kits.compiled_schema), not in every process.
        from cpudoctor.kits.compiled_schema import validator

        return validator({k: v for k, v in schema.items() if k not in ("$schema", "$id")}, "report")
    return fastjsonschema.compile({**json.loads(fragment), "$defs": schema["$defs"]})


_TYPE_NAMES = {"object": "an object", "array": "a list", "string": "a string", "integer": "an integer",
               "number": "a number", "boolean": "true or false", "null": "null"}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _shown(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return _json_type(value)
    return _clip(json.dumps(value, ensure_ascii=False))


def _message(kind: str, expected: Any, value: Any, fallback: str) -> str:
    """One short line for a failed keyword (the validator's own messages repeat the whole instance)."""
    if kind == "type":
        types = [expected] if isinstance(expected, str) else list(expected)
        return f"expected {' or '.join(_TYPE_NAMES.get(t, t) for t in types)}, got {_json_type(value)}"
    if kind == "required":
        missing = [k for k in expected if isinstance(value, dict) and k not in value]
        return f"missing required key {missing[0]!r}" if missing else "a required key is missing"
    if kind == "const":
        return f"expected {_shown(expected)}, got {_shown(value)}"
    if kind == "enum":
        return f"{_shown(value)} is not one of {', '.join(_shown(e) for e in expected[:8])}"
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        words = {"minimum": "below the minimum", "maximum": "above the maximum",
                 "exclusiveMinimum": "not above", "exclusiveMaximum": "not below"}[kind]
        return f"{_shown(value)} is {words} {expected}"
    if kind == "maxLength":
        return f"a string of {len(value):,} characters, longer than {expected}"
    if kind == "maxItems":
        return f"a list of {len(value):,} entries, more than {expected}"
    if kind == "pattern":       # not echoed: what fails a pattern is what must not reach a report (markup, escapes)
        return f"a string of {len(value):,} characters that does not match {expected}" if isinstance(value, str) \
            else f"{_json_type(value)} that does not match {expected}"
    if kind == "anyOf":
        return f"{_json_type(value)} fits none of the allowed forms"
    return _clip(fallback, 160)


def _could_be(schema: dict[str, Any], value: Any) -> bool:
    """Whether an anyOf alternative is meant for a value of this JSON type (object, list, ...)."""
    if "$ref" in schema:
        return isinstance(value, dict)
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    return not kinds or _json_type(value) in {_TYPE_NAMES[k] for k in kinds if k in _TYPE_NAMES} or (
        "number" in kinds and isinstance(value, int) and not isinstance(value, bool))


def _explain(exc, data: Any, prefix: list[Any]) -> tuple[list[Any], str]:
    """The JSON path (as keys/indices) and message of a fastjsonschema error, looking into anyOf."""
    steps: list[Any] = list(prefix)
    node = data
    for token in exc.path[1:]:                   # "data", then keys; list indices come as text
        if isinstance(node, list):
            token = int(token)
        steps.append(token)
        try:
            node = node[token]
        except (KeyError, IndexError, TypeError):
            break
    rule, definition = exc.rule, exc.definition if isinstance(exc.definition, dict) else {}
    if rule == "anyOf":
        fits = [alt for alt in definition.get("anyOf", []) if _could_be(alt, exc.value)]
        if len(fits) == 1:
            alone = dict(fits[0])
            for k in ("minimum", "maximum", "maxLength", "maxItems"):     # keywords beside the anyOf apply too
                if k in definition:
                    alone[k] = definition[k]
            if isinstance(definition.get("items"), dict):
                alone["items"] = {**alone.get("items", {}), **definition["items"]}
            import fastjsonschema

            try:
                _compiled(json.dumps(alone, sort_keys=True))(exc.value)
            except fastjsonschema.JsonSchemaValueException as inner:
                return _explain(inner, exc.value, steps)
    return steps, _message(rule, definition.get(rule), exc.value, exc.message)


def _format_path(steps: list[Any]) -> str:
    return "$" + "".join(f"[{s}]" if isinstance(s, int) else _key(s) for s in steps)


def check_schema(data: Any) -> None:
    """Validate against resources/report.schema.json; ReportError with the path and what is wrong."""
    import fastjsonschema


    try:
        _compiled()(data)
    except fastjsonschema.JsonSchemaValueException as exc:
        steps, message = _explain(exc, data, [])
        raise ReportError(f"the report is damaged: {_format_path(steps)}: {message}") from None


def check(data: Any) -> None:
    """Everything :func:`parse` leaves to check, in order: limits, then the schema."""
    check_limits(data)
    check_schema(data)


# ---------------------------------------------------------------------------
# Lab runs: one schema per kind of run

LAB_SCHEMA = "lab_metrics.schema.json"
# The kinds of run the lab writes (lab/results.KINDS; a test keeps the two equal). Another kind (a newer
# CPU Doctor's) is checked only for what every run carries.
LAB_KINDS = ("train", "sweep", "gemm", "quant", "roofline", "infer")
_MAX_RUN_NOTES = 8


@lru_cache(maxsize=None)
def _kind_name() -> re.Pattern[str]:
    """The schema's own pattern for a run's kind (resources/lab_metrics.schema.json), not a copy of it."""
    from cpudoctor import resources

    return re.compile(resources.load_json(LAB_SCHEMA)["$defs"]["run"]["properties"]["kind"]["pattern"])


@lru_cache(maxsize=None)
def _lab_validator(kind: str):
    """The compiled schema of one kind of lab run: the parts every run has, and that kind's metrics."""
    from cpudoctor import resources
    from cpudoctor.kits.compiled_schema import validator

    defs = resources.load_json(LAB_SCHEMA)["$defs"]
    schema = {"allOf": [{"$ref": "#/$defs/run"}, {"properties": {"metrics": {"$ref": f"#/$defs/{kind}"}}}],
              "$defs": defs}
    return validator(schema, f"lab-{kind}")


def lab_run_problem(run: Any) -> str | None:
    """Why a lab run (a BenchRun as JSON data) cannot be shown: the path in it and what is wrong
    (``.metrics.points[0].gflops: expected ...``); None when it fits
    the schema of its kind, so every surface may do arithmetic on its figures."""
    import fastjsonschema

    if not isinstance(run, dict):
        return f": expected an object, got {_json_type(run)}"
    kind = run.get("kind")
    try:
        _lab_validator(kind if kind in LAB_KINDS else "other")(run)
    except fastjsonschema.JsonSchemaValueException as exc:
        steps = [int(t) if t.isdigit() else t for t in exc.path[1:]]
        definition = exc.definition if isinstance(exc.definition, dict) else {}
        return f"{_format_path(steps)[1:]}: {_message(exc.rule, definition.get(exc.rule), exc.value, exc.message)}"
    return None


def check_lab_runs(runs: list[Any], where: str = "$.benchmarks") -> tuple[list[Any], list[str]]:
    """The runs that fit their kind's schema, and a note for each one left out (at most a few, then a count)."""
    kept: list[Any] = []
    notes: list[str] = []
    for i, run in enumerate(runs):
        problem = lab_run_problem(run)
        if problem is None:
            kept.append(run)
            continue
        if len(notes) < _MAX_RUN_NOTES:
            kind = run.get("kind") if isinstance(run, dict) else None
            kind = kind if isinstance(kind, str) and _kind_name().search(kind) else "?"   # never the damage itself
            notes.append(f"lab run {i + 1} ({_clip(kind, 20)}) is damaged and is not shown: {where}[{i}]{problem}")
    left_out = len(runs) - len(kept)
    if left_out > len(notes):
        notes.append(f"{left_out - len(notes)} more damaged lab runs are not shown")
    return kept, notes


# ---------------------------------------------------------------------------
# The Report of a file, a text or parsed JSON

def report_from_dict(data: Any) -> Report:
    """A Report from parsed JSON, after the limits and the schema (ReportError if bad)."""
    if not isinstance(data, dict):
        raise ReportError("not a CPU Doctor report: the JSON is not an object")
    check_limits(data)
    meta = data.get("meta")
    if not isinstance(meta, dict) or meta.get("kind") != REPORT_KIND or "schema_version" not in data:
        if isinstance(meta, dict) or "meta" not in data:
            raise ReportError("not a CPU Doctor report: no 'schema_version' / 'meta.kind' = cpudoctor-report")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION and isinstance(version, (int, float, str)) and not isinstance(version, bool):
        raise ReportError(
            f"report schema version {str(version)[:20]} is not supported by this CPU Doctor "
            f"(it reads version {SCHEMA_VERSION}); update CPU Doctor or re-export the report"
        )
    check_schema(data)
    runs, damaged = check_lab_runs(data["benchmarks"])
    if damaged:          # the rest of the report stands; the runs that would break every surface are left out
        data = dict(data, benchmarks=runs, notes=(list(data["notes"]) + damaged)[-MAX_NOTES:])
    try:
        return from_data(Report, data)
    except SchemaError as exc:
        raise ReportError(f"the report is damaged: {exc}") from None


def report_from_json(text: str) -> Report:
    """A Report from JSON text (parsed with bounds, then :func:`report_from_dict`)."""
    return report_from_dict(parse(text))


def load_report(path: Path | str) -> Report:
    """Read a saved report: a regular file of bounded size, checked before any use (ReportError)."""
    return report_from_json(read_report_text(path))
