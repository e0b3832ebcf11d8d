"""What the Inspector page shows, computed without Qt: rows, texts, messages, the map's load.

The page (:mod:`cpudoctor.gui.inspector_page`) keeps the widgets and wires
them; everything here is a plain function of an :class:`Inspection`, a
:class:`ProcessEntry` or a :class:`Topology`, so it is tested without a
window and reused by anything else that shows an inspection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cpudoctor.advisor.process_rules import run_process_rules
from cpudoctor.gui.common import SEVERITY_COLOUR
from cpudoctor.model import Topology
from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.probes.process.inspect import Inspection, InspectError, ProcessEntry
from cpudoctor.kits.escape import html_escape as esc
from cpudoctor.kits.format import percent, size
from cpudoctor.render.inspect import state_text
from cpudoctor.render.words import DASH, plural, severity
from cpudoctor.model import Finding

PICKER_COLUMNS = ("PID", "CPU %", "Threads", "Memory", "Command")
THREAD_COLUMNS = ("TID", "Name", "CPU %", "CPU", "CCX", "NUMA", "Moves", "Wait %", "State")
CHILD_COLUMNS = ("PID", "Name", "CPU %", "Threads", "Memory", "Command")
LIB_COLUMNS = ("Library", "Kind", "File", "Shipped by")
ENV_COLUMNS = ("Variable", "Value")
BUSY_THREAD_PERCENT = 25          # a thread at this CPU % or more counts as busy in the summary

@dataclass(frozen=True)
class Cell:
    """One table cell: its text, right-aligned numbers, an optional tooltip."""

    text: str
    numeric: bool = False
    tooltip: str = ""


def pct(v: float | None) -> str:
    """A table cell under a "CPU %" heading: the number alone."""
    return percent(v, DASH, symbol=False)


def _cell(value: Any, numeric: bool = False, tooltip: str = "") -> Cell:
    return Cell(DASH if value is None else str(value), numeric, tooltip)


# -- the picker ---------------------------------------------------------------

def process_matches(entry: ProcessEntry, text: str, python_only: bool) -> bool:
    """The picker's filter: Python only, and the text in the command, the name or equal to the PID."""
    if python_only and not entry.is_python:
        return False
    text = text.strip().lower()
    return not text or text in entry.cmdline.lower() or text in entry.name.lower() or text == str(entry.pid)


def process_row(entry: ProcessEntry) -> list[Cell]:
    other = "" if entry.own else "Another user's process: its environment and libraries need sudo to read"
    return [_cell(entry.pid, True, other), _cell(pct(entry.cpu_percent), True, other),
            _cell(entry.threads, True, other), _cell(_bytes(entry.rss_bytes), True, other),
            _cell(entry.cmdline, False, other or entry.cmdline)]


def listed_message(entries: list[ProcessEntry]) -> str:
    py = sum(1 for e in entries if e.is_python)
    return f"{len(entries)} processes ({py} Python). Pick one and press Inspect."


def parse_pid(text: str) -> tuple[int | None, str]:
    """(pid, "") for a usable PID, else (None, what to tell the user)."""
    text = text.strip()
    if not text:
        return None, "Pick a process in the list or type a PID."
    try:
        pid = int(text)
    except ValueError:
        pid = 0
    if pid <= 0:
        return None, f"{text!r} is not a process ID: type a positive whole number."
    return pid, ""


# -- the inspection -------------------------------------------------------------

def inspect_job(inspect_fn: Callable[..., Inspection], topology_fn: Callable[[], Topology], pid: int,
                seconds: float, topo: Topology | None, should_stop: Callable[[], bool]):
    """Runs on a pool thread: sample the process, then run the (cheap) process rules."""
    if topo is None:
        topo = topology_fn()
    insp = inspect_fn(pid, seconds=seconds, topology=topo, should_stop=should_stop)
    return insp, run_process_rules(insp, topo), topo


def inspected_message(insp: Inspection) -> str:
    if insp.status == "exited":
        return (f"Process {insp.pid} exited {insp.window_s or 0:.1f} s into the window: "
                "the figures cover only that part.")
    msg = f"Inspected process {insp.pid} over {insp.window_s or 0:.1f} s."
    if insp.access_limited:
        msg += (f" It belongs to another user: its environment and libraries need sudo "
                f"(run `sudo cpudoctor inspect {insp.pid}`).")
    return msg


def inspect_error_message(exc: BaseException) -> str:
    msg = str(exc) if isinstance(exc, InspectError) else f"Inspection failed: {type(exc).__name__}: {exc}"
    # the probe's advice is for the terminal; in the window the list is right above
    return msg.replace("pick one from `cpudoctor inspect --list`", "pick one from the list (Refresh updates it)")


def summary_html(insp: Inspection, findings: list[Finding]) -> str:
    """Two lines: the process and its verdict, then CPU, threads, children and memory."""
    busy = sum(1 for t in insp.threads if (t.cpu_percent or 0) >= BUSY_THREAD_PERCENT)
    worst = findings[0].severity if findings else "ok"
    colour = SEVERITY_COLOUR.get(worst, "#888")
    verdict = (f'<span style="color:{colour}">{plural(len(findings), "finding")}</span>'
               if findings else f'<span style="color:{colour}">Nothing to fix in this window</span>')
    return (f"<b>{esc(insp.name or '?')}</b> (PID {insp.pid}) — {verdict}<br>"
            f"{percent(insp.cpu_percent, '?')} CPU on {insp.usable_cpus or '?'} usable CPUs · "
            f"{insp.num_threads or '?'} threads ({busy} busy) · {plural(len(insp.children), 'child', 'children')} · "
            f"RSS {size(insp.rss_bytes, DASH)}")


def findings_html(findings: list[Finding]) -> str:
    """Findings as rich text: a coloured bar, title, why, fix, the command and a copy link.

    A QTextBrowser wraps and scrolls long text properly (word-wrapped labels in a
    scroll area do not); ``copy:N`` links copy the N-th finding's snippet.
    """
    if not findings:
        return ('<p style="color:%s"><b>Nothing to fix in this window.</b></p>'
                '<p>Inspect again while the job is in its busy phase (training steps, not start-up or '
                'evaluation) to be sure.</p>' % SEVERITY_COLOUR["ok"])
    parts = []
    for i, f in enumerate(findings):
        colour = SEVERITY_COLOUR.get(f.severity, "#888")
        body = [f'<b><span style="color:{colour}">{severity(f.severity).name}</span> {f.code}</b>'
                f' &mdash; <b>{esc(f.title)}</b>']
        if f.why:
            body.append(f"<b>Why:</b> {esc(f.why)}")
        if f.fix:
            body.append(f"<b>Fix:</b> {esc(f.fix)}")
        html = "<br>".join(body)
        if f.snippet:
            what = "command" if f.snippet_lang == "bash" else "code"
            html += (f'<pre style="white-space: pre-wrap; font-family: monospace; margin-top: 4px;">'
                     f'{esc(f.snippet)}</pre><a href="copy:{i}">Copy {what}</a>')
        parts.append(f'<table width="100%" cellspacing="0" cellpadding="4" style="margin-bottom: 8px;"><tr>'
                     f'<td width="4" bgcolor="{colour}"></td><td>{html}</td></tr></table>')
    return "".join(parts)


def thread_rows(insp: Inspection) -> list[list[Cell]]:
    """The Threads tab, busiest first; the tooltip lists every CPU the thread was seen on."""
    rows = []
    for th in sorted(insp.threads, key=lambda t: -(t.cpu_percent or 0)):
        tip = f"Seen on CPUs {format_cpulist(sorted(th.cpus_seen))}" if th.cpus_seen else ""
        rows.append([_cell(th.tid, True, tip), _cell(th.name, False, tip), _cell(pct(th.cpu_percent), True, tip),
                     _cell(th.last_cpu, True, tip), _cell(th.l3, True, tip), _cell(th.numa, True, tip),
                     _cell(th.migrations, True, tip), _cell(pct(th.wait_percent), True, tip),
                     _cell(state_text(th.state), False, tip)])
    return rows


def library_rows(insp: Inspection) -> list[list[Cell]]:
    return [[_cell(v) for v in (lib.label, lib.kind, lib.file, lib.origin or DASH)] for lib in insp.libraries]


def env_rows(insp: Inspection) -> list[list[Cell]]:
    return [[_cell(k), _cell(v)] for k, v in insp.env.items()]


def env_note(insp: Inspection) -> str:
    notes = []
    if not insp.libraries_readable:
        notes.append(f"Libraries: {insp.libraries_error}")
    if not insp.env_readable:
        notes.append(f"Environment: {insp.env_error}")
    elif not insp.env:
        notes.append("No thread variables set: every library uses its default (usually all CPUs).")
    return "\n".join(notes)


def child_rows(insp: Inspection) -> list[list[Cell]]:
    return [[_cell(c.pid, True), _cell(c.name), _cell(pct(c.cpu_percent), True), _cell(c.threads, True),
             _cell(_bytes(c.rss_bytes), True), _cell(c.cmdline, False, c.cmdline)] for c in insp.children]


def _unknown(value: Any, fmt: Callable[[Any], str] = str) -> str:
    return "unknown" if value is None else fmt(value)


def process_facts(insp: Inspection) -> list[tuple[str, str]]:
    """The Process card: (label, value) rows."""
    return [
        ("Command", insp.cmdline or DASH),
        ("Affinity", format_cpulist(insp.affinity) if insp.affinity else "unknown"),
        ("cgroup CPU quota", f"{insp.cpu_quota:g} CPUs" if insp.cpu_quota else "none"),
        ("Usable CPUs", _unknown(insp.usable_cpus)),
        ("Nice", _unknown(insp.nice)),
        ("Runnable threads", f"{insp.runnable_mean} avg, {insp.runnable_max} peak"
         if insp.runnable_mean is not None else "unknown"),
        ("Run-queue wait", _unknown(insp.wait_percent, lambda w: f"{w / 100:.2f} s per second")),
        ("Migrations", _unknown(insp.migrations)),
    ]


def memory_facts(insp: Inspection) -> list[tuple[str, str]]:
    """The Memory card: (label, value) rows."""
    return [
        ("Resident (RSS)", _bytes(insp.rss_bytes)),
        ("Swapped out", _bytes(insp.swap_bytes)),
        ("Major page faults", _unknown(insp.major_faults_per_s, lambda v: f"{v:g} per second")),
    ]


def notes_text(insp: Inspection) -> str:
    return "\n".join(f"• {n}" for n in insp.notes)


def children_tab_title(insp: Inspection) -> str:
    return f"Children ({len(insp.children)})"


# -- the map ------------------------------------------------------------------

def full_load(load: dict[int, float], topology: Topology | None) -> dict[int, float]:
    """This process's load on every CPU (0 where none of its threads ran).

    The map keeps unlisted CPUs at their last value, so a thread that moved
    must leave a 0 behind.
    """
    cpus = set(load)
    if topology is not None:
        cpus.update(topology.online_cpus)
        for d in topology.l3_domains:
            cpus.update(d.cpus)
    return {cpu: load.get(cpu, 0.0) for cpu in sorted(cpus)}


def live_caption(places: list | None) -> str:
    if places is None:
        return "Threads on cores — the process has exited"
    return f"Threads on cores (live, {len(places)} threads)"


def primes_only(places: list) -> bool:
    """The tracker's first poll has no CPU % yet (it only primes the CPU-time deltas)."""
    return bool(places) and all(p.cpu_percent is None for p in places)



def _bytes(n: int | None) -> str:
    return size(n, DASH)
