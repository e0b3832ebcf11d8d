"""The work of one library call, from the shapes its verbose line prints: FLOPs and bytes moved.

A pure function of the facts a line carries (no I/O, no judging): oneDNN's
problem descriptor and data types (:mod:`.onednn_verbose`), oneMKL's call
arguments (:mod:`.mkl_verbose`). Hardware counters are often absent (a VM has
no PMU), so the arithmetic a job did is counted the way benchdnn counts it:

- **convolution** (forward, backward data, backward weights: the same
  multiply-adds): ``2 * mb * oc * od*oh*ow * ic/g * kd*kh*kw``; the problem is
  oneDNN's descriptor ``g4mb8_ic16oc32_ih32oh15kh3sh2dh0ph0_iw32ow15kw3sw2dw0pw0``
  (``ic``/``oc`` count all groups' channels, a missing ``id``/``ih`` is 1);
- **deconvolution**: the same products seen from the input, ``2 * mb * ic * id*ih*iw * oc/g * kd*kh*kw``;
- **inner product** ``mb8ic512oc10`` (with ``ih``/``iw`` when the source has spatial dimensions):
  ``2 * mb * oc * ic * spatial``;
- **matmul** and oneDNN's GEMM API ``8x512:512x10`` (leading dimensions are batch dimensions, broadcast
  between the two operands: ``3x5x64x32:3x5x32x8``): ``2 * batch * M * K * N``;
- **GEMM/GEMV calls of oneMKL** (``SGEMM(N,N,m,n,k,...)``): ``2 * m * n * k`` (GEMV ``2 * m * n``).

Bytes are each operand read or written once (source, weights, destination;
the bias too small to matter): the compulsory traffic, a lower bound of what
the memory system moved, which is what a roofline's intensity uses. The
kinds without arithmetic worth counting (reorder, eltwise, binary, pooling,
normalisations, softmax, sum, concat, ...) get bytes only (every operand of
their shape once: source and destination, two sources for a binary);
arithmetic that is not counted at all (RNNs, a line whose shape cannot be
read, oneMKL's batched calls, which print pointers instead of sizes) has
``flop = None`` and names why (:data:`UNCOUNTED`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Bytes per element of oneDNN's data types.
DTYPE_BYTES = {"f32": 4, "f64": 8, "bf16": 2, "f16": 2, "s8": 1, "u8": 1, "s32": 4, "f8_e5m2": 1, "f8_e4m3": 1,
               "s4": 0.5, "u4": 0.5}
# The kinds whose arithmetic is counted from the shape (the rest: bytes only).
COUNTED = frozenset({"convolution", "deconvolution", "inner_product", "matmul", "gemm_api"})
# Kinds that only move data (a layout, a copy): bytes, no FLOPs.
MOVING = frozenset({"reorder", "concat", "sum", "shuffle"})
UNCOUNTED = ("rnn", "shape", "mkl_batch")      # why a computing call's FLOPs are not counted (render words them)

_KEY_RE = re.compile(r"([a-z]+)(\d+)")
_NAME_RE = re.compile(r"_?n\"[^\"]*\"|_?n[A-Za-z][\w.:-]*$")
_DIMS_RE = re.compile(r"^\d+(x\d+)*$")
MAX_DIM = 1 << 40


@dataclass(frozen=True)
class Work:
    """FLOPs and compulsory bytes of one call; ``flop`` None: arithmetic not counted (``uncounted`` says why)."""

    flop: float | None
    bytes: float | None
    uncounted: str = ""    # one of UNCOUNTED when flop is None for a kind that computes


def descriptor(problem: str) -> dict[str, int]:
    """oneDNN's descriptor ``g4mb8_ic16oc32_ih32oh15kh3...`` as ``{"g": 4, "mb": 8, "ic": 16, ...}`` (its name
    ``n"..."`` dropped); {} when it is no descriptor (a dims list ``8x16x32x32`` has no keys)."""
    text = _NAME_RE.sub("", problem.strip())
    out: dict[str, int] = {}
    for key, value in _KEY_RE.findall(text):
        v = int(value)
        if v > MAX_DIM:
            return {}
        out.setdefault(key, v)
    return out


def dims_list(problem: str) -> list[list[int]]:
    """oneDNN's dims notation ``8x512:512x10`` (operands separated by ``:``, a space or ``+``) as lists."""
    out = []
    for part in re.split(r"[:\s+]+", problem.strip()):
        if part and _DIMS_RE.match(part):
            dims = [int(d) for d in part.split("x")]
            if any(d > MAX_DIM for d in dims):
                return []
            out.append(dims)
    return out


def _numel(dims: list[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _size(dtypes: dict[str, str], role: str, fallback: str = "f32") -> float:
    return DTYPE_BYTES.get(dtypes.get(role) or dtypes.get("src") or dtypes.get("data") or fallback, 4)


def _spatial(d: dict[str, int], prefix: str) -> int:
    """id*ih*iw (prefix "i"), od*oh*ow ("o"), kd*kh*kw ("k"): a dimension the descriptor leaves out is 1."""
    return d.get(prefix + "d", 1) * d.get(prefix + "h", 1) * d.get(prefix + "w", 1)


def _conv(kind: str, d: dict[str, int], dtypes: dict[str, str]) -> Work:
    if not all(k in d for k in ("mb", "ic", "oc")):
        return Work(None, None, "shape")
    g = max(1, d.get("g", 1))
    mb, ic, oc = d["mb"], d["ic"], d["oc"]
    isp, k = _spatial(d, "i"), _spatial(d, "k")
    osp = _spatial(d, "o") if any(x in d for x in ("od", "oh", "ow")) else isp
    if kind == "deconvolution":
        flop = 2.0 * mb * ic * isp * (oc // g or 1) * k
    else:
        flop = 2.0 * mb * oc * osp * (ic // g or 1) * k
    moved = (mb * ic * isp * _size(dtypes, "src") + oc * (ic // g or 1) * k * _size(dtypes, "wei")
             + mb * oc * osp * _size(dtypes, "dst"))
    return Work(flop, moved)


def _inner_product(d: dict[str, int], dtypes: dict[str, str]) -> Work:
    if not all(k in d for k in ("mb", "ic", "oc")):
        return Work(None, None, "shape")
    mb, ic, oc, sp = d["mb"], d["ic"], d["oc"], _spatial(d, "i")
    moved = mb * ic * sp * _size(dtypes, "src") + oc * ic * sp * _size(dtypes, "wei") + mb * oc * _size(dtypes, "dst")
    return Work(2.0 * mb * oc * ic * sp, moved)


def matmul_work(a: list[int], b: list[int], dtypes: dict[str, str]) -> Work:
    """``a`` [..., M, K] times ``b`` [..., K, N]: batch dimensions broadcast (a 1 takes the other's size)."""
    if len(a) < 2 or len(b) < 2:
        return Work(None, None, "shape")
    m, k, n = a[-2], a[-1], b[-1]
    ba, bb = a[:-2], b[:-2]
    width = max(len(ba), len(bb))
    ba, bb = [1] * (width - len(ba)) + ba, [1] * (width - len(bb)) + bb
    batch = _numel([max(x, y) for x, y in zip(ba, bb)])
    moved = (_numel(a) * _size(dtypes, "src") + _numel(b) * _size(dtypes, "wei")
             + batch * m * n * _size(dtypes, "dst"))
    return Work(2.0 * batch * m * k * n, moved)


def _moved_only(kind: str, prop: str, problem: str, dtypes: dict[str, str]) -> Work:
    """Bytes of a kind that is not counted in FLOPs: each operand of its shape read or written once."""
    shapes = dims_list(problem)
    d = descriptor(problem) if not shapes else {}
    if shapes:
        first = _numel(shapes[0])
        if kind in ("binary", "sum", "concat"):
            inputs = sum(_numel(s) for s in shapes)
            out = max(_numel(s) for s in shapes) if kind != "concat" else inputs
            return Work(None, inputs * _size(dtypes, "src") + out * _size(dtypes, "dst"))
        operands = 3 if prop.startswith("backward") else 2       # backward: src (or dst) and diff_dst in, diff_src out
        if kind == "reorder":
            return Work(None, first * (_size(dtypes, "src") + _size(dtypes, "dst")))
        return Work(None, first * _size(dtypes, "src") * operands)
    if "mb" in d and "ic" in d:             # pooling, lrn, batch/layer normalisation descriptors
        src = d["mb"] * d["ic"] * _spatial(d, "i")
        dst = d["mb"] * d["ic"] * (_spatial(d, "o") if any(x in d for x in ("od", "oh", "ow")) else _spatial(d, "i"))
        extra = src if prop.startswith("backward") else 0
        return Work(None, (src + dst + extra) * _size(dtypes, "src"))
    return Work(None, None, "shape")


def onednn_work(kind: str, prop: str, dtypes: dict[str, str], problem: str) -> Work:
    """The work of one oneDNN primitive execution from its verbose line's fields."""
    if kind in ("convolution", "deconvolution"):
        return _conv(kind, descriptor(problem), dtypes)
    if kind == "inner_product":
        return _inner_product(descriptor(problem), dtypes)
    if kind in ("matmul", "gemm_api"):
        shapes = dims_list(problem)
        return matmul_work(shapes[0], shapes[1], dtypes) if len(shapes) >= 2 else Work(None, None, "shape")
    if kind in ("rnn", "lstm", "gru", "vanilla_rnn", "lbr_gru", "augru"):
        return Work(None, None, "rnn")
    return _moved_only(kind, prop, problem, dtypes)
