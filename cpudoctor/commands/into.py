"""``bench --into REPORT``: a measurement added to a saved report, and nothing lost on the way.

A job runs for minutes; meanwhile the report may be written by another
``bench --into``, edited, regenerated, deleted, or its name pointed somewhere
else. So the report is read twice: at the start (:func:`open_target`, so a
typo or a report of another machine is refused before the run), and at the
end, under an exclusive lock (:func:`add_run`), where the result is merged
into what the file holds *then*:

* **several at once**: the lock (``flock`` on the report itself) puts the
  merges in a row; each re-reads what the one before it wrote. A writer that
  replaced the file while another waited is noticed (the name no longer leads
  to the locked file) and the wait starts over on the new file;
* **unknown fields are kept**: the merge edits the parsed JSON, not the
  model's dataclasses, so a field from a newer CPU Doctor survives;
* **only the file that was read** is written: the name was resolved once at
  the start; a link swapped in for it, a deleted or damaged report, or one of
  another machine ends the merge with one line saying it was not added;
* "added" is said only once the result is on disk.

Without ``fcntl`` (Windows) the merge still re-reads at the end, unlocked.
"""

from __future__ import annotations

import copy
import errno
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cpudoctor.commands import CliError

try:
    import fcntl
except ImportError:                       # Windows
    fcntl = None  # type: ignore[assignment]

LOCK_WAIT_S = 60.0          # another merge holds the lock for well under a second; a minute means it is stuck
EXIT_NOT_ADDED = 1


class NotAdded(CliError):
    """The result could not be added: one line, exit code 1 (the figures were already shown)."""

    def __init__(self, message: str):
        super().__init__(message, code=EXIT_NOT_ADDED)


@dataclass(frozen=True)
class Target:
    """The report ``--into`` names, as read at the start of the run."""

    given: str               # as typed (for messages)
    path: Path               # the file itself: links in the name resolved once, here
    brand: str               # this machine's CPU brand (a report of another machine is refused)


def open_target(given: str) -> Target:
    """Check and read the report before the run: one line and exit code 2 when it cannot take a result."""
    from cpudoctor.lab.settings import SettingsError, check_output_path
    from cpudoctor.model import ReportError
    from cpudoctor.report_file import load_report

    if not given.strip():
        raise CliError('--into "": an empty name; give the saved report (made by cpudoctor report -o FILE.json)')
    try:
        target = check_output_path(given, "--into")
    except SettingsError as exc:
        raise CliError(str(exc)) from None
    if not target.exists():
        raise CliError(f"--into {given}: no such report; save one first with: cpudoctor report -o {given}")
    try:
        report = load_report(target)
    except ReportError as exc:
        raise CliError(f"--into {given}: {exc}") from None
    from cpudoctor.probes import probe_cpu

    here = (probe_cpu(Path("/")).brand or "").strip()
    _same_machine(report, here, given, code=2)
    return Target(given=given, path=Path(os.path.realpath(target)), brand=here)


def _same_machine(report, here: str, given: str, code: int) -> None:
    there = (report.cpu.brand or "").strip()
    if here and there and here != there:
        message = (f"--into {given}: that report describes another machine ({there}); this one is {here}, "
                   "and a measurement belongs in a report of the machine it was made on")
        raise CliError(message, code=code) if code == 2 else NotAdded(message + "; not added")


def add_run(target: Target, run, recommendation=None) -> None:
    """Merge ``run`` (a BenchRun) and ``recommendation`` into the report as it is now; NotAdded if it cannot be."""
    with _LockedReport(target) as (fd, old):
        data, report = _read_current(fd, target)
        _same_machine(report, target.brand, target.given, code=1)
        text = _merged(data, report, run, recommendation)
        from cpudoctor.fileio import WriteError, replace_file

        try:
            replace_file(target.path, text, old)
        except WriteError as exc:
            raise NotAdded(f"--into {target.given}: {exc.strerror or exc}; not added") from None


class _LockedReport:
    """The report's file opened (never through a link) and locked; the name still leads to it once locked."""

    def __init__(self, target: Target):
        self.target = target
        self.fd: int | None = None

    def __enter__(self) -> tuple[int, os.stat_result]:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            fd, st = self._open()
            if fcntl is None:
                self.fd = fd
                return fd, st
            if self._lock(fd, deadline):
                try:
                    now = os.stat(self.target.path, follow_symlinks=False)
                except OSError:
                    now = None
                if now is not None and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                    self.fd = fd
                    return fd, os.fstat(fd)
            os.close(fd)             # replaced (or removed) while we waited: look again at what the name holds
            if time.monotonic() > deadline:
                raise NotAdded(f"--into {self.target.given}: another program kept rewriting it for "
                               f"{LOCK_WAIT_S:g} s; not added")

    def _open(self) -> tuple[int, os.stat_result]:
        given, path = self.target.given, self.target.path
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            raise NotAdded(f"--into {given}: the report was deleted while the job ran; not added "
                           "(the figures are above)") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise NotAdded(f"--into {given}: the report was replaced by a link while the job ran; not "
                               "added, and nothing else was written") from None
            raise NotAdded(f"--into {given}: cannot read it any more ({exc.strerror or exc}); not added") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise NotAdded(f"--into {given}: the report was replaced by something that is not a file while the "
                           "job ran; not added")
        return fd, st

    def _lock(self, fd: int, deadline: float) -> bool:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise NotAdded(f"--into {self.target.given}: another program has held its lock for "
                                   f"{LOCK_WAIT_S:g} s; not added") from None
                time.sleep(0.02)
            except OSError:
                return True          # a file system without locks (some network mounts): merge unlocked

    def __exit__(self, *exc: Any) -> None:
        if self.fd is not None:
            os.close(self.fd)        # closing releases the lock
            self.fd = None


def _read_current(fd: int, target: Target) -> tuple[dict[str, Any], Any]:
    """What the report holds now: parsed JSON (every field) and the checked Report."""
    from cpudoctor.kits.rooted import read_fd
    from cpudoctor.model import ReportError
    from cpudoctor.report_file import MAX_REPORT_BYTES, parse, report_from_dict

    try:
        text = read_fd(fd, MAX_REPORT_BYTES).decode("utf-8")
        data = parse(text)
        report = report_from_dict(copy.deepcopy(data))
    except (OSError, UnicodeDecodeError, ReportError) as exc:
        why = ("it is not UTF-8 text" if isinstance(exc, UnicodeDecodeError)
               else exc.strerror if isinstance(exc, OSError) else str(exc))
        raise NotAdded(f"--into {target.given}: the report changed while the job ran and is no longer a valid "
                       f"report ({why}); not added") from None
    return data, report


def _merged(data: dict[str, Any], report, run, recommendation) -> str:
    """The report's JSON with the run appended (and the recommendation and findings updated), all else as it was."""
    from cpudoctor.model.serde import to_data

    if report.meta.redacted:
        from cpudoctor.privacy import Identity, Redactor

        run = copy.deepcopy(run)
        Redactor(Identity.current(report)).dataclass(run)
    from cpudoctor.pipeline import KEEP, with_lab_result

    benchmarks = data.get("benchmarks")
    data["benchmarks"] = (benchmarks if isinstance(benchmarks, list) else []) + [to_data(run)]
    if recommendation is not None:
        data["recommendation"] = to_data(recommendation)
    if report.findings:
        # judged again as every surface does it (a report saved without findings stays without)
        updated = with_lab_result(report, run, recommendation=KEEP if recommendation is None else recommendation)
        data["findings"] = to_data(updated.findings)
        if updated.notes != report.notes:          # the judging's own note (an advisor that failed)
            data["notes"] = list(updated.notes)
    from cpudoctor.model.report import json_text

    return json_text(data) + "\n"
