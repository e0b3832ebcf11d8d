"""Running under WSL2, a virtual machine or a container, and what follows from it."""

from __future__ import annotations

from cpudoctor.advisor import machine, snippets
from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.kits.format import size
from cpudoctor.kits.plural import plural
from cpudoctor.model import Finding, Report


@rule("ENV001", "wsl2", category="environment", severity="info",
      title="Running under WSL2")
def wsl2(report: Report) -> list[Finding]:
    """What it checks:
        Whether the report comes from WSL2 (or WSL1), from ``/proc/version``.

    Why it matters:
        WSL2 is a Hyper-V VM: it gets at most the memory and processors set in ``.wslconfig``
        (by default half of Windows' RAM), no CPU frequency control, often no cache/topology
        information (so CCX pinning cannot be planned), and files under ``/mnt/c`` are served over
        9P at a fraction of native speed — a DataLoader reading images from there starves the
        CPU. WSL1 translates system calls and has no real ``/proc``/``/sys`` at all.

    Fix:
        Keep datasets inside the Linux filesystem (``~/``), and size the VM in
        ``%UserProfile%\\.wslconfig`` (``processors=``, ``memory=``), then ``wsl --shutdown``. Under
        WSL1, which reads no ``.wslconfig``, convert the distribution to WSL2 (``wsl --set-version``).
    """
    f = Facts(report)
    wsl = f.get("software.os.wsl")
    if not wsl:
        return []
    mem = f.get("software.os.mem_total_bytes")
    cpus = f.get("topology.logical_cpus")
    l3 = f.get("topology.l3_known")
    details = []
    if cpus:
        details.append(f"it sees {cpus} CPUs")
    if mem:
        details.append(f"{size(mem)} of RAM")
    seen = f": {', '.join(details)}" if details else ""
    if wsl == 1:
        # WSL1 is no VM: it translates Linux system calls on Windows' own kernel and reads no .wslconfig ([wsl2]
        # is WSL2's section); its memory and CPUs are Windows' own
        why = (f"This is WSL1{seen}. WSL1 has no Linux kernel: it translates system calls on Windows' kernel, so "
               "there is no VM to size (.wslconfig's [wsl2] settings do not apply to it), files under /mnt/c go "
               "through that translation slowly, and what /proc and /sys show is partly made up. PyTorch runs, "
               "but WSL2 runs it on a real Linux kernel.")
        return [f.finding(
            "info", "Running under WSL1: convert the distribution to WSL2 for training",
            why=why,
            fix="Convert the distribution to WSL2 (in PowerShell on Windows; it keeps your files), then keep "
                "datasets under ~/ inside it.",
            snippet="# in PowerShell on Windows:\nwsl --list --verbose\nwsl --set-version <distribution> 2",
            snippet_lang="powershell")]
    why = (f"This is WSL2{seen}. "
           "Files under /mnt/c are served over 9P at a fraction of native speed, and the VM gets only what "
           ".wslconfig allows (by default half of Windows' memory).")
    if l3 is False:
        why += " WSL hides the cache topology, so CCX pinning cannot be planned from here."
    return [f.finding(
        "info", "Running under WSL2: keep data off /mnt/c, size the VM in .wslconfig",
        why=why,
        fix="Store datasets under ~/ inside WSL, give the VM enough processors and memory, then restart it.",
        snippet=("# %UserProfile%\\.wslconfig on Windows:\n"
                 "[wsl2]\n"
                 f"processors={cpus or 8}\n"
                 f"memory={max(8, int((mem or 16 * 2**30) / 2**30))}GB\n"
                 "# then, in PowerShell: wsl --shutdown"),
        snippet_lang="ini")]


@rule("ENV002", "virtual-machine", category="environment", severity="info",
      title="Running in a virtual machine")
def virtual_machine(report: Report) -> list[Finding]:
    """What it checks:
        A hypervisor (the ``hypervisor`` CPU flag, DMI vendor, systemd-detect-virt style facts),
        outside WSL.

    Why it matters:
        vCPUs are threads on the host: two vCPUs may be SMT siblings of one physical core, the
        topology the guest sees (cores, L3, NUMA) may be invented by the hypervisor, CPU flags may
        be masked (AVX-512, FMA), and other guests steal time. Thread counts and pinning advice
        based on the guest's view can be wrong by 2x.

    Fix:
        Use a CPU model that passes the host's flags through, pin vCPUs to host cores (and expose
        the host topology) for training VMs, and measure with the thread sweep rather than trust
        the counts.
    """
    f = Facts(report)
    if f.get("software.os.wsl"):
        return []
    vm = f.get("software.os.vm")
    hyper = f.get("cpu.hypervisor")
    if not vm and not hyper:
        if vm is False or hyper is False:
            return [f.finding("ok", "Bare metal: no hypervisor detected")]
        return []
    virt = f.get("software.os.virtualization")
    cpus = f.get("topology.logical_cpus")
    smt = machine.smt_threads(f)
    why = (f"This is a {virt or 'virtual machine'} guest" + (f" with {cpus} vCPUs" if cpus else "") + ". vCPUs are host threads: "
           "the cores, SMT siblings and caches the guest sees may not match the host, flags can be masked, and other "
           "guests steal time.")
    if smt == 1 and cpus and cpus > 1:
        why += " The guest reports no SMT, so it cannot tell whether two vCPUs share one physical core."
    return [f.finding(
        "info", "Running in a virtual machine" + (f" ({virt})" if virt else ""),
        why=why,
        fix="Ask for host-passthrough CPUs with pinned vCPUs for training, and trust the thread sweep over core counts.",
        snippet="grep -c ^processor /proc/cpuinfo\ngrep -E '^(steal|cpu )' /proc/stat  # steal time: column 8")]


@rule("ENV003", "container", category="environment", severity="info",
      title="Running in a container")
def container(report: Report) -> list[Finding]:
    """What it checks:
        Whether the report was made inside a container (Docker, Podman, Kubernetes, LXC), and the
        cgroup CPU quota and memory limit it runs under.

    Why it matters:
        A container sees the host's CPUs in ``/proc/cpuinfo`` but may only use its quota: PyTorch
        and OpenBLAS size their pools from the host's cores, so a pod limited to 4 CPUs on a
        64-core host starts 64 threads and is throttled by the CFS quota every 100 ms. The memory
        limit kills the job with SIGKILL (exit 137) instead of swapping.

    Fix:
        Set ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` to the quota in the image or pod spec, and
        size the memory limit for the job (``docker run --cpus N --memory XG``).
    """
    f = Facts(report)
    kind = f.get("software.os.container")
    if not kind:
        return []
    quota = f.get("topology.affinity.cpu_quota")
    limit = f.get("software.os.cgroup_memory_limit_bytes")
    logical = f.get("topology.logical_cpus")
    plan = snippets.thread_plan(report)
    why = f"This is a {kind} container"
    if quota:
        why += f" with a CPU quota of {plural(quota, 'CPU')}" + (f" on a host with {plural(logical, 'CPU')}" if logical else "")
    if limit:
        why += f" and a {size(limit)} memory limit"
    why += "."
    if quota:
        why += " Libraries size their thread pools from the host's CPUs, not the quota, and are throttled every 100 ms."
    else:
        why += " No CPU quota applies, so thread counts follow the CPUs the container sees."
    if limit:
        why += " Going over the memory limit kills the job with SIGKILL (exit 137), without a traceback."
    return [f.finding(
        "info", f"Running in a {kind} container" + (f" limited to {plural(quota, 'CPU')}" if quota else ""),
        why=why,
        fix=f"Set the thread counts to {plan.threads} in the image or the pod spec.",
        snippet=(f"docker run --cpus {quota:g} -e OMP_NUM_THREADS={plan.threads} -e MKL_NUM_THREADS={plan.threads} IMAGE"
                 if quota else f"docker run -e OMP_NUM_THREADS={plan.threads} -e MKL_NUM_THREADS={plan.threads} IMAGE"))]
