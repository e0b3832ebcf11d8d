"""``cpudoctor inspect [PID]``: why is this running training job slow?

Samples the process for ``--seconds``, prints its threads (CPU%, the core and
CCX/NUMA node each last ran on, migrations), affinity and cgroup quota, the
thread environment (whitelisted), native libraries, children and memory, then
the process findings with the command to relaunch it. ``--list`` shows the
processes to choose from, Python ones first.

Exit codes: 0 done; 2 no such PID, the process exited during the window (the
partial figures are still printed), or it belongs to another user and its
environment/libraries could not be read.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cpudoctor.commands import CliError, emit, root_arg

SEVERITY_MARK = {"ok": "[✓]", "info": "[i]", "warning": "[!]", "error": "[✗]"}
MAX_THREAD_ROWS = 24


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "inspect",
        help="inspect a running training process: threads, cores, libraries, env, findings",
        description="Sample a running process (your training job) and explain why it is slow.",
    )
    p.add_argument("pid", nargs="?", type=_pid, help="process ID (see --list)")
    p.add_argument("--seconds", "-s", type=_seconds, default=3.0, metavar="N",
                   help="sampling window in seconds (default 3, 0.2-120)")
    p.add_argument("--format", "-f", choices=("text", "json"), default="text")
    p.add_argument("--list", action="store_true", help="list processes to inspect (Python first) and exit")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--root", metavar="DIR", help=argparse.SUPPRESS)   # a captured or fake /proc tree
    p.set_defaults(func=run)


def _pid(value: str) -> int:
    try:
        pid = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a process ID (a whole number, see --list)") from None
    if pid <= 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a process ID (must be positive)")
    return pid


def _seconds(value: str) -> float:
    try:
        s = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not 0.2 <= s <= 120:
        raise argparse.ArgumentTypeError(f"{value} s is out of range: give 0.2 to 120 seconds")
    return s


def run(args: argparse.Namespace) -> int:
    root = root_arg(args.root) if args.root else Path("/")
    if args.list:
        from cpudoctor.probes.process.inspect import list_processes

        entries = list_processes(root, interval=0.4, exclude_self=True)
        emit(_list_json(entries) if args.format == "json" else render_list(entries), args.output)
        return 0
    if args.pid is None:
        raise CliError("give a process ID, or --list to see the candidates")
    from cpudoctor.advisor.process_rules import run_process_rules
    from cpudoctor.probes.process.inspect import InspectError, inspect_process
    from cpudoctor.probes import probe_topology

    topo = probe_topology(root)
    try:
        insp = inspect_process(args.pid, seconds=args.seconds, root=root, topology=topo)
    except InspectError as exc:
        raise CliError(str(exc)) from None
    findings = run_process_rules(insp, topo)
    if args.format == "json":
        from cpudoctor.serde import to_data

        text = json.dumps({"kind": "cpudoctor-inspection", "inspection": to_data(insp),
                           "findings": to_data(findings)}, indent=2, ensure_ascii=False)
    else:
        text = render_text(insp, findings)
    emit(text, args.output)
    if insp.status == "exited":
        raise CliError(f"process {insp.pid} exited {insp.window_s:.1f} s into the window: "
                       f"the figures cover only that part")
    if insp.access_limited:
        from cpudoctor.probes.process.inspect import denied_hint

        raise CliError(f"the environment and libraries of process {insp.pid} could not be read: "
                       f"{denied_hint(insp.pid, insp.uid, f'cpudoctor inspect {insp.pid}')}")
    return 0


# --- rendering (also used by the GUI's copy button) ---------------------------------------


def _mib(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _pct(v: float | None) -> str:
    return "?" if v is None else f"{v:.0f}%"


def _opt(v: object) -> str:
    return "-" if v is None else str(v)


def _wrapped(text: str, indent: int = 4, width: int = 100) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width=width, initial_indent=" " * indent, subsequent_indent=" " * (indent + 5),
                         break_on_hyphens=False, break_long_words=False) or [" " * indent]


def render_list(entries) -> str:
    lines = [f"{'PID':>7}  {'CPU%':>6}  {'THR':>4}  {'RSS':>9}  COMMAND"]
    for e in entries:
        lines.append(f"{e.pid:>7}  {_pct(e.cpu_percent):>6}  {_opt(e.threads):>4}  {_mib(e.rss_bytes):>9}  "
                     f"{e.cmdline[:100]}")
    if len(lines) == 1:
        lines.append("(no processes found)")
    return "\n".join(lines)


def _list_json(entries) -> str:
    from cpudoctor.serde import to_data

    return json.dumps(to_data(entries), indent=2, ensure_ascii=False)


def render_text(insp, findings) -> str:
    """A doctor-style plain-text page for one inspection (CLI output and the GUI's copy text)."""
    from cpudoctor.probes._fs import format_cpulist

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
        out.append(f"  ... {len(rest)} more threads using {sum(t.cpu_percent or 0 for t in rest):.0f}% together")
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
        out.append(f"Children     {n} process{'es' if n != 1 else ''}, {_opt(insp.children_threads)} threads, "
                   f"{_pct(insp.children_cpu_percent)} CPU")
        for c in insp.children[:16]:
            out.append(f"  {c.pid:>7}  {c.name[:16]:<16} {_pct(c.cpu_percent):>5}  {_opt(c.threads):>3} threads  "
                       f"{_mib(c.rss_bytes)}")
        if len(insp.children) > 16:
            out.append(f"  ... {len(insp.children) - 16} more")
    else:
        out.append("Children     none (no DataLoader workers)")
    swap = _mib(insp.swap_bytes) if insp.swap_bytes is not None else "?"
    faults = "?" if insp.major_faults_per_s is None else f"{insp.major_faults_per_s:g}/s"
    out.append(f"Memory       RSS {_mib(insp.rss_bytes)}; swap {swap}; major page faults {faults}")
    out.append("")
    if findings:
        out.append("Findings")
        for f in findings:
            out.append(f"{SEVERITY_MARK.get(f.severity, '[?]')} {f.code} {f.title}")
            if f.why:
                out.extend(_wrapped(f"Why: {f.why}"))
            if f.fix:
                out.extend(_wrapped(f"Fix: {f.fix}"))
            for line in (f.snippet or "").splitlines():
                out.append(f"      {'$ ' if f.snippet_lang == 'bash' else ''}{line}".rstrip())
        worst = max((f.severity for f in findings), key=lambda s: list(SEVERITY_MARK).index(s))
        out.append(f"{len(findings)} finding{'s' if len(findings) != 1 else ''} (worst: {worst}).")
    else:
        out.append("[✓] No problems found in this window.")
    if insp.notes:
        out.append("")
        out.append("Notes")
        out.extend(f"  - {n}" for n in insp.notes)
    return "\n".join(out)
