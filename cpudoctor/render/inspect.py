"""A process inspection (``cpudoctor inspect``) as text: the CLI's output and the Inspector's copy text.

Doctor-style: one block of facts per line (CPU, threads, libraries,
environment, children, memory), a table of the busiest threads, then the
process findings with the same marks as ``cpudoctor doctor``.
"""

from __future__ import annotations

import os
import re

from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.kits.escape import shell_quote
from cpudoctor.kits.format import or_unknown, percent, size
from cpudoctor.render import job_findings
from cpudoctor.render.words import DASH, plural

MAX_THREAD_ROWS = 24


def _mib(n: int | None) -> str:
    return size(n, "?")


def _pct(v: float | None) -> str:
    return percent(v, "?")


def _opt(v: object) -> str:
    return or_unknown(v, "-")


def shown_python(path: str | None) -> str | None:
    """The interpreter as inspect shows it (text and JSON): a home folder as ``~``, like the command line."""
    from cpudoctor.probes.process.procfs import redact_paths

    return redact_paths(path) if path else path


_OTHER_HOME = re.compile(r"(?:/home|/Users|/var/home)/([A-Za-z0-9._-]{1,64})/(.+)", re.DOTALL)


def python_word(path: str) -> str:
    """The interpreter as one shell word for a suggested command: the real file (controls quoted as bytes),
    with the home folder written ``~/`` (or ``~user/``) so no home path is printed and the command works."""
    home = os.path.expanduser("~").rstrip("/")
    if home and path.startswith(home + "/"):
        return "~/" + shell_quote(path[len(home) + 1:])
    m = _OTHER_HOME.fullmatch(path)
    if m:
        return f"~{m.group(1)}/" + shell_quote(m.group(2))
    return shell_quote(path)


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
        lines.append(f"{e.pid:>7}  {_pct(e.cpu_percent):>6}  {_opt(e.threads):>4}  {_mib(e.rss_bytes):>9}  "
                     f"{e.cmdline[:100]}")
    if len(lines) == 1:
        lines.append("(no Python process and no busy one)" if left_out else "(no processes found)")
    if left_out:
        lines.append(f"{plural(left_out, 'other process', 'other processes')} (not Python, under "
                     f"{busy_percent:g} % CPU) not listed: --all lists them")
    return "\n".join(lines)


# How the inspector found a process's interpreter (Inspection.python_found_by), in words.
_FOUND_BY = {"maps": "loaded libraries", "VIRTUAL_ENV": "$VIRTUAL_ENV", "CONDA_PREFIX": "$CONDA_PREFIX",
             "argv[0]": "command line", "exe": "executable"}


def render_text(insp, findings) -> str:
    """A doctor-style plain-text page for one inspection (CLI output and the GUI's copy text)."""
    out: list[str] = []
    out.append(f"Process {insp.pid} ({insp.name or '?'})  {insp.cmdline or ''}".rstrip())
    status = "exited during the window: partial data" if insp.status == "exited" else "running"
    out.append(f"  sampled {insp.window_s or 0:.1f} s ({insp.samples} samples), {status}")
    aff = format_cpulist(insp.affinity) if insp.affinity else "unknown"
    quota = f"cgroup quota {insp.cpu_quota:g} CPUs" if insp.cpu_quota else "no cgroup CPU quota"
    out.append(f"CPU          {_pct(insp.cpu_percent)} (100% = one CPU) of {_opt(insp.usable_cpus)} usable CPUs "
               f"(affinity {aff}; {quota}); nice {_opt(insp.nice)}")
    busy = sum(1 for t in insp.threads if (t.cpu_percent or 0) >= 25)
    wait = "?" if insp.wait_percent is None else f"{insp.wait_percent / 100:.2f} s/s"
    out.append(f"Threads      {_opt(insp.num_threads)} ({busy} busy); runnable {_opt(insp.runnable_mean)} avg / "
               f"{_opt(insp.runnable_max)} peak; run-queue wait {wait}; migrations {_opt(insp.migrations)}")
    rows = sorted(insp.threads, key=lambda t: -(t.cpu_percent or 0))
    out.append(f"  {'TID':>7}  {'NAME':<16} {'CPU%':>5}  {'CPU':>4}  {'CCX':>3}  {'NUMA':>4}  {'MOVES':>5}  "
               f"{'WAIT%':>5}  STATE")
    for t in rows[:MAX_THREAD_ROWS]:
        out.append(f"  {t.tid:>7}  {t.name[:16]:<16} {_pct(t.cpu_percent):>5}  {_opt(t.last_cpu):>4}  "
                   f"{_opt(t.l3):>3}  {_opt(t.numa):>4}  {t.migrations:>5}  "
                   f"{_pct(t.wait_percent):>5}  {t.state}")
    if len(rows) > MAX_THREAD_ROWS:
        rest = rows[MAX_THREAD_ROWS:]
        out.append(f"  ... {len(rest)} more threads using {_pct(sum(t.cpu_percent or 0 for t in rest))} together")
    if insp.libraries_readable:
        libs = [f"{lib.label}: {lib.file}" + (f" [{lib.origin}]" if lib.origin else "") for lib in insp.libraries]
        libs = libs or ["none of the known OpenMP/BLAS/oneDNN/allocator libraries"]
        # One library a line: five of them on one line ran past 300 columns.
        out.append(f"Libraries    {libs[0]}")
        out.extend(f"             {lib}" for lib in libs[1:])
    else:
        out.append(f"Libraries    unknown: {insp.libraries_error}")
    if insp.env_readable:
        env = " ".join(f"{k}={v}" for k, v in insp.env.items()) or "no thread variables set (library defaults)"
        out.append(f"Environment  {env}")
        out.append("             (as the process started; changes made inside the program are not visible)")
    else:
        out.append(f"Environment  unknown: {insp.env_error}")
    if insp.children:
        n = len(insp.children)
        out.append(f"Children     {plural(n, 'process', 'processes')}, {_opt(insp.children_threads)} threads, "
                   f"{_pct(insp.children_cpu_percent)} CPU")
        for c in insp.children[:16]:
            out.append(f"  {c.pid:>7}  {c.name[:16]:<16} {_pct(c.cpu_percent):>5}  {_opt(c.threads):>3} threads  "
                       f"{_mib(c.rss_bytes)}")
        if len(insp.children) > 16:
            out.append(f"  ... {len(insp.children) - 16} more")
    else:
        out.append("Children     none (no DataLoader workers)")
    if insp.python:
        found_by = _FOUND_BY.get(insp.python_found_by, "process")
        out.append(f"Python       {shown_python(insp.python)} (found from its {found_by})")
        out.append(f"             its environment: cpudoctor doctor --python {python_word(insp.python)}")
    swap = _mib(insp.swap_bytes) if insp.swap_bytes is not None else "?"
    faults = "?" if insp.major_faults_per_s is None else f"{insp.major_faults_per_s:g}/s"
    out.append(f"Memory       RSS {_mib(insp.rss_bytes)}; swap {swap}; major page faults {faults}")
    if insp.time is not None:
        from cpudoctor.render.breakdown import render_text as breakdown_text

        out.extend(breakdown_text(insp.time))
    out.append("")
    out += job_findings.text_lines(findings, none="Nothing to fix in this window.")
    if insp.notes:
        out.append("")
        out.append("Notes")
        out.extend(f"  - {n}" for n in insp.notes)
    return "\n".join(out)
