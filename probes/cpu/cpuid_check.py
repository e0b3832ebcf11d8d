"""Cross-check /proc/cpuinfo against CPUID + XGETBV executed in a child process.

Why a child: executing raw machine code can crash the interpreter (SELinux
denying executable memory, an emulator without XGETBV), and under emulation
(qemu-user, Rosetta 2) ``/proc/cpuinfo`` describes the *host*, while CPUID run
by our own code describes the CPU that actually executes PyTorch. The child is the
standalone script ``probes/child/scripts/cpuid.py`` (it imports nothing of CPU Doctor);
``python -m cpudoctor.probes.cpu.cpuid_check`` runs it too: it prints one JSON object.

Only for the live machine and only when asked (the report pipeline's
``cpuid-cross-check`` stage, skipped by ``--fast``): it costs a Python
start-up (~0.1-0.3 s). The result goes into the report twice: as
:class:`CpuidCheck` data the advisor judges, and as notes people read.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field

from cpudoctor.model.cpu import CpuidCheck


@dataclass
class CpuidResult:
    vendor_id: str | None = None
    family: int | None = None
    model: int | None = None
    stepping: int | None = None
    brand: str | None = None
    xcr0: int | None = None
    flags: list[str] = field(default_factory=list)       # CPUID bits, as kernel flag names
    os_disabled: list[str] = field(default_factory=list)  # in CPUID but the OS does not save their state
    hypervisor_vendor: str | None = None                  # leaf 0x40000000's signature ("KVMKVMKVM") in a guest
    error: str | None = None


def bits_argument() -> str:
    """The flag catalogue's CPUID bits as the child script's argument (JSON)."""
    from cpudoctor.knowledge import FLAGS

    return json.dumps({name: list(where) for name, where in FLAGS.cpuid_bits().items()}, separators=(",", ":"))


def _not_x86() -> str | None:
    """Why CPUID cannot run here (not an x86 machine), or None."""
    import platform

    from cpudoctor.model import arch_family

    machine = platform.machine()
    return None if arch_family(machine) == "x86" else f"CPUID is x86-only; this is {machine or 'an unknown machine'}"


def main() -> int:
    """``python -m cpudoctor.probes.cpu.cpuid_check``: the child script, run in this process (qemu-user runs
    it this way: the emulated CPU executes it)."""
    import runpy

    from cpudoctor.probes.child.scripts import script_path

    why = _not_x86()
    if why:
        print(json.dumps({"error": why}))
        return 0

    sys.argv = [str(script_path("cpuid")), bits_argument()]
    runpy.run_path(sys.argv[0], run_name="__main__")
    return 0


# -- the parent side ------------------------------------------------------

def run_child(timeout: float = 20.0) -> CpuidResult:
    """Run the CPUID reader in a child Python (the app's one child runner); never raises."""
    from cpudoctor.kits.child.runner import ChildSpec
    from cpudoctor.kits.child.runner import run_child as run_probe_child
    from cpudoctor.probes.child.scripts import script_argv

    why = _not_x86()
    if why:
        return CpuidResult(error=why)
    child = run_probe_child(ChildSpec(script_argv("cpuid", bits_argument()), what="the CPUID check", timeout=timeout))
    if not child.ok:
        return CpuidResult(error=child.diagnosis.message)
    if not child.data:
        return CpuidResult(error="the CPUID check printed no result")
    return CpuidResult(**{k: v for k, v in child.data.items() if k in CpuidResult.__dataclass_fields__})


def summarise(cpu, result: CpuidResult) -> CpuidCheck:
    """Where /proc/cpuinfo (``cpu``) and the executing CPU's CPUID (``result``) disagree, as data."""
    if result.error:
        return CpuidCheck(error=result.error)
    from cpudoctor.knowledge import FLAGS

    comparable = set(FLAGS.cpuid_bits())
    kernel = set(cpu.flags) & comparable
    usable = set(result.flags) - set(result.os_disabled)
    return CpuidCheck(
        executing=f"{result.vendor_id} family {result.family} model {result.model}",
        emulated=bool(cpu.vendor_id) and (cpu.vendor_id, cpu.family, cpu.model) != (result.vendor_id, result.family,
                                                                                   result.model),
        missing_flags=sorted(kernel - set(result.flags)),
        hidden_flags=sorted((usable & comparable) - kernel),
        os_disabled=sorted(set(result.os_disabled) & kernel),
        hypervisor_vendor=result.hypervisor_vendor,
    )


def compare(cpu, result: CpuidResult) -> list[str]:
    """Notes where /proc/cpuinfo and the executing CPU's CPUID disagree."""
    return notes(cpu, summarise(cpu, result), result.xcr0)


def notes(cpu, check: CpuidCheck, xcr0: int | None = None) -> list[str]:
    """The disagreements of ``check`` in words, for the report's notes."""
    if check.error:
        return [f"CPUID cross-check skipped: {check.error}"]
    out = []
    if check.emulated:
        out.append(
            f"/proc/cpuinfo describes {cpu.vendor_id} family {cpu.family} model {cpu.model}, but the CPU executing "
            f"code reports {check.executing}: this looks like emulation "
            "(qemu-user, Rosetta 2), so /proc/cpuinfo shows the host. Trust the executing CPU's flags."
        )
    if check.missing_flags:
        it = "it" if len(check.missing_flags) == 1 else "them"
        out.append(
            f"/proc/cpuinfo lists {', '.join(check.missing_flags)} but CPUID in a child process does not: the CPU that "
            f"runs your code lacks {it} (emulation?), so code using {it} would crash with SIGILL."
        )
    if check.hidden_flags:
        it = "it" if len(check.hidden_flags) == 1 else "them"
        out.append(
            f"CPUID reports {', '.join(check.hidden_flags)} but the kernel does not list {it}: the kernel disabled {it} "
            f"(a known erratum or a boot option) or is older than the CPU; libraries that trust CPUID may still use {it}."
        )
    if check.os_disabled:
        xcr0_text = f"XCR0 = {xcr0:#x}: " if xcr0 is not None else ""
        out.append(f"{xcr0_text}the OS does not save the register state of {', '.join(check.os_disabled)}.")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
