"""CPU Doctor's probe inside a job ``cpudoctor run`` started: the job's own torch and Python state, from inside.

How it gets in: ``run`` puts a private folder first on the job's ``PYTHONPATH``
holding this file as ``sitecustomize.py``, and Python's ``site`` imports it at
start, before the script (the way samplers and coverage tools attach). Then it

- takes its folder off ``sys.path``, gives ``PYTHONPATH`` back the job's own
  value (or unsets it) and takes its own variables out of ``os.environ``, so the
  job's children and subprocesses see the user's environment (DataLoader workers
  forked from the job inherit the probe, silenced: they write nothing);
- chains to the ``sitecustomize`` it shadows (the next one on ``sys.path``: a
  distribution's or the user's), whose errors reach ``site`` as they would
  without the probe; ``usercustomize`` is not touched;
- records, each with the file and line that made it (the first frame outside
  torch, the standard library's ``os`` and this file; and, when that frame is a
  library's, the user's line that led there): writes to ``os.environ`` and
  ``os.putenv`` of thread and binding variables, ``os.sched_setaffinity``;
- watches for ``import torch`` (a finder on ``sys.meta_path`` that wraps torch's
  loader and leaves once torch is in: it never imports torch itself) and then
  wraps the calls that set torch's global state (``set_num_threads``,
  ``set_num_interop_threads``, ``set_default_dtype``, anomaly detection,
  ``use_deterministic_algorithms``, ``set_flush_denormal``,
  ``set_float32_matmul_precision``, ``set_default_device``, oneDNN's switch,
  ``torch.compile``, DataLoader construction), times the model's calls and counts
  what a serving loop loads, builds or compiles per request (:class:`_Serving`),
  counts optimizer steps (a global
  step hook) and the outermost module's forward calls (global forward hooks for
  the first calls only, then hooks on the model alone), and on the thread that
  drives the step reads what is thread-local there: grad and inference mode,
  autocast, anomaly mode, the profiler, tracers, torch function and dispatch
  modes left on; the model's parameters and dtypes, the inputs' dtypes, and the
  FLOPs of one forward pass (counted once, on a short one);
- counts what the training holds (:class:`_MemoryCount`): the model's parameter
  and buffer bytes and the activations autograd saved in one forward pass (read
  from its graph after the pass, changing nothing), and at each optimizer's first
  step its gradients' and its state's bytes.

It prints nothing, raises nothing into the job (each hook keeps its own
errors), changes no result (wrappers call the original with the same arguments
and return what it returns), and reads thread counts only after the job's own
kernels ran (reading them earlier would fix PyTorch's pool size before a later
``os.environ`` write in the script could). It writes JSON lines, bounded, to
the file named by ``CPUDOCTOR_PROBE_OUT``: events as they happen, progress
about once a second from the step hooks, and a last line at exit.
Standard library only; Python 3.8 and later.
"""

import os
import sys

ENV_OUT = "CPUDOCTOR_PROBE_OUT"
ENV_PATH = "CPUDOCTOR_PROBE_PYTHONPATH"    # the job's own PYTHONPATH (absent: it had none)
ENV_WINDOWS = "CPUDOCTOR_VERBOSE_WINDOWS"  # verbose_window.py's plan ("on=2,every=10"), set by run --verbose-windows
WINDOWS_FILE = "cpudoctor_verbose_window.py"   # its copy beside this file in the probe's folder
MAX_BYTES = 2_000_000          # the whole file
MAX_LINE = 16_000              # one line
MAX_CALLS = 400                # recorded setting calls (then counted only)
DISCOVERY_CALLS = 6            # outermost forward calls seen through global hooks before the model is chosen
PROGRESS_S = 1.0               # progress lines at most this often (longer as the file grows)
SAMPLE_S = 2.0                 # mode samples at most this often
FLOPS_MAX_FORWARD_S = 0.5      # count FLOPs only on a forward pass shorter than this
GRAPH_MAX_NODES = 200_000      # the autograd graph walked for the saved activations, at most ...
GRAPH_MAX_S = 1.0              # ... and for this long (then the count is marked incomplete)
MAX_TENSORS = 200_000          # parameters or optimizer-state tensors summed at most
WATCHED_ENV = ("OMP_", "MKL_", "KMP_", "GOMP_", "OPENBLAS_", "BLIS_", "ONEDNN_", "DNNL_", "VECLIB_", "NUMEXPR_")

_HERE = os.path.dirname(os.path.abspath(__file__))
_OS_FILES = {os.path.abspath(getattr(os, "__file__", "") or "")}
_STDLIB = os.path.dirname(os.path.abspath(getattr(os, "__file__", "") or ""))


def _restore_environment():
    """The job's own PYTHONPATH back, our folder off sys.path; returns where to write (None: stay silent)."""
    out = os.environ.pop(ENV_OUT, None)
    saved = os.environ.pop(ENV_PATH, None)
    if saved is not None:
        os.environ["PYTHONPATH"] = saved
    elif out is not None:
        os.environ.pop("PYTHONPATH", None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    return out


def _chain():
    """Run the sitecustomize this file shadows, as ``site`` would have; its errors are its own (``site`` reports them)."""
    import importlib.machinery
    import importlib.util

    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [p for p in sys.path
                                                                      if os.path.abspath(p or ".") != _HERE])
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop("sitecustomize", None)
        raise


class _Wrapping:
    """The wrappers the probe puts around what sets global state: the os module's, then torch's setters, its
    compile and DataLoader construction (each records the call with the code that made it, through
    :meth:`_Probe.record`, and returns what the original returns)."""

    def watch_os(self):
        probe = self
        putenv, unsetenv = getattr(os, "putenv", None), getattr(os, "unsetenv", None)

        def watched(key):
            try:
                k = os.fsdecode(key)
            except Exception:  # noqa: BLE001
                return None
            return k if k.startswith(WATCHED_ENV) else None

        if putenv is not None:
            def putenv_watched(key, value):
                putenv(key, value)
                try:
                    k = watched(key)
                    if k:
                        probe.record("os.environ", os.fsdecode(value), key=k)
                except Exception:  # noqa: BLE001
                    pass

            os.putenv = _like(putenv_watched, putenv)
        if unsetenv is not None:
            def unsetenv_watched(key):
                unsetenv(key)
                try:
                    k = watched(key)
                    if k:
                        probe.record("os.environ", None, key=k)
                except Exception:  # noqa: BLE001
                    pass

            os.unsetenv = _like(unsetenv_watched, unsetenv)
        setaffinity = getattr(os, "sched_setaffinity", None)
        if setaffinity is not None:
            def setaffinity_watched(pid, mask):
                setaffinity(pid, mask)
                try:
                    cpus = sorted(int(c) for c in list(mask)[:4096])
                    probe.record("os.sched_setaffinity", _cpulist(cpus), key=str(pid))
                except Exception:  # noqa: BLE001
                    pass

            os.sched_setaffinity = _like(setaffinity_watched, setaffinity)

    def wrap_setter(self, owner, name, label):
        original = getattr(owner, name, None)
        if original is None or getattr(original, "_cpudoctor", False):
            return
        probe = self

        def setter(*args, **kwargs):
            try:
                result = original(*args, **kwargs)
            except BaseException:
                try:
                    probe.record(label, _args_text(args, kwargs), failed=True)
                except Exception:  # noqa: BLE001
                    pass
                raise
            try:
                probe.record(label, _args_text(args, kwargs))
            except Exception:  # noqa: BLE001
                pass
            return result

        try:
            setattr(owner, name, _like(setter, original))
        except Exception:  # noqa: BLE001
            pass

    def wrap_mkldnn_switch(self, torch):
        """``torch.backends.mkldnn.enabled = False`` goes through a descriptor whose setter is replaced here."""
        try:
            prop = type(torch.backends.mkldnn).__dict__["enabled"]
            original = prop.setter
        except Exception:  # noqa: BLE001
            return
        probe = self

        def set_enabled(value):
            original(value)
            try:
                probe.record("torch.backends.mkldnn.enabled", value)
            except Exception:  # noqa: BLE001
                pass

        prop.setter = set_enabled

    def start_windows(self, torch):
        """oneDNN's and oneMKL's verbose lines on for windows only, when run asked (probes/child/scripts/
        verbose_window.py, copied beside this file), from the moment torch is in."""
        if not self.windows:
            return
        try:
            import importlib.util

            spec = importlib.util.spec_from_file_location("cpudoctor_verbose_window", os.path.join(_HERE, WINDOWS_FILE))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            module.install(torch, env={ENV_WINDOWS: self.windows})
        except Exception:  # noqa: BLE001 - watching must never stop the job
            pass

    def count_backward(self, torch):
        """Count backward passes (``Tensor.backward`` goes through ``torch.autograd.backward``; and ``grad``)."""
        probe = self
        for name in ("backward", "grad"):
            original = getattr(torch.autograd, name, None)
            if original is None or getattr(original, "_cpudoctor", False):
                continue

            def counted(*args, _original=original, **kwargs):
                probe.backwards += 1
                return _original(*args, **kwargs)

            try:
                setattr(torch.autograd, name, _like(counted, original))
            except Exception:  # noqa: BLE001
                pass

    def wrap_compile(self, torch):
        original = getattr(torch, "compile", None)
        if original is None:
            return
        probe = self

        def compile(*args, **kwargs):
            try:
                probe.compiled = True
                probe.drop_global_hooks()        # before Dynamo sees them: removing them later would recompile
                probe.record("torch.compile", _args_text(args[1:], kwargs))
            except Exception:  # noqa: BLE001
                pass
            result = original(*args, **kwargs)
            try:
                if isinstance(result, torch.nn.Module) and probe.model is None:
                    probe.choose(result)
            except Exception:  # noqa: BLE001
                pass
            return result

        torch.compile = _like(compile, original)

    def wrap_dataloader(self, torch):
        try:
            cls = torch.utils.data.DataLoader
            original = cls.__init__
        except Exception:  # noqa: BLE001
            return
        probe = self

        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            try:
                probe.calls += 1
                if probe.calls <= MAX_CALLS:
                    context = getattr(self, "multiprocessing_context", None)
                    probe.write("loader", at=probe.caller(), num_workers=getattr(self, "num_workers", None),
                                batch_size=getattr(self, "batch_size", None),
                                pin_memory=getattr(self, "pin_memory", None),
                                persistent_workers=getattr(self, "persistent_workers", None),
                                prefetch_factor=getattr(self, "prefetch_factor", None),
                                context=getattr(context, "_name", None) if context is not None else None,
                                worker_init=getattr(self, "worker_init_fn", None) is not None,
                                usable_cpus=len(_affinity() or []) or None)
            except Exception:  # noqa: BLE001
                pass

        cls.__init__ = _like(__init__, original)
        self.wrap_batches(torch)

    def wrap_batches(self, torch):
        """Count the batches (and their samples) the job's DataLoaders hand it: a rate when no step or model is seen."""
        try:
            cls = torch.utils.data.dataloader._BaseDataLoaderIter
            original = cls.__next__
        except Exception:  # noqa: BLE001
            return
        probe = self

        def __next__(self):
            batch = original(self)
            try:
                sampler = getattr(self, "_index_sampler", None)
                probe.batches += 1
                probe.drawn += getattr(sampler, "batch_size", None) or 1
                now = probe.time.monotonic()
                if now >= probe.due:
                    probe.tick(now)
            except Exception:  # noqa: BLE001
                pass
            return batch

        cls.__next__ = _like(__next__, original)



class _Serving:
    """What a serving loop pays per request, counted inside the job (``run``'s evidence for an inference loop):

    - the outermost model's forward durations and the intervals between the starts of its calls (the last
      ``KEEP`` of each: percentiles of the loop as it runs now, not of its warm-up);
    - the calls that load a model (``torch.load`` of a module or a state dict, ``torch.jit.load``,
      ``Module.load_state_dict``), build one (parameters or submodules registered on a new module after the
      model first ran: its class's ``__init__``, a ``from_pretrained``), or compile one (``torch.compile``,
      ``torch.jit.script``, ``torch.jit.trace``), each site (its file and line) with its calls, the calls made
      after the model first ran, and the seconds they took.

    A model built again is followed (the forward hooks move to the new instance at its first call), so its
    calls are still counted. ``torch.jit.script`` gets the model without the probe's hooks (it would try to
    compile them) and has them back after. Every wrapper calls the original with the same arguments and
    returns what it returns; nothing here raises into the job.
    """

    KEEP = 2048
    MAX_SITES = 32
    FOLLOW_CALLS = 256          # outermost calls watched for the rebuilt model's first call before giving up

    def __init__(self, probe):
        self.probe = probe
        self.clock = probe.time.monotonic
        self.durations = []
        self.intervals = []
        self.n = 0
        self.t_start = None
        self.last_start = None
        self.sites = {}
        self.inside = 0            # depth of the wrapped load/compile calls (their nested calls are theirs)
        self.building = False      # a build counted since the model's last call
        self.follow_hook = None
        self.follow_seen = 0
        self.reported = None
        self.results_of = {}       # id(what compiling returned) -> id(the module compiled), the last 64

    # -- the model's calls ----------------------------------------------------------------------------

    def enter(self):
        now = self.clock()
        if self.last_start is not None and self.n > 1:
            self._keep(self.intervals, now - self.last_start)
        self.last_start = self.t_start = now

    def leave(self, keep=True):
        """The model's call ended; its duration is kept unless it is the process's first call (libraries' lazy
        start-up) or one the probe slowed (``keep`` False: its FLOPs were counted)."""
        if self.t_start is not None:
            if keep and self.n:
                self._keep(self.durations, self.clock() - self.t_start)
            self.t_start = None
            self.n += 1
        self.building = False

    def _keep(self, ring, value):
        if len(ring) < self.KEEP:
            ring.append(value)
        else:
            ring[self.n % self.KEEP] = value

    # -- installing the wrappers when torch is in ---------------------------------------------------------

    def install(self, torch):
        self.torch = torch
        self.wrap(torch, "load", "torch.load", "load", self.loaded_model)
        self.wrap(torch.jit, "load", "torch.jit.load", "load")
        self.wrap(torch.nn.Module, "load_state_dict", "Module.load_state_dict", "load")
        self.wrap(torch, "compile", "torch.compile", "compile")
        self.wrap(torch.jit, "script", "torch.jit.script", "compile", unhook=True, frames_up=2)
        self.wrap(torch.jit, "trace", "torch.jit.trace", "compile")
        try:
            mod = sys.modules["torch.nn.modules.module"]
            mod.register_module_module_registration_hook(self.registered)
            mod.register_module_parameter_registration_hook(self.registered)
        except Exception:  # noqa: BLE001
            pass

    def wrap(self, owner, name, label, kind, counts=None, unhook=False, frames_up=None):
        """``owner.name`` counted as ``label``; ``frames_up``: the position of the original's ``_frames_up``
        argument (``torch.jit.script`` resolves a class's names in its caller's frame: one more frame up, past this
        wrapper)."""
        original = getattr(owner, name, None)
        if original is None or getattr(original, "_cpudoctor_serving", False):
            return
        serving = self

        def wrapped(*args, **kwargs):
            if serving.inside:
                return original(*args, **kwargs)
            if frames_up is not None and len(args) <= frames_up:
                kwargs["_frames_up"] = kwargs.get("_frames_up", 0) + 1
            serving.inside += 1
            hooks = serving.unhook(args[0] if args else None) if unhook else None
            if kind == "compile":
                serving.unfollow()          # a global hook Dynamo saw would recompile when it goes
            t0 = serving.clock()
            try:
                result = original(*args, **kwargs)
            finally:
                serving.inside -= 1
                if hooks:
                    serving.rehook(hooks)
            try:
                if counts is None or counts(result):
                    serving.count(label, kind, serving.clock() - t0)
                if kind == "compile":
                    serving.adopt(args[0] if args else None, result)
            except Exception:  # noqa: BLE001
                pass
            return result

        try:
            wrapped = _like(wrapped, original)
            wrapped._cpudoctor_serving = True
            setattr(owner, name, wrapped)
        except Exception:  # noqa: BLE001
            pass

    def loaded_model(self, obj):
        """``torch.load`` read a model: a module, a state dict (tensors under parameter-like names), or a
        checkpoint holding one; a sample's tensors (a dataset's files) are not counted."""
        torch = self.torch
        if isinstance(obj, torch.nn.Module):
            return True
        if not isinstance(obj, dict):
            return False
        if any(isinstance(obj.get(k), dict) and self.loaded_model(obj[k])
               for k in ("state_dict", "model", "model_state_dict") if k in obj):
            return True
        keys = [k for k, v in list(obj.items())[:256] if isinstance(v, torch.Tensor) and isinstance(k, str)]
        return any(k.endswith(("weight", "bias", "running_mean")) for k in keys)

    def adopt(self, source, result):
        """What compiling the model returned is what the loop calls: the forward hooks move to it (a scripted
        module takes no hooks: its calls go uncounted)."""
        probe = self.probe
        torch = self.torch
        if isinstance(source, torch.nn.Module) and isinstance(result, torch.nn.Module):
            if len(self.results_of) >= 64:
                self.results_of.clear()
            self.results_of[id(result)] = id(source)
        model = probe.model
        if (model is None or source is None or not (source is model or self.results_of.get(id(model)) == id(source))
                or not probe.root_hooks
                or not isinstance(result, torch.nn.Module) or isinstance(result, torch.jit.RecursiveScriptModule)):
            return
        if type(result).__name__ != "TopLevelTracedModule" and type(result).__name__ != "OptimizedModule":
            return
        for h in probe.root_hooks:
            h.remove()
        probe.model = result
        self.rehook(result)

    def unhook(self, module):
        """The probe's hooks off the module about to be scripted (``torch.jit.script`` compiles a module's
        hooks, and would fail on the probe's); returns what to put back."""
        probe = self.probe
        if module is None or module is not probe.model or not probe.root_hooks:
            return None
        for h in probe.root_hooks:
            h.remove()
        probe.root_hooks = []
        return module

    def rehook(self, module):
        probe = self.probe
        try:
            probe.root_hooks = [module.register_forward_pre_hook(probe.model_pre),
                                module.register_forward_hook(probe.model_post, always_call=True)]
        except Exception:  # noqa: BLE001
            probe.root_hooks = []

    # -- counting -----------------------------------------------------------------------------------------

    def count(self, label, kind, seconds, at=None):
        probe = self.probe
        at = at or probe.caller()
        key = (label, (at or {}).get("file"), (at or {}).get("line"))
        site = self.sites.get(key)
        if site is None:
            if len(self.sites) >= self.MAX_SITES:
                return
            site = self.sites[key] = {"name": label, "kind": kind, "at": at, "calls": 0, "after": 0,
                                      "seconds": 0.0, "forwards_first": None}
        site["calls"] += 1
        site["seconds"] += seconds
        # inside the loop: after the model first ran; a compile made again counts too (what the loop calls may be
        # a scripted module, whose calls the probe cannot count)
        if probe.forwards >= 1 or (kind == "compile" and site["calls"] > 1):
            site["after"] += 1
            if site["forwards_first"] is None:
                site["forwards_first"] = probe.forwards

    def registered(self, module, name, value):
        """A parameter or submodule registered: a module being built. The first registration after the model's
        last call counts one build of a model, at the line that built it; the forward hooks then follow the new
        instance."""
        if self.inside or self.building or self.probe.forwards < 1 or not self.probe.active:
            return None
        try:
            if type(module).__name__ in ("OptimizedModule", "RecursiveScriptModule", "TopLevelTracedModule"):
                return None
            self.building = True
            self.count("model built", "build", 0.0, at=self.builder())
            self.follow()
        except Exception:  # noqa: BLE001
            pass
        return None

    def builder(self):
        """The line that built the module: the first frame outside torch, the probe and the modules' own
        ``__init__`` (a class's constructor is not where the loop builds it); a library's call gets the user's
        line that led there."""
        probe = self.probe
        frame = sys._getframe(2)
        at = None
        while frame is not None:
            code = frame.f_code
            inside_init = code.co_name == "__init__" and isinstance(frame.f_locals.get("self"), self.torch.nn.Module)
            if not probe._ours(code.co_filename) and not inside_init:
                library = probe._library(code.co_filename)
                if at is None and library != "torch":
                    at = {"file": code.co_filename, "line": frame.f_lineno, "function": code.co_name}
                    if library is not None:
                        at["library"] = library
                    elif code.co_name == "<module>":
                        return at
                elif at is not None and library is None:
                    # a library's call: the user's line that led there; the user's own function: the line that
                    # called it (the loop's line, where a build_model() helper is called per request)
                    if at.get("library"):
                        at["user_file"], at["user_line"] = code.co_filename, frame.f_lineno
                    else:
                        at["via_file"], at["via_line"] = code.co_filename, frame.f_lineno
                    return at
            frame = frame.f_back
        return at

    def follow(self):
        """Watch the next outermost calls for a new instance of the model's class: its hooks move there."""
        probe = self.probe
        if self.follow_hook is not None or probe.model is None or not probe.root_hooks:
            return
        try:
            mod = sys.modules["torch.nn.modules.module"]
            self.follow_seen = 0
            self.follow_hook = mod.register_module_forward_pre_hook(self.follow_pre)
        except Exception:  # noqa: BLE001
            self.follow_hook = None

    def follow_pre(self, module, args):
        probe = self.probe
        if probe.compiling():
            return None
        try:
            self.follow_seen += 1
            model = probe.model
            if model is None or module is model or not probe.root_hooks or self.follow_seen > self.FOLLOW_CALLS:
                self.unfollow()
            elif type(module) is type(model):
                for h in probe.root_hooks:
                    h.remove()
                probe.model = module
                self.rehook(module)
                self.unfollow()
                probe.model_pre(module, args)      # this call's own hooks were chosen before the move
        except Exception:  # noqa: BLE001
            self.unfollow()
        return None

    def unfollow(self):
        hook, self.follow_hook = self.follow_hook, None
        if hook is not None:
            hook.remove()

    # -- writing --------------------------------------------------------------------------------------------

    def report(self):
        """A ``serving`` line (the figures so far) when anything changed since the last one."""
        mark = (self.n, sum(s["calls"] for s in self.sites.values()))
        if mark == self.reported or (not self.n and not self.sites):
            return
        self.reported = mark
        top = sorted(self.sites.values(), key=lambda s: -s["after"])[:12]       # the line stays under MAX_LINE
        sites = [{**s, "seconds": round(s["seconds"], 6)} for s in top]
        self.probe.write("serving", calls=self.n, forward=_percentiles(self.durations),
                         interval=_percentiles(self.intervals), sites=sites)


def _percentiles(values):
    """{n, p50, p90, p99, mean} of ``values`` (seconds) in milliseconds, or None."""
    if not values:
        return None
    s = sorted(values)
    n = len(s)

    def at(q):
        return round(s[min(n - 1, int(q * n))] * 1e3, 4)

    return {"n": n, "p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "mean": round(sum(s) / n * 1e3, 4)}


class _MemoryCount:
    """What the job's training holds, counted once from inside it: parameters, buffers, gradients, optimizer state
    and the activations of one forward pass.

    Activations are the tensors autograd saved for the backward pass of one measured forward pass of the model
    (the outermost module with parameters, in grad mode): read right after that pass from the graph it built,
    walking ``grad_fn.next_functions`` and reading each node's ``_raw_saved_*`` through ``SavedTensor.data``,
    each storage once, the module's parameters and buffers left out. Why this way:

    - it changes nothing the job computes: no hook runs during the pass, nothing is unpacked (a saved tensor
      packed by ``torch.utils.checkpoint`` or the job's own ``saved_tensors_hooks`` is seen as what it holds,
      a checkpoint's holder, and is not recomputed), autograd's in-place checks and the graph's life
      are the job's own. Counting with ``saved_tensors_hooks`` during the pass (as ``fit``'s child does, on its
      own model) would not: with a pack hook set autograd skips its in-place modification check, an identity
      hook keeps each saved output alive in a reference cycle, and ``torch.func`` transforms refuse to run
      under one;
    - it is cheap: one walk of one graph (a node per operator) on the driving thread, once;
    - it is the quantity ``fit`` plans with (:class:`TrainingMemory`'s activations per sample): the saved
      tensors divided by the batch of that pass (the first dimension of its first tensor input, else of its
      output). The fixed part of what is saved is divided in too, so at a small batch the figure per sample
      is a little high; what a step holds at its peak beside them (the activations' gradients, the kernels'
      workspace) is not a saved tensor, and ``fit`` adds it as its planner does.

    What saved-tensor hooks keep (a checkpointed block's inputs and its recomputation, tensors offloaded by the
    job's own hooks) is not in the graph: such a pass is counted and marked (``hooked``), and its figure is not
    used as the activations (it would be too low).

    The process's peak resident memory over a step would count all of that, but it cannot be read without
    resetting the job's own peak (``/proc/self/clear_refs``, which CPU Doctor's sampler reads too), and
    PyTorch keeps no allocator statistics for the CPU.

    Gradients and optimizer state exist only after a backward pass and a step (Adam creates its state at its
    first step): they are summed at each optimizer's first step, from its parameter groups and its ``state``.
    """

    def __init__(self, probe):
        self.probe = probe
        self.measured = None          # id() of the module whose forward pass was counted
        self.counted = None           # what was written of it
        self.model_done = False       # the chosen model's own pass was counted (or cannot be)
        self.optimizers = set()

    @property
    def done(self):
        return self.model_done

    def chosen(self, model):
        """The probe chose ``model``: its pass, counted before, is written again as the model's; one counted on
        another module does not stand for it (the model's next pass is counted)."""
        self.model_done = self.measured == id(model)
        if self.model_done and self.counted is not None:
            self.probe.write("memory_forward", **dict(self.counted, chosen=True))

    def after_forward(self, module, args, output):
        """After an outermost forward pass: count its saved activations, once (again for the chosen model)."""
        probe = self.probe
        if self.model_done or not probe.active or self.measured == id(module):
            return
        if probe.model is not None and module is not probe.model:
            return
        torch = probe.torch
        if not torch.is_grad_enabled() or torch.is_inference_mode_enabled():
            return
        outputs = _output_tensors(output, torch)
        roots = [t.grad_fn for t in outputs if t.grad_fn is not None]
        if not roots:
            return
        params, param_bytes = _storages(module.parameters(), torch)
        if not params:
            return                    # a loss module, an activation: not the model
        buffers, buffer_bytes = _storages(module.buffers(), torch)
        saved, tensors, nodes, complete, hooked = self.walk(roots, set(params) | set(buffers), torch)
        self.measured = id(module)
        self.model_done = probe.model is module
        batch = _batch(args, torch) or _batch(outputs, torch)
        self.counted = {"module": type(module).__name__, "parameters": _param_count(module),
                        "param_bytes": param_bytes, "buffer_bytes": buffer_bytes, "batch": batch,
                        "saved_bytes": saved, "saved_tensors": tensors, "nodes": nodes, "complete": complete,
                        "hooked": hooked}
        probe.write("memory_forward", chosen=self.model_done, **self.counted)

    def walk(self, roots, skip, torch):
        """(bytes, tensors, nodes, complete, hooked) of what the graph from ``roots`` saved, each storage once;
        ``hooked``: saved values packed by saved-tensor hooks (checkpointing, offload), whose memory is theirs."""
        clock = self.probe.time.monotonic
        deadline = clock() + GRAPH_MAX_S
        attrs = {}
        counted = {}
        seen, stack, nodes, hooked = set(), list(roots), 0, 0
        while stack:
            if nodes >= GRAPH_MAX_NODES or (nodes % 256 == 0 and clock() > deadline):
                return sum(counted.values()), len(counted), nodes, False, hooked
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            nodes += 1
            kind = type(node)
            names = attrs.get(kind)
            if names is None:
                names = attrs[kind] = [a for a in dir(node) if a.startswith("_raw_saved_")]
            for name in names:
                try:
                    value = getattr(node, name)
                except Exception:  # noqa: BLE001 - a saved value already freed, or one that is not a tensor
                    continue
                for item in (value if isinstance(value, (list, tuple)) else (value,)):
                    if getattr(item, "unpack_hook", None) is not None:
                        hooked += 1
                    data = getattr(item, "data", None)      # never unpack(): no hook, no recomputation
                    if isinstance(data, torch.Tensor):
                        try:
                            storage = data.untyped_storage()
                            ptr = storage.data_ptr()
                            if ptr and ptr not in skip:
                                counted[ptr] = storage.nbytes()
                        except Exception:  # noqa: BLE001 - no storage (sparse, nested, a subclass)
                            pass
            for nxt in getattr(node, "next_functions", ()):
                if nxt[0] is not None:
                    stack.append(nxt[0])
        return sum(counted.values()), len(counted), nodes, True, hooked

    def after_step(self, optimizer):
        """At an optimizer's first step: its parameters', gradients' and state's bytes (the state exists now)."""
        if id(optimizer) in self.optimizers or len(self.optimizers) >= 8 or not self.probe.active:
            return
        self.optimizers.add(id(optimizer))
        torch = self.probe.torch
        params = [p for group in optimizer.param_groups for p in group.get("params", ())][:MAX_TENSORS]
        _, param_bytes = _storages(params, torch)
        _, grad_bytes = _storages([p.grad for p in params if getattr(p, "grad", None) is not None], torch)
        state = []
        for i, entry in enumerate(optimizer.state.values()):
            if i >= MAX_TENSORS:
                break
            if isinstance(entry, dict):
                state.extend(v for v in entry.values() if isinstance(v, torch.Tensor))
        _, state_bytes = _storages(state, torch)
        unique = {id(p): p for p in params}
        self.probe.write("memory_step", optimizer=type(optimizer).__name__,
                         parameters=sum(p.numel() for p in unique.values()), param_bytes=param_bytes,
                         grad_bytes=grad_bytes, state_bytes=state_bytes, state_tensors=len(state))


class _Probe(_Wrapping):
    def __init__(self, path):
        import time

        self.time = time
        self.t0 = time.monotonic()
        self.path = path
        self.fd = None
        self.written = 0
        self.lines = 0
        self.calls = 0
        self.active = True
        self.torch = None
        self.torch_dir = None
        self.steps = 0
        self.first_step = None
        self.last_step = None
        self.forwards = 0
        self.backwards = 0
        self.batches = 0               # DataLoader batches drawn (and the samples in them)
        self.drawn = 0
        self.depth = 0
        self.candidates = {}           # id(module) -> [module, outermost calls]
        self.model = None
        self.global_hooks = []
        self.root_hooks = []
        self.next_progress = 0.0
        self.due = 0.0                 # monotonic time before which the step hooks only count
        self.next_sample = 0.0
        self.last_modes = None
        self.samples = 0
        self.forward_t0 = None
        self.last_forward_s = None
        self.flops_done = False
        self.flops_mode = None
        self.compiled = False
        self.inputs_seen = False
        self.optimizers = set()
        self.memory = _MemoryCount(self)
        self.windows = os.environ.pop(ENV_WINDOWS, None)     # the job's children do not inherit the plan
        self.serving = _Serving(self)   # per-request evidence of a serving loop

    # -- writing ------------------------------------------------------------------------------

    def now(self):
        return round(self.time.monotonic() - self.t0, 4)

    def write(self, kind, **data):
        if not self.active or self.written >= MAX_BYTES:
            return
        try:
            import json

            if self.fd is None:
                self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0),
                                  0o600)
            data["k"] = kind
            data["pid"] = os.getpid()
            data["t"] = self.now()
            line = json.dumps(data, separators=(",", ":"), default=str)
            if len(line) > MAX_LINE:
                line = json.dumps({"k": kind, "pid": data["pid"], "t": data["t"], "cut": len(line)})
            blob = (line + "\n").encode("utf-8", "replace")
            os.write(self.fd, blob)
            self.written += len(blob)
            self.lines += 1
        except Exception:  # noqa: BLE001 - the probe never raises into the job
            self.active = False

    def forked(self):
        """In a forked child (a DataLoader worker): silent; its parent's file and hooks are not its own."""
        self.active = False
        self.fd = None

    # -- where a call came from -------------------------------------------------------------------

    def _ours(self, filename):
        if not filename or filename.startswith("<frozen"):
            return True
        path = os.path.abspath(filename)
        return path.startswith(_HERE) or path in _OS_FILES or os.path.basename(path) in (
            "_collections_abc.py", "functools.py", "contextlib.py")

    def _library(self, filename):
        if self.torch_dir and os.path.abspath(filename).startswith(self.torch_dir):
            return "torch"
        parts = os.path.abspath(filename).split(os.sep)
        for marker in ("site-packages", "dist-packages"):
            if marker in parts:
                i = parts.index(marker)
                return parts[i + 1].split(".")[0] if i + 1 < len(parts) else marker
        if filename.startswith(_STDLIB + os.sep):
            return "python"
        return None

    def caller(self):
        """{file, line, function[, library, user_file, user_line]} of the code that made the call."""
        try:
            frame = sys._getframe(1)
        except ValueError:
            return None
        at = None
        while frame is not None:
            filename = frame.f_code.co_filename
            if not self._ours(filename):
                if at is None:
                    at = {"file": filename, "line": frame.f_lineno, "function": frame.f_code.co_name}
                    library = self._library(filename)
                    if library is None:
                        return at
                    at["library"] = library
                elif self._library(filename) is None:
                    at["user_file"], at["user_line"] = filename, frame.f_lineno
                    return at
            frame = frame.f_back
        return at

    def record(self, name, value, key=None, failed=False):
        self.calls += 1
        if self.calls > MAX_CALLS:
            return
        self.write("set", name=name, key=key, value=str(value)[:200], at=self.caller(), torch=self.torch is not None,
                   failed=failed or None)

    # -- torch ----------------------------------------------------------------------------------------

    def on_torch(self, torch):
        """Right after ``import torch`` finished: wrap the setters, add the step and forward hooks."""
        self.torch = torch
        self.torch_dir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
        self.write("torch", version=getattr(torch, "__version__", "?"), affinity=_affinity(),
                   file=torch.__file__)
        setters = [(torch, "set_num_threads"), (torch, "set_num_interop_threads"), (torch, "set_default_dtype"),
                   (torch, "set_default_tensor_type"), (torch, "set_anomaly_enabled"),
                   (torch, "use_deterministic_algorithms"), (torch, "set_flush_denormal"),
                   (torch, "set_float32_matmul_precision"), (torch, "set_default_device")]
        for owner, name in setters:
            self.wrap_setter(owner, name, "torch." + name)
        self.start_windows(torch)
        self.wrap_mkldnn_switch(torch)
        self.count_backward(torch)
        self.wrap_compile(torch)
        self.wrap_dataloader(torch)
        self.serving.install(torch)
        try:
            # torch.optim deletes its submodules' names: the module is found in sys.modules
            sys.modules["torch.optim.optimizer"].register_optimizer_step_post_hook(self.on_step)
        except Exception:  # noqa: BLE001
            pass
        try:
            mod = sys.modules["torch.nn.modules.module"]
            self.global_hooks = [mod.register_module_forward_pre_hook(self.on_pre),
                                 mod.register_module_forward_hook(self.on_post, always_call=True)]
        except Exception:  # noqa: BLE001
            self.global_hooks = []

    # -- the step: optimizer steps and the outermost forward calls --------------------------------------

    def compiling(self):
        """Whether Dynamo is tracing this hook (it then traces it as a no-op: no graph break, no guard on it), or
        TorchScript is tracing or scripting the model (the hooks would change its graph)."""
        if self.serving.inside:
            return True
        if "torch._dynamo" not in sys.modules:
            return False
        try:
            return self.torch.compiler.is_compiling()
        except Exception:  # noqa: BLE001
            return False

    def on_step(self, optimizer, args, kwargs):
        if self.compiling():
            return
        try:
            now = self.time.monotonic()
            self.steps += 1
            self.first_step = self.first_step or now
            self.last_step = now
            if id(optimizer) not in self.optimizers and len(self.optimizers) < 8:
                self.optimizers.add(id(optimizer))
                self.write("optimizer", name=type(optimizer).__name__, groups=len(optimizer.param_groups),
                           at=self.caller())
                self.count_step_memory(optimizer)
            if now >= self.due:
                self.tick(now)
                if self.root_hooks and self.flops_done and self.inputs_seen and self.steps >= 10 and (
                        self.memory.done or self.steps >= 50):
                    self.drop_model_hooks()     # a training loop: its rate is its steps; the forward hooks cost
        except Exception:  # noqa: BLE001
            pass

    def on_pre(self, module, args):
        if self.compiling():
            return None
        depth = self.depth
        self.depth = depth + 1
        if depth == 0:
            try:
                entry = self.candidates.get(id(module))
                if entry is None and len(self.candidates) < 16:
                    self.candidates[id(module)] = entry = [module, 0]
                if entry is not None:
                    entry[1] += 1
                self.root_pre(module, args)
            except Exception:  # noqa: BLE001
                pass
        return None

    def on_post(self, module, args, output):
        if self.compiling():
            return None
        self.depth = max(0, self.depth - 1)
        if self.depth == 0:
            try:
                self.root_post(module)
                self.count_forward_memory(module, args, output)     # after the FLOP count's mode is off
                if sum(n for _, n in self.candidates.values()) >= DISCOVERY_CALLS:
                    self.choose(None)
            except Exception:  # noqa: BLE001
                pass
        return None

    def choose(self, model):
        """The model: given (a compiled module), else the outermost module seen with the most parameters; its own
        hooks replace the global ones (which cost every module call a slower path)."""
        if model is None:
            ranked = sorted(self.candidates.values(), key=lambda e: (-_param_count(e[0]), -e[1]))
            model = ranked[0][0] if ranked else None
            if ranked:
                self.forwards = ranked[0][1]          # the model's own outermost calls so far, not the loss's
        self.drop_global_hooks()
        self.candidates = {}
        if model is None or self.model is not None:
            return
        self.model = model
        self.memory.chosen(model)
        try:
            self.root_hooks = [model.register_forward_pre_hook(self.model_pre),
                               model.register_forward_hook(self.model_post, always_call=True)]
        except Exception:  # noqa: BLE001
            self.root_hooks = []
        self.write("model", **_describe_model(model))

    def drop_model_hooks(self):
        """Once optimizer steps give the job's rate, the model's own hooks (a slower call path on every forward)
        go; the forward count stops there."""
        hooks, self.root_hooks = self.root_hooks, []
        for h in hooks:
            try:
                h.remove()
            except Exception:  # noqa: BLE001
                pass
        self.write("forwards_counted", forwards=self.forwards)

    def count_forward_memory(self, module, args, output):
        """The saved activations of an outermost forward pass (:class:`_MemoryCount`), its errors its own."""
        try:
            self.memory.after_forward(module, args, output)
        except Exception:  # noqa: BLE001
            self.memory.model_done = True         # counted once at most, even when counting fails

    def count_step_memory(self, optimizer):
        try:
            self.memory.after_step(optimizer)
        except Exception:  # noqa: BLE001
            pass

    def drop_global_hooks(self):
        hooks, self.global_hooks = self.global_hooks, []
        for h in hooks:
            try:
                h.remove()
            except Exception:  # noqa: BLE001
                pass
        self.depth = 0

    def model_pre(self, module, args):
        if self.compiling():
            return None
        try:
            self.root_pre(module, args)
        except Exception:  # noqa: BLE001
            pass
        return None

    def model_post(self, module, args, output):
        if self.compiling():
            return None
        try:
            self.root_post(module)
            self.count_forward_memory(module, args, output)
        except Exception:  # noqa: BLE001
            pass
        return None

    def root_pre(self, module, args):
        if self.model is None or module is self.model:
            self.serving.enter()
        if self.flops_done and self.inputs_seen:
            return
        self.forward_t0 = self.time.monotonic()
        if not self.inputs_seen and self.model is module:
            self.inputs_seen = True
            self.write("inputs", inputs=_tensors(args, self.torch), at=self.caller())
        if (not self.flops_done and self.model is module and not self.compiled and self.forwards >= 2
                and self.last_forward_s is not None and self.last_forward_s < FLOPS_MAX_FORWARD_S):
            self.flops_done = True
            self.flops_mode = _flop_mode(self.torch)
            if self.flops_mode is not None:
                try:
                    self.flops_mode.__enter__()
                except Exception:  # noqa: BLE001
                    self.flops_mode = None

    def root_post(self, module):
        if self.model is None or module is self.model:
            self.forwards += 1
            self.serving.leave(keep=self.flops_mode is None)
        now = self.time.monotonic()
        if now < self.due and self.flops_done and self.flops_mode is None:
            return
        if self.flops_mode is not None:
            mode, self.flops_mode = self.flops_mode, None
            try:
                mode.__exit__(None, None, None)
                self.write("flops", forward=mode.flops, module=type(module).__name__, ops=mode.ops,
                           grad=self.torch.is_grad_enabled())
            except Exception:  # noqa: BLE001
                pass
        if self.forward_t0 is not None:
            self.last_forward_s = now - self.forward_t0
        self.tick(now)

    def tick(self, now):
        """On the driving thread, after the job's own work: progress and a sample of its modes, when due."""
        self.due = now + 0.25
        t = now - self.t0
        if t >= self.next_progress:
            every = PROGRESS_S * (1 if self.lines < 600 else 5 if self.lines < 1500 else 30)
            self.next_progress = t + every
            self.progress()
        if t >= self.next_sample and self.samples < 300:
            self.next_sample = t + SAMPLE_S
            modes = _modes(self.torch)
            if modes != self.last_modes:
                self.last_modes = modes
                self.samples += 1
                self.write("modes", **modes)

    def progress(self):
        first = round(self.first_step - self.t0, 4) if self.first_step else None
        last = round(self.last_step - self.t0, 4) if self.last_step else None
        self.write("progress", steps=self.steps, forwards=self.forwards, backwards=self.backwards, first_step=first,
                   last_step=last, batches=self.batches, samples=self.drawn)
        self.serving.report()

    def at_exit(self):
        if not self.active:
            return
        self.progress()
        if self.torch is not None and self.samples < 300:
            self.write("modes", at_exit=True, **_modes(self.torch))
        self.write("exit", calls=self.calls, lines=self.lines)
        try:
            if self.fd is not None:
                os.close(self.fd)
        except OSError:
            pass
        self.active = False


# --- helpers ---------------------------------------------------------------------------------------------


def _like(wrapper, original):
    """``wrapper`` with ``original``'s name, documentation and signature (help() and inspect see the original)."""
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            setattr(wrapper, attr, getattr(original, attr))
        except (AttributeError, TypeError):
            pass
    wrapper.__wrapped__ = original
    wrapper._cpudoctor = True
    return wrapper


def _args_text(args, kwargs):
    parts = [repr(a)[:60] for a in args[:4]] + ["%s=%s" % (k, repr(v)[:60]) for k, v in list(kwargs.items())[:6]]
    return ", ".join(parts)


def _affinity():
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _cpulist(cpus):
    out, start, prev = [], None, None
    for c in cpus:
        if start is None:
            start = prev = c
        elif c == prev + 1:
            prev = c
        else:
            out.append(str(start) if start == prev else "%d-%d" % (start, prev))
            start = prev = c
    if start is not None:
        out.append(str(start) if start == prev else "%d-%d" % (start, prev))
    return ",".join(out)


def _param_count(module):
    try:
        n = 0
        for i, p in enumerate(module.parameters()):
            if i > 200_000:
                break
            n += p.numel()
        return n
    except Exception:  # noqa: BLE001
        return 0


def _storages(tensors, torch):
    """({storage pointer: bytes}, their sum) of ``tensors``, each storage once (views and tied weights share one)."""
    out = {}
    for i, t in enumerate(tensors):
        if i >= MAX_TENSORS:
            break
        try:
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                if storage.data_ptr():
                    out[storage.data_ptr()] = storage.nbytes()
        except Exception:  # noqa: BLE001 - meta, sparse or subclass tensors have no plain storage
            pass
    return out, sum(out.values())


def _output_tensors(output, torch, depth=0):
    """The tensors in a forward pass's output (a tensor, a tuple or list, a dict or ModelOutput), a few levels deep."""
    if isinstance(output, torch.Tensor):
        return [output]
    if depth > 3:
        return []
    if isinstance(output, dict):
        items = list(output.values())[:32]
    elif isinstance(output, (list, tuple)):
        items = list(output)[:32]
    else:
        return []
    out = []
    for item in items:
        out.extend(_output_tensors(item, torch, depth + 1))
    return out


def _batch(tensors, torch):
    """The first dimension of the first tensor with one: the batch of a forward pass."""
    for t in list(tensors)[:8]:
        if isinstance(t, torch.Tensor) and t.dim() >= 1 and t.shape[0] > 0:
            return int(t.shape[0])
    return None


def _describe_model(module):
    dtypes, params, trainable, tensors = {}, 0, 0, 0
    try:
        for i, p in enumerate(module.parameters()):
            if i > 200_000:
                break
            n = p.numel()
            params += n
            tensors += 1
            trainable += n if p.requires_grad else 0
            key = str(p.dtype).replace("torch.", "")
            dtypes[key] = dtypes.get(key, 0) + n
    except Exception:  # noqa: BLE001
        pass
    return {"name": type(module).__name__, "parameters": params, "trainable": trainable, "tensors": tensors,
            "dtypes": dtypes, "compiled": type(module).__name__ == "OptimizedModule"}


def _tensors(args, torch):
    out = []
    for a in list(args)[:8]:
        if isinstance(a, torch.Tensor):
            out.append({"dtype": str(a.dtype).replace("torch.", ""), "shape": list(a.shape)[:6],
                        "grad": bool(a.requires_grad)})
    return out


def _modes(torch):
    """What the driving thread runs under, read on it (grad, inference mode and autocast are thread-local)."""
    import threading

    def read(fn, default=None):
        try:
            return fn()
        except Exception:  # noqa: BLE001
            return default

    def autocast():
        try:
            on = torch.is_autocast_enabled("cpu")
        except TypeError:
            on = torch.is_autocast_cpu_enabled()
        if not on:
            return None
        try:
            return str(torch.get_autocast_dtype("cpu")).replace("torch.", "")
        except TypeError:
            return str(torch.get_autocast_cpu_dtype()).replace("torch.", "")

    def tool(fn):
        value = fn()
        if value is None:
            return None
        return "%s.%s" % (getattr(type(value), "__module__", "?"), getattr(value, "__qualname__", type(value).__name__))

    def monitoring():
        mon = getattr(sys, "monitoring", None)
        if mon is None:
            return []
        return [name for name in (mon.get_tool(i) for i in range(6)) if name]

    def stack(getter):
        return [type(m).__name__ for m in getter()][:8]

    def modes_of(module, name):
        return lambda: stack(getattr(sys.modules[module], name))

    out = {
        "main": threading.current_thread() is threading.main_thread(),
        "grad": read(torch.is_grad_enabled),
        "inference": read(torch.is_inference_mode_enabled),
        "autocast": read(autocast),
        "anomaly": read(torch.is_anomaly_enabled),
        "anomaly_nan": read(torch.is_anomaly_check_nan_enabled),
        "profiler": read(lambda: bool(torch.autograd.profiler._is_profiler_enabled)),
        "trace": read(lambda: tool(sys.gettrace)),
        "profile": read(lambda: tool(sys.getprofile)),
        "monitoring": read(monitoring, []),
        "threads": read(torch.get_num_threads),
        "interop": read(torch.get_num_interop_threads),
        "dtype": read(lambda: str(torch.get_default_dtype()).replace("torch.", "")),
        "deterministic": read(torch.are_deterministic_algorithms_enabled),
        "matmul": read(torch.get_float32_matmul_precision),
        "mkldnn": read(lambda: bool(torch.backends.mkldnn.enabled)),
        "function_modes": read(modes_of("torch.overrides", "_get_current_function_mode_stack"), []),
        "dispatch_modes": read(modes_of("torch.utils._python_dispatch", "_get_current_dispatch_mode_stack"), []),
        "device": read(lambda: str(torch.get_default_device())),
        "affinity": _cpulist(_affinity() or []),
        "tracemalloc": read(lambda: sys.modules["tracemalloc"].is_tracing(), False) if "tracemalloc" in sys.modules
        else False,
    }
    return out


def _flop_mode(torch):
    """A dispatch mode counting one forward pass's FLOPs with PyTorch's own formulas (torch.utils.flop_counter)."""
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils.flop_counter import flop_registry
    except Exception:  # noqa: BLE001
        return None

    class FlopCount(TorchDispatchMode):
        flops = 0
        ops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            formula = flop_registry.get(getattr(func, "_overloadpacket", None))
            if formula is not None:
                try:
                    self.flops += int(formula(*args, **kwargs, out_val=out))
                    self.ops += 1
                except Exception:  # noqa: BLE001
                    pass
            return out

    return FlopCount()


class _TorchWatch:
    """A finder first on ``sys.meta_path`` that answers nothing itself: for ``torch`` it asks the others, wraps the
    loader's ``exec_module`` to call the probe when torch's import finished, and leaves."""

    def __init__(self, probe):
        self.probe = probe
        self.busy = False

    def find_spec(self, name, path=None, target=None):
        if name != "torch" or self.busy:
            return None
        self.busy = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        except Exception:  # noqa: BLE001
            spec = None
        finally:
            self.busy = False
        self.leave()
        loader = getattr(spec, "loader", None)
        original = getattr(loader, "exec_module", None)
        if original is None:
            return None
        probe = self.probe

        def exec_module(module):
            original(module)
            try:
                probe.on_torch(module)
            except Exception:  # noqa: BLE001
                pass

        try:
            loader.exec_module = exec_module
        except Exception:  # noqa: BLE001
            return None
        return spec

    def leave(self):
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


def _flags():
    flags = sys.flags
    return {"dev_mode": bool(getattr(flags, "dev_mode", False)), "optimize": flags.optimize,
            "debug_build": hasattr(sys, "gettotalrefcount"), "x": sorted(getattr(sys, "_xoptions", {}))[:12],
            "malloc": os.environ.get("PYTHONMALLOC"), "tracemalloc": "tracemalloc" in sys.modules
            and sys.modules["tracemalloc"].is_tracing()}


def _start(path):
    probe = _Probe(path)
    probe.write("hello", python=sys.version.split()[0], executable=sys.executable, argv=list(getattr(sys, "argv", []))[:8],
                affinity=_affinity(), flags=_flags(), ppid=os.getppid())
    probe.watch_os()
    sys.meta_path.insert(0, _TorchWatch(probe))
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=probe.forked)
    import atexit

    atexit.register(probe.at_exit)


def _main():
    try:
        out = _restore_environment()
        if out:
            _start(out)
    except Exception:  # noqa: BLE001 - the probe never stops the job
        pass
    _chain()


_main()
