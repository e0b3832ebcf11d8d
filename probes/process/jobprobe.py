"""The job-state probe, parent side: put it into a Python job ``cpudoctor run`` starts, and read what it wrote.

The probe itself (``probes/child/scripts/job_probe.py``) runs inside the job as
its ``sitecustomize``: :meth:`ProbeChannel.open` copies it as
``sitecustomize.py`` into a private folder (0700) that goes first on the job's
``PYTHONPATH``, and names the file it writes to (``CPUDOCTOR_PROBE_OUT``) and
the job's own ``PYTHONPATH`` (``CPUDOCTOR_PROBE_PYTHONPATH``, absent when it had
none), which the probe puts back at once. It is only added to a command that runs Python (an
interpreter, a ``.py`` file, or a script whose ``#!`` line names Python): a
shell script or a binary gets no ``PYTHONPATH`` it did not have.

:func:`parse_probe` reads the probe's JSON lines into a
:class:`~cpudoctor.model.jobstate.JobState` as hostile input: a file cut short,
garbage, lines too long, too many lines, a job that wrote into the file itself
— bounded in bytes and lines, each bad line counted, never an exception.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cpudoctor.model.jobstate import (CodeLine, ForwardMemory, JobState, Latency, LoaderInfo, ModeSample, ModelInfo,
                                      Progress, PythonFlags, RepeatedCall, Serving, SettingCall, StepMemory)

ENV_OUT = "CPUDOCTOR_PROBE_OUT"
ENV_PATH = "CPUDOCTOR_PROBE_PYTHONPATH"
MAX_READ = 4_000_000                    # bytes of the probe's file read at most
MAX_LINE = 64_000                       # a longer line is not the probe's
MAX_LINES = 50_000
MAX_CALLS = 400
MAX_SAMPLES = 300
MAX_PROGRESS = 4_000
MAX_LOADERS = 32
MAX_SITES = 32                          # places that load, build or compile a model
ISOLATING_FLAGS = ("-I", "-E", "-S")    # an interpreter started so ignores PYTHONPATH or site


@dataclass
class ProbeChannel:
    """The probe's private folder for one job: its copy as ``sitecustomize.py`` and the file it writes."""

    folder: Path
    out: Path

    @classmethod
    def open(cls, argv: list[str], env: dict[str, str], *, enabled: bool = True) -> tuple[dict[str, str],
                                                                                            "ProbeChannel | None", str]:
        """(the job's environment with the probe added, the channel, why it was not added: "" | off | not_python
        | unavailable)."""
        if not enabled:
            return env, None, "off"
        if not is_python_command(argv, env):
            return env, None, "not_python"
        try:
            from cpudoctor.probes.child.scripts import script_path

            source = script_path("job_probe")
            folder = Path(tempfile.mkdtemp(prefix="cpudoctor-probe-"))
            shutil.copyfile(source, folder / "sitecustomize.py")
            # run --verbose-windows: the probe switches the verbose lines with verbose_window.py, loaded by path
            shutil.copyfile(script_path("verbose_window"), folder / "cpudoctor_verbose_window.py")
        except OSError:
            return env, None, "unavailable"
        channel = cls(folder, folder / "state.jsonl")
        job_env = dict(env)
        own = env.get("PYTHONPATH")
        if own is not None:
            job_env[ENV_PATH] = own               # put back by the probe (absent: it unsets PYTHONPATH)
        job_env["PYTHONPATH"] = str(folder) + (os.pathsep + own if own else "")
        job_env[ENV_OUT] = str(channel.out)
        return job_env, channel, ""

    def read(self, pid: int | None) -> JobState:
        """What the probe wrote, for the job's process ``pid``; then the folder goes."""
        try:
            with open(self.out, "rb") as fh:
                blob = fh.read(MAX_READ + 1)
        except FileNotFoundError:
            return JobState(why_not="not_loaded")
        except OSError:
            return JobState(why_not="unreadable")
        finally:
            self.close()
        state = parse_probe(blob[:MAX_READ].splitlines(), pid)
        state.truncated = state.truncated or len(blob) > MAX_READ
        return state

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def is_python_command(argv: list[str], env: dict[str, str] | None = None) -> bool:
    """Whether ``argv`` starts a Python interpreter (not one that ignores PYTHONPATH or site): ``python…``,
    a ``.py`` file, or a script whose ``#!`` line names Python (console scripts such as torchrun)."""
    if not argv:
        return False
    first = os.path.basename(argv[0])
    if first.startswith("python") or first.endswith(".py"):
        return not any(a in ISOLATING_FLAGS for a in _interpreter_flags(argv[1:]))
    path = shutil.which(argv[0], path=(env or os.environ).get("PATH"))
    if not path:
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return False
    line = head.split(b"\n", 1)[0].decode("utf-8", "replace")
    if not line.startswith("#!") or "python" not in line:
        return False
    words = line[2:].split()
    after = words[words.index(next(w for w in words if "python" in os.path.basename(w))) + 1:]
    return not any(a in ISOLATING_FLAGS for a in _interpreter_flags(after))


def _interpreter_flags(args: list[str]) -> list[str]:
    """The interpreter's own one-letter options before the script, ``-m`` or ``-c`` (``-IB`` is ``-I``, ``-B``)."""
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if not a.startswith("-") or a == "-":
            break
        if a.startswith("--"):
            out.append(a)
            continue
        for i, c in enumerate(a[1:]):
            if c in "mc":
                return out
            if c in "XW":                   # -X opt / -W arg: the value is the rest, or the next word
                skip = i == len(a) - 2
                break
            out.append(f"-{c}")
    return out


# --- reading the lines ------------------------------------------------------------------------------------------


def parse_probe(lines: Iterable[bytes | str], pid: int | None) -> JobState:
    """The probe's lines -> one JobState (the job's process: ``pid``, else the one that imported torch)."""
    by_pid: dict[int, list[dict]] = {}
    bad = 0
    truncated = False
    for n, raw in enumerate(lines):
        if n >= MAX_LINES:
            truncated = True
            break
        if len(raw) > MAX_LINE:
            bad += 1
            continue
        try:
            item = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            bad += 1
            continue
        if not isinstance(item, dict) or not isinstance(item.get("k"), str) or not _is_int(item.get("pid")):
            bad += 1
            continue
        by_pid.setdefault(item["pid"], []).append(item)
    if not by_pid:
        return JobState(why_not="not_loaded", bad_lines=bad, truncated=truncated)
    chosen = pid if pid in by_pid else next((p for p, items in by_pid.items() if any(i["k"] == "torch" for i in items)),
                                            next(iter(by_pid)))
    state = JobState(loaded=True, pid=chosen, bad_lines=bad, truncated=truncated,
                     other_pids=sorted(p for p in by_pid if p != chosen)[:16])
    for item in by_pid[chosen]:
        try:
            _apply(state, item)
        except (TypeError, ValueError, KeyError, AttributeError):
            state.bad_lines += 1
    return state


def _apply(state: JobState, item: dict) -> None:
    kind, t = item["k"], _num(item.get("t"))
    if t is not None:
        state.duration_s = max(state.duration_s or 0.0, t)
    if kind == "hello":
        state.python = _text(item.get("python"), 40)
        state.affinity_start = _cpus(item.get("affinity"))
        flags = item.get("flags") if isinstance(item.get("flags"), dict) else {}
        state.flags = PythonFlags(dev_mode=bool(flags.get("dev_mode")), optimize=_int(flags.get("optimize")) or 0,
                                  debug_build=bool(flags.get("debug_build")),
                                  x_options=[_text(x, 40) for x in _list(flags.get("x"))[:12]],
                                  malloc=_text(flags.get("malloc"), 40), tracemalloc=bool(flags.get("tracemalloc")))
    elif kind == "torch":
        state.torch_version = _text(item.get("version"), 60)
        state.torch_at_s = t
        state.affinity_after_torch = _cpus(item.get("affinity"))
    elif kind == "set" and len(state.calls) < MAX_CALLS:
        state.calls.append(SettingCall(name=_text(item.get("name"), 80) or "?",
                                       value=None if item.get("value") in (None, "None") else _text(item["value"], 200),
                                       key=_text(item.get("key"), 80), at=_code_line(item.get("at")),
                                       after_torch=bool(item.get("torch")), failed=bool(item.get("failed")), t_s=t))
    elif kind == "loader" and len(state.loaders) < MAX_LOADERS:
        state.loaders.append(LoaderInfo(num_workers=_int(item.get("num_workers")), batch_size=_int(item.get("batch_size")),
                                        pin_memory=_bool(item.get("pin_memory")),
                                        persistent_workers=_bool(item.get("persistent_workers")),
                                        prefetch_factor=_int(item.get("prefetch_factor")),
                                        context=_text(item.get("context"), 20), worker_init=bool(item.get("worker_init")),
                                        usable_cpus=_int(item.get("usable_cpus")), at=_code_line(item.get("at"))))
    elif kind == "optimizer":
        name = _text(item.get("name"), 80)
        if name and len(state.optimizers) < 8:
            state.optimizers.append(name)
        state.optimizer_at = state.optimizer_at or _code_line(item.get("at"))
    elif kind == "model":
        model = state.model or ModelInfo()
        model.name = _text(item.get("name"), 120) or model.name
        model.parameters = _int(item.get("parameters")) or 0
        model.trainable = _int(item.get("trainable")) or 0
        model.tensors = _int(item.get("tensors")) or 0
        dtypes = item.get("dtypes") if isinstance(item.get("dtypes"), dict) else {}
        model.dtypes = {_text(k, 40): _int(v) or 0 for k, v in list(dtypes.items())[:16]}
        model.compiled = bool(item.get("compiled"))
        state.model = model
    elif kind == "inputs":
        model = state.model or ModelInfo()
        model.called_at = _code_line(item.get("at"))
        for tensor in _list(item.get("inputs"))[:8]:
            if isinstance(tensor, dict):
                model.input_dtypes.append(_text(tensor.get("dtype"), 40) or "?")
                model.input_shapes.append([_int(d) or 0 for d in _list(tensor.get("shape"))[:6]])
        state.model = model
    elif kind == "flops":
        model = state.model or ModelInfo()
        model.forward_flops = _int(item.get("forward"))
        model.flops_ops = _int(item.get("ops"))
        model.flops_grad = _bool(item.get("grad"))
        state.model = model
    elif kind == "modes" and len(state.samples) < MAX_SAMPLES:
        state.samples.append(_sample(item, t))
    elif kind == "progress":
        steps, forwards = _int(item.get("steps")) or 0, _int(item.get("forwards")) or 0
        backwards = _int(item.get("backwards")) or 0
        batches, samples = _int(item.get("batches")) or 0, _int(item.get("samples")) or 0
        state.steps, state.forwards = max(state.steps, steps), max(state.forwards, forwards)
        state.backwards = max(state.backwards, backwards)
        state.batches, state.samples_drawn = max(state.batches, batches), max(state.samples_drawn, samples)
        state.first_step_s = _num(item.get("first_step")) if state.first_step_s is None else state.first_step_s
        state.last_step_s = _num(item.get("last_step")) or state.last_step_s
        if t is not None and len(state.progress) < MAX_PROGRESS:
            state.progress.append(Progress(t, steps, forwards, backwards, last_step_s=_num(item.get("last_step")),
                                           batches=batches, samples=samples))
    elif kind == "memory_forward":
        if state.forward_memory is None or not state.forward_memory.chosen:     # the chosen model's pass stays
            state.forward_memory = ForwardMemory(
                module=_text(item.get("module"), 120) or "", parameters=_int(item.get("parameters")) or 0,
                param_bytes=_int(item.get("param_bytes")) or 0, buffer_bytes=_int(item.get("buffer_bytes")) or 0,
                batch=_int(item.get("batch")) or None, saved_bytes=_int(item.get("saved_bytes")) or 0,
                saved_tensors=_int(item.get("saved_tensors")) or 0, nodes=_int(item.get("nodes")) or 0,
                complete=item.get("complete") is True, chosen=item.get("chosen") is True,
                hooked=_int(item.get("hooked")) or 0)
    elif kind == "memory_step" and len(state.step_memory) < 8:
        state.step_memory.append(StepMemory(optimizer=_text(item.get("optimizer"), 80) or "",
                                            parameters=_int(item.get("parameters")) or 0,
                                            param_bytes=_int(item.get("param_bytes")) or 0,
                                            grad_bytes=_int(item.get("grad_bytes")) or 0,
                                            state_bytes=_int(item.get("state_bytes")) or 0,
                                            state_tensors=_int(item.get("state_tensors")) or 0))
    elif kind == "exit":
        state.exited = True
        if state.progress and len(state.progress) < MAX_PROGRESS:
            state.progress[-1].at_exit = True       # the probe writes its last progress line just before this one
    elif kind == "serving" and "cut" not in item:      # a line cut for its length keeps the last whole one
        state.serving = _serving(item)


def _sample(item: dict, t: float | None) -> ModeSample:
    return ModeSample(t_s=t or 0.0, at_exit=bool(item.get("at_exit")), main_thread=_bool(item.get("main")),
                      grad=_bool(item.get("grad")), inference=_bool(item.get("inference")),
                      autocast=_text(item.get("autocast"), 40), anomaly=_bool(item.get("anomaly")),
                      anomaly_nan=_bool(item.get("anomaly_nan")), profiler=_bool(item.get("profiler")),
                      trace=_text(item.get("trace"), 200), profile=_text(item.get("profile"), 200),
                      monitoring=[_text(m, 80) for m in _list(item.get("monitoring"))[:6]],
                      threads=_int(item.get("threads")), interop=_int(item.get("interop")),
                      dtype=_text(item.get("dtype"), 40), deterministic=_bool(item.get("deterministic")),
                      matmul=_text(item.get("matmul"), 20), mkldnn=_bool(item.get("mkldnn")),
                      function_modes=[_text(m, 80) for m in _list(item.get("function_modes"))[:8]],
                      dispatch_modes=[_text(m, 80) for m in _list(item.get("dispatch_modes"))[:8]],
                      device=_text(item.get("device"), 40), affinity=_text(item.get("affinity"), 400),
                      tracemalloc=bool(item.get("tracemalloc")))


def _serving(item: dict) -> Serving:
    """A ``serving`` line (each one holds the figures so far: the last one wins)."""
    sites = []
    for s in _list(item.get("sites"))[:MAX_SITES]:
        if not isinstance(s, dict) or s.get("kind") not in ("load", "build", "compile"):
            continue
        sites.append(RepeatedCall(name=_text(s.get("name"), 80) or "?", kind=s["kind"], calls=_int(s.get("calls")) or 0,
                                  after=_int(s.get("after")) or 0, seconds=_num(s.get("seconds")) or 0.0,
                                  forwards_first=_int(s.get("forwards_first")), at=_code_line(s.get("at"))))
    return Serving(calls=_int(item.get("calls")) or 0, forward=_latency(item.get("forward")),
                   interval=_latency(item.get("interval")), sites=sites)


def _latency(value) -> Latency | None:
    if not isinstance(value, dict) or not _int(value.get("n")):
        return None
    return Latency(n=value["n"], p50_ms=_num(value.get("p50")), p90_ms=_num(value.get("p90")),
                   p99_ms=_num(value.get("p99")), mean_ms=_num(value.get("mean")))


def _code_line(value) -> CodeLine | None:
    if not isinstance(value, dict) or not isinstance(value.get("file"), str) or not _is_int(value.get("line")):
        return None
    from cpudoctor.probes.process.procfs import redact_paths

    user_file, via_file = value.get("user_file"), value.get("via_file")
    return CodeLine(file=redact_paths(value["file"][:400]), line=value["line"],
                    function=_text(value.get("function"), 120) or "", library=_text(value.get("library"), 80),
                    user_file=redact_paths(user_file[:400]) if isinstance(user_file, str) else None,
                    user_line=value.get("user_line") if _is_int(value.get("user_line")) else None,
                    via_file=redact_paths(via_file[:400]) if isinstance(via_file, str) else None,
                    via_line=value.get("via_line") if _is_int(value.get("via_line")) else None)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63


def _int(v) -> int | None:
    return v if _is_int(v) else None


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1e9 else None


def _bool(v) -> bool | None:
    return v if isinstance(v, bool) else None


def _text(v, limit: int) -> str | None:
    if v is None:
        return None
    text = v if isinstance(v, str) else str(v)
    return "".join(c if c.isprintable() else "?" for c in text[:limit])


def _list(v) -> list:
    return v if isinstance(v, list) else []


def _cpus(v) -> list[int] | None:
    if not isinstance(v, list):
        return None
    return [c for c in v[:4096] if _is_int(c)]
