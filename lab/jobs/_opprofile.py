"""The operators of a few training steps with their FLOP counts, bytes and time, from PyTorch's profiler.

For the roofline picture each operator is a point: arithmetic intensity
(FLOP per byte of its inputs and output) against the GFLOP/s it reached.
The FLOP counts are the profiler's own (``with_flops=True``: matrix
multiplies, convolutions, element-wise add/mul); the bytes are the sizes of
the operator's tensors from its recorded shapes and dtypes, the output's
computed from the operator's shapes (convolutions with their stride, padding
and dilation). Under autocast an operator appears twice (the autocast
wrapper and the cast call inside it): only the innermost counts.

Standard library only, Python 3.8+; torch is handed in.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

# Bytes per element of the profiler's dtype names (unknown: 4).
ELEMENT_BYTES = {"float": 4, "double": 8, "c10::BFloat16": 2, "c10::Half": 2, "long int": 8, "int": 4,
                 "signed char": 1, "unsigned char": 1, "bool": 1, "short int": 2}
DTYPE_NAMES = {"float": "fp32", "double": "fp64", "c10::BFloat16": "bf16", "c10::Half": "fp16",
               "signed char": "int8", "unsigned char": "int8"}


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _conv_out(shapes: List[List[int]], concrete: List[Any]) -> Optional[int]:
    """Elements of a conv2d output from input [N,C,H,W], weight [O,C/g,kh,kw] and stride/padding/dilation."""
    if len(shapes) < 2 or len(shapes[0]) != 4 or len(shapes[1]) != 4:
        return None
    (n, _c, h, w), (o, _ci, kh, kw) = shapes[0], shapes[1]

    def pair(i: int, default: int) -> Tuple[int, int]:
        v = concrete[i] if i < len(concrete) else None
        if isinstance(v, (list, tuple)) and len(v) == 2:
            return int(v[0]), int(v[1])
        return default, default

    (sh, sw), (ph, pw), (dh, dw) = pair(3, 1), pair(4, 0), pair(5, 1)
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    return n * o * max(ho, 0) * max(wo, 0)


def output_elements(name: str, shapes: List[List[int]], concrete: List[Any]) -> Optional[int]:
    """Elements of the operator's output, from its input shapes; None when the profiler's record is too thin."""
    tensors = [s for s in shapes if s]
    if name in ("aten::mm", "aten::matmul") and len(tensors) >= 2 and len(tensors[0]) == 2:
        return tensors[0][0] * tensors[1][-1]
    if name == "aten::addmm" and len(tensors) >= 3:
        return tensors[1][0] * tensors[2][-1]
    if name in ("aten::bmm", "aten::baddbmm") and len(tensors) >= 2:
        a, b = tensors[-2], tensors[-1]
        return a[0] * a[1] * b[-1] if len(a) == 3 and len(b) == 3 else None
    if name == "aten::conv2d":
        return _conv_out(shapes, concrete)
    if name in ("aten::add", "aten::mul", "aten::add_", "aten::mul_"):
        return max((_numel(s) for s in tensors), default=None)
    return None


def _inner(event: Any) -> bool:
    """True unless a child of ``event`` is the same operator with FLOPs (the autocast wrapper)."""
    return not any(c.name == event.name and getattr(c, "flops", 0) for c in getattr(event, "cpu_children", []) or [])


def operators(events: Any) -> List[Dict[str, Any]]:
    """Profiler events with FLOPs, grouped by operator, shapes and dtypes (calls, FLOP, bytes, seconds)."""
    groups: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
    for e in events:
        flops = getattr(e, "flops", 0) or 0
        if flops <= 0 or not _inner(e):
            continue
        shapes = [list(s) for s in (getattr(e, "input_shapes", None) or [])]
        dtypes = list(getattr(e, "input_dtypes", None) or [])
        concrete = list(getattr(e, "concrete_inputs", None) or [])
        sizes = [ELEMENT_BYTES.get(str(d), 4) for d in dtypes] + [4] * max(0, len(shapes) - len(dtypes))
        moved = sum(_numel(s) * b for s, b in zip(shapes, sizes) if s)
        out = output_elements(e.name, shapes, concrete)
        main_dtype = next((str(d) for d, s in zip(dtypes, shapes) if s), "float")
        moved += (out or 0) * ELEMENT_BYTES.get(main_dtype, 4)
        key = (e.name, str([s for s in shapes if s]), main_dtype)
        g = groups.setdefault(key, {"op": e.name.replace("aten::", ""), "shapes": [s for s in shapes if s],
                                    "dtype": DTYPE_NAMES.get(main_dtype, main_dtype), "calls": 0, "flop": 0.0,
                                    "bytes": 0.0, "seconds": 0.0, "bytes_known": out is not None})
        g["calls"] += 1
        g["flop"] += float(flops)
        g["bytes"] += float(moved)
        g["seconds"] += float(getattr(e, "cpu_time_total", 0.0) or 0.0) / 1e6
    out_list = []
    for g in groups.values():
        if g["seconds"] <= 0 or g["bytes"] <= 0:
            continue
        g["gflops"] = round(g["flop"] / g["seconds"] / 1e9, 3)
        g["intensity"] = round(g["flop"] / g["bytes"], 3)       # FLOP per byte
        g["seconds"] = round(g["seconds"], 6)
        out_list.append(g)
    return sorted(out_list, key=lambda g: -g["flop"])


def profile_operators(torch: Any, fn: Callable[[], Any], steps: int = 2) -> Tuple[List[Dict[str, Any]], List[str]]:
    """Run ``fn`` ``steps`` times under the profiler; (operators, notes)."""
    try:
        from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415 - only in the child
    except ImportError as exc:
        return [], [f"torch.profiler is unavailable: {exc}"]
    try:
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
            for _ in range(steps):
                fn()
        return operators(prof.events()), []
    except Exception as exc:  # noqa: BLE001 - the profile is a bonus: never fail the job for it
        return [], [f"the operator profile failed: {type(exc).__name__}: {exc}"]
