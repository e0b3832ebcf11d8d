"""oneDNN's verbose lines (``ONEDNN_VERBOSE=profile_exec``) -> which kernels ran, on which ISA, how long.

A pure parser: lines in, records (:mod:`cpudoctor.model.joblogs`) out, no I/O. oneDNN prints one line per
primitive execution to the process's stdout::

    onednn_verbose,v1,primitive,exec,cpu,convolution,brg_conv_fwd:avx512_core,forward_training,
        src:f32::blocked:acdb::f0 wei:f32:a:blocked:Acdb16a::f0 ...,attr-scratchpad:user,alg:...,mb16_ic3oc32...,0.49

(oneDNN 3.x, with the ``v1`` version marker; older builds print ``onednn_verbose,exec,...`` or
``dnnl_verbose,exec,...`` without it, and a timestamp field when ``ONEDNN_VERBOSE_TIMESTAMP=1``). The
implementation name carries the ISA after a colon (``jit:avx2``, ``brg_matmul:avx512_core_amx``); ``ref``,
``gemm:ref`` or ``simple`` implementations are the slow reference code. ``info`` lines name the library version,
its runtime and the highest ISA it may use (after ``ONEDNN_MAX_CPU_ISA``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

from cpudoctor.model.joblogs import LAYOUT_KINDS, OneDnnLog, Primitive
from cpudoctor.probes.process.kernel_work import onednn_work

PREFIXES = ("onednn_verbose,", "dnnl_verbose,", "mkldnn_verbose,")
MAX_LINE = 8192

# Legacy spellings in older builds' implementation names.
_ALIASES = {"avx512_common": "avx512_core", "avx512_mic": "avx512_core", "uni": None, "any": None}
_REFERENCE_RE = re.compile(r"(^|:)(ref|simple|gemm:ref|ref_[a-z_]+|gemm_ref)(:|$)|^ref", re.IGNORECASE)
_DTYPE_RE = re.compile(r"\b(?:diff_)?(src|wei|dst|bia|data)(?:_(?:iter|layer))?[:_](f32|f16|bf16|s8|u8|s32|f64|f8_e5m2|f8_e4m3)\b")


@cache
def _isa_re() -> re.Pattern[str]:
    """oneDNN's instruction-set names (the knowledge table's, :mod:`cpudoctor.knowledge.isa`), longest first so
    ``avx512_core_amx`` wins over ``avx512_core``; built on first use, not at import."""
    from cpudoctor.knowledge import ISA_FORCING

    names = sorted(ISA_FORCING.onednn_names, key=len, reverse=True)
    return re.compile(r"(?:^|[:_])(" + "|".join(map(re.escape, names)) + r")(?:$|[:_])")


def isa_of(impl: str) -> str | None:
    """The ISA in an implementation name (``brg_conv_fwd:avx512_core`` -> ``avx512_core``), or None."""
    name = impl.lower()
    for old, new in _ALIASES.items():
        if new and old in name:
            name = name.replace(old, new)
    m = _isa_re().search(name)
    return m.group(1) if m else None


def is_verbose_line(line: str) -> bool:
    return line.startswith(PREFIXES)


# What oneDNN itself prints with ONEDNN_VERBOSE set: the prefix, the format version, a timestamp
# (ONEDNN_VERBOSE_TIMESTAMP=1), the component, then a stage ("exec", "create:cache_miss", "info", ...).
_PRINTED_RE = re.compile(r"(?:onednn|dnnl|mkldnn)_verbose,(?:v\d+,)?(?:\d+(?:\.\d+)?,)?"
                         r"(?:(?:primitive|graph|common|ukernel),)?"
                         r"(?:info|exec|create|error|warn|warning|check|debug|api)(?::[a-z_]+)?,")


def printed_by_onednn(line: str) -> bool:
    """``line`` has the exact shape of a line oneDNN's verbose mode prints (``cpudoctor run`` holds back only
    those; a job's own line that merely starts with or contains ``dnnl_verbose,`` is the job's)."""
    return _PRINTED_RE.match(line) is not None


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_line(line: str) -> Primitive | None | dict:
    """One line: a :class:`Primitive`, an info dict (``{"version": ...}``), or None for anything else."""
    if len(line) > MAX_LINE or not is_verbose_line(line):
        return None
    parts = line.rstrip("\r\n").split(",")
    rest = parts[1:]
    if rest and re.fullmatch(r"v\d+", rest[0]):
        rest = rest[1:]                       # the format version (v1)
    if rest and _float(rest[0]) is not None and "." in rest[0]:
        rest = rest[1:]                       # a timestamp (ONEDNN_VERBOSE_TIMESTAMP=1)
    if rest and rest[0] in ("primitive", "graph", "common"):
        if rest[0] == "graph":
            return None
        rest = rest[1:]
    if not rest:
        return None
    if rest[0] == "info":
        text = ",".join(rest[1:])
        if text.startswith("cpudoctor,window:") and len(rest) >= 4:     # verbose_window.py's markers
            state, t = rest[2].partition(":")[2], _float(rest[3])
            return {"window": (state, t)} if state in ("on", "off", "end") and t is not None else None
        if text.startswith("oneDNN ") or text.startswith("DNNL "):
            return {"version": text.split()[1]}
        if text.startswith("cpu,runtime:"):
            out: dict = {}
            for item in rest[2:]:
                k, _, v = item.partition(":")
                if k == "runtime":
                    out["runtime"] = v
                elif k == "nthr" and v.isdigit():
                    out["threads"] = int(v)
            return out
        if text.startswith("cpu,isa:"):
            return {"max_isa": text.split("isa:", 1)[1]}
        return None
    stage = rest[0]
    if stage.startswith("create"):
        stage = "create"
    elif stage != "exec":
        return None
    # exec,cpu,KIND,IMPL,PROP,MDS,ATTR,AUX,PROBLEM,TIME
    fields = rest[1:]
    if len(fields) < 8 or fields[0] != "cpu":
        return None
    kind, impl, prop = fields[1], fields[2], fields[3]
    mds = fields[4]
    time_ms = _float(fields[-1])
    problem = fields[-2] if time_ms is not None else fields[-1]
    dtypes: dict[str, str] = {}
    for m in _DTYPE_RE.finditer(mds):
        dtypes.setdefault(m.group(1), m.group(2))
    work = onednn_work(kind, prop, dtypes, problem) if stage == "exec" else None
    return Primitive(kind=kind, impl=impl, isa=isa_of(impl), prop=prop, dtypes=dtypes, problem=problem,
                     time_ms=time_ms if stage == "exec" else None, stage=stage, reference=is_reference(kind, impl),
                     flop=work.flop if work else None, bytes=work.bytes if work else None)


def is_reference(kind: str, impl: str) -> bool:
    """oneDNN's reference (portable C++) implementation of a computation: correct, and many times slower.
    A reorder's ``simple:any`` is its ordinary generic copy, not a slow path."""
    return kind not in LAYOUT_KINDS and bool(_REFERENCE_RE.search(impl))


def parse_onednn_verbose(lines: Iterable[str], limit: int = 200_000) -> OneDnnLog:
    """Every oneDNN verbose line among ``lines`` (other lines are ignored); at most ``limit`` primitives kept."""
    log = OneDnnLog()
    for line in lines:
        rec = parse_line(line)
        if rec is None:
            continue
        log.lines += 1
        if isinstance(rec, dict):
            if "window" in rec:
                if len(log.windows) < limit:
                    log.windows.append(rec["window"])
                continue
            for k, v in rec.items():
                setattr(log, k, v)
        elif len(log.primitives) < limit:
            log.primitives.append(rec)
        else:
            log.dropped += 1
    return log
