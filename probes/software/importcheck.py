"""Import each installed DL package in its own child process.

The only honest test of "will ``import tensorflow`` work here" is to try it
where a crash costs nothing: a child with a timeout. One child per package so
a SIGILL in one does not hide the others.
"""

from __future__ import annotations

from cpudoctor.probes.child.runner import ChildResult, ChildSpec, script_argv
from cpudoctor.probes.software.model import ImportCheck

def import_spec(module: str, what: str, timeout: float, isa_hint=None) -> ChildSpec:
    return ChildSpec(script_argv("import_check", module), what=what, timeout=timeout, isa_hint=isa_hint or "")


def to_import_check(package: str, module: str, result: ChildResult) -> ImportCheck:
    """An ImportCheck from a finished child: ok / crashed (signal named) / error text / timeout."""
    d = result.diagnosis
    check = ImportCheck(package=package, module=module, seconds=round(result.seconds, 3))
    if d.kind == "ok":
        check.status = "ok"
        check.message = f"import {module} works"
        if isinstance(result.data.get("seconds"), (int, float)):
            check.seconds = round(float(result.data["seconds"]), 3)
    elif d.kind == "timeout":
        check.status = "timeout"
        check.message = d.message
    elif d.signal is not None:
        check.status = "crashed"
        check.signal, check.signal_name = d.signal, d.signal_name
        check.message = d.message
    else:
        check.status = "error"
        check.message = d.message
    return check
