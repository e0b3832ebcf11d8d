"""oneMKL's verbose lines (``MKL_VERBOSE=1``) -> the calls a job made, their sizes, time and threads.

A pure parser: lines in, records (:class:`cpudoctor.model.joblogs.MklLog`) out, no I/O. oneMKL prints one line
per call to the process's stdout::

    MKL_VERBOSE SGEMM(T,N,512,8,784,0x7ffd...,0x7f28...,784,0x5616...,784,0x7ffd...,0x5616...,512) 52.86ms
        CNR:OFF Dyn:0 FastMM:1 TID:0  NThr:2

PyTorch's fp32 ``nn.Linear`` on x86 goes to oneMKL's SGEMM this way (torch 2.13: forward ``SGEMM(T,N,out,batch,in)``,
the two backward GEMMs beside it), as do ``torch.mm``/``matmul`` in fp32 and fp64; ``bmm`` goes to
``SGEMM_BATCH``, whose sizes are printed as pointers (time only, not counted). The first line names the version
and, on Intel CPUs, the code path. The arguments follow BLAS: ``?GEMM(transa, transb, m, n, k, alpha, a, lda, b,
ldb, beta, c, ldc)``, ``?GEMV(trans, m, n, ...)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from cpudoctor.model.joblogs import MklCall, MklLog
from cpudoctor.probes.process.kernel_work import DTYPE_BYTES

PREFIX = "MKL_VERBOSE"
MAX_LINE = 8192
_CALL_RE = re.compile(r"^MKL_VERBOSE\s+([A-Za-z0-9_]+)\((.*?)\)\s+([0-9.]+(?:[eE][-+]?\d+)?)(ns|us|ms|s)\b(.*)$")
_THREADS_RE = re.compile(r"\bNThr:(\d+)")
_UNITS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
# The first letter of a BLAS name: its data type (oneDNN's spelling, as the rest of the job's kernels).
_TYPES = {"S": "f32", "D": "f64", "C": "c64", "Z": "c128"}
# Integer and bf16 GEMMs name their types in full.
_NAMED = (("S8U8S32", "s8"), ("U8S8S32", "s8"), ("S16S16S32", "s16"), ("BF16BF16F32", "bf16"),
          ("F16F16F32", "f16"), ("E5M2", "f8_e5m2"), ("E4M3", "f8_e4m3"))


def is_verbose_line(line: str) -> bool:
    return line.startswith(PREFIX)


def printed_by_mkl(line: str) -> bool:
    """``line`` has the exact shape of a line oneMKL's verbose mode prints (a call with its time, or the version
    line): ``cpudoctor run`` holds back only those."""
    if len(line) > MAX_LINE or not line.startswith(PREFIX + " "):
        return False
    text = line.strip()
    return _CALL_RE.match(text) is not None or text[len(PREFIX):].strip().startswith(("Intel(R)", "oneMKL"))


def _int(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() and len(text) < 13 else None


def _dtype(name: str) -> str:
    for word, dtype in _NAMED:
        if word in name:
            return dtype
    return _TYPES.get(name[:1], "?")


def call_work(name: str, dtype: str, args: list[str]) -> tuple[tuple[int, ...], float | None, float | None]:
    """(dims, FLOPs, bytes) of one call from its arguments; (), None, None when its sizes are not printed."""
    size = DTYPE_BYTES.get(dtype, 4)
    plain = name.upper()
    if plain.endswith("_BATCH") or "BATCH" in plain:
        return (), None, None
    if "GEMM" in plain and len(args) >= 5:
        m, n, k = (_int(a) for a in args[2:5])
        if None not in (m, n, k):
            out_size = 4 if dtype in ("s8", "bf16", "f16", "s16") else size      # the int32/fp32 accumulator
            return (m, n, k), 2.0 * m * n * k, float((m * k + k * n) * size + m * n * out_size)   # type: ignore[operator]
    if "GEMV" in plain and len(args) >= 3:
        m, n = _int(args[1]), _int(args[2])
        if m is not None and n is not None:
            return (m, n), 2.0 * m * n, float((m * n + m + n) * size)
    return (), None, None


def parse_line(line: str) -> MklCall | str | None:
    """One line: a :class:`MklCall`, the version line's text, or None for anything else."""
    if len(line) > MAX_LINE or not is_verbose_line(line):
        return None
    text = line.strip()
    m = _CALL_RE.match(text)
    if m is None:
        rest = text[len(PREFIX):].strip()
        return rest if rest.startswith(("Intel(R)", "oneMKL")) else None
    name, args, value, unit, tail = m.groups()
    name = name.upper()
    dtype = _dtype(name)
    dims, flop, moved = call_work(name, dtype, args.split(","))
    threads = _THREADS_RE.search(tail)
    return MklCall(name, dtype, dims, float(value) * _UNITS[unit], int(threads.group(1)) if threads else None,
                   flop, moved)


def parse_mkl_verbose(lines: Iterable[str], limit: int = 200_000) -> MklLog:
    """Every oneMKL verbose line among ``lines`` (others are ignored); at most ``limit`` calls kept."""
    log = MklLog()
    for line in lines:
        rec = parse_line(line)
        if rec is None:
            continue
        log.lines += 1
        if isinstance(rec, str):
            log.version = log.version or rec[:300]
        elif len(log.calls) < limit:
            log.calls.append(rec)
        else:
            log.dropped += 1
    return log
