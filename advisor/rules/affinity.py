"""CPU affinity that an import or an OpenMP binding variable takes away from the job."""

from __future__ import annotations

from cpudoctor.advisor import machine, snippets
from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.model import Finding, Report

# OMP_PROC_BIND values that bind (the runtime pins the initial thread to its first place).
_BINDING = {"true", "close", "spread", "master", "primary"}


def parse_gomp_affinity(value: str) -> list[int] | None:
    """CPUs named by ``GOMP_CPU_AFFINITY`` ("0 3 1-2 4-15:2", commas allowed); None when it does not parse."""
    cpus: set[int] = set()
    for item in value.replace(",", " ").split():
        span, _, stride = item.partition(":")
        lo, _, hi = span.partition("-")
        try:
            start, end, step = int(lo), int(hi or lo), int(stride or 1)
        except ValueError:
            return None
        if step < 1 or end < start:
            return None
        cpus.update(range(start, end + 1, step))
    return sorted(cpus) or None


def _binding_vars(f: Facts) -> dict[str, str]:
    out = {}
    for name in machine.PINNING_VARS:
        value = machine.env(f, name)
        if value is not None and value.strip():
            out[name] = value
    return out


def _cpus(n: int) -> str:
    return f"{n} CPU{'s' if n != 1 else ''}"


def _named(cpus: set[int] | list[int]) -> str:
    """``CPU 0`` or ``CPUs 0-3``."""
    cpus = sorted(cpus)
    return f"CPU{'s' if len(cpus) != 1 else ''} {format_cpulist(cpus)}"


@rule("AFF001", "import-shrinks-affinity", category="topology", severity="warning",
      title="An OpenMP binding variable or an import takes CPUs away from the job")
def import_shrinks_affinity(report: Report) -> list[Finding]:
    """What it checks:
        The CPU affinity measured in the import-check children: the main thread's CPUs
        (``os.sched_getaffinity``) before and after ``import torch`` / ``import numpy``, and the CPUs
        the OpenMP threads of a small matmul ran on (``/proc/self/task/*/status``). The binding
        variables ``GOMP_CPU_AFFINITY``, ``OMP_PROC_BIND``, ``OMP_PLACES`` and ``KMP_AFFINITY`` are
        named as the cause when set. Without a measurement (quick probe), a ``GOMP_CPU_AFFINITY``
        list narrower than the usable CPUs.

    Why it matters:
        With binding on, the OpenMP runtime pins the main thread to its first place the moment
        ``import torch`` loads it. Every process started from it afterwards (DataLoader workers,
        multiprocessing pools) inherits that one CPU, so eight workers share one core; a
        ``GOMP_CPU_AFFINITY=0`` left in a profile puts every compute thread on CPU 0 too. Nothing
        fails: training is just several times slower.

    Fix:
        Unset the variable (shell profile, launch script, container environment) or relaunch
        without it (``env -u NAME python train.py``); bind with ``taskset``/``numactl`` instead. Who
        keeps OpenMP binding on purpose gives the workers their CPUs back in ``worker_init_fn``
        with ``os.sched_setaffinity``.
    """
    f = Facts(report)
    if not machine.env_known(f):
        return []
    binding = _binding_vars(f)
    checks = [c for c in (f.get("software.import_checks", record=False) or []) if c.cpus_before]
    measured: list[str] = []
    out: list[Finding] = []
    seen: set[tuple] = set()
    for chk in checks:
        before = set(chk.cpus_before)
        main_after = set(chk.cpus_after) if chk.cpus_after else before
        workers = set(chk.workload_cpus or []) if chk.workload_threads else set()
        compute = main_after | workers
        lost_main, lost_compute = before - main_after, before - compute
        f.record(f"software.import_checks[{chk.package}].cpus",
                 {"before": format_cpulist(before), "after": format_cpulist(main_after),
                  "workload_threads": chk.workload_threads, "workload_cpus": format_cpulist(workers) if workers else None})
        measured.append(chk.package)
        if not lost_main and not lost_compute:
            continue
        key = (frozenset(lost_main), frozenset(lost_compute))
        if key in seen:
            continue
        seen.add(key)
        out.append(_shrunk(f, chk.package, before, main_after, workers, chk.workload_threads or 0, binding))
    if out:
        return out
    if measured:
        if binding:
            listed = ", ".join(f"{k}={v}" for k, v in binding.items())
            return [f.finding("ok", f"{listed} set, and imports keep all {len(checks[0].cpus_before)} CPUs")]
        return [f.finding("ok", f"Importing {', '.join(measured)} keeps all {_cpus(len(checks[0].cpus_before))} of the process")]
    if f.get("software.children_ran"):
        return []   # the checks ran without measuring affinity (a report from an older CPU Doctor): say nothing
    return _static(f, binding)


def _shrunk(f: Facts, package: str, before: set[int], main_after: set[int], workers: set[int], n_workers: int,
            binding: dict[str, str]) -> Finding:
    lost_main, lost_compute = before - main_after, before - (main_after | workers)
    cause = ", ".join(f"{k}={v}" for k, v in binding.items())
    names = list(binding)
    if lost_compute:
        title = (f"{cause or f'import {package}'} confines the compute threads to {_named(before - lost_compute)} "
                 f"of {format_cpulist(before)}")
        why = (f"After `import {package}` its first matmul ran {n_workers + 1} threads (main + {n_workers} OpenMP) on "
               f"{_named(before - lost_compute)} only: {_named(lost_compute)} ({_cpus(len(lost_compute))} of "
               f"{len(before)}) stay idle while the threads share the rest.")
    else:
        title = (f"{cause or f'import {package}'}: after import {package} the main thread may use only "
                 f"{_named(main_after)} of {format_cpulist(before)}")
        why = (f"Before `import {package}` the main thread could use {_named(before)}; after it, only "
               f"{_named(main_after)}. ")
        why += ("The OpenMP threads still spread, but every process started from the main thread afterwards "
                "(DataLoader workers, multiprocessing pools) inherits the smaller set: "
                f"{_named(lost_main)} ({_cpus(len(lost_main))} of {len(before)}) are lost to them.")
    if binding:
        why += (f" The cause is {cause}: with binding on, the OpenMP runtime pins the initial thread to its first place "
                f"when `import {package}` loads it.")
        fix = (f"Unset {', '.join(names)} where it is set (shell profile, launch script, container image) or relaunch "
               "without it; restrict CPUs with taskset/numactl instead. To keep OpenMP binding for the compute threads, "
               "give DataLoader workers the CPUs back in worker_init_fn with os.sched_setaffinity.")
        snippet = (snippets.unset_lines(names) + "\n# or for one run, without editing the profile:\n"
                   + snippets.clean_launch(names))
    else:
        why += f" No binding variable is set: `import {package}` itself changes the affinity."
        fix = (f"Save the affinity before `import {package}` and restore it right after, and report it to the package: "
               "a library should not narrow its importer's CPUs.")
        snippet = ("import os\n\nallowed = os.sched_getaffinity(0)\n"
                   f"import {package}  # narrows the CPUs of the main thread\nos.sched_setaffinity(0, allowed)")
    return f.finding("warning", title, why=why, fix=fix, snippet=snippet,
                     snippet_lang="bash" if binding else "python")


def _static(f: Facts, binding: dict[str, str]) -> list[Finding]:
    """No measurement (quick probe): judge the variables' text."""
    usable = machine.usable_cpu_list(f)
    value = binding.get("GOMP_CPU_AFFINITY")
    if value and usable:
        listed = parse_gomp_affinity(value)
        if listed is not None:
            inside = sorted(set(listed) & set(usable))
            lost = sorted(set(usable) - set(listed))
            if lost:
                return [f.finding(
                    "warning", f"GOMP_CPU_AFFINITY={value} confines libgomp's threads to {_cpus(len(inside))} of {len(usable)}",
                    why=(f"GOMP_CPU_AFFINITY lists CPUs {format_cpulist(listed)}; this process may use "
                         f"{format_cpulist(usable)}. libgomp (PyTorch's OpenMP) binds its threads to the listed CPUs only, "
                         f"so CPUs {format_cpulist(lost)} get none, and the main thread is pinned at import torch."),
                    fix="Unset GOMP_CPU_AFFINITY, or list one CPU per thread to use; restrict CPUs with taskset instead.",
                    snippet=snippets.unset_lines(["GOMP_CPU_AFFINITY"]) + "\n# or for one run:\n"
                    + snippets.clean_launch(["GOMP_CPU_AFFINITY"]))]
    bind = (binding.get("OMP_PROC_BIND") or "").split(",")[0].strip().lower()
    if bind in _BINDING or (binding.get("OMP_PLACES") and bind != "false"):
        names = [n for n in ("OMP_PROC_BIND", "OMP_PLACES") if n in binding]
        listed = ", ".join(f"{n}={binding[n]}" for n in names)
        return [f.finding(
            "info", f"{listed}: the main thread will be pinned to one place at import torch",
            why=("With OpenMP binding on, the runtime pins the initial thread to its first place when torch loads it; "
                 "DataLoader workers and multiprocessing pools started afterwards inherit that one CPU. The import "
                 "checks did not run (quick probe), so this was not measured."),
            fix="Run the full report to measure it; restrict CPUs with taskset instead, or reset the workers' affinity.",
            snippet=snippets.clean_launch(names))]
    return []
