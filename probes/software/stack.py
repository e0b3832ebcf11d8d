"""Assemble :class:`Software` from the OS, package, environment and child probes.

The cheap part (files, metadata, environment) takes milliseconds and is
always done; the children run concurrently so the slowest one (usually
``import torch``) bounds the wall time. Every failure becomes a field plus a
note, never an exception.

:class:`SoftwareProbe` does the cheap part once and can then give the quick
answer, the complete one, or first one and then the other (the window shows
the quick answer while the children run) without reading anything twice.
"""

from __future__ import annotations

import copy
import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cpudoctor.knowledge import FLOORS, SOFTWARE_FACTS
from cpudoctor.probes.child import cache as childcache
from cpudoctor.kits.rooted import is_live_root, read_text, under
from cpudoctor.kits.child.runner import ChildResult, ChildSpec, run_children
from cpudoctor.probes.child.scripts import script_argv
from cpudoctor.model import CpuInfo
from cpudoctor.probes.cpu.identity import probe_cpu
from cpudoctor.probes.software.envs import describe as describe_env
from cpudoctor.probes.software.dists import distributions as safe_distributions
from cpudoctor.probes.software.envvars import filter_thread_env, preload_names
from cpudoctor.probes.software.importcheck import import_spec, order_spec, to_import_check, to_order_check
from cpudoctor.probes.software.isarisk import assess, shortfall
from cpudoctor.probes.software.gpu import probe_gpus
from cpudoctor.probes.platforms import probe_os
from cpudoctor.probes.software.packages import (
    compiled_distributions,
    probe_packages,
    probe_python,
)
from cpudoctor.model import (BlasLib, CpuidCheck, ImportCheck, ImportOrderCheck, NumpyInfo, PackageInfo, PythonEnv, Software,
    TorchBuild)



def cpu_for_risk(root: Path, cpu: CpuInfo | None = None) -> CpuInfo:
    """The CPU probe's answer (``cpu`` when the caller has it already), with flags read
    straight from cpuinfo if it has none.

    The ISA comparison needs only the flags line; reading it here keeps the
    risk table working even when the full CPU probe cannot classify the chip.
    """
    if cpu is not None:
        cpu = copy.deepcopy(cpu)
    else:
        try:
            cpu = probe_cpu(root)
        except Exception:  # noqa: BLE001 - a probe bug must not take the software probe down
            cpu = CpuInfo()
    if not cpu.flags:
        text = read_text(under(root, "/proc/cpuinfo")) or ""
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() == "flags":
                cpu.flags = value.split()
                break
            if sep and key.strip() == "Features" and cpu.arch is None:
                cpu.arch = "aarch64"  # ARM kernels print "Features", x86 kernels "flags"
    if cpu.arch is None and cpu.flags:
        cpu.arch = "x86_64" if "lm" in cpu.flags else None
    if cpu.arch is None and is_live_root(root):
        cpu.arch = platform.machine() or None
    return cpu


def _openmp_label(libs: list[str]) -> str | None:
    labels: list[str] = []
    for lib in libs:
        for entry in SOFTWARE_FACTS.data["openmp_runtimes"]:
            # libomp must not match libgomp: compare at the start of the file name.
            if lib.startswith(entry["match"]) and entry["label"] not in labels:
                labels.append(entry["label"])
    return " + ".join(labels) or None


def _blas_libs(items: Any) -> list[BlasLib]:
    out: list[BlasLib] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            out.append(BlasLib(**{k: item.get(k) for k in BlasLib.__dataclass_fields__}))
    return out


def _numpy_info(data: dict[str, Any], result: ChildResult) -> NumpyInfo:
    info = NumpyInfo()
    facts = data.get("numpy")
    if isinstance(facts, dict):
        info.version = facts.get("version")
        info.simd_baseline = list(facts.get("simd_baseline") or [])
        info.simd_dispatched = list(facts.get("simd_dispatched") or [])
        info.simd_not_found = list(facts.get("simd_not_found") or [])
    elif data.get("numpy_error"):
        info.error = data["numpy_error"]
    elif not result.ok:
        info.error = result.diagnosis.message
    info.blas = _blas_libs(data.get("numpy_blas"))
    return info


def _torch_build(result: ChildResult, torch_pkg: PackageInfo | None) -> TorchBuild:
    data = result.data
    build = TorchBuild(status="ok", seconds=round(result.seconds, 3))
    facts = data.get("torch")
    if isinstance(facts, dict):
        for key in ("version", "cpu_capability", "mkl_available", "mkl_version", "mkldnn_available", "mkldnn_version",
                    "parallel_backend", "intra_op_threads", "inter_op_threads", "bf16_supported", "cuda_version",
                    "hip_version", "blas", "compiler", "import_seconds"):
            if key in facts:
                setattr(build, key, facts[key])
        libs = list(data.get("mapped_libs") or []) + [b.library for b in _blas_libs(data.get("loaded_libs")) if b.user_api == "openmp" and b.library]
        build.openmp = _openmp_label(libs) or (facts.get("openmp_spec") if build.parallel_backend == "OpenMP" else None)
    d = result.diagnosis
    if isinstance(facts, dict):
        if d.kind != "ok":
            # torch imported and answered; the child died afterwards (in the workload: see the import check). Keep the facts.
            build.error = d.message if data.get("stage") != "workload torch" else f"torch imported, then its first computation died: {d.message}"
        return build
    build.version = torch_pkg.version if torch_pkg else None
    if data.get("stage") == "import numpy" and d.kind != "ok":
        # The child died before it reached `import torch`: numpy's own import check tells the story.
        build.status = "timeout" if d.kind == "timeout" else "error"
        build.error = f"PyTorch was not checked: the child died importing numpy first ({d.message})"
        return build
    if d.kind == "timeout":
        build.status, build.error = "timeout", d.message
    elif d.signal is not None:
        build.status, build.signal, build.signal_name, build.error = "crashed", d.signal, d.signal_name, d.message
    elif data.get("torch_error"):
        build.status, build.error = "error", f"import torch failed: {data['torch_error']}"
    else:
        build.status, build.error = "error", d.message if d.kind != "ok" else "the PyTorch child printed no facts"
    return build


class SoftwareProbe:
    """The software stack of ``root``: the cheap facts at once, the child checks on demand.

    ``SoftwareProbe(root)`` reads the OS, Python, packages and environment
    (milliseconds); :meth:`quick` is that answer, :meth:`complete` adds the
    child processes (torch and BLAS facts, import checks). Each returns a new
    :class:`Software`, so a quick answer already handed out is never changed
    by the complete one. ``cpu`` is the CPU probe's answer when the caller has
    it (saves reading it again for the Illegal-instruction risk table).

    ``python`` is the interpreter of the environment to describe (the one the
    user trains in); None, or this interpreter, is CPU Doctor's own. Another
    environment is read from its files (nothing is imported in it) and its
    children run in its interpreter. ``chosen_by`` says how it was chosen
    (recorded in the report: ``--python``, "most likely training environment"). ``ask=False``
    (``--fast``): its interpreter is not run either; a remembered answer or its files describe it.
    """

    def __init__(self, root: Path, *, environ: Mapping[str, str] | None = None, cpu: CpuInfo | None = None,
                 python: str | None = None, chosen_by: str | None = None, ask: bool = True):
        self.root = Path(root)
        self.target: PythonEnv | None = None    # None: CPU Doctor's own interpreter
        live = is_live_root(self.root)
        self.env = dict(os.environ if environ is None else environ) if live else None
        self.own_environ = environ is None      # this process's environment: libraries may have changed it
        sw = Software()
        sw.os, notes = probe_os(self.root, environ=self.env)
        sw.notes.extend(notes)
        sw.gpus, gpu_notes = probe_gpus(self.root)
        sw.notes.extend(gpu_notes)
        self.installed: dict[str, PackageInfo] = {}
        self.cpu = CpuInfo()
        self._base = sw
        self.captured_cpuid = None               # a capture's CPUID check (its environment.json), for the CPU
        self.carried = False                     # the software came with the capture: nothing to add to it
        if not live:
            self._base, self.captured_cpuid = _captured_software(self.root, sw, cpu)
            self.carried = not self._base.captured
            return
        assert self.env is not None
        if python is not None and not _is_own(python):
            self.target = describe_env(Path(python), "--python" if chosen_by == "--python" else "chosen", cache=True,
                                       ask=ask)
        if self.target is None:
            sw.python = probe_python(self.env)
            sw.python.own, sw.python.prefix = True, sys.prefix
            dists = None                          # this interpreter's own import path
        else:
            sw.python = self.target.record()
            dists = safe_distributions(self.target.site_dirs) if self.target.usable else []
            if self.target.from_files and self.target.usable:
                sw.notes.append(f"the Python environment {self.target.python} was described from its files (a quick "
                                "probe runs no interpreter): its Python version and site folders are read from its "
                                "layout")
            if not self.target.usable:
                sw.notes.append(f"the Python environment {self.target.python} cannot be examined: {self.target.error}; "
                                "its packages and import checks are missing (choose another with --python)")
        sw.python.chosen_by = chosen_by
        sw.packages = probe_packages(dists)
        # As the user set it: a hiding variable a library set inside CPU Doctor (threadpoolctl) is not theirs.
        sw.thread_env = filter_thread_env(child_environment(self.env, own_environ=self.own_environ)[0])
        sw.preload_libs = preload_names(self.env.get("LD_PRELOAD"))
        self.cpu = cpu_for_risk(self.root, cpu)
        sw.isa_risks = assess(self.cpu, sw.packages)
        sw.compiled_unknown = FLOORS.compiled_without_floor(compiled_distributions(dists))
        if not self.cpu.flags:
            sw.notes.append("CPU flags unknown: the Illegal-instruction risk table could not be checked")
        # One entry per known package that is installed (the first distribution found).
        for pkg in sw.packages:
            known = FLOORS.package_of(pkg.name)
            if known and known.name not in self.installed:
                self.installed[known.name] = pkg

    @property
    def captured(self) -> bool:
        """A captured tree: there is nothing a child process could check (see :meth:`complete`)."""
        return self._base.captured

    def quick(self) -> Software:
        """The stack without child processes: PyTorch and NumPy versions only, marked as a quick probe."""
        sw = copy.deepcopy(self._base)
        if sw.captured or self.carried:
            return sw
        torch_pkg = self.installed.get("torch")
        sw.torch = TorchBuild(status="not_installed" if torch_pkg is None else "skipped",
                              version=torch_pkg.version if torch_pkg else None)
        sw.numpy = NumpyInfo(version=self.installed["numpy"].version if "numpy" in self.installed else None)
        sw.notes.append("child checks not run (quick probe): PyTorch build facts, BLAS libraries and import checks are missing")
        return sw

    @property
    def python(self) -> str:
        """The interpreter the children run in."""
        return self.target.python if self.target is not None else sys.executable

    def complete(self, *, timeout: float = 60.0, cache: bool | Path = True) -> Software:
        """The stack with the child checks (reused from the cache while nothing they depend on changed)."""
        sw = copy.deepcopy(self._base)
        if sw.captured or self.carried:
            return sw
        if self.target is not None and not self.target.usable:
            return self.quick()
        _run_children(sw, self, timeout, cache)
        return sw


def _captured_software(root: Path, sw: Software, cpu: CpuInfo | None) -> "tuple[Software, CpuidCheck | None]":
    """The software of a captured tree: the capture's own environment description when it carries one
    (its OS and GPU facts from the tree), else the tree's file-based facts only."""
    from cpudoctor.probes.software.captured import ENVIRONMENT_FILE, read_captured

    found, problem = read_captured(root)
    if found is not None:
        carried = copy.deepcopy(found.software)
        carried.os, carried.gpus = sw.os, sw.gpus
        # the tree's OS notes, where the facts came from, then the capture's own (its OS notes said once)
        carried.notes = list(dict.fromkeys([*sw.notes, found.note, *carried.notes]))
        return carried, found.cpuid_check
    sw.captured = True
    sw.notes.append(problem or (
        f"captured tree at {root}: only file-based OS facts were read; the tree describes no Python environment "
        f"(no {ENVIRONMENT_FILE}: an older capture, or hwloc-gather-topology), so Python, packages, thread "
        "environment and child checks are unknown"))
    # The ISA table needs only the tree's cpuinfo flags: what this CPU could not run if installed.
    sw.isa_risks = assess(cpu_for_risk(root, cpu), [])
    return sw, None


def _is_own(python: str) -> bool:
    """``python`` is the interpreter running CPU Doctor: the same path, or another name of it in the
    same folder (``.venv/bin/python`` for ``.venv/bin/python3``). The base interpreter a venv links to
    is another environment."""
    mine, given = Path(sys.executable), Path(python)
    try:
        return given.absolute() == mine.absolute() or (
            given.parent.resolve() == mine.parent.resolve() and given.resolve() == mine.resolve())
    except OSError:
        return False



def probe_stack(
    root: Path,
    *,
    children: bool = True,
    environ: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    cache: bool | Path = True,
    python: str | None = None,
) -> Software:
    probe = SoftwareProbe(root, environ=environ, python=python)
    return probe.complete(timeout=timeout, cache=cache) if children else probe.quick()


def _run_children(sw: Software, probe: SoftwareProbe, timeout: float, cache: bool | Path) -> None:
    """Run (or reuse) the torch/BLAS facts and import-check children and fill ``sw`` from them."""
    assert probe.env is not None
    env, cpu, installed = probe.env, probe.cpu, probe.installed
    torch_pkg = installed.get("torch")
    child_env, removed = child_environment(env, own_environ=probe.own_environ)
    if removed:
        sw.notes.append(f"{', '.join(removed)} was removed from the checks' environment: it was set inside this "
                        "process (threadpoolctl sets KMP_DUPLICATE_LIB_OK when imported), not by you, and it would "
                        "hide duplicate OpenMP runtimes (OMP: Error #15)")
    specs: list[ChildSpec] = []
    roles: list[tuple[str, str, str]] = []   # (role, package, module)

    def hint(package: str):
        version = installed[package].version if package in installed else None
        return lambda: shortfall(cpu, package, version)

    if torch_pkg is not None:
        argv = script_argv("torch_facts", *(["--numpy"] if "numpy" in installed else []), "--workload",
                           python=probe.python)
        specs.append(ChildSpec(argv, what="import torch", timeout=timeout, isa_hint=hint("torch"), env=child_env))
        roles.append(("torch", "torch", "torch"))
        if "numpy" in installed:
            # The other order scripts use: torch first, then numpy (the torch child above imports numpy first).
            spec = order_spec(["torch", "numpy"], timeout, hint("torch"), python=probe.python)
            spec.env = child_env
            specs.append(spec)
            roles.append(("order", "torch", "torch numpy"))
    elif "numpy" in installed:
        specs.append(ChildSpec(script_argv("blas_facts", python=probe.python), what="numpy/BLAS facts", timeout=timeout,
                               isa_hint=hint("numpy"), env=child_env))
        roles.append(("blas", "numpy", "numpy"))
    modules = {k.name: k.module for k in FLOORS.packages.values()}
    for name in installed:
        if name == "torch":
            continue  # the torch facts child is torch's import check
        spec = import_spec(modules[name], f"import {modules[name]}", timeout, hint(name), python=probe.python)
        spec.env = child_env
        specs.append(spec)
        roles.append(("import", name, modules[name]))

    folder = (cache if isinstance(cache, Path) else childcache.default_dir(env)) if cache else None
    target = probe.target
    key = childcache.fingerprint(specs, {n: (p.version, modules[n]) for n, p in installed.items()}, cpu.flags, child_env,
                                 python=(target.python, target.version) if target else None,
                                 site_dirs=target.site_dirs if target else None)
    results = childcache.load(folder, key, specs)
    sw.children_cached = results is not None
    if results is None:
        results = run_children(specs)
        childcache.save(folder, key, results)
    else:
        sw.notes.append("PyTorch facts and import checks were reused from CPU Doctor's cache: the installation, "
                        "CPU, kernel and environment are unchanged since they last ran")
    sw.children_ran = True
    checks: list[ImportCheck] = []
    orders: list[ImportOrderCheck] = []
    for (role, package, module), result in zip(roles, results):
        if role == "torch":
            sw.torch = _torch_build(result, torch_pkg)
            sw.numpy = _numpy_info(result.data, result)
            sw.loaded_libs = _blas_libs(result.data.get("loaded_libs"))
            checks.append(_torch_import_check(result, sw.torch))
            if "--numpy" in result_argv(specs, roles, role):
                orders.append(to_order_check(["numpy", "torch"], result))
        elif role == "order":
            orders.append(to_order_check(module.split(), result))
        elif role == "blas":
            sw.numpy = _numpy_info(result.data, result)
            sw.loaded_libs = list(sw.numpy.blas)
        else:
            checks.append(to_import_check(package, module, result))
    if torch_pkg is None:
        sw.torch = TorchBuild(status="not_installed")
    sw.import_orders = orders
    sw.import_checks = sorted(checks, key=lambda c: list(installed).index(c.package) if c.package in installed else 99)
    _mark_crashes(sw)
    _runtime_notes(sw)


def result_argv(specs: list[ChildSpec], roles: list[tuple[str, str, str]], role: str) -> list[str]:
    """The command line of the child that played ``role``."""
    for spec, (r, _, _) in zip(specs, roles):
        if r == role:
            return spec.argv
    return []


def _torch_import_check(result: ChildResult, build: TorchBuild) -> ImportCheck:
    """torch's import check from the torch facts child: facts printed = the import worked."""
    check = to_import_check("torch", "torch", result)
    data = result.data
    facts = data.get("torch")
    if isinstance(facts, dict):
        if check.workload_status is None or check.workload_status == "ok":
            check.status, check.signal, check.signal_name = "ok", None, None
        check.message = "import torch works"
        check.seconds = facts.get("import_seconds", check.seconds)
    elif data.get("torch_error"):
        check.status, check.message = "error", data["torch_error"]
    elif data.get("stage") == "import numpy":
        check.status, check.signal, check.signal_name = "skipped", None, None
        check.message = build.error or "not checked"
    return check


def initial_environment() -> dict[str, str] | None:
    """The environment this process was started with (``/proc/self/environ``), before anything in it changed it.

    ``os.environ`` also holds what imported libraries set later (threadpoolctl
    sets ``KMP_DUPLICATE_LIB_OK``); the kernel's copy does not. None where
    there is no /proc (macOS, Windows).
    """
    try:
        raw = Path("/proc/self/environ").read_bytes()
    except OSError:
        return None
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key:
            out[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return out


# Variables that hide what the checks look for when something other than the user set them.
_HIDING_VARS = ("KMP_DUPLICATE_LIB_OK",)


def child_environment(env: Mapping[str, str], *, own_environ: bool) -> tuple[dict[str, str], list[str]]:
    """The environment for the probe children, and the names removed from it.

    The children must see what the user's script sees: with ``own_environ``
    (``env`` is this process's ``os.environ``), a variable that hides
    duplicate OpenMP runtimes is dropped unless the process was started with
    it, i.e. the user set it. An environment passed in explicitly is the
    user's by definition and kept as given.
    """
    child = dict(env)
    child.setdefault("PYTHONUNBUFFERED", "1")
    removed: list[str] = []
    if own_environ:
        initial = initial_environment()
        for name in _HIDING_VARS:
            if name in child and initial is not None and name not in initial:
                del child[name]
                removed.append(name)
    return child, removed


def _mark_crashes(sw: Software) -> None:
    """A package whose import died of SIGILL is at risk whatever the table says."""
    for check in sw.import_checks:
        if check.signal_name != "SIGILL" or check.status != "crashed":
            continue  # a workload that died after a clean import is not the package's ISA floor
        for risk in sw.isa_risks:
            if risk.package == check.package and not risk.at_risk:
                risk.at_risk = True
                risk.note = (risk.note + "; " if risk.note else "") + "its import check died with SIGILL (Illegal instruction)"


def _runtime_notes(sw: Software) -> None:
    runtimes = {b.library.split(".so")[0].split("-")[0] for b in sw.loaded_libs if b.user_api == "openmp" and b.library}
    if len(runtimes) > 1:
        sw.notes.append("several OpenMP runtimes are loaded together (" + ", ".join(sorted(runtimes)) + "): their thread pools compete")


def probe_software(
    root: Path = Path("/"),
    children: bool = True,
    *,
    environ: "Mapping[str, str] | None" = None,
    timeout: float = 60.0,
    cache: bool | Path = True,
    python: str | None = None,
) -> Software:
    """Probe the software stack; ``children=False`` returns at once without child processes.

    ``python``: the interpreter of the environment to describe (default: CPU Doctor's own).

    For a captured tree (``root`` is not ``/``) only the file-based OS facts
    are filled in: the Python, packages and children of *this* process say
    nothing about that machine. ``cache`` reuses the children's results while
    the installation, CPU, kernel and environment are unchanged (True: the user
    cache folder, a Path: that folder, False: always run them).
    """
    return probe_stack(Path(root), children=children, environ=environ, timeout=timeout, cache=cache, python=python)
