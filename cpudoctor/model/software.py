"""The software stack of the Python environment a report describes: OS, Python, packages, PyTorch, BLAS.

Plain data, filled by :mod:`cpudoctor.probes.software` and read by every
other layer. The field names are a public JSON contract
(``resources/report.schema.json``).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GpuInfo:
    vendor: str                 # NVIDIA, AMD, Intel, ...
    pci_address: str = ""        # PCI bus address (0000:41:00.0), or "dxg" for a WSL2 GPU
    device_id: str = ""         # hex, e.g. 0x2330
    compute: bool = True        # False for BMC/VM console adapters (ASPEED, QEMU std VGA)


@dataclass
class OsInfo:
    system: str | None = None              # Linux, Darwin, Windows
    distro: str | None = None              # e.g. "Debian GNU/Linux"
    distro_version: str | None = None
    kernel: str | None = None
    libc: str | None = None                # e.g. "glibc 2.36"
    wsl: int | None = None                 # 1, 2, or None (not WSL)
    virtualization: str | None = None      # kvm, vmware, hyperv, ... or None
    vm: bool | None = None
    container: str | None = None           # docker, podman, kubernetes, lxc, ... or None
    governor: str | None = None            # performance, powersave, schedutil, ...
    power_plan: str | None = None          # Windows: the active power plan (Balanced, High performance, ...)
    power_plan_guid: str | None = None     # Windows: its GUID (the same in every display language)
    cpufreq_driver: str | None = None      # amd-pstate, amd-pstate-epp, acpi-cpufreq, intel_pstate
    boost: bool | None = None
    thp: str | None = None                 # always | madvise | never
    mem_total_bytes: int | None = None
    mem_available_bytes: int | None = None
    swap_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    cgroup_memory_limit_bytes: int | None = None
    hostname: str | None = None            # redacted by exports unless asked for


@dataclass
class PythonInfo:
    """The Python environment the software facts describe (the user's training environment, ideally)."""

    version: str | None = None
    implementation: str | None = None
    executable: str | None = None
    env_kind: str | None = None            # venv | conda | pyenv | system | pipx
    env_name: str | None = None
    prefix: str | None = None              # the environment's folder (redacted to ~ in exports)
    own: bool | None = None                # True: CPU Doctor's own environment, not one the user trains in
    chosen_by: str | None = None           # how it was chosen: --python | most likely training environment | ...
    error: str | None = None               # why it could not be examined (then packages and checks are empty)


@dataclass
class PackageInfo:
    name: str
    version: str | None = None
    build: str | None = None               # cpu | cuda | rocm | unknown
    detail: str = ""                       # e.g. "+cu121", "CUDA 12.1"
    installer: str | None = None           # who installed it: pip | conda | uv | ... (the dist-info INSTALLER file)


@dataclass
class TorchBuild:
    status: str = "not_installed"          # ok | not_installed | skipped (quick probe) | crashed | error | timeout
    version: str | None = None
    cpu_capability: str | None = None      # DEFAULT | AVX2 | AVX512 | ZVECTOR | ...
    mkl_available: bool | None = None
    mkl_version: str | None = None
    mkldnn_available: bool | None = None
    mkldnn_version: str | None = None
    openmp: str | None = None              # e.g. "GNU libgomp", "Intel OpenMP (libiomp5)", "LLVM libomp"
    parallel_backend: str | None = None    # OpenMP | native thread pool | TBB
    intra_op_threads: int | None = None
    inter_op_threads: int | None = None
    bf16_supported: bool | None = None     # torch.backends.mkldnn.is_bf16_supported() or equivalent
    cuda_version: str | None = None
    hip_version: str | None = None
    signal: int | None = None              # the child died of this signal
    signal_name: str | None = None         # "SIGILL" ...
    error: str | None = None               # "Illegal instruction: ..." / Python error text
    seconds: float | None = None
    blas: str | None = None                # BLAS_INFO of the build: mkl, openblas, accelerate, ...
    compiler: str | None = None            # e.g. "GCC 13.3"
    import_seconds: float | None = None    # time of `import torch` alone, in the child


@dataclass
class BlasLib:
    """One native threadpool library loaded by numpy/torch (threadpoolctl's view)."""

    user_api: str | None = None            # blas | openmp
    internal_api: str | None = None        # openblas | mkl | blis | openmp | ...
    library: str | None = None             # file name only (never a home path)
    version: str | None = None
    num_threads: int | None = None
    threading_layer: str | None = None
    architecture: str | None = None        # OpenBLAS core type, e.g. Haswell, Zen


@dataclass
class NumpyInfo:
    version: str | None = None
    simd_baseline: list[str] = field(default_factory=list)
    simd_dispatched: list[str] = field(default_factory=list)
    blas: list[BlasLib] = field(default_factory=list)
    error: str | None = None
    simd_not_found: list[str] = field(default_factory=list)  # dispatch targets compiled in but missing on this CPU


@dataclass
class IsaRisk:
    package: str
    installed: bool
    version: str | None = None
    needs: list[str] = field(default_factory=list)      # flags / x86-64 level the build needs
    missing: list[str] = field(default_factory=list)    # of those, what this CPU lacks
    at_risk: bool = False
    note: str = ""
    status: str | None = None              # met | at_risk | no_floor | unknown | not_x86 | flags_unknown
    confidence: str | None = None          # documented | reported | unverified (of the floor that applies)
    failure: str | None = None             # sigill | import_error: how a CPU below the floor sees it
    safe_versions: str | None = None       # releases this CPU runs, e.g. "<2.4"; "" = none known; None = current ones run
    sources: list[str] = field(default_factory=list)  # links behind the floor (release notes, issues)


@dataclass(frozen=True)
class FloorTally:
    """The installed packages against the ISA-floor table, each named once, in one of four lists.

    The report's Illegal-instruction section and rule ISA005 both count from here, so "N unknown" is the
    same number everywhere and no package is both "met" and "unknown".
    """

    met: list[str]                 # a floor on record (or none above the x86-64 baseline), and this CPU meets it
    at_risk: list[str]             # a floor on record that this CPU does not meet
    unknown: list[str]             # compiled code and no floor on record: neither fine nor at risk
    unchecked: list[str]           # a floor on record that could not be compared (CPU flags unknown, not x86)

    @property
    def checked(self) -> int:
        return len(self.met) + len(self.at_risk)


@dataclass
class ImportCheck:
    """One package imported in its own child, then its tiny workload run (a BLAS call, a matmul + conv).

    ``status`` is the import's; a crash after a clean import (a kernel that
    dies of SIGILL on the first matrix product) is ``workload_status`` and
    blames the package whose workload was running, never the import.
    """

    package: str
    module: str
    status: str = "skipped"                # ok | crashed | error | timeout | skipped
    signal: int | None = None
    signal_name: str | None = None
    message: str = ""
    seconds: float | None = None
    stage: str | None = None               # the last step the child reached: "import numpy", "workload numpy", "done"
    workload: str | None = None            # what ran after the import, e.g. "matrix product 384x384 float64 (numpy's BLAS)"
    workload_status: str | None = None     # ok | crashed | error | timeout; None = none known for this package, or not reached
    workload_message: str = ""
    workload_library: str | None = None    # the native library the crashed workload ran in: "OpenBLAS 0.3.27 (SkylakeX kernels)"
    crashed_in: str | None = None          # top-level module whose code ran at a crash (faulthandler's innermost installed frame): "numpy" when importing cv2 died in numpy
    cpus_before: list[int] | None = None   # the main thread's CPUs before the import (os.sched_getaffinity)
    cpus_after: list[int] | None = None    # ... after the import and the workload: smaller = the import pinned the thread
    workload_threads: int | None = None    # threads the workload started (the OpenMP team or BLAS pool)
    workload_cpus: list[int] | None = None # the CPUs those threads may use, together


@dataclass
class ImportOrderCheck:
    """Several packages imported in one child in the order scripts do (numpy then torch, torch then numpy).

    Two OpenMP runtimes, or two copies of one, meet only when both are loaded
    in one process: Intel's aborts with "OMP: Error #15" while each package
    imports fine alone. The child runs without ``KMP_DUPLICATE_LIB_OK`` unless
    the user set it, so the check sees what the user's script will.
    """

    modules: list[str] = field(default_factory=list)   # in import order
    status: str = "skipped"                # ok | crashed | error | timeout | skipped
    stage: str | None = None               # the last step reached: "import torch", "workload numpy", "done"
    message: str = ""
    signal_name: str | None = None
    openmp_libs: list[str] = field(default_factory=list)   # OpenMP runtime files mapped (one per distinct file)
    openmp_error: str | None = None        # the runtime's own words, e.g. "OMP: Error #15: Initializing libiomp5.so, ..."
    crashed_in: str | None = None          # top-level module whose code ran at a crash (faulthandler's innermost installed frame)


@dataclass
class Software:
    os: OsInfo = field(default_factory=OsInfo)
    python: PythonInfo = field(default_factory=PythonInfo)
    packages: list[PackageInfo] = field(default_factory=list)
    torch: TorchBuild = field(default_factory=TorchBuild)
    numpy: NumpyInfo = field(default_factory=NumpyInfo)
    loaded_libs: list[BlasLib] = field(default_factory=list)   # all threadpools in a torch+numpy child
    thread_env: dict[str, str] = field(default_factory=dict)   # whitelisted names only
    preload_libs: list[str] = field(default_factory=list)      # LD_PRELOAD reduced to names (jemalloc, tcmalloc)
    isa_risks: list[IsaRisk] = field(default_factory=list)
    compiled_unknown: list[str] = field(default_factory=list)  # installed distributions with compiled code and no ISA floor on record
    import_checks: list[ImportCheck] = field(default_factory=list)
    import_orders: list[ImportOrderCheck] = field(default_factory=list)   # several packages in one child, in users' orders
    gpus: "list[GpuInfo] | None" = None    # PCI display/accelerator devices; None = unknown (no PCI sysfs)
    children_ran: bool = False             # False for the cheap, instant part only
    children_cached: bool = False          # the children's results came from the cache (nothing they depend on changed)
    captured: bool = False                 # a captured tree (root is not /): Python, packages, env and children unknown, not empty
    notes: list[str] = field(default_factory=list)

    def floor_tally(self) -> FloorTally:
        """The installed packages by their ISA-floor status, each once (see :class:`FloorTally`)."""
        lists: dict[str, list[str]] = {"met": [], "at_risk": [], "unknown": [], "unchecked": []}
        seen: set[str] = set()

        def add(kind: str, name: str) -> None:
            key = name.lower().replace("_", "-").replace(".", "-")
            if key not in seen:
                seen.add(key)
                lists[kind].append(name)

        for r in self.isa_risks:
            if not r.installed:
                continue
            if r.at_risk:
                add("at_risk", r.package)
            elif r.status in ("met", "no_floor", None):     # None: a report from before 'status' (checked, met)
                add("met", r.package)
            elif r.status == "unknown":
                add("unknown", r.package)
            else:
                add("unchecked", r.package)
        for name in self.compiled_unknown:
            add("unknown", name)
        return FloorTally(**lists)
