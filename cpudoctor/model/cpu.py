"""What a CPU is: identity, flags, ISA verdicts, clocks, and the CPUID cross-check's answer.

Plain data, filled by :mod:`cpudoctor.probes.cpu` and read by every other
layer; ``None`` means unknown and ``notes`` say why. The field names are a
public JSON contract (``resources/report.schema.json``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Every name an OS gives an x86 machine (``uname -m``, ``platform.machine()`` on Windows, cpuinfo).
X86_ARCHES = frozenset({"x86_64", "amd64", "x64", "i386", "i486", "i586", "i686", "x86"})
ARM_ARCHES = frozenset({"aarch64", "arm64", "arm", "armv6l", "armv7l", "armv8", "armv8l"})
# The names of a 64-bit machine as some OS or tool spells them -> the Linux kernel's (``uname -m``).
_CANONICAL = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64", "armv8": "aarch64"}


def arch_family(arch: str | None) -> str | None:
    """``x86``, ``arm`` or the name itself (``riscv64``, ``ppc64le``); None when unknown.

    The one answer to "is this x86?" and "is this Arm?" for the whole app: an
    ``arch`` as any OS spells it (``AMD64`` on Windows, ``arm64`` on macOS) is
    folded here.
    """
    if not arch:
        return None
    low = arch.lower()
    if low in X86_ARCHES:
        return "x86"
    if low in ARM_ARCHES:
        return "arm"
    return low


def canonical_arch(machine: str | None) -> str | None:
    """``platform.machine()`` (or py-cpuinfo's raw arch) in the Linux kernel's spelling: ``AMD64`` and ``x64``
    -> ``x86_64``, ``arm64`` -> ``aarch64``; other names lower-cased; None for none."""
    if not machine:
        return None
    low = machine.strip().lower()
    return _CANONICAL.get(low, low) or None


@dataclass
class IsaVerdict:
    """What the CPU can run, decided from flags the kernel reports (not substrings)."""

    avx512_usable: bool = False            # avx512f AND avx512cd reported (OS saves ZMM state)
    avx512_subsets: list[str] = field(default_factory=list)  # short names: F, CD, BW, DQ, VL, IFMA, VBMI, VBMI2, VNNI, BF16, FP16, BITALG, VPOPCNTDQ, VP2INTERSECT, ER, PF
    avx512_torch_kernels: bool = False     # PyTorch's AVX512 kernels eligible: F+BW+DQ+VL
    avx512_reason: str = ""                # one or two sentences: why usable / not
    avx2: bool = False
    fma: bool = False
    f16c: bool = False
    bmi2: bool = False
    avx_vnni: bool = False
    avx512_vnni: bool = False
    avx512_bf16: bool = False
    amx: list[str] = field(default_factory=list)   # subset of tile, bf16, int8, fp16, complex
    x86_64_level: int | None = None        # 1-4 per the psABI; None on non-x86
    vector_width_bits: int | None = None   # widest usable SIMD register (128/256/512; SVE: vector length if known)
    datapath_note: str = ""                # e.g. "Zen4 executes 512-bit ops on 256-bit units"
    datapath_bits: int | None = None       # native SIMD execution width of the micro-architecture, when known


@dataclass
class CpuInfo:
    vendor: str | None = None              # short: AMD, Intel, ARM, Hygon, ...
    vendor_id: str | None = None           # raw: AuthenticAMD, GenuineIntel, 0x41
    brand: str | None = None
    family: int | None = None
    model: int | None = None
    stepping: int | None = None
    microarchitecture: str | None = None   # lowercase: zen, zen2, ..., haswell, skylake, icelake, sapphirerapids, neoverse_v2, ...
    codename: str | None = None            # product codename: Milan, Raphael, Sapphire Rapids, ...
    product_line: str | None = None        # Ryzen desktop, Ryzen mobile, Threadripper, EPYC, Xeon, Core, ...
    arch: str | None = None                # x86_64, aarch64, ...
    base_mhz: float | None = None
    max_mhz: float | None = None
    flags: list[str] = field(default_factory=list)
    isa: IsaVerdict = field(default_factory=IsaVerdict)
    hypervisor: bool | None = None         # running under a hypervisor (flags may be masked)
    source: str = "unknown"                # procfs | py-cpuinfo | sysctl (macOS) | unknown
    notes: list[str] = field(default_factory=list)
    microarchitecture_name: str | None = None  # human form: "Zen 5", "Neoverse V2"
    arm_part: str | None = None            # ARM: CPU part of the fastest core, e.g. 0xd4f
    arm_parts: list[str] = field(default_factory=list)  # ARM: every distinct CPU part (hybrid chips list several)
    arm_variant: str | None = None         # ARM: CPU variant
    logical_cpus_listed: int | None = None  # processor entries in cpuinfo (archspec dumps keep only one)
    base_mhz_source: str | None = None     # cpufreq base_frequency | acpi_cppc nominal_freq | brand string
    max_mhz_source: str | None = None      # cpufreq cpuinfo_max_freq
    current_mhz: float | None = None       # the clock the kernel reported when probed, averaged over CPUs (a snapshot)
    current_mhz_source: str | None = None  # cpuinfo cpu MHz | cpufreq scaling_cur_freq
    cpuid_check: CpuidCheck | None = None  # CPUID in a child against cpuinfo (this machine, x86); None = not run

    @property
    def arch_family(self) -> str | None:
        """``x86``, ``arm``, another architecture's name, or None when the architecture is unknown."""
        return arch_family(self.arch)

    @property
    def is_x86(self) -> bool | None:
        """True on x86 (32 or 64 bit), False on any other known architecture, None when unknown."""
        family = self.arch_family
        return None if family is None else family == "x86"

    @property
    def is_arm(self) -> bool | None:
        """True on Arm (64 or 32 bit), False on any other known architecture, None when unknown."""
        family = self.arch_family
        return None if family is None else family == "arm"


@dataclass
class CpuidCheck:
    """CPUID run by a child Python against /proc/cpuinfo: does the CPU that executes code match it?"""

    executing: str | None = None           # "GenuineIntel family 6 model 26": the CPU that ran the child
    emulated: bool = False                 # its identity differs from /proc/cpuinfo's (qemu-user, Rosetta 2)
    missing_flags: list[str] = field(default_factory=list)   # listed by the kernel, absent from CPUID: SIGILL if used
    hidden_flags: list[str] = field(default_factory=list)    # in CPUID, not listed by the kernel (disabled by it)
    os_disabled: list[str] = field(default_factory=list)     # listed by the kernel, register state not saved (XCR0)
    error: str | None = None               # the check could not run; the rest is empty
    hypervisor_vendor: str | None = None   # CPUID leaf 0x40000000's signature in a guest ("KVMKVMKVM"); None on bare metal
