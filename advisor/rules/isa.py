"""Instruction sets: what the silicon has, what the OS lets through, what the builds need."""

from __future__ import annotations

from cpudoctor.advisor import floors, machine, sigill, snippets, vm_mask
from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.advisor.quoting import quote_message
from cpudoctor.advisor.torch_install import pip_install, platform_of
from cpudoctor.kits.plural import plural
from cpudoctor.knowledge import FLOORS
from cpudoctor.model import Finding, Report


def _uarch(f: Facts) -> str | None:
    u = f.get("cpu.microarchitecture")
    return u.lower() if u else None


@rule("ISA001", "avx512-not-usable", category="isa", severity="warning",
      title="AVX-512 in the silicon but hidden from programs")
def avx512_not_usable(report: Report) -> list[Finding]:
    """What it checks:
        Whether the CPU's micro-architecture implements AVX-512 (Skylake-SP and later Xeons,
        Ice/Tiger/Rocket Lake, Zen4, Zen5) while the kernel does not report ``avx512f`` and
        ``avx512cd``, so no program may use it.

    Why it matters:
        oneDNN, MKL and PyTorch pick their fastest kernels from what the OS reports. A hypervisor
        that masks AVX-512 (common on cloud VMs with an old CPU model, or live-migration pools),
        or a kernel booted with ``clearcpuid``/``noxsave``, halves the vector width: GEMM and
        convolutions run the AVX2 code path at up to half the FLOP/s.

    Fix:
        On a VM, ask for a CPU model that passes AVX-512 through (libvirt ``host-passthrough``,
        ``-cpu host`` in QEMU, a newer instance type in the cloud). On bare metal, remove
        ``clearcpuid=``/``noxsave`` from the kernel command line and update the kernel.
    """
    f = Facts(report)
    if not f.get("cpu.flags") or not machine.is_x86(f):
        return []
    mask = vm_mask.detect(f)
    if mask is not None and mask.kind in ("generic", "masked"):
        return []  # ISA009 names the VM's CPU model as the cause, with the fix per hypervisor
    uarch = _uarch(f)
    usable = f.get("cpu.isa.avx512_usable")
    if usable:
        subsets = f.get("cpu.isa.avx512_subsets") or []
        return [f.finding("ok", f"AVX-512 is usable ({', '.join(subsets) or 'F, CD'})")]
    silicon = machine.knowledge()["avx512_silicon"]["uarchs"]
    if uarch not in silicon:
        label = uarch or "this CPU"
        best = machine.expected_torch_capability(f)
        kernels = {"AVX2": "AVX2 kernels are the best available",
                   "DEFAULT": "PyTorch runs its DEFAULT (pre-AVX2) kernels here"}.get(
                       best or "", "its widest vector kernels are the best available")
        if best == "DEFAULT":
            # Not a pass: the slowest kernels. Nothing to fix in software on this silicon, so a suggestion.
            return [f.finding("info", f"No AVX-512 or AVX2 in {label}: PyTorch runs its DEFAULT kernels",
                              why=(f"{f.get('cpu.brand') or 'This CPU'} has no AVX2 with FMA, so PyTorch, oneDNN and "
                                   "MKL run their SSE code paths: expect a fraction of a current CPU's throughput."),
                              fix="For training, prefer a machine with AVX2 and FMA (any x86 CPU since 2013-2017).")]
        return [f.finding("ok", f"AVX-512: not part of {label}; {kernels}")]
    hyper = f.get("cpu.hypervisor")
    virt = f.get("software.os.virtualization")
    who = f"the hypervisor{f' ({virt})' if virt else ''}" if hyper else "the operating system or firmware"
    why = (f"This is a {uarch} CPU ({silicon[uarch]}), which has AVX-512, but the kernel reports no "
           f"avx512f/avx512cd, so {who} hides it. PyTorch, oneDNN and MKL then run their AVX2 kernels, "
           f"with half the vector width for GEMM and convolutions.")
    if hyper:
        fix = ("Give the VM a CPU model that passes AVX-512 through: libvirt <cpu mode='host-passthrough'/>, "
               "QEMU -cpu host, or an instance type whose CPU model exposes AVX-512.")
        snippet = "# libvirt (virsh edit VM):\n#   <cpu mode='host-passthrough' check='none'/>\n# QEMU:\nqemu-system-x86_64 -cpu host ..."
    else:
        fix = ("Check /proc/cmdline for clearcpuid= or noxsave and remove them, and use a kernel newer than "
               "the CPU (older kernels do not enable its XSAVE state).")
        snippet = "cat /proc/cmdline\ngrep -o 'avx512[a-z_0-9]*' /proc/cpuinfo | sort -u"
    return [f.finding("warning", "AVX-512 is in the silicon but hidden from programs", why=why, fix=fix, snippet=snippet)]


@rule("ISA002", "torch-capability-below-cpu", category="isa", severity="warning",
      title="PyTorch runs slower kernels than the CPU supports")
def torch_capability_below_cpu(report: Report) -> list[Finding]:
    """What it checks:
        PyTorch's run-time kernel choice (``torch.backends.cpu.get_cpu_capability()``: DEFAULT,
        AVX2 or AVX512) against what the CPU's flags allow (AVX512 needs F+BW+DQ+VL and FMA,
        AVX2 needs AVX2 and FMA), and whether ``ATEN_CPU_CAPABILITY`` forces it lower. Also notes
        AVX-512 CPUs whose subsets are too few for PyTorch's AVX512 kernels (e.g. Xeon Phi).

    Why it matters:
        PyTorch's vectorised element-wise, reduction and activation kernels are compiled three
        times and picked at start-up. Running the DEFAULT (SSE) kernels on an AVX2 machine, or
        AVX2 on an AVX-512 machine, costs up to 2x on those operators.

    Fix:
        Unset ``ATEN_CPU_CAPABILITY`` (it can only lower the choice), and update PyTorch if an old
        build does not know this CPU's AVX-512.
    """
    f = Facts(report)
    status = f.get("software.torch.status")
    if status != "ok":
        return []
    actual = f.get("software.torch.cpu_capability")
    expected = machine.expected_torch_capability(f)
    rank = machine.knowledge()["torch_cpu_capability"]["rank"]
    if not actual or expected is None or actual.upper() not in rank:
        return []
    forced = machine.env(f, "ATEN_CPU_CAPABILITY")
    if rank[actual.upper()] < rank[expected]:
        why = (f"The CPU's flags allow PyTorch's {expected} kernels, but this PyTorch "
               f"({f.get('software.torch.version') or 'unknown version'}) runs {actual}.")
        if forced:
            why += f" ATEN_CPU_CAPABILITY={forced} is set in the environment and forces it down."
            fix = "Unset ATEN_CPU_CAPABILITY where it is set (shell profile, launch script, container image)."
            snippet = snippets.unset_lines(["ATEN_CPU_CAPABILITY"])
        else:
            why += " Vectorised operators then run at up to half their speed."
            fix = "Update PyTorch to a release that dispatches this CPU's best kernels."
            snippet = snippets.install_commands(report)
        return [f.finding("warning", f"PyTorch uses {actual} kernels; this CPU can run {expected}",
                          why=why, fix=fix, snippet=snippet)]
    if f.get("cpu.isa.avx512_usable") and not f.get("cpu.isa.avx512_torch_kernels"):
        subsets = ", ".join(f.get("cpu.isa.avx512_subsets") or [])
        return [f.finding("info", f"AVX-512 is usable but not for PyTorch's AVX512 kernels ({subsets})",
                          why=(f"PyTorch's AVX512 kernels need the F, BW, DQ and VL subsets; this CPU has {subsets}, "
                               f"so PyTorch runs its {actual} kernels. oneDNN and MKL still use what there is."),
                          fix="Nothing to change: this is the best PyTorch build for this CPU.")]
    if actual.upper() == "DEFAULT":
        mask = vm_mask.detect(f)
        if f.get("cpu.cpuid_check.emulated"):
            cause = "the CPU that executes Python (emulated, see ISA007) has no AVX2 with FMA"
        elif mask is not None and mask.kind != "named":
            cause = "the VM's CPU model hides AVX2/FMA (see ISA009)"
        else:
            cause = "this CPU, as the OS reports it, has no AVX2 with FMA"
        return [f.finding("info", "PyTorch runs its DEFAULT (SSE) kernels",
                          why=(f"PyTorch {f.get('software.torch.version') or ''} picked its DEFAULT kernels because "
                               f"{cause}. They are the slowest of its three kernel sets.").replace("  ", " "),
                          fix=("Give the VM the host's CPU model (ISA009)." if mask is not None and mask.kind != "named"
                               else "Nothing to change in software; a CPU with AVX2 and FMA runs the AVX2 kernels."))]
    return [f.finding("ok", f"PyTorch runs its best kernels for this CPU ({actual})")]


@rule("ISA003", "illegal-instruction", category="isa", severity="error",
      title="Importing a package crashes with Illegal instruction")
def illegal_instruction(report: Report) -> list[Finding]:
    """What it checks:
        Whether importing PyTorch or another installed deep-learning package in a child process
        died of signal SIGILL ("Illegal instruction"), and which instructions the package build
        needs that this CPU lacks (from the ISA-floor table).

    Why it matters:
        A binary built for a newer instruction set (AVX, AVX2, x86-64-v2/v3) kills the whole Python
        process the moment it runs one such instruction, with no Python traceback. Nothing can
        catch it; every script that imports the package dies.

    Fix:
        Install a build made for this CPU: an older release whose floor the CPU meets, a conda-forge
        build, or a build from source with the right ``-march``. Running on a newer CPU also works.
    """
    f = Facts(report)
    crashes = sigill.sigill_crashes(f)
    if not crashes:
        if f.get("software.children_ran"):
            return [f.finding("ok", "Installed deep-learning packages import without Illegal instruction")]
        return []
    emulated = bool(machine.executing_lacks(f))
    mask = vm_mask.detect(f)
    who = ("the CPU that runs Python (emulated, see ISA007)" if emulated
           else f.get("cpu.brand") or "this CPU")
    return [_sigill_finding(report, f, crash, who, emulated, mask) for crash in crashes]


def _sigill_finding(report: Report, f: Facts, crash: sigill.Sigill, who: str, emulated: bool, mask) -> Finding:
    """One ISA003 finding: the package that lacks the instructions, what died with it, and its fix."""
    package = crash.package
    died = [package] if crash.message else []
    died += crash.also
    why = f"Importing {' and '.join(died)} in a child process died with SIGILL (Illegal instruction)"
    if crash.also:
        why += (f" inside {package}'s code: {', '.join(crash.also)} import{'s' if len(crash.also) == 1 else ''} "
                f"{package}, whose build is the one that lacks the instructions")
    why += "."
    said = quote_message(crash.message)
    if said and not said.startswith("Illegal instruction:"):
        why += f" The child said: {said}"  # diagnose_exit's own wording would only repeat the lines below
    missing = ", ".join(crash.missing)
    version = f" {crash.version}" if crash.version else ""
    if missing:
        why += f" {package}{version} needs {', '.join(crash.needs)}, which {who} lacks: {missing}."
    elif emulated:
        why += f" {who[0].upper() + who[1:]} lacks instructions /proc/cpuinfo lists, which this build uses."
    if crash.floor_name and missing:
        fix, snippet = floors.fix_for(crash.floor_name, FLOORS.safe_versions(crash.floor_name,
                                                                            machine.running_flags(f)),
                                      platform_of(report))
    elif package == "torch":
        fix = ("Install a PyTorch build that matches this CPU, or run on a CPU that has the instructions it needs.")
        snippet = snippets.install_commands(report)
    else:
        fix = (f"Install a {package} build that matches this CPU (an older release, a conda-forge build, or "
               f"one compiled from source), or run on a CPU that has the instructions it needs.")
        snippet = (f"python -m pip uninstall -y {package}  # this build cannot run here\n"
                   f"# then install a build for this CPU, e.g. from conda-forge: conda install -c conda-forge {package}")
    snippet = snippet or f"python -m pip uninstall -y {package}  # this build cannot run here"
    if emulated:
        fix = ("Run the job on the host CPU, natively (ISA007: /proc/cpuinfo describes the host, Python runs on an "
               "emulated CPU); to stay on the emulated CPU: " + fix[0].lower() + fix[1:])
    elif mask is not None and mask.kind in ("generic", "masked"):
        fix += " Or give the VM a CPU model that passes the host's instructions through (ISA009)."
    title = f"{package} crashes on import: Illegal instruction"
    if crash.also:
        title += f" (and takes {', '.join(crash.also)} down with it)"
    return f.finding("error", title, why=why, fix=fix, snippet=snippet)


@rule("ISA004", "import-failed", category="isa", severity="error",
      title="A package crashed, failed or hung on import")
def import_failed(report: Report) -> list[Finding]:
    """What it checks:
        The import checks (each installed deep-learning package imported in its own child process
        with a timeout): crashes by a signal other than SIGILL, Python errors, and timeouts.

    Why it matters:
        A package that segfaults or raises on import breaks every training script that uses it;
        a hanging import usually means a broken CUDA/ROCm driver stack or a deadlocked OpenMP
        runtime. The exit status says which: SIGSEGV and SIGABRT point at mixed native libraries.

    Fix:
        When a build's ISA floor explains the failure (jaxlib without AVX raises its own error;
        an import that dies inside NumPy 2.4 on a CPU without x86-64-v2), install the release that
        runs on this CPU, as ISA003 names it. Otherwise reinstall the package in a clean environment
        (``python -m venv``) with versions that match each other; the message of the failed import
        names the library that failed.
    """
    f = Facts(report)
    checks = f.get("software.import_checks", record=False) or []
    out = []
    seen = set()
    torch_status = f.get("software.torch.status")
    if torch_status in ("crashed", "error", "timeout") and f.get("software.torch.signal_name") != "SIGILL":
        checks = [_TorchCheck(torch_status, f.get("software.torch.signal_name"), f.get("software.torch.error") or "")] + list(checks)
    for chk in checks:
        if chk.status not in ("crashed", "error", "timeout") or chk.package in seen:
            continue
        if chk.status == "crashed" and chk.signal_name == "SIGILL":
            continue  # ISA003 explains these
        seen.add(chk.package)
        f.record(f"software.import_checks[{chk.package}]", f"{chk.status} {chk.signal_name or ''}".strip())
        if chk.status == "crashed":
            sev, what = "error", f"crashed with {chk.signal_name or 'a signal'}"
        elif chk.status == "timeout":
            sev, what = "warning", "did not finish importing before the time limit"
        else:
            sev, what = "error", "raised an error"
        why = f"Importing {chk.package} in a child process {what}."
        if chk.message:
            why += f" Message: {quote_message(chk.message)}"
        cause = sigill.floor_culprit(f, chk, platform_of(report))
        if cause is not None:
            # the cause is known: a build whose ISA floor this CPU misses (jaxlib without AVX, NumPy 2.4 on
            # x86-64-v1); the release that runs, as ISA003 says it, not a reinstall of the same build
            version = f" {cause.version}" if cause.version else ""
            why += (f" {cause.label}{version} needs {', '.join(cause.needs)}, which "
                    f"{'the CPU that runs Python' if machine.executing_lacks(f) else 'this CPU'} lacks: "
                    f"{', '.join(cause.missing)}.")
            title = f"{chk.package} {what} on import: {cause.label}{version} needs {', '.join(cause.needs)}"
            out.append(f.finding("error", title, why=why, fix=cause.fix, snippet=cause.snippet))
            continue
        out.append(f.finding(sev, f"{chk.package} {what} on import", why=why,
                             fix=("Reinstall it in a clean virtual environment with matching versions; "
                                  "the message names the library that failed."),
                             snippet=_fresh_venv(report, chk.package)))
    if not out and checks and all(c.status in ("ok", "skipped") for c in checks):
        passed = [c.package for c in checks if c.status == "ok"]
        if len(passed) == 1:
            return [f.finding("ok", f"The import check passed ({passed[0]})")]
        return [f.finding("ok", f"All {plural(len(passed), 'import check')} passed")]
    return out


def _fresh_venv(report: Report, package: str) -> str:
    """A new virtual environment with ``package`` installed (PyTorch from its CPU index, like TORCH002)."""
    platform = platform_of(report)
    if platform.os_name == "Windows":
        make = "py -m venv fresh-env\nfresh-env\\Scripts\\activate"
    else:
        make = "python -m venv fresh-env && . fresh-env/bin/activate"
    return make + "\n" + (pip_install([package], platform, pip="python -m pip")
                          or f"# no official {package} build for this OS and CPU")


class _TorchCheck:
    """The torch child's result shaped like an ImportCheck."""

    def __init__(self, status: str, signal_name: str | None, message: str):
        self.package, self.status, self.signal_name, self.message = "torch", status, signal_name, message


@rule("ISA005", "package-isa-floor", category="isa", severity="error",
      title="An installed package needs instructions this CPU lacks")
def package_isa_floor(report: Report) -> list[Finding]:
    """What it checks:
        The ISA-floor table (resources/isa_floors.json, by version range, with sources): for each
        installed package build, the instruction sets its release needs (TensorFlow 1.6+: AVX;
        NumPy 2.4+: x86-64-v2; jaxlib: AVX ...) against this CPU's flags. Installed packages with
        compiled code that the table does not know are named as "unknown", never as fine.

    Why it matters:
        A package below its floor dies with "Illegal instruction" (or refuses to import) the first
        time that code runs — often minutes into a run, with no Python traceback.

    Fix:
        Install a release this CPU runs (the finding names the range, e.g. ``numpy<2.4``), a build
        compiled for this CPU, or run on a CPU that has the instructions. Floors marked unverified
        are reported as a warning, not an error. A package that crashed or failed to import for
        want of instructions is ISA003's, ISA004's or KERNEL001's to name, and "every floor is met"
        is never said beside it.
    """
    f = Facts(report)
    risks = f.get("software.isa_risks", record=False)
    if risks is None:
        return []
    crashed = sigill.crashed_packages(Facts(report)) | sigill.explained_by_floor(Facts(report))
    out = []
    brand = f.get("cpu.brand") or "this CPU"
    for r in [r for r in risks if r.at_risk and r.installed and r.package not in crashed]:
        f.record(f"software.isa_risks[{r.package}]", {"needs": r.needs, "missing": r.missing,
                                                      "confidence": r.confidence, "safe_versions": r.safe_versions})
        sure = r.confidence in (None, "documented", "reported")
        effect = ("refuses to import" if r.failure == "import_error"
                  else "dies with Illegal instruction the first time that code runs")
        why = (f"The installed {r.package} {r.version or ''} needs {', '.join(r.needs)}; {brand} lacks "
               f"{', '.join(r.missing)}, so it {effect}.")
        if not sure:
            why += " The floor is unverified (see the table's reason), so this is a warning, not a certainty."
        if r.sources:
            why += f" Source: {r.sources[0]}"
        sentence, command = floors.fix_for(r.package, floors.safe_range(f, r), platform_of(report))
        out.append(f.finding(
            "error" if sure else "warning",
            " ".join(f"{r.package} {r.version or ''} needs {', '.join(r.missing)}, which this CPU lacks".split()),
            why=" ".join(why.split()), fix=sentence, snippet=command))
    if out or not risks:
        return out
    if crashed:
        # never "every floor is met" in green beside a package that crashed or failed for want of instructions
        # (ISA003, ISA004, KERNEL001 name it): those findings speak for the floors
        return []
    tally = f.get("software", record=False).floor_tally()
    f.record("software.floor_tally", {"met": tally.met, "unknown": tally.unknown, "unchecked": tally.unchecked})
    n = len(tally.unknown)
    shown = ", ".join(tally.unknown[:6]) + (f" and {n - 6} more" if n > 6 else "")
    packages = f"compiled package{'s' if n != 1 else ''} unknown ({shown})"
    if not tally.checked:
        # nothing checked is not a pass: a captured tree, or only packages without a floor on record
        return [f.finding("info", f"No installed package's ISA floor could be checked; {n} {packages}")] if n else []
    title = f"Every installed package's ISA floor is met ({tally.checked} checked)"
    return [f.finding("ok", title + (f"; {n} other {packages}" if n else ""))]


@rule("ISA006", "fma-masked", category="isa", severity="warning",
      title="AVX2 without FMA: PyTorch falls back to its slowest kernels")
def fma_masked(report: Report) -> list[Finding]:
    """What it checks:
        A CPU that reports ``avx2`` but not ``fma`` — every AVX2 CPU ever made has FMA3, so this is
        a hypervisor's CPU model masking it (e.g. a KVM guest with a generic CPU type).

    Why it matters:
        PyTorch's AVX2 kernels and oneDNN's AVX2 code need AVX2 *and* FMA. Without FMA, PyTorch
        dispatches its DEFAULT (SSE) kernels and GEMMs lose half their FLOP/s (one fused
        multiply-add becomes two instructions).

    Fix:
        Give the VM the host's CPU model (libvirt ``host-passthrough``, QEMU ``-cpu host``) or a
        named model with FMA (``Haswell`` or later, ``EPYC``).
    """
    f = Facts(report)
    flags = machine.flags(f)
    if not flags or not machine.is_x86(f):
        return []
    if "avx2" not in flags:
        return []
    if "fma" in flags:
        return [f.finding("ok", "AVX2 and FMA are both available")]
    mask = vm_mask.detect(f)
    if mask is not None and mask.kind in ("generic", "masked"):
        return []  # ISA009: the VM's CPU model, with what else it hides and the fix per hypervisor
    hyper = f.get("cpu.hypervisor")
    return [f.finding(
        "warning", "AVX2 is reported without FMA" + (" (the hypervisor masks it)" if hyper else ""),
        why=(f"{f.get('cpu.brand') or 'This CPU'} reports avx2 but not fma; no real AVX2 CPU lacks FMA3, so "
             f"{'the VM' if hyper else 'the kernel/firmware'} hides it. PyTorch needs both for its AVX2 kernels and "
             "runs DEFAULT (SSE) kernels instead; GEMM throughput halves."),
        fix="Pass the host CPU model through to the VM (host-passthrough / -cpu host).",
        snippet="# libvirt: <cpu mode='host-passthrough' check='none'/>\nqemu-system-x86_64 -cpu host ...",
    )]


@rule("ISA007", "executing-cpu-differs", category="isa", severity="error",
      title="The CPU that runs Python is not the one /proc/cpuinfo describes")
def executing_cpu_differs(report: Report) -> list[Finding]:
    """What it checks:
        CPUID executed by a child Python, i.e. by the CPU that really runs your code, against the
        identity and flags /proc/cpuinfo lists. Checked on this machine only, by the report's
        ``cpuid-cross-check`` stage (skipped with ``--fast``, on captured trees and on non-x86 CPUs).

    Why it matters:
        Under user-mode emulation (qemu-user, Rosetta 2, some sandboxes) /proc/cpuinfo describes the
        host while your code runs on the emulated CPU. Every verdict read from the flags (AVX2,
        AVX-512, the x86-64 level, which wheels can run, which kernels PyTorch should pick) is then
        about the wrong CPU, and code built for a flag the emulated CPU lacks dies with Illegal
        instruction (SIGILL).

    Fix:
        Run the training natively on the host, or give the emulator the host's CPU model
        (``qemu-x86_64 -cpu host``), and install packages built for the CPU that executes them.
    """
    f = Facts(report)
    check = f.get("cpu.cpuid_check", record=False)
    if check is None or check.error:
        return []
    missing = f.get("cpu.cpuid_check.missing_flags") or []
    emulated = f.get("cpu.cpuid_check.emulated")
    executing = f.get("cpu.cpuid_check.executing") or "an unknown CPU"
    fix = ("Run the job natively on the host (or start the emulator with the host's CPU model, "
           "e.g. qemu-x86_64 -cpu host) and install packages built for the CPU that runs them.")
    if missing:
        shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
        return [f.finding(
            "error", f"The CPU running Python lacks {shown}, which /proc/cpuinfo lists",
            why=(f"CPUID in a child process reports {executing} without {shown}. /proc/cpuinfo describes "
                 "another CPU (the host of an emulator), so the instruction-set verdicts in this report "
                 "overstate what runs here, and any code built for those instructions dies with "
                 "Illegal instruction (SIGILL)."),
            fix=fix)]
    if emulated:
        return [f.finding(
            "warning", f"Python runs on {executing}, not the CPU /proc/cpuinfo describes",
            why=("CPUID in a child process names another CPU than /proc/cpuinfo: this looks like emulation "
                 "(qemu-user, Rosetta 2). Their flags agree, but speed and thread figures describe the emulator."),
            fix=fix)]
    return [f.finding("ok", "/proc/cpuinfo describes the CPU that runs Python (CPUID checked)")]

