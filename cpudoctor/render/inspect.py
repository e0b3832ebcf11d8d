"""A process inspection (``cpudoctor inspect``) as text: the CLI's output and the Inspector's copy text.

Doctor-style: one block of facts per line (CPU, threads, libraries,
environment, children, memory), a table of the busiest threads, then the
process findings with the same marks as ``cpudoctor doctor``. Also the words
the inspector's facts need: why a process could not be inspected
(:func:`inspect_error_text`), why a file of it could not be read and what to do
(:func:`read_problem_text`), and the thread labels of the topology map
(:func:`thread_markers`).
"""

from __future__ import annotations

import os
import re

from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.kits.escape import shell_quote
from cpudoctor.kits.format import or_unknown, percent, size, wrap
from cpudoctor.render import job_findings
from cpudoctor.render.words import DASH, plural
from cpudoctor.model.inspection import Inspection, ReadProblem, ThreadInfo, ThreadPlace

MAX_THREAD_ROWS = 24


def _mib(n: int | None) -> str:
    return size(n, '?')


def _opt(v: object) -> str:
    return or_unknown(v, "-")


def shown_python(path: str | None) -> str | None:
    """The interpreter as inspect shows it (text and JSON): a home folder as ``~``, like the command line."""
    from cpudoctor.probes.process.procfs import redact_paths

    return redact_paths(path) if path else path


_OTHER_HOME = re.compile(r"(?:/home|/Users|/var/home)/([A-Za-z0-9._-]{1,64})/(.+)", re.DOTALL)


def python_word(path: str) -> str:
    """The interpreter as one shell word for a suggested command: the real file (controls quoted as bytes),
    with the home folder written ``~/`` so no home path is printed. Another user's home is scrubbed like every
    other path (``~alice/`` named the user in a pasted inspection): ``~/`` too."""
    home = os.path.expanduser("~").rstrip("/")
    if home and path.startswith(home + "/"):
        return "~/" + shell_quote(path[len(home) + 1:])
    m = _OTHER_HOME.fullmatch(path)
    if m:
        return "~/" + shell_quote(m.group(2))
    return shell_quote(path)


def library_name(library: str) -> str:
    """A recognised native library's name (resources/native_libs.json's label): ``GNU OpenMP (libgomp)``."""
    from cpudoctor.knowledge import NATIVE_LIBS

    return next((e["label"] for e in NATIVE_LIBS.data["libraries"] if e["id"] == library), library)


def denied_hint(pid: int, uid: int | None, command: str | None = None, me: int | None = None) -> str:
    """Why /proc/PID/environ and maps were refused, and what to do (the owner decides which).

    ``command`` (the CLI's own command line) makes the sudo advice copy-pastable;
    ``me``: CPU Doctor's effective uid (this process's by default).
    """
    if me is None and hasattr(os, "geteuid"):
        me = os.geteuid()
    if uid is not None and me is not None and uid == me:
        # Same user (or root) and still refused: ptrace access rules, not file ownership.
        todo = ("give the container CAP_SYS_PTRACE or check /proc/sys/kernel/yama/ptrace_scope" if me == 0
                else f"run `sudo {command}`" if command else "run CPU Doctor with sudo")
        return (f"it runs as your user (uid {uid}) but the kernel's ptrace rules hide it (a non-dumpable "
                f"process, Yama ptrace_scope, or a container without CAP_SYS_PTRACE); {todo}")
    owner = f" (uid {uid})" if uid is not None else ""
    if command:
        return f"it belongs to another user{owner}; run `sudo {command}` or run it as that user"
    return f"it belongs to another user{owner}; run CPU Doctor as that user or with sudo to see it"


def read_problem_text(problem: ReadProblem | None, what: str, insp: Inspection) -> str:
    """``cannot read the environment of process 42: permission denied - it belongs to another user ...``."""
    if problem is None:
        return f"cannot read the {what} of process {insp.pid}"
    if problem.problem == "denied":
        return f"cannot read the {what} of process {insp.pid}: permission denied - {denied_hint(insp.pid, insp.uid)}"
    if problem.problem == "gone":
        return f"cannot read the {what} of process {insp.pid}: the process exited (or /proc lacks the file)"
    return f"cannot read the {what} of process {insp.pid} ({problem.detail or 'unreadable'})"


def env_problem_text(insp: Inspection) -> str:
    return read_problem_text(insp.env_problem, "environment", insp)


def libraries_problem_text(insp: Inspection) -> str:
    return read_problem_text(insp.libraries_problem, "loaded libraries", insp)


def inspection_notes(insp: Inspection) -> list[str]:
    """What the reader must know about the window: the inspector's notes, an early exit, unreadable files."""
    out = []
    if insp.status == "exited":
        out.append(f"process {insp.pid} exited {insp.exited_after_s or 0:.1f} s into the window: the figures cover "
                   f"only the {insp.window_s or 0:.1f} s before it ended")
    if not insp.env_readable and insp.env_problem is not None:
        out.append(env_problem_text(insp))
    if not insp.libraries_readable and insp.libraries_problem is not None:
        out.append(libraries_problem_text(insp))
    return out + list(insp.notes)


def inspect_error_text(exc, list_hint: str = "pick one from `cpudoctor inspect --list`") -> str:
    """Why a process could not be inspected at all, in one line (``exc``: an InspectError); ``list_hint`` says
    where the user picks another process (the window's list is right above, the terminal has --list)."""
    pid, kind, detail = exc.pid, exc.kind, exc.detail
    return {
        "not_a_pid": f"{pid} is not a process ID (give a positive number)",
        "no_proc": f"no /proc under {detail}: process inspection needs Linux",
        "denied": f"process {pid} cannot be read: permission denied; run CPU Doctor as its owner or with sudo",
        "no_such_process": f"no process with PID {pid} (it may have exited); {list_hint}",
        "unreadable_stat": f"process {pid}: unreadable stat ({detail})",
        "zombie": f"process {pid} has already exited (zombie waiting for its parent)",
        "kernel_thread": f"process {pid} is a kernel thread, not a program",
        "no_tasks": (f"cannot list the threads of process {pid} (/proc/{pid}/task is unreadable: a hardened /proc "
                     "mount or a sandbox)"),
        "exited": f"process {pid} exited before it could be sampled",
    }.get(kind, f"process {pid} cannot be inspected ({kind}{': ' + detail if detail else ''})")


def thread_markers(places: list[ThreadPlace] | list[ThreadInfo], busy_only: bool = False,
                   busy_percent: float = 25.0) -> tuple[dict[int, list[str]], dict[int, float]]:
    """Thread labels per CPU (busiest first) and the process's CPU% per CPU, for the topology map."""
    labels: dict[int, list[tuple[float, str]]] = {}
    load: dict[int, float] = {}
    for p in places:
        cpu = p.cpu if isinstance(p, ThreadPlace) else p.last_cpu
        if cpu is None:
            continue
        pct = p.cpu_percent
        if busy_only and (pct or 0.0) < busy_percent:
            continue
        text = f"{p.name} {p.tid}" + (f" ({percent(pct)})" if pct is not None else "")
        labels.setdefault(cpu, []).append((pct or 0.0, text))
        load[cpu] = min(100.0, load.get(cpu, 0.0) + (pct or 0.0))
    return ({cpu: [t for _, t in sorted(items, key=lambda x: -x[0])] for cpu, items in sorted(labels.items())},
            load)


# /proc/<pid>/task/<tid>/stat states, in words (proc(5))
THREAD_STATES = {"R": "running", "S": "sleeping", "D": "waiting on I/O", "T": "stopped", "t": "traced",
                 "Z": "zombie", "X": "dead", "I": "idle", "P": "parked", "W": "waking"}


def state_text(state: str | None) -> str:
    if not state:
        return DASH
    word = THREAD_STATES.get(state)
    return f"{word} ({state})" if word else state


def render_list(entries, left_out: int = 0, busy_percent: float = 5.0) -> str:
    """The processes to pick from (Python ones and busy ones first); ``left_out``: how many idle others were not
    listed, said in a last line with the option that lists them."""
    lines = [f"{'PID':>7}  {'CPU%':>6}  {'THR':>4}  {'RSS':>9}  COMMAND"]
    for e in entries:
        lines.append(f"{e.pid:>7}  {percent(e.cpu_percent, '?'):>6}  {_opt(e.threads):>4}  {_mib(e.rss_bytes):>9}  "
                     f"{e.cmdline[:100]}")
    if len(lines) == 1:
        lines.append("(no Python process and no busy one)" if left_out else "(no processes found)")
    if left_out:
        lines.append(f"{plural(left_out, 'other process', 'other processes')} (not Python, under "
                     f"{percent(busy_percent)} CPU) not listed: --all lists them")
    return "\n".join(lines)


# How the inspector found a process's interpreter (Inspection.python_found_by), in words.
_FOUND_BY = {"maps": "loaded libraries", "VIRTUAL_ENV": "$VIRTUAL_ENV", "CONDA_PREFIX": "$CONDA_PREFIX",
             "argv[0]": "command line", "exe": "executable"}


def render_json(insp: Inspection, findings) -> str:
    """``cpudoctor inspect --format json``: the inspection's facts, with the words a reader needs beside them
    (each library's name, the notes, the breakdown's verdict), and the findings as ``doctor`` writes them."""
    from cpudoctor.model.report import json_text
    from cpudoctor.model.serde import to_data
    from cpudoctor.render.run_report import breakdown_data

    data = to_data(insp)
    data["python"] = shown_python(insp.python)       # ~ for a home folder, as everywhere else in inspect
    for lib in data["libraries"]:
        lib["label"] = library_name(lib["library"])
    data["notes"] = inspection_notes(insp)
    from cpudoctor.render.job_state import OUTSIDE

    data["state"] = {"read": False, "why_not": OUTSIDE}
    if insp.time is not None:
        data["time"] = breakdown_data(insp.time)
    return json_text({"kind": "cpudoctor-inspection", "inspection": data, "findings": to_data(findings)})


def render_text(insp, findings) -> str:
    """A doctor-style plain-text page for one inspection (CLI output and the GUI's copy text)."""
    out: list[str] = []
    out.append(f"Process {insp.pid} ({insp.name or '?'})  {insp.cmdline or ''}".rstrip())
    status = "exited during the window: partial data" if insp.status == "exited" else "running"
    out.append(f"  sampled {insp.window_s or 0:.1f} s ({insp.samples} samples), {status}")
    aff = format_cpulist(insp.affinity) if insp.affinity else "unknown"
    quota = f"cgroup quota {insp.cpu_quota:g} CPUs" if insp.cpu_quota else "no cgroup CPU quota"
    out.append(f"CPU          {percent(insp.cpu_percent, '?')} (100 % = one CPU) of {_opt(insp.usable_cpus)} usable CPUs "
               f"(affinity {aff}; {quota}); nice {_opt(insp.nice)}")
    busy = sum(1 for t in insp.threads if (t.cpu_percent or 0) >= 25)
    wait = "?" if insp.wait_percent is None else f"{insp.wait_percent / 100:.2f} s/s"
    out.append(f"Threads      {_opt(insp.num_threads)} ({busy} busy); runnable {_opt(insp.runnable_mean)} avg / "
               f"{_opt(insp.runnable_max)} peak; run-queue wait {wait}; migrations {_opt(insp.migrations)}")
    rows = sorted(insp.threads, key=lambda t: -(t.cpu_percent or 0))
    out.append(f"  {'TID':>7}  {'NAME':<16} {'CPU%':>5}  {'CPU':>4}  {'CCX':>3}  {'NUMA':>4}  {'MOVES':>5}  "
               f"{'WAIT%':>5}  STATE")
    for t in rows[:MAX_THREAD_ROWS]:
        out.append(f"  {t.tid:>7}  {t.name[:16]:<16} {percent(t.cpu_percent, '?'):>5}  {_opt(t.last_cpu):>4}  "
                   f"{_opt(t.l3):>3}  {_opt(t.numa):>4}  {t.migrations:>5}  "
                   f"{percent(t.wait_percent, '?'):>5}  {t.state}")
    if len(rows) > MAX_THREAD_ROWS:
        rest = rows[MAX_THREAD_ROWS:]
        out.append(f"  ... {len(rest)} more threads using {percent(sum(t.cpu_percent or 0 for t in rest), '?')} together")
    if insp.libraries_readable:
        libs = [f"{library_name(lib.library)}: {lib.file}" + (f" [{lib.origin}]" if lib.origin else "") for lib in insp.libraries]
        libs = libs or ["none of the known OpenMP/BLAS/oneDNN/allocator libraries"]
        # One library a line: five of them on one line ran past 300 columns.
        out.append(f"Libraries    {libs[0]}")
        out.extend(f"             {lib}" for lib in libs[1:])
    else:
        out.append(f"Libraries    unknown: {libraries_problem_text(insp)}")
    if insp.env_readable:
        env = " ".join(f"{k}={v}" for k, v in insp.env.items()) or "no thread variables set (library defaults)"
        out.append(f"Environment  {env}")
        out.append("             (as the process started; changes made inside the program are not visible)")
    else:
        out.append(f"Environment  unknown: {env_problem_text(insp)}")
    from cpudoctor.render.job_state import OUTSIDE

    out.extend(wrap(f"State        {OUTSIDE}", 100, hang=13))
    if insp.children:
        n = len(insp.children)
        out.append(f"Children     {plural(n, 'process', 'processes')}, {_opt(insp.children_threads)} threads, "
                   f"{percent(insp.children_cpu_percent, '?')} CPU")
        for c in insp.children[:16]:
            out.append(f"  {c.pid:>7}  {c.name[:16]:<16} {percent(c.cpu_percent, '?'):>5}  {_opt(c.threads):>3} threads  "
                       f"{_mib(c.rss_bytes)}")
        if len(insp.children) > 16:
            out.append(f"  ... {len(insp.children) - 16} more")
    else:
        out.append("Children     none (no DataLoader workers)")
    if insp.python:
        found_by = _FOUND_BY.get(insp.python_found_by, "process")
        out.append(f"Python       {shown_python(insp.python)} (found from its {found_by})")
        out.append(f"             its environment: cpudoctor doctor --python {python_word(insp.python)}")
    if insp.memory is not None:
        from cpudoctor.render.job_memory import memory_lines

        out.extend(memory_lines(insp.memory))
    else:
        swap = _mib(insp.swap_bytes) if insp.swap_bytes is not None else "?"
        faults = "?" if insp.major_faults_per_s is None else f"{insp.major_faults_per_s:g}/s"
        out.append(f"Memory       RSS {_mib(insp.rss_bytes)}; swap {swap}; major page faults {faults}")
    if insp.time is not None:
        from cpudoctor.render.breakdown import render_text as breakdown_text

        out.extend(breakdown_text(insp.time))
    out.append("")
    out += job_findings.text_lines(findings, none="Nothing to fix in this window.")
    notes = inspection_notes(insp)
    if notes:
        out.append("")
        out.append("Notes")
        out.extend(f"  - {n}" for n in notes)
    return "\n".join(out)
