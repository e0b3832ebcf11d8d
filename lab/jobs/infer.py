"""Inference worker: prepares a model's inference variants, then measures one segment of one variant per command.

``python -I infer.py --json-args '{...}' --control stdin`` (run by the orchestrator,
:mod:`cpudoctor.lab.infer`, once per process the variants need) loads the model (a built-in one, a
``module:callable``, a TorchScript or an ONNX file), builds each variant it was given (``torch.inference_mode``,
a thread count, channels_last, bf16 autocast, dynamic int8, ``torch.compile``, ONNX Runtime sessions), warms
each up at every batch size, and checks its outputs against plain fp32 on the same weights and inputs
(max absolute and relative error, top-1 agreement). It says ``prepared`` per variant (or why the variant does
not apply here: no ONNX Runtime, no Linear layer to quantise, no native bf16, ...) and ``ready`` once.

Then, per ``measure {"variant": NAME, "batch": B, "seconds": S}`` line on stdin, it times calls of that
variant for about S seconds (at least one call) and sends the segment: its calls' median, the count and the
share of the CPUs other programs took meanwhile. ``report`` sends every variant's latency distribution
(quantiles of all its calls and an evenly spaced sample of them, for the drawings). The orchestrator
interleaves the segments of all variants and workers, so a burst of load elsewhere hits each alike.

Standard library plus torch (and onnxruntime/numpy where a variant uses them); Python 3.8+: this runs in the
user's environment.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
import math
import os
import sys
import tempfile
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

if __package__:
    from . import _cpumeter, _jobkit
    from ._settings import InferWorkerSettings, pin_cpus
else:  # a standalone script: ``python -I`` leaves the script's folder off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _cpumeter
    import _jobkit
    from _settings import InferWorkerSettings, pin_cpus

MIN_WARMUP_CALLS = 1
SAMPLE_POINTS = 240          # latencies kept per variant and batch for the drawings (evenly spaced in time)
QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0)
REPORT_COMMAND = "report"
GO_COMMAND = "go"            # during preparation: stop preparing, serve what is prepared (the time is up)


class Skipped(Exception):
    """A variant that does not apply here; the message says why (never an error)."""


class LoadError(_jobkit.JobError):
    kind = "model"
    exit_code = 2


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def loaded_libraries() -> List[str]:
    """The shared libraries mapped into this process (Linux), by file name."""
    try:
        with open("/proc/self/maps") as fh:
            names = {line.rsplit("/", 1)[-1].strip() for line in fh if ".so" in line}
    except OSError:
        return []
    return sorted(n for n in names if n)


def openmp_runtime(libraries: List[str]) -> Optional[str]:
    """Which OpenMP runtime the process loaded: "gnu" (libgomp), "intel" (libiomp5), "llvm" (libomp)."""
    for name in libraries:
        if name.startswith("libiomp5"):
            return "intel"
    for name in libraries:
        if name.startswith("libgomp"):
            return "gnu"
    for name in libraries:
        if name.startswith("libomp."):
            return "llvm"
    return None


# ----------------------------------------------------------------------------- the model and its inputs


class Source:
    """The model under test: a callable on a batch, a batch maker, and (torch models) the module itself."""

    def __init__(self, module: Any, make_input: Callable[[int], Any], torch_model: bool, description: str,
                 onnx_path: Optional[str] = None):
        self.module = module
        self.make_input = make_input
        self.torch_model = torch_model
        self.description = description
        self.onnx_path = onnx_path

    def layer_kinds(self) -> set:
        kinds = set()
        if not self.torch_model:
            return kinds
        for m in self.module.modules():
            kinds.add(getattr(m, "original_name", None) or type(m).__name__)   # a ScriptModule keeps its name
        return kinds


def _repeat_to(example: Any, batch: int, torch: Any) -> Any:
    """The example input grown or cut to ``batch`` along its first dimension (a tensor, or a tuple of them)."""
    if isinstance(example, (tuple, list)):
        return type(example)(_repeat_to(e, batch, torch) for e in example)
    if not isinstance(example, torch.Tensor) or example.dim() == 0:
        return example
    n = example.shape[0]
    reps = [-(-batch // n)] + [1] * (example.dim() - 1)
    return example.repeat(*reps)[:batch].contiguous()


def _random_input(shape: List[int], batch: int, torch: Any, integer: bool = False) -> Any:
    gen = torch.Generator().manual_seed(1234)
    if integer:
        return torch.randint(0, 100, (batch, *shape), generator=gen)
    return torch.randn(batch, *shape, generator=gen)


def _import_callable(target: str, cwd: Optional[str]) -> Callable[[], Any]:
    """``package.module:callable`` (imported from ``cwd`` first, as ``python -m`` would) or ``file.py:callable``."""
    where, sep, name = target.rpartition(":")
    if not sep or not where or not name:
        raise LoadError(f"--module {target}: give module:callable, e.g. mymodels:build (a callable that returns the "
                        "model, or the model and an example input)")
    try:
        if where.endswith(".py") or os.sep in where:
            path = os.path.abspath(os.path.join(cwd or os.getcwd(), where))
            spec = importlib.util.spec_from_file_location("_cpudoctor_user_model", path)
            if spec is None or spec.loader is None or not os.path.isfile(path):
                raise LoadError(f"--module {target}: no Python file {path}")
            mod = importlib.util.module_from_spec(spec)
            sys.path.insert(0, os.path.dirname(path))
            spec.loader.exec_module(mod)
        else:
            if cwd:
                sys.path.insert(0, cwd)
            mod = importlib.import_module(where)
    except LoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's code: one line saying what went wrong
        raise LoadError(f"--module {target}: importing {where} failed: {type(exc).__name__}: {exc}") from None
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise LoadError(f"--module {target}: {where} has no callable {name!r}")
    return fn


def load_source(s: InferWorkerSettings) -> Source:
    if s.source == "onnx":
        return _load_onnx(s)
    torch = _jobkit.require("torch")
    torch.manual_seed(s.seed)
    if s.source == "model":
        if __package__:
            from . import infer_models
        else:
            import infer_models
        model, make = infer_models.build(s.model or "resnet18")
        return Source(model, make, True, s.model or "resnet18")
    if s.source == "torchscript":
        path = os.path.abspath(os.path.join(s.cwd or os.getcwd(), s.target or ""))
        try:
            model = torch.jit.load(path, map_location="cpu").eval()
        except Exception as exc:  # noqa: BLE001 - a file of any kind: one line
            raise LoadError(f"--torchscript {s.target}: torch.jit.load failed: {type(exc).__name__}: "
                            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}") from None
        if not s.input_shape:
            raise LoadError("--torchscript needs --input-shape (one sample's dimensions, e.g. 3,224,224): a "
                            "TorchScript file does not say what it takes")
        shape = list(s.input_shape)
        return Source(model, lambda b: _random_input(shape, b, torch), True, os.path.basename(path))
    built = _import_callable(s.target or "", s.cwd)()
    model, example = (built[0], built[1]) if isinstance(built, tuple) and len(built) == 2 else (built, None)
    if not isinstance(model, torch.nn.Module):
        raise LoadError(f"--module {s.target}: the callable returned {type(model).__name__}, not a torch.nn.Module "
                        "(or a (model, example input) pair)")
    model.eval()
    if example is None:
        if not s.input_shape:
            raise LoadError(f"--module {s.target}: give --input-shape (one sample's dimensions), or return "
                            "(model, example_input) from the callable")
        shape = list(s.input_shape)
        return Source(model, lambda b: _random_input(shape, b, torch), True, s.target or "")
    return Source(model, lambda b: _repeat_to(example, b, torch), True, s.target or "")


ORT_TYPES = {"tensor(float)": "float32", "tensor(double)": "float64", "tensor(float16)": "float16",
             "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(bool)": "bool"}


def _load_onnx(s: InferWorkerSettings) -> Source:
    path = os.path.abspath(os.path.join(s.cwd or os.getcwd(), s.target or ""))
    if not os.path.isfile(path):
        raise LoadError(f"--onnx {s.target}: no such file")
    if not _has_module("onnxruntime"):
        raise LoadError(f"--onnx {s.target}: ONNX Runtime is not installed in {sys.executable} "
                        "(pip install onnxruntime)")
    np = _jobkit.require("numpy")
    import onnxruntime as ort  # noqa: PLC0415

    try:
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - any file: one line
        raise LoadError(f"--onnx {s.target}: ONNX Runtime cannot load it: {type(exc).__name__}: "
                        f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}") from None
    inputs = []
    for i in sess.get_inputs():
        dims = list(i.shape)
        rest = dims[1:]
        if any(not isinstance(d, int) or d <= 0 for d in rest):
            if s.input_shape and len(sess.get_inputs()) == 1:
                rest = list(s.input_shape)
            else:
                raise LoadError(f"--onnx {s.target}: input {i.name!r} has dimensions {dims} that the file leaves "
                                "open; give --input-shape (one sample's dimensions)")
        inputs.append((i.name, rest, ORT_TYPES.get(i.type, "float32")))

    def make(batch: int) -> Dict[str, Any]:
        rng = np.random.default_rng(1234)
        feed = {}
        for name, rest, dtype in inputs:
            shape = [batch] + list(rest)
            if dtype.startswith("int"):
                feed[name] = rng.integers(0, 100, size=shape).astype(dtype)
            elif dtype == "bool":
                feed[name] = np.ones(shape, dtype=bool)
            else:
                feed[name] = rng.standard_normal(shape).astype(dtype)
        return feed

    return Source(None, make, False, os.path.basename(path), onnx_path=path)


# ----------------------------------------------------------------------------- outputs and accuracy


def flatten(out: Any) -> List[Any]:
    """The output tensors/arrays of a model call, in a fixed order (tuples, lists, dicts, model outputs)."""
    if isinstance(out, dict):
        return [t for k in sorted(out, key=str) for t in flatten(out[k])]
    if isinstance(out, (tuple, list)):
        return [t for x in out for t in flatten(x)]
    if hasattr(out, "to_tuple") and callable(out.to_tuple):
        return flatten(out.to_tuple())
    if hasattr(out, "shape"):
        return [out]
    return []


def _as_float_lists(out: Any) -> List[Any]:
    """Each output flattened to float64: torch tensors when torch is loaded (ONNX Runtime's arrays converted),
    else numpy arrays."""
    torch = sys.modules.get("torch")
    arrays = []
    for t in flatten(out):
        if torch is not None:
            if not isinstance(t, torch.Tensor):
                t = torch.from_numpy(__import__("numpy").asarray(t, dtype="float64"))
            t = t.detach()
            if t.is_quantized:
                t = t.dequantize()
            arrays.append(t.to(dtype=torch.float64).reshape(-1))
        else:
            arrays.append(t.astype("float64").reshape(-1))
    return arrays


def compare(out: Any, ref: Any) -> Dict[str, Any]:
    """Max absolute error, the same relative to the reference's largest magnitude, and top-1 agreement."""
    got, want = _as_float_lists(out), _as_float_lists(ref)
    if not want:
        return {"checked": False, "why": "the model's output holds no tensor to compare"}
    if len(got) != len(want) or any(tuple(g.shape) != tuple(w.shape) for g, w in zip(got, want)):
        return {"checked": True, "nonfinite": False, "max_abs": None, "max_rel": None, "shape_differs": True}
    max_abs, scale, nonfinite = 0.0, 0.0, False
    for g, w in zip(got, want):
        if g.shape[0] == 0:
            continue
        diff = abs(g - w)
        finite = bool((diff == diff).all()) and float(diff.max()) != math.inf
        if not finite:
            nonfinite = True
            continue
        max_abs = max(max_abs, float(diff.max()))
        scale = max(scale, float(abs(w).max()))
    res: Dict[str, Any] = {"checked": True, "nonfinite": nonfinite, "max_abs": max_abs,
                           "max_rel": (max_abs / scale) if scale > 0 else (0.0 if max_abs == 0 else None)}
    first_got, first_ref = flatten(out)[:1], flatten(ref)[:1]
    if first_got and len(first_ref[0].shape) == 2 and first_ref[0].shape[1] > 1:
        a, b = _argmax_rows(first_got[0]), _argmax_rows(first_ref[0])
        if a is not None and b is not None and len(a) == len(b) and a:
            res["top1_agreement"] = sum(1 for x, y in zip(a, b) if x == y) / len(a)
    return res


def _argmax_rows(t: Any) -> Optional[List[int]]:
    try:
        if hasattr(t, "detach"):
            return [int(i) for i in t.detach().float().argmax(dim=1).tolist()]
        return [int(i) for i in t.argmax(axis=1).tolist()]
    except Exception:  # noqa: BLE001 - an output without rows
        return None


# ----------------------------------------------------------------------------- building variants


class Variant:
    """One prepared variant: a call on an input batch, and what preparing it found."""

    def __init__(self, spec: Dict[str, Any]):
        self.spec = spec
        self.name: str = spec["name"]
        self.threads: Optional[int] = spec.get("threads")
        self.call: Optional[Callable[[Any], Any]] = None
        self.convert: Callable[[Any], Any] = lambda x: x   # once per batch size, untimed (ONNX: numpy feeds)
        self.inputs: Dict[int, Any] = {}
        self.status = "ok"
        self.reason = ""
        self.facts: Dict[str, Any] = {}
        self.latencies: Dict[int, List[float]] = {}


def _quantize(model: Any, api_wanted: str) -> Tuple[Any, str, List[str]]:
    if __package__:
        from . import quant
    else:
        import quant
    try:
        api = quant.choose_api(api_wanted)
    except _jobkit.JobError as exc:
        raise Skipped(str(exc)) from None
    try:
        int8, said = quant.quantize(model, api)
    except _jobkit.JobError as exc:
        raise Skipped(str(exc)) from None
    return int8, api, said


def _export_onnx(source: Source, folder: str, torch: Any) -> str:
    """The torch model as an ONNX file (once per worker), batch dimension left open."""
    if not _has_module("onnx"):
        raise Skipped("exporting the model to ONNX needs the onnx package, which is not installed here "
                      "(pip install onnx onnxscript)")
    path = os.path.join(folder, "model.onnx")
    example = source.make_input(2)
    args = example if isinstance(example, tuple) else (example,)
    names = [f"input{i}" for i in range(len(args))]
    errors = []
    for dynamo in (False, True):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                kwargs: Dict[str, Any] = {"input_names": names, "dynamo": dynamo}
                if dynamo:
                    kwargs["dynamic_shapes"] = tuple({0: torch.export.Dim("batch", min=1, max=4096)} for _ in args)
                else:
                    kwargs["dynamic_axes"] = {n: {0: "batch"} for n in names}
                torch.onnx.export(source.module, args, path, **kwargs)
            return path
        except Exception as exc:  # noqa: BLE001 - both exporters may refuse a model
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            errors.append(f"{'dynamo' if dynamo else 'TorchScript'} exporter: {type(exc).__name__}: {text[:200]}")
    raise Skipped("the model could not be exported to ONNX (" + "; ".join(errors) + ")")


# Layers whose fused inference path (torch.backends.mha's "fast path") reads ``linear1.weight.device``: a
# dynamically quantised Linear has a ``weight()`` method instead, so the int8 model's first call fails with
# "AttributeError: 'function' object has no attribute 'device'" (torch 2.13) unless the fast path is off.
FUSED_TRANSFORMER_LAYERS = {"TransformerEncoderLayer", "TransformerDecoderLayer"}


def _without_mha_fastpath(call: Callable[[Any], Any], torch: Any) -> Callable[[Any], Any]:
    """``call`` with nn.Transformer's fused path off during it (the flag is process-wide; other variants in this
    worker keep it)."""
    mha = torch.backends.mha

    def wrapped(x: Any) -> Any:
        was = mha.get_fastpath_enabled()
        mha.set_fastpath_enabled(False)
        try:
            return call(x)
        finally:
            mha.set_fastpath_enabled(was)

    return wrapped


ORT_LEVEL_NAMES = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED",
                   "all": "ORT_ENABLE_ALL"}


class Builder:
    """Builds each variant on the model; shared pieces (the int8 copy, the ONNX file) are made once."""

    def __init__(self, source: Source, s: InferWorkerSettings, default_threads: Optional[int], tmp: str):
        self.source = source
        self.s = s
        self.default_threads = default_threads
        self.tmp = tmp
        self._onnx: Optional[str] = source.onnx_path
        self.kinds = source.layer_kinds()
        self.compile_s: Optional[float] = None

    def build(self, v: Variant, done: Dict[str, Variant]) -> None:
        spec = v.spec
        same = spec.get("same_threads_as")
        if same and spec.get("threads") is not None and spec.get("threads") == self.default_threads:
            v.status = "same"
            v.reason = f"the same setting as '{same}' (the default here is {spec['threads']} threads)"
            v.facts["same_as"] = same
            return
        if spec["kind"] == "onnxruntime":
            self._build_ort(v)
            return
        if not self.source.torch_model:
            raise Skipped("an ONNX file runs in ONNX Runtime only")
        torch = _jobkit.require("torch")
        model = self.source.module
        convert = None
        if spec.get("channels_last"):
            if "Conv2d" not in self.kinds:
                raise Skipped("the model has no 2-D convolution, so channels_last changes nothing")
            model = copy.deepcopy(model).to(memory_format=torch.channels_last)

            def convert(x: Any) -> Any:
                return x.contiguous(memory_format=torch.channels_last) if getattr(x, "dim", lambda: 0)() == 4 else x
        if spec.get("int8"):
            if not (self.kinds & {"Linear", "LSTM", "GRU"}):
                raise Skipped("the model has no Linear (or LSTM/GRU) layer for dynamic int8 quantisation")
            if getattr(self.source.module, "_c", None) is not None:
                raise Skipped("dynamic int8 quantisation works on an nn.Module, not on a TorchScript file")
            model, api, said = _quantize(model, self.s.int8_api)
            v.facts.update(int8_api=api, int8_warnings=said, torchao_installed=_has_module("torchao"))
            fastpath_off = api != "torchao" and bool(self.kinds & FUSED_TRANSFORMER_LAYERS) and \
                hasattr(getattr(torch.backends, "mha", None), "set_fastpath_enabled")
            if fastpath_off:
                v.facts["mha_fastpath_off"] = True
        if spec.get("autocast") == "bf16" and self.s.native_bf16 is False:
            raise Skipped("this CPU has no native bf16 (no AVX512_BF16 or AMX-BF16): autocast would emulate it")
        if spec.get("compile"):
            if getattr(self.source.module, "_c", None) is not None:
                raise Skipped("torch.compile does not take a TorchScript module")
            model = torch.compile(model)
        grad = spec["kind"] == "eager"
        autocast = spec.get("autocast") == "bf16"

        def run(x: Any, model: Any = model, convert: Any = convert) -> Any:
            if convert is not None:
                x = convert(x)
            args = x if isinstance(x, tuple) else (x,)
            if grad:
                return model(*args)
            with torch.inference_mode():
                if autocast:
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        return model(*args)
                return model(*args)

        v.call = run if not v.facts.get("mha_fastpath_off") else _without_mha_fastpath(run, torch)

    def _build_ort(self, v: Variant) -> None:
        if not _has_module("onnxruntime"):
            raise Skipped("ONNX Runtime is not installed in this Python (pip install onnxruntime)")
        import onnxruntime as ort  # noqa: PLC0415

        if self._onnx is None:
            torch = _jobkit.require("torch")
            began = time.perf_counter()
            self._onnx = _export_onnx(self.source, self.tmp, torch)
            v.facts["export_s"] = round(time.perf_counter() - began, 3)
        opts = ort.SessionOptions()
        level = v.spec.get("ort_level") or "all"
        opts.graph_optimization_level = getattr(ort.GraphOptimizationLevel, ORT_LEVEL_NAMES[level])
        threads = v.spec.get("ort_threads")
        if threads:
            opts.intra_op_num_threads = int(threads)
        try:
            sess = ort.InferenceSession(self._onnx, sess_options=opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - an operator ONNX Runtime lacks, a bad export
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise Skipped(f"ONNX Runtime cannot run the exported model: {type(exc).__name__}: {text[:200]}") from None
        names = [i.name for i in sess.get_inputs()]
        v.facts.update(onnxruntime=getattr(ort, "__version__", None), ort_level=ORT_LEVEL_NAMES[level])

        def to_feed(x: Any) -> Dict[str, Any]:
            if isinstance(x, dict):
                return x
            args = x if isinstance(x, tuple) else (x,)
            return {n: a.numpy() for n, a in zip(names, args)}

        v.convert = to_feed
        v.call = lambda feed, sess=sess: sess.run(None, feed)


# ----------------------------------------------------------------------------- measuring


def _set_threads(torch: Any, n: Optional[int]) -> None:
    if torch is not None and n and torch.get_num_threads() != n:
        torch.set_num_threads(n)


def time_calls(call: Callable[[Any], Any], x: Any, seconds: float, stop: _jobkit.StopFlag,
               min_calls: int = 1) -> List[float]:
    """Per-call seconds of ``call(x)`` for about ``seconds`` (at least ``min_calls`` calls)."""
    out: List[float] = []
    began = time.perf_counter()
    while (time.perf_counter() - began < seconds or len(out) < min_calls) and not stop.is_set():
        t0 = time.perf_counter()
        call(x)
        out.append(time.perf_counter() - t0)
    return out


def _quantile(ordered: List[float], q: float) -> float:
    if not ordered:
        return math.nan
    pos = q * (len(ordered) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def distribution(seconds: List[float]) -> Dict[str, Any]:
    """Quantiles of per-call latencies in ms, their mean, and an evenly spaced sample (in time order)."""
    ordered = sorted(seconds)
    n = len(ordered)
    keys = ("min", "p10", "p25", "p50", "p75", "p90", "p99", "max")
    out: Dict[str, Any] = {k + "_ms": round(_quantile(ordered, q) * 1000, 4) for k, q in zip(keys, QUANTILES)}
    step = max(1, n // SAMPLE_POINTS)
    out.update(calls=n, mean_ms=round(sum(seconds) / n * 1000, 4) if n else None,
               sample_ms=[round(x * 1000, 4) for x in seconds[::step][:SAMPLE_POINTS]])
    return out


def _prepare(builder: Builder, v: Variant, s: InferWorkerSettings, torch: Any, stop: _jobkit.StopFlag,
             reference: Any, probe: Any) -> None:
    began = time.perf_counter()
    stage = "building it"                # said with a failure: where the variant broke
    try:
        builder.build(v, {})
        if v.status == "same" or v.call is None:
            return
        _set_threads(torch, v.threads or builder.default_threads)
        first = None
        for b in s.batches:
            stage = f"its first call at batch {b}"
            x = v.convert(builder.source.make_input(b))
            v.inputs[b] = x
            t0 = time.perf_counter()
            v.call(x)
            if first is None:
                first = time.perf_counter() - t0
            stage = f"its warm-up at batch {b}"
            time_calls(v.call, x, s.warmup_s, stop, MIN_WARMUP_CALLS)
            v.latencies[b] = []
        if v.spec.get("compile"):
            v.facts["compile_s"] = round(first or 0.0, 3)     # the first call compiles; apart from the latency
        if reference is not None:
            stage = "the accuracy check"
            v.facts["accuracy"] = compare(v.call(v.convert(probe)), reference)
    except Skipped as exc:
        v.status, v.reason, v.call = "skipped", str(exc), None
    except Exception as exc:  # noqa: BLE001 - a variant that fails here must not end the others
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        short = _jobkit.out_of_memory_words(text)
        v.status, v.call = "error", None
        v.reason = short or f"failed in {stage}: {type(exc).__name__}: {text[:300]}"
    finally:
        v.facts["prepare_s"] = round(time.perf_counter() - began, 3)


def _reference(source: Source, probe: Any, torch: Any) -> Any:
    """Plain fp32 outputs of the unchanged model (ONNX: with graph optimisation off), the accuracy yardstick."""
    if source.torch_model:
        with torch.no_grad():
            args = probe if isinstance(probe, tuple) else (probe,)
            return source.module(*args)
    import onnxruntime as ort  # noqa: PLC0415

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(source.onnx_path, sess_options=opts, providers=["CPUExecutionProvider"])
    return sess.run(None, probe)


def run(args: Dict[str, Any], stop: _jobkit.StopFlag) -> Dict[str, Any]:
    s = InferWorkerSettings.from_dict(args)
    cpus = pin_cpus(s.cpus)
    source = load_source(s)
    torch = sys.modules.get("torch")
    if torch is not None and s.threads:
        torch.set_num_threads(s.threads)
    default_threads = torch.get_num_threads() if torch is not None else None
    libraries = loaded_libraries()
    facts: Dict[str, Any] = {
        "torch": getattr(torch, "__version__", None), "threads": default_threads, "cpus": cpus,
        "openmp": openmp_runtime(libraries), "model": source.description,
        "onnxruntime_installed": _has_module("onnxruntime"), "torchao_installed": _has_module("torchao"),
        "env": {k: os.environ[k] for k in ("OMP_WAIT_POLICY", "KMP_BLOCKTIME", "GOMP_SPINCOUNT", "LD_PRELOAD",
                                           "OMP_NUM_THREADS", "MALLOC_CONF") if k in os.environ},
    }
    if s.preload:
        facts["preloaded"] = any(s.preload in lib for lib in libraries)
    if torch is not None:
        facts["parameters"] = sum(p.numel() for p in source.module.parameters())
    probe = source.make_input(s.probe_batch)
    reference = _reference(source, probe, torch)
    variants = [Variant(spec) for spec in s.variants]
    with tempfile.TemporaryDirectory(prefix="cpudoctor-infer-") as tmp:
        builder = Builder(source, s, default_threads, tmp)
        pending: List[str] = []
        for v in variants:
            if stop.is_set():
                break
            if _told_to_go(stop, pending):
                v.status, v.reason = "unprepared", ("the time for preparation ran out before its turn (a busy or slow "
                                                    "machine: measure again with a larger budget)")
            elif s.preload and not facts.get("preloaded"):
                v.status, v.reason = "error", f"LD_PRELOAD did not load {s.preload} into the worker"
            else:
                _prepare(builder, v, s, torch, stop, reference, probe)
            _jobkit.progress(phase="prepared", variant=v.name, status=v.status, reason=v.reason, **v.facts)
        _jobkit.progress(phase="ready", **facts)
        return _serve(variants, s, torch, default_threads, stop, facts, pending)


def _told_to_go(stop: _jobkit.StopFlag, pending: List[str]) -> bool:
    """True once the orchestrator said "go" (preparation time is over); other commands wait in ``pending``."""
    if GO_COMMAND in pending:
        return True
    while True:
        command = stop.next_command(timeout=0.0)
        if command is None:
            return False
        pending.append(command)
        if command == GO_COMMAND:
            return True


def _serve(variants: List[Variant], s: InferWorkerSettings, torch: Any, default_threads: Optional[int],
           stop: _jobkit.StopFlag, facts: Dict[str, Any], pending: Optional[List[str]] = None) -> Dict[str, Any]:
    by_name = {v.name: v for v in variants if v.call is not None}
    meter = _cpumeter.CpuMeter(facts.get("cpus"))
    segments = 0
    queued = [c for c in pending or [] if c != GO_COMMAND]
    while True:
        command = queued.pop(0) if queued else stop.next_command()
        if command is None:
            break
        word, _, rest = command.partition(" ")
        if word == REPORT_COMMAND:
            _jobkit.progress(phase="summary", cells=[dict(variant=v.name, batch=b, **distribution(times))
                                                     for v in by_name.values() for b, times in v.latencies.items()
                                                     if times])
            continue
        if word != _jobkit.MEASURE_COMMAND:
            _jobkit.log(f"unknown command {command!r} ignored")
            continue
        try:
            ask = json.loads(rest)
            v = by_name[ask["variant"]]
            batch = int(ask["batch"])
            x = v.inputs[batch]
            seconds = max(0.005, float(ask.get("seconds", 0.3)))
        except (ValueError, KeyError, TypeError) as exc:
            _jobkit.log(f"'measure' needs {{\"variant\", \"batch\", \"seconds\"}} of a prepared variant: {exc!r}")
            _jobkit.progress(phase="segment", error=f"cannot measure {rest[:200]}")
            continue
        _set_threads(torch, v.threads or default_threads)
        cpu_start = meter.start()
        times = time_calls(v.call, x, seconds, stop)
        interference = meter.since(cpu_start)
        if stop.is_set():
            break
        v.latencies[batch].extend(times)
        segments += 1
        ordered = sorted(times)
        _jobkit.progress(phase="segment", variant=v.name, batch=batch, calls=len(times),
                         median_ms=round(_quantile(ordered, 0.5) * 1000, 4), min_ms=round(ordered[0] * 1000, 4),
                         max_ms=round(ordered[-1] * 1000, 4), seconds=round(sum(times), 4),
                         interference=interference)
    return {"status": "ok", "segments": segments, **facts}


if __name__ == "__main__":
    warnings.filterwarnings("default")
    _jobkit.exit_job(_jobkit.job_main(run))
