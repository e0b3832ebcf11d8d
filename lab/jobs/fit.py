"""``fit``'s child: measure the memory one training step of a model takes, at a few batch sizes.

``python -I fit.py --json-args '{...}' --control stdin``, in the environment the user trains in. It builds the
model (a lab model, or ``module:callable`` from the user's folder), its optimizer, and measures:

* **exact sizes** of the model's state: parameters, buffers, gradients and the optimizer's state tensors
  (their bytes, after one step has created them);
* **activations** autograd saves for the backward pass, per sample: the tensors the
  ``saved_tensors_hooks`` see during a forward pass at two batch sizes, each storage counted once, parameters
  left out (a layer that saves its weight saves no new memory);
* **the step's peak**: the process's peak resident memory (VmHWM) over a few steps at each batch size, with
  the peak reset first (``/proc/self/clear_refs``) and the allocator's free memory given back (glibc's
  ``malloc_trim``), minus the memory resident before the step. This counts what the saved-tensor count
  misses: the gradients of the activations during the backward pass, the kernels' workspace, the allocator's
  rounding and fragmentation: on ResNet-18 the saved tensors were 3.5 MiB per sample and the peak rose by
  4.2-5 MiB per sample. The peak is what the kernel's OOM killer and a cgroup limit see.

Optionally the same with the model's repeated blocks checkpointed (:mod:`_checkpointing`) and under bf16
autocast. Each measured batch is sent as a progress line, so a measurement cut short (the parent's stop, an
out-of-memory kill) keeps its points. Standard library and torch only, Python 3.8+.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

if __package__:
    from . import _checkpointing, _jobkit
    from ._settings import MODELS, FitSettings, SettingsError
else:  # a standalone script: ``python -I`` leaves the script's folder off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _checkpointing
    import _jobkit
    from _settings import MODELS, FitSettings, SettingsError

FIRST_BATCH = 2          # BatchNorm needs more than one value per channel in training mode
SAVED_BATCHES = (2, 4)   # the saved-tensor count's two batch sizes (per sample = the difference)


class ModelError(_jobkit.JobError):
    """The model could not be imported, built or run; the message says which and why."""

    kind = "model"
    exit_code = 2


# --- the process's memory ---------------------------------------------------------------------------


def _status(key: str) -> Optional[int]:
    """A ``kB`` line of /proc/self/status in bytes (None off Linux)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _max_rss() -> Optional[int]:
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux 4.0+: ``echo 5 > /proc/self/clear_refs``)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


_LIBC = None


def _trim() -> None:
    """Give the allocator's free memory back to the system (glibc), so each batch starts from what is live."""
    global _LIBC
    gc.collect()
    if not sys.platform.startswith("linux"):
        return
    try:
        if _LIBC is None:
            import ctypes

            _LIBC = ctypes.CDLL("libc.so.6")
        _LIBC.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _rss() -> Optional[int]:
    return _status("VmRSS")


def _peak() -> Optional[int]:
    return _status("VmHWM") or _max_rss()


# --- the model ----------------------------------------------------------------------------------------


def _import_callable(spec: str, path: Optional[str]) -> Callable[[], Any]:
    module_name, _, attr = spec.partition(":")
    if path and path not in sys.path:
        sys.path.insert(0, path)
    try:
        obj: Any = importlib.import_module(module_name.strip())
    except Exception as exc:  # noqa: BLE001 - the user's module: any failure is theirs to read
        raise ModelError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc} (run from the folder that "
                         "holds it, or give its folder)") from None
    for part in attr.strip().split("."):
        if not part or not hasattr(obj, part):
            raise ModelError(f"{module_name} has no {attr!r}") from None
        obj = getattr(obj, part)
    if not callable(obj):
        raise ModelError(f"{spec} is not callable (give a class or a function that returns the model)")
    return obj


class Subject:
    """The model, how to make a batch of ``n`` for it, and the loss of its output."""

    def __init__(self, s: FitSettings, torch):
        self.torch, self.s = torch, s
        self.make_batch: Optional[Callable[[int], Any]] = None
        self.labels = False
        if s.model in MODELS:
            if __package__:
                from .models import build_model
            else:
                from models import build_model  # noqa: PLC0415 - a sibling of this script

            self.model = build_model(s.model)
            self.shape, self.dtype, self.labels = [1, 28, 28], torch.float32, True
        else:
            made = _import_callable(s.model, s.path)()
            if isinstance(made, (tuple, list)) and len(made) == 2 and callable(made[1]):
                made, self.make_batch = made
            if not isinstance(made, torch.nn.Module):
                raise ModelError(f"{s.model} returned {type(made).__name__}, not a torch.nn.Module")
            self.model = made
            if self.make_batch is None and not s.input:
                raise ModelError("give one sample's input shape (e.g. 3x224x224), or return (model, make_batch) "
                                 "from the callable")
            self.shape = list(s.input or [])
            self.dtype = getattr(torch, s.input_dtype)
        self.model.train()

    def batch(self, n: int):
        torch = self.torch
        if self.make_batch is not None:
            return self.make_batch(n)
        if self.dtype in (torch.int64, torch.int32):
            return torch.randint(0, self.s.vocab, [n] + self.shape, dtype=self.dtype)
        return torch.randn([n] + self.shape).to(self.dtype)

    def loss(self, x, n: int):
        torch = self.torch
        if isinstance(x, dict):
            out = self.model(**x)
        elif isinstance(x, (tuple, list)):
            out = self.model(*x)
        else:
            out = self.model(x)
        if self.labels:
            return torch.nn.functional.cross_entropy(out, torch.arange(n) % 10)
        return _scalar(out, torch)

    def describe(self) -> str:
        if self.make_batch is not None:
            return "the model's own make_batch"
        return "x".join(str(d) for d in self.shape) + f" {self.s.input_dtype}"


def _scalar(out, torch):
    """A scalar to call backward on: the output's ``loss`` when it has one, else the mean of its first tensor."""
    loss = out.get("loss") if isinstance(out, dict) else getattr(out, "loss", None)
    if torch.is_tensor(loss) and loss.numel() == 1:
        return loss
    if isinstance(out, dict):
        out = next((v for v in out.values() if torch.is_tensor(v)), None)
    elif isinstance(out, (tuple, list)):
        out = next((v for v in out if torch.is_tensor(v)), None)
    if not torch.is_tensor(out) or not out.is_floating_point():
        raise ModelError("the model's output has no floating-point tensor to compute a loss from")
    return out.float().mean()


def _optimizer(name: str, params, torch):
    if name == "none":
        return None
    opt = torch.optim
    makers = {"adam": lambda: opt.Adam(params), "adamw": lambda: opt.AdamW(params),
              "sgd": lambda: opt.SGD(params, lr=0.01), "sgd-momentum": lambda: opt.SGD(params, lr=0.01, momentum=0.9),
              "rmsprop": lambda: opt.RMSprop(params), "adagrad": lambda: opt.Adagrad(params),
              "adafactor": lambda: opt.Adafactor(params)}
    try:
        return makers[name]()
    except AttributeError:
        raise SettingsError(f"this torch ({torch.__version__}) has no {name} optimizer") from None


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _factored_bytes(p) -> int:
    """Adafactor's state for one parameter (torch.optim.Adafactor): a matrix's second moment as a row and a column
    vector over its last two dimensions, a vector's in full."""
    shape = list(p.shape)
    if len(shape) < 2:
        return p.numel() * p.element_size()
    rows = 1
    for d in shape[:-1]:
        rows *= d
    cols = shape[-1]
    for d in shape[:-2]:
        cols *= d
    return (rows + cols) * p.element_size()


# --- measuring -------------------------------------------------------------------------------------


class Meter:
    """Steps of the subject at batch sizes, each measured from a trimmed allocator and a reset peak."""

    def __init__(self, subject: Subject, opt, s: FitSettings, stop: _jobkit.StopFlag):
        self.sub, self.opt, self.s, self.stop = subject, opt, s, stop
        self.torch = subject.torch
        self.peak_reset = True
        self.autocast = False

    def step(self, n: int) -> None:
        torch = self.torch
        x = self.sub.batch(n)
        if self.opt is not None:
            self.opt.zero_grad(set_to_none=True)
        else:
            self.sub.model.zero_grad(set_to_none=True)
        if self.autocast:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = self.sub.loss(x, n)
        else:
            loss = self.sub.loss(x, n)
        loss.backward()
        if self.opt is not None:
            self.opt.step()

    def point(self, n: int) -> Dict[str, Any]:
        """The peak a few steps at batch ``n`` add over what was resident before them."""
        self.sub.model.zero_grad(set_to_none=True)         # as zero_grad(set_to_none=True) leaves them: freed
        _trim()
        before = _rss()
        self.peak_reset = _reset_peak() and self.peak_reset
        times = []
        for _ in range(self.s.steps):
            t0 = time.perf_counter()
            self.step(n)
            times.append(time.perf_counter() - t0)
        peak = _peak()
        delta = peak - before if peak is not None and before is not None else None
        return {"batch": n, "peak_delta_bytes": delta, "before_bytes": before, "step_s": round(min(times), 5)}


def saved_per_sample(sub: Subject) -> Tuple[Optional[int], Optional[int]]:
    """(bytes per sample, fixed bytes) autograd saved for backward in a forward pass, each storage once."""
    torch = sub.torch
    params = {p.untyped_storage().data_ptr() for p in sub.model.parameters()}
    counted = []
    for n in SAVED_BATCHES:
        seen: Dict[int, int] = {}

        def pack(t, seen=seen):
            try:
                storage = t.untyped_storage()
                ptr = storage.data_ptr()
                if ptr not in params and ptr not in seen:
                    seen[ptr] = storage.nbytes()
            except (RuntimeError, AttributeError, NotImplementedError):
                pass              # a tensor without storage (sparse, nested, a tensor subclass)
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = sub.loss(sub.batch(n), n)
        loss.backward()
        sub.model.zero_grad(set_to_none=True)
        del loss
        counted.append(sum(seen.values()))
    per = (counted[1] - counted[0]) / (SAVED_BATCHES[1] - SAVED_BATCHES[0])
    return max(0, int(per)), max(0, int(counted[0] - per * SAVED_BATCHES[0]))


def _next_batches(s: FitSettings) -> List[int]:
    if s.batches:
        return list(s.batches)
    target = s.target_batch or 256
    out, n = [], FIRST_BATCH
    while n < target:
        out.append(n)
        n *= 2
    return out + [target]


WORKSPACE = 1.5          # a step's rise per sample over the saved tensors' (ResNet-18: 4.2-5.1 over 3.5 MiB)


def _predict(points: List[Dict[str, Any]], n: int, key: str, per_sample: Optional[float] = None) -> Optional[float]:
    """``key`` at batch ``n`` from the last two points (a straight line); from one point, its rise per sample
    ``per_sample`` when known, else the point scaled."""
    known = [p for p in points if p.get(key) is not None]
    if not known:
        return None
    if len(known) == 1 or known[-1]["batch"] == known[-2]["batch"]:
        if per_sample is not None:
            return known[-1][key] + per_sample * (n - known[-1]["batch"])
        return known[-1][key] * n / known[-1]["batch"]
    a, b = known[-2], known[-1]
    slope = (b[key] - a[key]) / (b["batch"] - a["batch"])
    return b[key] + slope * (n - b["batch"])


class Series:
    """Batch sizes measured in turn while the next one fits the memory and time budgets."""

    def __init__(self, meter: Meter, s: FitSettings, deadline: float, base: int, saved_per_sample: int):
        self.meter, self.s, self.deadline, self.base = meter, s, deadline, base
        self.per_sample = saved_per_sample * WORKSPACE
        self.notes: List[str] = []

    def run(self, batches: List[int], variant: str, share: float = 1.0) -> List[Dict[str, Any]]:
        """Measure ``batches`` in turn within ``share`` of the time left (the rest for the variants after)."""
        points: List[Dict[str, Any]] = []
        deadline = time.perf_counter() + share * max(0.0, self.deadline - time.perf_counter())
        for n in batches:
            if self.meter.stop.is_set():
                self.notes.append(f"{variant}: stopped before batch {n}")
                break
            why = self._too_much(points, n, deadline)
            if why:
                self.notes.append(f"{variant}: batch {n} not measured ({why})")
                break
            p = self.meter.point(n)
            p["variant"] = variant
            points.append(p)
            _jobkit.progress(phase="measured", **p)
        return points

    def _too_much(self, points: List[Dict[str, Any]], n: int, deadline: float) -> str:
        if not points:
            return ""
        # the least disturbed step so far, per sample (a busy machine slows some steps down, never speeds one up)
        timed = [p["step_s"] / p["batch"] for p in points if p.get("step_s")]
        step = min(timed) * n if timed else 0.0
        if time.perf_counter() + step * (self.s.steps + 1) > deadline:
            return f"its steps would take about {step * self.s.steps:.1f} s, past the time budget"
        delta = _predict(points, n, "peak_delta_bytes", self.per_sample)
        if self.s.budget_bytes and delta is not None and self.base + delta > self.s.budget_bytes:
            return (f"it would need about {(self.base + delta) / 2**20:.0f} MiB, past the "
                    f"{self.s.budget_bytes / 2**20:.0f} MiB the measurement may use")
        return ""


def measure(s: FitSettings, stop: _jobkit.StopFlag) -> Dict[str, Any]:
    started = time.perf_counter()
    deadline = started + s.seconds
    at_start = _rss()
    torch = _jobkit.require("torch")
    if s.threads is not None:
        torch.set_num_threads(s.threads)
    torch.manual_seed(0)
    (torch.ones(64, 64) @ torch.ones(64, 64)).sum()       # the libraries' first use, as any job's first step
    framework = _rss()
    try:
        sub = Subject(s, torch)
    except _jobkit.JobError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's code
        raise ModelError(f"building {s.model} failed: {type(exc).__name__}: {exc}") from None
    params = list(sub.model.parameters())
    opt = _optimizer(s.optimizer, [p for p in params if p.requires_grad], torch)
    meter = Meter(sub, opt, s, stop)
    batches = _next_batches(s)
    try:
        meter.step(batches[0])                            # the optimizer's state, the kernels' first use
        grad_bytes = _nbytes(p.grad for p in params if p.grad is not None)
        state_bytes = 0
        if opt is not None:
            state_bytes = _nbytes(v for st in opt.state.values() for v in st.values()
                                  if torch.is_tensor(v) and v.dim() > 0)
        saved, saved_fixed = saved_per_sample(sub)
    except _jobkit.JobError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's model or inputs
        short = _jobkit.out_of_memory_words(str(exc))
        raise ModelError(short or f"a training step of {s.model} at batch {batches[0]} failed: "
                                  f"{type(exc).__name__}: {str(exc)[:300]}") from None
    sub.model.zero_grad(set_to_none=True)
    _trim()
    base = _rss() or 0
    series = Series(meter, s, deadline, base, saved)
    res: Dict[str, Any] = {
        "status": "ok", "model": s.model, "input": sub.describe(), "torch": torch.__version__,
        "threads": torch.get_num_threads(), "optimizer": s.optimizer,
        "start_bytes": at_start, "framework_bytes": framework, "base_bytes": base,
        "parameters": sum(p.numel() for p in params), "param_bytes": _nbytes(params),
        "buffer_bytes": _nbytes(sub.model.buffers()), "grad_bytes": grad_bytes, "optimizer_state_bytes": state_bytes,
        "trainable_bytes": _nbytes(p for p in params if p.requires_grad),
        "factored_state_bytes": sum(_factored_bytes(p) for p in params if p.requires_grad),
        "saved_bytes_per_sample": saved, "saved_fixed_bytes": saved_fixed,
    }
    _jobkit.progress(phase="model", **res)            # a measurement cut short (killed, stopped) keeps these
    variants = int(s.bf16) + int(s.checkpoint)
    # the plain steps first, with most of the time; each variant then measures the two largest batches measured
    res["points"] = series.run(batches, "plain", share=1.0 if not variants else 0.55)
    measured = [p["batch"] for p in res["points"]][-2:]
    if s.bf16 and measured and not stop.is_set():
        meter.autocast = True
        res["bf16"] = {"points": series.run(measured, "bf16", share=1.0 / variants)}
        meter.autocast = False
    if s.checkpoint and measured and not stop.is_set():
        block, count = _checkpointing.checkpoint_blocks(sub.model, torch)
        ck_batches = [b for b in (s.checkpoint_batches or measured) if b <= max(measured)] or measured
        res["checkpoint"] = {"block": block, "blocks": count,
                             "points": series.run(ck_batches, "checkpoint") if count else []}
    res["peak_reset"] = meter.peak_reset
    res["notes"] = series.notes
    res["seconds"] = round(time.perf_counter() - started, 2)
    if stop.is_set():
        res["status"] = "cancelled"
    return res


def run(args: Dict[str, Any], stop: _jobkit.StopFlag) -> Dict[str, Any]:
    return measure(FitSettings.from_dict(args), stop)


if __name__ == "__main__":
    _jobkit.exit_job(_jobkit.job_main(run))
