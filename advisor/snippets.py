"""What to type: shell exports, Python settings, pinned launches, installs, a launch script.

Every generator takes the Report, so the numbers are this machine's: the
thread count comes from the thread sweep's recommendation when the report has
one, else from the usable physical cores (affinity and cgroup quota
respected). CPU sets for pinning come from the report's topology (one L3
domain = one CCX on AMD; NUMA nodes), through the pinning generator
:mod:`cpudoctor.advisor.pinning` when it is available.

No shell is assumed: exports exist for bash/zsh, fish, PowerShell and cmd.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import platform
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from cpudoctor import __version__
from cpudoctor.advisor import machine, measured, pinning, torch_install, winpin, winshell
from cpudoctor.advisor.engine import Facts
from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.kits.format import cache_size
from cpudoctor.kits.plural import plural
from cpudoctor.model import Finding, Report, Topology

SHELLS: tuple[str, ...] = ("bash", "zsh", "fish", "powershell", "cmd")
SHELL_LABELS: dict[str, str] = {
    "bash": "bash", "zsh": "zsh", "fish": "fish", "powershell": "PowerShell", "cmd": "cmd.exe",
}
# Syntax-highlighting / file-type names for Finding.snippet_lang and saved scripts.
SCRIPT_SUFFIX: dict[str, str] = {"bash": ".sh", "zsh": ".zsh", "fish": ".fish", "powershell": ".ps1", "cmd": ".cmd"}



@dataclass
class ThreadPlan:
    """The thread settings every snippet uses, and where each number comes from."""

    threads: int
    source: str
    interop: int = 1
    workers: int = 0
    cpus: list[int] | None = None          # pin to these (None = no pinning)
    variant: str = ""
    notes: list[str] = field(default_factory=list)
    worker_cpus: list[int] | None = None   # where DataLoader workers should run (hybrid: the E-cores)


def thread_plan(report: Report) -> ThreadPlan:
    """Threads, inter-op threads, DataLoader workers and pinning for this report's machine.

    A measured sweep recommendation wins. Without one, a hybrid CPU (P/E
    cores) gets its performance cores, pinned, exactly as rule TOPO003 says;
    other CPUs get their usable physical cores, unpinned.
    """
    f = Facts(report)
    threads, source = machine.recommended_threads(report, f)
    rec = measured.sweep_choice(report)
    interop = rec.interop_threads if rec is not None and rec.interop_threads else 1
    cpus = list(rec.cpus) if rec is not None and rec.cpus else None
    hybrid = machine.performance_cores(f) if rec is None or not rec.threads else None
    if hybrid is not None:
        cpus = hybrid.fast_cpus
    usable = machine.usable_cpus(f) or threads
    # DataLoader workers get what the compute threads leave (SMT siblings, spare
    # cores), at most 4: decoding small images rarely needs more, and every
    # worker holds its own copy of the dataset object.
    spare = max(0, usable - threads)
    workers = min(4, spare)
    reserved = 0
    if workers == 0 and rec is None and threads >= 8:
        # A big machine with no spare CPU would otherwise be told num_workers=0 and decode
        # every batch on the main thread while 95 cores wait; one core per 8 (at most 4)
        # costs the compute pool little. A measured sweep recommendation is kept as is.
        reserved = min(4, threads // 8)
        threads -= reserved
        workers = reserved
    plan = ThreadPlan(threads=threads, source=source, interop=interop, workers=workers, cpus=cpus,
                      variant=rec.variant if rec is not None else "")
    if hybrid is not None:
        p, e = format_cpulist(hybrid.fast_cpus), format_cpulist(hybrid.slow_cpus)
        plan.variant = "performance cores"
        plan.worker_cpus = hybrid.slow_cpus if workers and hybrid.slow_cpus else None
        plan.notes.append(
            f"hybrid CPU: the compute threads are pinned to the {hybrid.fast_cores} performance cores (CPUs {p}), "
            f"one thread each, and the {hybrid.slow_cores} efficiency cores (CPUs {e}) are left to DataLoader "
            "workers and the desktop. OpenMP gives every thread an equal share of each operator, so a thread on "
            "an efficiency core would make the others wait at every barrier (TOPO003). The thread sweep measures "
            "P-cores against all cores; its result replaces this plan")
    if reserved:
        plan.notes.append(f"{plural(reserved, 'core')} left to the DataLoader "
                          f"{'worker' if reserved == 1 else 'workers'}: compute threads = usable cores minus workers")
    if workers == 0:
        plan.notes.append("no CPU is left over for DataLoader workers: load data in the main process "
                          "(num_workers=0) or give up one compute thread per worker")
    return plan


# ---------------------------------------------------------------- env exports

def thread_env(report: Report, plan: ThreadPlan | None = None, *, pinned: bool = False) -> dict[str, str]:
    """The environment variables to set, in the order to show them."""
    plan = plan or thread_plan(report)
    n = str(plan.threads)
    out = {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n}
    if pinned:
        out["OMP_PLACES"] = "cores"
        out["OMP_PROC_BIND"] = "close"
    return out


def _quote_ps(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def export_lines(env: dict[str, str], shell: str = "bash") -> str:
    """``env`` as commands for ``shell`` (bash, zsh, fish, powershell, cmd)."""
    shell = normalise_shell(shell)
    lines = []
    for name, value in env.items():
        if shell in ("bash", "zsh"):
            lines.append(f"export {name}={shlex.quote(value)}")
        elif shell == "fish":
            lines.append(f"set -gx {name} {shlex.quote(value)}")
        elif shell == "powershell":
            lines.append(f"$env:{name} = {_quote_ps(value)}")
        else:  # cmd: no quoting; the value must not contain & | < > ^
            lines.append(f"set {name}={value}")
    return "\n".join(lines)


def unset_lines(names: list[str], shell: str = "bash") -> str:
    shell = normalise_shell(shell)
    out = []
    for name in names:
        if shell in ("bash", "zsh"):
            out.append(f"unset {name}")
        elif shell == "fish":
            out.append(f"set -e {name}")
        elif shell == "powershell":
            out.append(f"Remove-Item Env:{name} -ErrorAction SilentlyContinue")
        else:
            out.append(f"set {name}=")
    return "\n".join(out)


def normalise_shell(shell: str) -> str:
    s = shell.strip().lower().replace(".exe", "")
    s = {"pwsh": "powershell", "ps": "powershell", "sh": "bash", "cmd.exe": "cmd"}.get(s, s)
    if s not in SHELLS:
        raise ValueError(f"unknown shell {shell!r}; choose one of {', '.join(SHELLS)}")
    return s


def inherited_env(report: Report) -> dict[str, str] | None:
    """The thread variables of the report's environment; None when the report cannot know them (a captured tree)."""
    sw = report.software
    if sw is None or sw.captured:
        return None
    return dict(sw.thread_env)


def binding_vars_set(report: Report) -> list[str]:
    """OpenMP binding variables set in the report's environment (they override any CPU set a launch asks for)."""
    env = inherited_env(report)
    return [v for v in pinning.AFFINITY_VARS if env and v in env]


def clean_launch(names: list[str], command: str = "python train.py") -> str:
    """``command`` run without the variables ``names`` (``env -u ...``), for one run without editing the profile."""
    prefix = pinning.env_unset(names)
    return f"{prefix} {command}" if prefix else command


def shell_exports(report: Report, shell: str = "bash", *, pinned: bool = False) -> str:
    """The thread exports, headed by where the number comes from; the pinned launch too when the plan pins.

    Binding variables set in the report's environment are unset first (unless
    ``pinned`` sets them): left over, they pin every thread to their CPUs
    whatever count is exported here.
    """
    plan = thread_plan(report)
    comment = "#" if normalise_shell(shell) != "cmd" else "rem"
    head = f"{comment} {plural(plan.threads, 'thread')}: {plan.source}"
    clear = [v for v in binding_vars_set(report) if not (pinned and v in ("OMP_PLACES", "OMP_PROC_BIND"))]
    text = head + "\n" + (unset_lines(clear, shell) + "\n" if clear else "")
    text += export_lines(thread_env(report, plan, pinned=pinned), shell)
    target = _best_target(report, plan)
    if target is not None:
        # The count is meant for these CPUs: the same threads spread over every core would run at the slowest one's pace.
        launch = translate(pinned_command(report, target), shell)
        text += (f"\n{comment} and launch pinned to {target.label}:"
                 + "".join(f"\n{comment} {line}" for line in launch.splitlines()))
    return text


# ---------------------------------------------------------------- Python

def python_settings(report: Report) -> str:
    """torch thread settings and a DataLoader line with this machine's numbers."""
    plan = thread_plan(report)
    lines = ["import os", ""] if plan.worker_cpus else []
    if plan.worker_cpus:
        # taskset pins the main process, and forked workers inherit its CPUs: move them to the E-cores.
        lines += [
            "import torch",
            "",
            f"EFFICIENCY_CORES = {{{', '.join(map(str, plan.worker_cpus))}}}  # CPUs {format_cpulist(plan.worker_cpus)}",
            "",
            "",
            "def to_efficiency_cores(worker_id):",
            "    # DataLoader workers inherit the launch's pinning to the performance cores; run them on the E-cores",
            "    if hasattr(os, \"sched_setaffinity\"):  # Linux",
            "        os.sched_setaffinity(0, EFFICIENCY_CORES)",
            "",
            "",
        ]
    else:
        lines += ["import torch", ""]
    lines += [
        f"torch.set_num_threads({plan.threads})  # intra-op: {plan.source}",
        f"torch.set_num_interop_threads({plan.interop})  # call before any parallel work, once per process",
        "",
        "loader = torch.utils.data.DataLoader(",
        "    dataset, batch_size=64, shuffle=True,",
        f"    num_workers={plan.workers},"
        + ("  # spare CPUs beside the compute threads" if plan.workers else "  # no spare CPU: load in the main process"),
    ]
    if plan.workers:
        lines.append("    persistent_workers=True,  # do not re-fork workers every epoch")
    if plan.workers and plan.worker_cpus:
        lines.append("    worker_init_fn=to_efficiency_cores,")
    lines.append("    pin_memory=False,  # pinned memory only speeds up copies to a GPU")
    lines.append(")")
    return "\n".join(lines)


# ---------------------------------------------------------------- pinning

@dataclass
class PinTarget:
    """One place to pin a job: a CCX (L3 domain) or a NUMA node, with its CPUs."""

    kind: str          # "ccx" | "numa" | "cpus"
    index: int         # L3 domain index or NUMA node id
    cpus: list[int]
    label: str


def _cpus_label(cpus: list[int], limit: int = 40) -> str:
    """CPUs for a comment: ``CPUs 0-15``, or ``40 CPUs: 0-78 step 2`` for long interleaved sets."""
    text = format_cpulist(cpus)
    if len(text) <= limit or len(cpus) < 3:
        return f"CPUs {text}"
    stride = cpus[1] - cpus[0]
    if stride > 1 and all(b - a == stride for a, b in itertools.pairwise(cpus)):
        return f"{len(cpus)} CPUs: {cpus[0]}-{cpus[-1]} step {stride}"
    return f"CPUs {text}"


def pin_targets(report: Report) -> list[PinTarget]:
    """NUMA nodes (when more than one) and L3 domains (when more than one), usable CPUs only.

    An L3 domain with exactly the CPUs of a NUMA node is listed once, as the node.
    """
    topo = report.topology
    usable = set(report.topology.affinity.allowed_cpus or topo.online_cpus or [])
    out: list[PinTarget] = []
    listed: set[tuple[int, ...]] = set()
    nodes = [n for n in topo.numa_nodes if n.cpus]
    if len(nodes) > 1:
        for n in nodes:
            cpus = sorted(set(n.cpus) & usable) if usable else sorted(n.cpus)
            if cpus:
                out.append(PinTarget("numa", n.id, cpus, f"NUMA node {n.id} ({_cpus_label(cpus)})"))
                listed.add(tuple(cpus))
    if len(topo.l3_domains) > 1:
        for i, d in enumerate(topo.l3_domains):
            cpus = sorted(set(d.cpus) & usable) if usable else sorted(d.cpus)
            if cpus and tuple(cpus) not in listed:  # an L3 per NUMA node (Kunpeng): list it once
                size = f", {cache_size(d.size_bytes)} L3" if d.size_bytes else ""
                zen = (report.cpu.microarchitecture or "").startswith("zen")   # CCX is a Zen term, not K10's
                what = f"L3 domain {i} / CCX" if zen and report.cpu.vendor in ("AMD", "Hygon") else f"L3 domain {i}"
                out.append(PinTarget("ccx", i, cpus, f"{what} ({_cpus_label(cpus)}{size})"))
    return out


def pinned_command(report: Report, target: PinTarget, command: str = "python train.py") -> str:
    """A one-line launch pinned to ``target``: numactl for a NUMA node (CPUs and memory), else taskset.

    The text comes from the shared pinning generator, so the topology map, the
    inspector and the advisor print the same commands.
    """
    plan = pinning.pinning_plan(target.cpus, report.topology, command, environ=inherited_env(report), posix=True)
    return plan.snippet(_pin_kind(report, target, plan)).text


def _pin_kind(report: Report, target: PinTarget, plan: pinning.PinningPlan) -> str:
    whole_node = plan.whole_numa_nodes and len([n for n in report.topology.numa_nodes if n.cpus]) > 1
    return "numactl" if target.kind == "numa" or whole_node else "taskset"


def _pinning_prefix(report: Report, target: PinTarget) -> str:
    """The ``numactl ...``/``taskset ...`` part alone, for scripts that set the env themselves."""
    plan = pinning.pinning_plan(target.cpus, report.topology, posix=True)
    return plan.snippet(_pin_kind(report, target, plan)).prefix


# Launches listed per snippet: the largest real machines have a few dozen NUMA nodes and L3 domains together;
# a topology with thousands (a damaged or made-up capture) once took the advisor minutes and said nothing more.
MAX_LAUNCHES = 64
# ... and characters: a node's CPUs scattered one by one make a taskset list kilobytes long, and 64 of them a
# 147 kB snippet, more than a saved report may hold in a field (the report could not be read back).
MAX_LAUNCH_CHARS = 16_384


def pinned_launches(report: Report, command: str = "python train.py") -> str:
    """One pinned launch per NUMA node and per CCX, commented; empty when there is one of each."""
    return launch_lines(report, pin_targets(report), command)


def launch_lines(report: Report, targets: list[PinTarget], command: str = "python train.py") -> str:
    """A commented pinned launch per target, at most :data:`MAX_LAUNCHES` and :data:`MAX_LAUNCH_CHARS` of them,
    then how many more; empty for no target. Every snippet listing launches per place goes through here."""
    if not targets:
        return ""
    lines: list[str] = []
    size = shown = 0
    for t in targets[:MAX_LAUNCHES]:
        pair = [f"# {t.label}", pinned_command(report, t, command)]
        added = sum(len(line) + 1 for line in pair)
        if shown and size + added > MAX_LAUNCH_CHARS:
            break
        lines += pair
        size += added
        shown += 1
    if len(targets) > shown:
        lines.append(f"# ... and {len(targets) - shown:,} more NUMA nodes and L3 domains: the same launch "
                     "with their CPUs")
    return "\n".join(lines)


# ---------------------------------------------------------------- installs

# pip distribution -> conda package (the pytorch and conda-forge channels call PyTorch "pytorch")
CONDA_NAMES = {"torch": "pytorch", "torchvision": "torchvision", "torchaudio": "torchaudio"}


def install_commands(report: Report, *, manager: str | None = None) -> str:
    """Install (or replace with) the CPU build of PyTorch, for this OS, Python and the tool that installed it.

    In a conda environment PyTorch may have come from conda (package
    ``pytorch``, with the ``pytorch-cuda`` meta-package for a CUDA build) or
    from pip (``torch``): the dist-info INSTALLER file says which, and the
    commands follow it. Without that record a conda env is assumed to use conda.
    """
    sw = report.software
    platform = torch_install.platform_of(report)
    system = platform.os_name
    env_kind = sw.python.env_kind if sw else None
    torch_pkg = next((p for p in sw.packages if p.name.lower() == "torch"), None) if sw else None
    installer = torch_pkg.installer if torch_pkg is not None else None
    if manager is None:
        manager = "conda" if env_kind == "conda" and installer in (None, "conda") else "pip"
    pkgs = ["torch"]
    if sw is not None:
        names = {p.name.lower() for p in sw.packages}
        pkgs += [p for p in ("torchvision", "torchaudio") if p in names]
    py = "py -m pip" if system == "Windows" else "python -m pip"
    lines: list[str] = []
    build = machine.torch_build(Facts(report)) if sw else None
    if manager == "conda":
        conda_pkgs = [CONDA_NAMES[p] for p in pkgs]
        if build == "cuda":
            lines.append(f"conda remove --yes {' '.join(conda_pkgs)} pytorch-cuda")
        elif build == "rocm":
            lines.append(f"conda remove --yes {' '.join(conda_pkgs)}")
        lines.append("conda install --yes -c conda-forge pytorch-cpu" + (" torchvision" if "torchvision" in pkgs else ""))
        return "\n".join(lines)
    if env_kind == "conda":
        lines.append("# PyTorch came from pip in this conda environment: replace it with pip, not conda")
    if build in ("cuda", "rocm"):
        lines.append(f"{py} uninstall -y {' '.join(pkgs)}")
        if build == "cuda" and system != "Windows":
            lines.append(f"{py} list --format=freeze | grep -o '^nvidia-[^=]*' | xargs -r {py} uninstall -y")
        if build == "rocm":
            lines.append(f"{py} uninstall -y pytorch-triton-rocm")
    command = torch_install.pip_install(pkgs, platform, pip=py)
    if not command:
        lines.append(f"# PyTorch publishes no build for {system} on {platform.arch}")
    elif system == "Darwin":
        lines.append(f"{command}  # PyPI's macOS wheels are the CPU/MPS build")
    else:
        lines.append(command)
    return "\n".join(lines)


# ---------------------------------------------------------------- launch script

def report_python(report: Report) -> str | None:
    """The interpreter of the environment ``report`` describes (None: unknown, or a captured tree)."""
    sw = report.software
    if sw is None or sw.captured or sw.python is None:
        return None
    return sw.python.executable or None


def launch_script(report: Report, shell: str = "bash", python: str | None = None) -> str:
    """A complete script to save: thread settings, pinning when it helps, then runs the given command.

    The command runs in ``python`` (default: the interpreter of the environment the report describes; the
    shell's ``python3``/``python`` when unknown); ``$PYTHON`` set when the script runs overrides it.
    """
    shell = normalise_shell(shell)
    python = python or report_python(report)
    plan = thread_plan(report)
    target = _best_target(report, plan)
    cpu = report.cpu.brand or report.cpu.microarchitecture or "this CPU"
    header = [
        f"CPU Doctor {__version__} launch script for {cpu}",
        f"{plan.threads} compute threads: {plan.source}.",
    ]
    if target is not None:
        header.append(f"Pinned to {target.label}.")
        if plan.worker_cpus:
            header += [f"Efficiency cores (CPUs {format_cpulist(plan.worker_cpus)}) are left to DataLoader workers and",
                       "the desktop: OpenMP threads on them would hold back every barrier (TOPO003)."]
    # No OMP_PLACES/OMP_PROC_BIND: binding pins the main thread at `import torch`, and DataLoader workers
    # forked from it would share one CPU. taskset/numactl keep the job on its CPUs instead.
    env = thread_env(report, plan)
    if target is not None:
        n = str(pinning.pinning_plan(target.cpus, report.topology, posix=True).threads)
        env.update(OMP_NUM_THREADS=n, MKL_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n)
    if python:
        header.append(f"Runs in {python} (the environment the report describes; set PYTHON to change it).")
    if shell in ("bash", "zsh"):
        return _script_posix(shell, header, env, report, target, python or "python3")
    if shell == "fish":
        return _script_fish(header, env, report, target, python or "python3")
    pin = winpin.windows_pin(target.cpus, report.topology) if target is not None else None
    if shell == "powershell":
        return _script_powershell(header, env, pin, python or "python")
    return _script_cmd(header, env, pin, python or "python")


def _best_target(report: Report, plan: ThreadPlan) -> PinTarget | None:
    """Pin when the sweep chose a CPU set or the plan uses a hybrid CPU's P-cores; otherwise no pinning."""
    if plan.cpus:
        if plan.variant == "performance cores":        # the same label as TOPO003's snippet
            return PinTarget("cpus", 0, plan.cpus, f"performance cores (CPUs {format_cpulist(plan.cpus)})")
        return PinTarget("cpus", 0, plan.cpus, f"CPUs {format_cpulist(plan.cpus)} ({plan.variant or 'thread sweep'})")
    return None


def _script_posix(shell: str, header: list[str], env: dict[str, str], report: Report, target: PinTarget | None,
                  python: str = "python3") -> str:
    lines = [f"#!/usr/bin/env {shell}"]
    lines += [f"# {h}" for h in header]
    lines += [
        "# Usage: ./launch" + SCRIPT_SUFFIX[shell] + " train.py [args...]",
        "set -eu",
        'if [ "$#" -eq 0 ]; then',
        '  echo "usage: $0 SCRIPT.py [ARGS...]" >&2',
        "  exit 2",
        "fi",
        "# Inherited OpenMP binding would override the CPU set and pin the main thread (and its workers) to one CPU",
        unset_lines(list(pinning.AFFINITY_VARS), shell),
        export_lines(env, shell),
        f'if [ -z "${{PYTHON:-}}" ]; then PYTHON={shlex.quote(python)}; fi',
    ]
    if target is not None:
        prefix = _pinning_prefix(report, target)
        lines.append(f'exec {prefix} "$PYTHON" "$@"')
    else:
        alternatives = pinned_launches(report, 'python3 "$@"')
        if alternatives:
            lines.append("# Alternatives: one job per NUMA node or L3 domain (run the thread sweep to compare):")
            lines += ["#   " + line.lstrip("# ") for line in alternatives.splitlines()]
        lines.append('exec "$PYTHON" "$@"')
    return "\n".join(lines) + "\n"


def _script_fish(header: list[str], env: dict[str, str], report: Report, target: PinTarget | None,
                 python: str = "python3") -> str:
    lines = ["#!/usr/bin/env fish"]
    lines += [f"# {h}" for h in header]
    lines += [
        "# Usage: ./launch.fish train.py [args...]",
        "if test (count $argv) -eq 0",
        # fish substitutes (status filename) outside quotes only
        '    echo "usage: "(status filename)" SCRIPT.py [ARGS...]" >&2',
        "    exit 2",
        "end",
        unset_lines(list(pinning.AFFINITY_VARS), "fish"),
        export_lines(env, "fish"),
        f"set -q PYTHON; or set PYTHON {shlex.quote(python)}",
    ]
    prefix = (_pinning_prefix(report, target) + " ") if target is not None else ""
    lines.append(f"exec {prefix}$PYTHON $argv")
    return "\n".join(lines) + "\n"


def _script_powershell(header: list[str], env: dict[str, str], pin: winpin.WindowsPin | None,
                       python: str = "python") -> str:
    lines = [f"# {h}" for h in header]
    lines += [f"# {n}" for n in (pin.notes if pin is not None else [])]
    lines += [
        "# Usage: .\\launch.ps1 train.py [args...]",
        "if ($args.Count -eq 0) { Write-Error 'usage: launch.ps1 SCRIPT.py [ARGS...]'; exit 2 }",
        unset_lines(list(pinning.AFFINITY_VARS), "powershell"),
        export_lines(env, "powershell"),
        f"$python = if ($env:PYTHON) {{ $env:PYTHON }} else {{ {_quote_ps(python)} }}",
    ]
    if pin is not None and pin.node is None and pin.absolute_mask is not None:
        lines += [
            "$p = Start-Process -FilePath $python -ArgumentList $args -NoNewWindow -PassThru",
            f"$p.ProcessorAffinity = [IntPtr]0x{pin.absolute_mask:X}",
            "$p.WaitForExit()",
            "exit $p.ExitCode",
        ]
    elif pin is not None and (pin.node is not None or pin.mask is not None):
        # Start-Process cannot choose a processor group or NUMA node; cmd's start can
        lines += [f"cmd /c \"start `\"`\" /b /wait {pin.start_switches()} `\"$python`\" $args\"",
                  "exit $LASTEXITCODE"]
    else:
        lines += ["& $python @args", "exit $LASTEXITCODE"]
    return "\n".join(lines) + "\n"


def _script_cmd(header: list[str], env: dict[str, str], pin: winpin.WindowsPin | None, python: str = "python") -> str:
    lines = ["@echo off"]
    lines += [f"rem {h}" for h in header]
    lines += [f"rem {n}" for n in (pin.notes if pin is not None else [])]
    lines += [
        "rem Usage: launch.cmd train.py [args...]",
        'if "%~1"=="" (echo usage: %~nx0 SCRIPT.py [ARGS...] 1>&2 & exit /b 2)',
        "setlocal",
        *unset_lines(list(pinning.AFFINITY_VARS), "cmd").splitlines(),
        *export_lines(env, "cmd").splitlines(),
        f'if not defined PYTHON set "PYTHON={python}"',
    ]
    switches = pin.start_switches() if pin is not None else ""
    if switches:
        lines.append(f'start "" /b /wait {switches} "%PYTHON%" %*')
    else:
        lines.append('"%PYTHON%" %*')
    lines.append("exit /b %ERRORLEVEL%")
    return "\r\n".join(lines) + "\r\n"


# ---------------------------------------------------------------- shell translation

_EXPORT_RE = re.compile(r"^(\s*)export\s+(.+)$")
_UNSET_RE = re.compile(r"^(\s*)unset\s+(.+)$")
_ASSIGN_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=('(?:[^']*)'|\"(?:[^\"]*)\"|\S*)")
_ONE_RUN_RE = re.compile(r"^\s*#\s*or for one run\b")


def _already_cleared(following: list[str], cleared: set[str]) -> bool:
    """True when the next line is a launch that only removes variables the snippet already removed."""
    launch = parse_launch(following[0]) if following else None
    return launch is not None and bool(launch.unset) and set(launch.unset) <= cleared


def translate(snippet: str, shell: str, topology: Topology | None = None) -> str:
    """Rewrite a bash snippet's ``export``/``unset`` lines, comments and pinned launches for ``shell``.

    fish runs ``taskset``/``numactl`` as they are; PowerShell and cmd get the
    Windows equivalents of a pinned launch (:func:`windows_launch`: ``start
    /affinity``, ``start /node``, ``ProcessorAffinity``). Lines with command
    substitutions or pipes are left alone. The finding view calls it for the shell a surface asks
    for (:mod:`cpudoctor.render.finding_view`); ``topology`` (the report's) makes Windows CPU numbers
    and processor groups exact.

    A Windows shell forgets a variable for the rest of the session, not for one command: after
    ``unset X``, the bash idiom's second way (``# or for one run:`` then ``env -u X CMD``) is just the
    command there, so it is written once, without the repeated removal.
    """
    shell = normalise_shell(shell)
    if shell in ("bash", "zsh"):
        return snippet
    out = []
    cleared: set[str] = set()
    lines = snippet.splitlines()
    for i, line in enumerate(lines):
        m = _EXPORT_RE.match(line)
        if m and _ASSIGN_RE.search(m.group(2)) and "$(" not in line and "`" not in line:
            env = {k: v.strip("'\"") for k, v in _ASSIGN_RE.findall(m.group(2))}
            out += [m.group(1) + s for s in export_lines(env, shell).splitlines()]
            continue
        m = _UNSET_RE.match(line)
        if m:
            names = m.group(2).split()
            out += [m.group(1) + s for s in unset_lines(names, shell).splitlines()]
            if shell in ("powershell", "cmd"):
                cleared.update(names)
            continue
        if shell in ("powershell", "cmd") and _ONE_RUN_RE.match(line) and _already_cleared(lines[i + 1:], cleared):
            continue                        # the session has no such variable any more: the command follows as is
        if shell == "cmd" and line.lstrip().startswith("#"):
            out.append(line.replace("#", "rem", 1))
            continue
        if shell in ("powershell", "cmd"):
            launch = parse_launch(line)
            if launch is not None:
                indent = line[: len(line) - len(line.lstrip())]
                out += [indent + s for s in windows_launch(launch, shell, topology, cleared).splitlines()]
                continue
            out += winshell.windows_lines(line, shell)
            continue
        out.append(line)
    return "\n".join(out)


# ---------------------------------------------------------------- the report's own OS

def report_os(report: Report) -> str:
    """``windows``, ``macos`` or ``linux``: the OS the report describes (not the one reading it)."""
    source = report.topology.source
    system = report.software.os.system if report.software is not None else None
    if source == "windows" or system == "Windows":
        return "windows"
    if source == "sysctl" or system == "Darwin":
        return "macos"
    return "linux"


def default_shell(report: Report) -> str:
    """The shell a snippet for this report's machine is written for: PowerShell on Windows, zsh on a Mac."""
    return {"windows": "powershell", "macos": "zsh"}.get(report_os(report), "bash")


def user_shell(report: Report, environ: Mapping[str, str] | None = None, system: str | None = None) -> str:
    """The shell to write snippets in when the user names none (``--shell``'s default).

    A report of a Windows machine gets PowerShell, as does any report read on Windows; elsewhere the
    login shell in ``$SHELL`` when CPU Doctor writes for it (bash, zsh, fish), else the report's OS
    default (:func:`default_shell`). A report of a Linux or Mac machine read on Windows keeps its own
    OS's shell: its commands run there.
    """
    environ = os.environ if environ is None else environ
    system = platform.system() if system is None else system
    if report_os(report) == "windows":
        return "powershell"
    if system == "Windows":
        return default_shell(report)
    login = environ.get("SHELL", "").rstrip("/").rsplit("/", 1)[-1]
    return login if login in ("bash", "zsh", "fish") else default_shell(report)


MACOS_NO_PINNING_LINE = "# macOS cannot pin a process to CPUs: only the thread count applies"


def localize(findings: list[Finding], report: Report) -> list[Finding]:
    """Findings with their bash snippets in the form the report's OS needs, still bash.

    macOS: pinned launches lose their ``taskset``/``numactl`` (there is no CPU affinity on macOS) and
    keep their thread counts. Elsewhere unchanged: the shell a snippet is shown in (PowerShell for a
    Windows machine, the user's ``--shell``) is the finding view's choice
    (:class:`cpudoctor.render.finding_view.ShellChoice`), made when it is shown, never here.
    """
    if report_os(report) != "macos":
        return findings
    return [dataclasses.replace(f, snippet=_unpinned(f.snippet)) if f.snippet_lang == "bash" and f.snippet else f
            for f in findings]


def _unpinned(snippet: str) -> str:
    """A bash snippet with its taskset/numactl launches reduced to their environment and command (macOS)."""
    out: list[str] = []
    for line in snippet.splitlines():
        launch = parse_launch(line)
        if launch is None or (launch.cpus is None and launch.node is None and not launch.memory):
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        if MACOS_NO_PINNING_LINE not in out:
            out.append(indent + MACOS_NO_PINNING_LINE)
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in launch.env.items())
        out.append(indent + " ".join(x for x in (env, shlex.join(launch.command)) if x))
    return "\n".join(out)


# ---------------------------------------------------------------- DataLoader workers

# Pools a DataLoader worker inherits or starts, and each library's own switch to shrink it to one thread.
WORKER_POOL_SWITCHES: dict[str, tuple[str, ...]] = {
    "torch": ("torch.set_num_threads(1)  # torch ops in the worker (its OpenMP pool)",),
    "blas": ("threadpool_limits(1)  # numpy/scipy BLAS (openblas_set_num_threads, MKL_Set_Num_Threads) and OpenMP",),
    "opencv": ("cv2.setNumThreads(1)  # OpenCV's own pool (cv2.getNumThreads() shows it)",),
}


# Each pool's switch in words, for a fix that names them (the snippet holds the calls).
WORKER_POOL_WORDS: dict[str, str] = {"torch": "torch.set_num_threads(1)", "blas": "threadpool_limits(1) for OpenBLAS/MKL",
                                     "opencv": "cv2.setNumThreads(1) for OpenCV"}


def worker_pools(libraries, readable: bool) -> list[str]:
    """The pools a forked worker of a process inherits (keys of :data:`WORKER_POOL_SWITCHES`), from the native
    libraries mapped in it (:class:`~cpudoctor.model.inspection.NativeLib`); BLAS is assumed when the map could
    not be read."""
    pools = ["torch"]
    if any(lib.kind == "blas" for lib in libraries) or not readable:
        pools.append("blas")
    if any(lib.library == "opencv" for lib in libraries):
        pools.append("opencv")
    return pools


def worker_init_snippet(pools: list[str], main_threads: int, workers: int) -> str:
    """A ``worker_init_fn`` that gives each DataLoader worker one thread in every pool named in ``pools``.

    ``pools`` holds keys of :data:`WORKER_POOL_SWITCHES` (torch, blas, opencv):
    each library is limited by its own switch, because ``OMP_NUM_THREADS``
    is read once at load time and does not reach a pool that already exists
    in a forked worker.
    """
    wanted = [p for p in ("torch", "blas", "opencv") if p in pools] or ["torch"]
    lines = ["import torch"]
    if "opencv" in wanted:
        lines.append("import cv2")
    if "blas" in wanted:
        lines.append("from threadpoolctl import threadpool_limits  # pip install threadpoolctl")
    lines += ["", "", "def worker_init_fn(worker_id):",
              "    # Each worker is one CPU's worth of work: one thread in every pool it has."]
    lines += [f"    {line}" for key in wanted for line in WORKER_POOL_SWITCHES[key]]
    lines += ["", "",
              f"torch.set_num_threads({main_threads})  # main process: the usable CPUs minus the workers",
              f"loader = torch.utils.data.DataLoader(dataset, num_workers={workers}, worker_init_fn=worker_init_fn)"]
    return "\n".join(lines) + "\n"


@dataclass
class Launch:
    """A bash launch line taken apart: ``OMP_NUM_THREADS=8 numactl --cpunodebind=1 --membind=1 python train.py``."""

    env: dict[str, str]
    command: list[str]
    cpus: list[int] | None = None          # taskset -c / numactl --physcpubind
    node: int | None = None                # numactl --cpunodebind (one node)
    memory: str = ""                       # what numactl asked of memory: "bind 1", "local", "interleave all"
    unset: list[str] = field(default_factory=list)   # ``env -u NAME``: variables the launch clears first
    nodes: list[int] | None = None         # numactl --cpunodebind over several nodes (``node`` holds one)


_ENV_PREFIX_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_launch(line: str) -> Launch | None:
    """A plain launch line (env assignments, optional taskset/numactl, a command), or None.

    Anything with shell syntax beyond words and quotes (pipes, substitutions,
    redirections, ``&&``) is not a plain launch and is left to the user.
    """
    text = line.strip()
    if not text or text.startswith("#") or any(c in text for c in "|&;<>$`(){}\\") and not _only_braces_in_quotes(text):
        return None
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    unset: list[str] = []
    if words and words[0] == "env":        # ``env -u A -u B CMD``: the clean-environment prefix of pinned launches
        words.pop(0)
        while len(words) >= 2 and words[0] == "-u" and _NAME_RE.match(words[1]):
            unset.append(words[1])
            del words[:2]
        if words and words[0].startswith("-"):
            return None                     # another env option: not a plain launch
    env: dict[str, str] = {}
    while words and _ENV_PREFIX_RE.match(words[0]):
        name, value = _ENV_PREFIX_RE.match(words[0]).groups()
        env[name] = value
        words.pop(0)
    if not words:
        return None
    launch = Launch(env, [], unset=unset)
    from cpudoctor.kits.cpulist import parse_cpulist

    if words[0] == "taskset":
        if len(words) < 4 or words[1] not in ("-c", "--cpu-list"):
            return None
        launch.cpus = parse_cpulist(words[2])
        launch.command = words[3:]
    elif words[0] == "numactl":
        i = 1
        while i < len(words) and words[i].startswith("-"):
            opt, _, value = words[i].partition("=")
            if not value and opt in ("-C", "-N", "-m", "-i") and i + 1 < len(words):
                i += 1
                value = words[i]
            if opt in ("--physcpubind", "-C"):
                launch.cpus = parse_cpulist(value)
            elif opt in ("--cpunodebind", "-N"):
                nodes = parse_cpulist(value)
                if not nodes:
                    return None
                if len(nodes) == 1:
                    launch.node = nodes[0]
                else:
                    launch.nodes = nodes             # several: Windows pins to their CPUs (windows_launch)
            elif opt in ("--membind", "-m"):
                launch.memory = f"bind {value}"
            elif opt in ("--localalloc", "-l"):
                launch.memory = "local"
            elif opt in ("--interleave", "-i"):
                launch.memory = f"interleave {value}"
            else:
                return None
            i += 1
        launch.command = words[i:]
    elif env or unset:
        launch.command = words
    else:
        return None                                  # a plain command: the same in every shell
    if not launch.command or (launch.cpus is None and launch.node is None and not launch.nodes
                              and words[0] in ("taskset", "numactl") and not launch.memory):
        return None
    return launch


def _only_braces_in_quotes(text: str) -> bool:
    """True when the only special characters are inside quotes (``OMP_PLACES="{0,1}:4"``)."""
    out, quote = [], ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
            continue
        if ch in "'\"":
            quote = ch
            continue
        out.append(ch)
    return not any(c in "".join(out) for c in "|&;<>$`(){}\\")


def windows_launch(launch: Launch, shell: str, topology: Topology | None = None,
                   cleared: set[str] | None = None) -> str:
    """The Windows way to run a pinned launch: ``start /affinity HEX`` / ``start /node N`` in cmd,
    ``Start-Process`` then ``ProcessorAffinity`` in PowerShell; variables set (and cleared) first.

    With the report's ``topology`` the CPU numbers are Windows' own and processor groups are
    respected (:mod:`cpudoctor.advisor.winpin`); without it CPUs 0-63 are group 0.
    ``cleared``: variables an earlier line of the same snippet already removed (a Windows
    shell forgets them for the whole session, unlike ``env -u`` for one command).
    """
    comment = "rem" if shell == "cmd" else "#"
    unset = [v for v in launch.unset if cleared is None or v not in cleared]
    if cleared is not None:
        cleared.update(unset)
    lines = unset_lines(unset, shell).splitlines() if unset else []
    lines += export_lines(launch.env, shell).splitlines() if launch.env else []
    cpus, notes = launch.cpus, []
    if launch.nodes and cpus is None:
        # ``start /node`` takes one node: several nodes become the affinity of their CPUs.
        known = {n.id: n.cpus for n in (topology.numa_nodes if topology is not None else [])}
        if all(known.get(n) for n in launch.nodes):
            cpus = sorted({c for n in launch.nodes for c in known[n]})
        else:
            notes.append(f"{comment} the CPUs of NUMA nodes {format_cpulist(launch.nodes)} are unknown here and "
                         "start /node takes one node: run one process per node, each with start /node N")
    pin = winpin.windows_pin(cpus, topology, node=launch.node)
    notes += [f"{comment} {n}" for n in pin.notes]
    if cpus and pin.mask is None and pin.node is None and not notes:
        notes.append(f"{comment} CPUs {format_cpulist(cpus)} reach past CPU 63: a Windows affinity mask covers "
                     "one processor group of 64; pin to a NUMA node with start /node instead")
    if launch.memory and launch.node is None:
        notes.append(f"{comment} numactl's memory placement ({launch.memory}) has no Windows switch: memory comes "
                     "from the node of the CPU that first touches it, which pinning keeps local")
    if shell == "cmd":
        if pin.mask is None and pin.node is None:
            return "\n".join(lines + notes + [subprocess_line(launch.command)])
        return "\n".join(lines + notes + [winpin.cmd_launch(launch.command, pin)])
    return "\n".join(lines + notes + winpin.powershell_launch(launch.command, pin))


def subprocess_line(words: list[str]) -> str:
    """Words back into one Windows command line (double quotes where a word has a space)."""
    return " ".join(f'"{w}"' if " " in w else w for w in words)
