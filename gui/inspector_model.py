"""The Inspector's model: its work (listing, inspecting, the live markers' timer) and what its page shows.

:class:`InspectorModel` owns the inspections: it lists processes and samples
one on the thread pool (never on the UI thread), diagnoses it through the job
pipeline (:mod:`cpudoctor.jobrun`, as ``cpudoctor inspect`` does), keeps the
live thread markers' timer (running only while someone watches), and reads
this machine's CPU and topology when the window shows a saved report.
The page (:mod:`cpudoctor.gui.inspector_page`) keeps the widgets, listens to
the model's signals and never calls a probe. The rest of this module are
plain functions of an :class:`Inspection`, a :class:`ProcessEntry` or a
:class:`Topology` (rows, texts, messages, the map's load), tested without a
window and reused by anything else that shows an inspection.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from cpudoctor.gui.common import SEVERITY_COLOUR
from cpudoctor.jobrun import Machine, inspect_job as diagnosed_inspection
from cpudoctor.model import Topology
from cpudoctor.model.inspection import Inspection, ProcessEntry
from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.probes.process import procfs
from cpudoctor.probes.process.inspect import InspectError, ThreadTracker, inspect_process, list_processes
from cpudoctor.kits.rooted import read_text
from cpudoctor.kits.escape import html_escape as esc
from cpudoctor.kits.format import percent, size
from cpudoctor.render.breakdown import label, verdict_line
from cpudoctor.render.inspect import (env_problem_text, inspect_error_text, inspection_notes, libraries_problem_text,
                                      library_name, state_text)
from cpudoctor.render.own_jobs import for_this_user
from cpudoctor.render.finding_html import finding_html
from cpudoctor.render.finding_view import finding_view
from cpudoctor.render.words import DASH, plural, reason_of
from cpudoctor.model import Finding

PICKER_COLUMNS = ("PID", "CPU %", "Threads", "Memory", "Command")
THREAD_COLUMNS = ("TID", "Name", "CPU %", "CPU", "CCX", "NUMA", "Moves", "Wait %", "State")
CHILD_COLUMNS = ("PID", "Name", "CPU %", "Threads", "Memory", "Command")
LIB_COLUMNS = ("Library", "Kind", "File", "Shipped by")
ENV_COLUMNS = ("Variable", "Value")
BUSY_THREAD_PERCENT = 25          # a thread at this CPU % or more counts as busy in the summary
LIVE_MARKER_MS = 1000             # the live markers' refresh while the page is visible

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Cell:
    """One table cell: its text, right-aligned numbers, an optional tooltip."""

    text: str
    numeric: bool = False
    tooltip: str = ""


def _cell_percent(v: float | None) -> str:
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
    return [_cell(entry.pid, True, other), _cell(_cell_percent(entry.cpu_percent), True, other),
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

def is_own_process(pid: int, root: Path = Path("/")) -> bool | None:
    """Whether ``pid`` runs as this user (root owns every process); None when it cannot be told (gone)."""
    uid = procfs.status_uid(procfs.parse_status(read_text(procfs.proc_dir(root, pid) / "status") or ""))
    me = os.geteuid() if hasattr(os, "geteuid") else None
    if uid is None or me is None:
        return None
    return me == 0 or uid == me


def inspect_job(inspect_fn: Callable[..., Inspection], machine_fn: Callable[[], Machine], pid: int,
                seconds: float, machine: Machine | None, should_stop: Callable[[], bool],
                owner: Callable[[int], bool | None] = is_own_process):
    """Runs on a pool thread: sample the process and diagnose it (the job pipeline), keep the user's own relaunches."""
    if machine is None:
        machine = machine_fn()
    insp, findings = diagnosed_inspection(pid, seconds=seconds, machine=machine, should_stop=should_stop,
                                          inspect=inspect_fn)
    return insp, for_this_user(findings, owner), machine


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
    if isinstance(exc, InspectError):     # in the window the list is right above
        return inspect_error_text(exc, list_hint="pick one from the list (Refresh updates it)")
    return f"Inspection failed: {reason_of(exc)}"


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
    return "".join(finding_html(finding_view(f), "widget", evidence=False, copy_href=f"copy:{i}")
                   for i, f in enumerate(findings))


def thread_rows(insp: Inspection) -> list[list[Cell]]:
    """The Threads tab, busiest first; the tooltip lists every CPU the thread was seen on."""
    rows = []
    for th in sorted(insp.threads, key=lambda t: -(t.cpu_percent or 0)):
        tip = f"Seen on CPUs {format_cpulist(sorted(th.cpus_seen))}" if th.cpus_seen else ""
        rows.append([_cell(th.tid, True, tip), _cell(th.name, False, tip), _cell(_cell_percent(th.cpu_percent), True, tip),
                     _cell(th.last_cpu, True, tip), _cell(th.l3, True, tip), _cell(th.numa, True, tip),
                     _cell(th.migrations, True, tip), _cell(_cell_percent(th.wait_percent), True, tip),
                     _cell(state_text(th.state), False, tip)])
    return rows


def library_rows(insp: Inspection) -> list[list[Cell]]:
    return [[_cell(v) for v in (library_name(lib.library), lib.kind, lib.file, lib.origin or DASH)]
            for lib in insp.libraries]


def env_rows(insp: Inspection) -> list[list[Cell]]:
    return [[_cell(k), _cell(v)] for k, v in insp.env.items()]


def env_note(insp: Inspection) -> str:
    notes = []
    if not insp.libraries_readable:
        notes.append(f"Libraries: {libraries_problem_text(insp)}")
    if not insp.env_readable:
        notes.append(f"Environment: {env_problem_text(insp)}")
    elif not insp.env:
        notes.append("No thread variables set: every library uses its default (usually all CPUs).")
    return "\n".join(notes)


def child_rows(insp: Inspection) -> list[list[Cell]]:
    return [[_cell(c.pid, True), _cell(c.name), _cell(_cell_percent(c.cpu_percent), True), _cell(c.threads, True),
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
    """The Memory card: (label, value) rows (render's, as inspect prints them)."""
    if insp.memory is not None:
        from cpudoctor.render.job_memory import memory_rows

        return memory_rows(insp.memory)
    return [
        ("Resident (RSS)", _bytes(insp.rss_bytes)),
        ("Swapped out", _bytes(insp.swap_bytes)),
        ("Major page faults", _unknown(insp.major_faults_per_s, lambda v: f"{v:g} per second")),
    ]


def notes_text(insp: Inspection) -> str:
    return "\n".join(f"• {n}" for n in inspection_notes(insp))


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


# -- the time breakdown and "Run a script…" ----------------------------------------------------

TIME_COLUMNS = ("Category", "Share", "Thread-seconds", "Samples")
THREAD_TIME_COLUMNS = ("Process", "Thread", "Role", "Samples", "Where the time went")
# The header's tooltip for the seconds: they add up every thread's time, so they exceed the window.
THREAD_SECONDS_TIP = ("Seconds summed over the job's threads (two busy threads for 10 s are 20 thread-seconds): "
                      "the column adds up to more than the window; the Share column is of this sum.")
MIN_THREAD_SAMPLES = 10            # below this a thread's shares are counts, not percentages ("1 sample" is no 100 %)
PROCESS_ROLES = {"main": "main process", "dataloader_worker": "DataLoader worker", "compile_worker": "compile worker",
                 "compiler": "compiler", "child": "child process"}


def time_rows(bd) -> list[list[Cell]]:
    """One row per category of the job, largest first; compute's libraries in the tooltip."""
    from cpudoctor.render.breakdown import share_text

    rows = []
    for s in sorted(bd.shares, key=lambda s: -s.share) if bd is not None else []:
        tip = share_text(s)
        rows.append([Cell(label(s.category), False, tip), Cell(percent(s.share * 100, DASH, symbol=False), True, tip),
                     Cell(f"{s.seconds:.2f}", True, f"{tip}; {THREAD_SECONDS_TIP}"), Cell(str(s.samples), True, tip)])
    return rows


def shares_in_words(shares, samples: int) -> str:
    """A thread's or process's shares: percentages from :data:`MIN_THREAD_SAMPLES` samples on; below, what the
    samples saw, counted ("Other, 1 sample": one sample is no "100 %")."""
    from cpudoctor.render.breakdown import summary_line_of

    if samples >= MIN_THREAD_SAMPLES:
        return summary_line_of(shares)
    seen = sorted((s for s in shares if s.samples), key=lambda s: -s.samples)
    if not seen:
        return DASH
    return "; ".join(f"{label(s.category)}, {plural(s.samples, 'sample')}" for s in seen[:3]) + \
        " (too few samples for shares)"


def thread_time_rows(bd) -> list[list[Cell]]:
    """Each process of the job (DataLoader workers and compilers included, sampled threads or not), then its
    sampled threads."""
    rows = []
    for p in bd.processes if bd is not None else []:
        threads = [t for t in p.threads if t.samples]
        if not threads and not p.samples and not p.idle_samples:
            continue
        role = PROCESS_ROLES.get(p.role, p.role.replace("_", " "))
        if len(threads) != 1:        # its threads together (a worker without stacks: only the process's states)
            what = "all threads" if threads else ("no thread sampled" if p.samples else "idle")
            rows.append([Cell(f"{p.pid} {p.name}", False, p.cmdline or p.name),
                         Cell(what, False, f"{percent(p.cpu_percent, DASH)} CPU over the window"),
                         Cell(role), Cell(str(p.samples), True), Cell(shares_in_words(p.shares, p.samples))])
        for t in threads:
            rows.append([Cell(f"{p.pid} {p.name}", False, p.cmdline or p.name), Cell(f"{t.tid} {t.name}"),
                         Cell(f"{t.role} ({role})" if p.role != "main" else t.role), Cell(str(t.samples), True),
                         Cell(shares_in_words(t.shares, t.samples))])
    return rows


def evidence_findings(findings: list[Finding]) -> list[tuple[int, Finding]]:
    """The findings the Time tab shows beside the breakdown, with their place in the page's list: those the job's
    own evidence gave (the EVID rules: its breakdown, kernels, recompilations, exit)."""
    return [(i, f) for i, f in enumerate(findings) if f.code.startswith("EVID")]


def evidence_findings_html(findings: list[Finding]) -> str:
    picked = evidence_findings(findings)
    if not picked:
        return ('<p style="color:gray">No finding from the breakdown: '
                + ("nothing in it called for one." if findings else "inspect a process or run a script.") + "</p>")
    return "".join(finding_html(finding_view(f), "widget", evidence=False, copy_href=f"copy:{i}") for i, f in picked)


def time_caption(bd, state=None) -> str:
    """The text above the bar: what was sampled, whether it may be judged, the driving thread's own time (its top
    frames), and the job's own state (a run's probe; an inspection says what needs `run`)."""
    from cpudoctor.render.breakdown import driver_lines, stacks_line
    from cpudoctor.render.job_state import summary

    if bd is None:
        return "No time breakdown: inspect a process (stacks are sampled with it) or run a script."
    text = (f"Where the job's threads spent a {bd.window_s:g} s window: {bd.seconds:g} thread-seconds (every thread's "
            f"time added up), {bd.samples} samples counted ({bd.idle_samples} idle, {bd.startup_samples} start-up), "
            f"{bd.sampler}.")
    verdict = verdict_line(bd)
    if verdict:
        text += f"\n{verdict}"
    if bd.stacks_error_kind:
        text += f"\nStacks: {stacks_line(bd)}"
    driver = driver_lines(bd)
    if driver:
        text += "\n" + driver[0] + "; " + "; ".join(" ".join(line.split()) for line in driver[1:3])
    return text + "\n" + summary(state)


def script_command(python: str, script: str, arguments: str) -> list[str]:
    """``python script args...`` for "Run a script…" (the arguments split as a shell would)."""
    import shlex

    return [python, script, *shlex.split(arguments)]


def run_message(obs) -> str:
    from cpudoctor.render.run_report import ended_text

    return f"Ran {obs.command}: {ended_text(obs, window=True)} after {obs.duration_s:g} s."


# -- the model ----------------------------------------------------------------

class InspectorModel(QObject):
    """The Inspector's work, off the UI thread: the process list, one inspection at a time, the live markers.

    The functions that touch the machine are attributes, so tests and other
    sources swap them (all run on a pool thread). The live markers' timer runs
    while an inspected process lives and someone :meth:`watch`-es.
    """

    listing_changed = Signal(bool)            # a listing runs
    listed = Signal(list)                     # list[ProcessEntry]
    list_failed = Signal(str)
    busy_changed = Signal(bool)               # an inspection runs
    inspected = Signal(object, list)          # Inspection, list[Finding]
    failed = Signal(str)                      # one line: why the inspection failed
    topology_changed = Signal(object)         # Topology: the map's machine (its CPU judges the findings)
    places = Signal(object)                   # list[ThreadPlace] from a live poll; None once the process is gone

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.list_fn: Callable[[], list[ProcessEntry]] = lambda: list_processes(interval=0.3)
        self.inspect_fn: Callable[..., Inspection] = partial(inspect_process, stacks=True)
        self.machine_fn: Callable[[], Machine] = Machine.of_source      # this machine's CPU and topology
        self.tracker_factory: Callable[[int], ThreadTracker] = ThreadTracker
        self.owner_fn: Callable[[int], bool | None] = is_own_process
        self.entries: list[ProcessEntry] = []
        self.inspection: Inspection | None = None
        self.findings: list[Finding] = []
        self.machine: Machine | None = None
        self.busy = False
        self.listing = False
        self._stop = threading.Event()
        self._tracker: ThreadTracker | None = None
        self._polling = False
        self._watching = False
        self._probing_machine = False
        self.live_timer = QTimer(self)
        self.live_timer.setObjectName("inspector_live")
        self.live_timer.setInterval(LIVE_MARKER_MS)
        self.live_timer.timeout.connect(self.poll)

    # -- the process list --

    def refresh(self) -> bool:
        """List the processes (False while a listing runs already)."""
        if self.listing:
            return False
        self._set_listing(True)
        from cpudoctor.gui.workers import run_in_thread

        run_in_thread(self.list_fn, on_result=self._listed, on_error=lambda exc: self.list_failed.emit(reason_of(exc)),
                      on_finished=lambda: self._set_listing(False))
        return True

    def _set_listing(self, busy: bool) -> None:
        self.listing = busy
        self.listing_changed.emit(busy)

    def _listed(self, entries: list[ProcessEntry]) -> None:
        self.entries = list(entries)
        self.listed.emit(self.entries)

    # -- the topology --

    @property
    def topology(self) -> Topology | None:
        return self.machine.topology if self.machine is not None else None

    def set_machine(self, machine: Machine | None) -> None:
        """The CPU and topology of this machine (the window's report when it shows this machine)."""
        self.machine = machine
        if machine is not None and machine.topology is not None:
            self.topology_changed.emit(machine.topology)

    def need_local_machine(self) -> None:
        """Read this machine's CPU and topology once (the window shows a saved report of another machine)."""
        if self.machine is not None or self._probing_machine:
            return
        self._probing_machine = True
        from cpudoctor.gui.workers import run_in_thread

        run_in_thread(self.machine_fn, on_result=lambda m: self.machine is None and self.set_machine(m),
                      on_error=lambda exc: log.warning("this machine's CPU and topology unavailable: %s", exc))

    # -- inspecting --

    def inspect(self, pid: int, seconds: float) -> bool:
        """Sample ``pid`` for ``seconds`` on the pool; ``inspected`` or ``failed`` follows (False: one runs)."""
        if self.busy:
            return False
        self._stop.clear()
        self._set_busy(True)
        from cpudoctor.gui.workers import run_in_thread

        run_in_thread(inspect_job, self.inspect_fn, self.machine_fn, pid, seconds, self.machine, self._stop.is_set,
                      self.owner_fn, on_result=self._inspected,
                      on_error=lambda exc: self.failed.emit(inspect_error_message(exc)),
                      on_finished=lambda: self._set_busy(False))
        return True

    def stop(self) -> None:
        """End the running inspection's window early (what it sampled so far is shown)."""
        self._stop.set()

    def _set_busy(self, busy: bool) -> None:
        self.busy = busy
        self.busy_changed.emit(busy)

    def _inspected(self, result) -> None:
        insp, findings, machine = result
        if machine is not None and machine is not self.machine:
            self.set_machine(machine)
        self.inspection, self.findings = insp, list(findings)
        if insp.status == "exited":
            self._tracker = None
            self.live_timer.stop()
        else:
            self._tracker = self.tracker_factory(insp.pid)
            if self._watching:
                self.live_timer.start()
        self.inspected.emit(insp, list(findings))

    # -- the live markers --

    def watch(self, watching: bool) -> None:
        """Someone looks at the markers (the page is visible): poll while an inspected process lives."""
        self._watching = watching
        if watching and self._tracker is not None:
            if not self.live_timer.isActive():
                self.live_timer.start()
        else:
            self.live_timer.stop()

    def poll(self) -> None:
        if self._tracker is None or self._polling or not self._watching:
            return
        self._polling = True
        from cpudoctor.gui.workers import run_in_thread

        run_in_thread(self._tracker.poll, on_result=self._on_places, on_finished=self._poll_done)

    def _poll_done(self) -> None:
        self._polling = False

    def _on_places(self, places) -> None:
        if places is None:
            self._tracker = None
            self.live_timer.stop()
        elif primes_only(places):
            return
        self.places.emit(places)

    def shutdown(self) -> None:
        """Stop the running inspection and the live timer (the page is closing)."""
        self._stop.set()
        self._tracker = None
        self.live_timer.stop()
