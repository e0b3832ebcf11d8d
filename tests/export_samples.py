"""A fully populated Report for export tests: a 2-socket EPYC with findings and a sweep.

Built by hand (not probed) so the export tests do not depend on the probes'
progress and can plant identifying strings in known places.
"""

from __future__ import annotations

from cpudoctor.model import CpuInfo, IsaVerdict
from cpudoctor.model import BlasLib, NumpyInfo, OsInfo, PackageInfo, PythonInfo, Software, TorchBuild
from cpudoctor.model import Affinity, Core, L3Domain, NumaNode, Package, Topology
from cpudoctor.model import BenchRun, Finding, Meta, Report, ThreadRecommendation

BRAND = "AMD EPYC 9354 32-Core Processor"


def epyc_topology(packages: int = 2, ccx_per_pkg: int = 4, cores_per_ccx: int = 8, smt: int = 2) -> Topology:
    cores_per_pkg = ccx_per_pkg * cores_per_ccx
    ncores = packages * cores_per_pkg
    l3s: list[L3Domain] = []
    core_list: list[Core] = []
    for p in range(packages):
        for x in range(ccx_per_pkg):
            cpus: list[int] = []
            for k in range(cores_per_ccx):
                cid = p * cores_per_pkg + x * cores_per_ccx + k
                threads = [cid + t * ncores for t in range(smt)]
                cpus += threads
                core_list.append(Core(package=p, core_id=x * cores_per_ccx + k, cpus=threads, die=x,
                                      l3=len(l3s), numa=p))
            l3s.append(L3Domain(cpus=sorted(cpus), size_bytes=32 << 20))
    l3s.sort(key=lambda d: d.cpus[0])
    nodes = [NumaNode(id=p, cpus=sorted(c for core in core_list if core.package == p for c in core.cpus),
                      distances=[10 if q == p else 32 for q in range(packages)]) for p in range(packages)]
    allcpus = list(range(ncores * smt))
    return Topology(
        packages=packages, cores=ncores, logical_cpus=ncores * smt, l3_domains=l3s, numa_nodes=nodes,
        online_cpus=allcpus, smt_threads_per_core=smt,
        package_list=[Package(id=p, cpus=n.cpus) for p, n in enumerate(nodes)], core_list=core_list,
        numa_memory_bytes={str(p): 384 << 30 for p in range(packages)},
        affinity=Affinity(allowed_cpus=allcpus, usable_cpus=len(allcpus)), l3_known=True, source="sysfs")


def sample_report(hostname: str = "build-box-7", home: str = "/home/alice") -> Report:
    """A report with identifying strings planted where real probes could put them."""
    flags = ["fpu", "sse2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512cd", "avx512bw", "avx512dq",
             "avx512vl", "avx512_bf16", "avx512_vnni", "avx_vnni"]
    cpu = CpuInfo(vendor="AMD", vendor_id="AuthenticAMD", brand=BRAND, family=25, model=17, stepping=1,
                  microarchitecture="zen4", codename="Genoa", product_line="EPYC", arch="x86_64",
                  base_mhz=3250.0, max_mhz=3800.0, flags=flags,
                  isa=IsaVerdict(avx512_usable=True, avx512_subsets=["F", "CD", "BW", "DQ", "VL", "BF16", "VNNI"],
                                 avx512_torch_kernels=True, avx512_reason="avx512f and avx512cd are reported.",
                                 avx2=True, fma=True, f16c=True, bmi2=True, avx_vnni=True, avx512_vnni=True,
                                 avx512_bf16=True, x86_64_level=4, vector_width_bits=512,
                                 datapath_note="Zen4 executes 512-bit ops on 256-bit units"),
                  hypervisor=False, source="procfs")
    sw = Software(
        os=OsInfo(system="Linux", distro="Debian GNU/Linux", distro_version="12", kernel="6.1.0-18-amd64",
                  libc="glibc 2.36", governor="schedutil", cpufreq_driver="acpi-cpufreq", thp="madvise",
                  mem_total_bytes=768 << 30, hostname=hostname),
        python=PythonInfo(version="3.11.2", implementation="CPython", executable=f"{home}/venv/bin/python",
                          env_kind="venv", env_name="venv"),
        packages=[PackageInfo("torch", "2.3.0+cpu", "cpu", "+cpu"), PackageInfo("numpy", "1.26.4")],
        torch=TorchBuild(status="ok", version="2.3.0+cpu", cpu_capability="AVX512", mkl_available=True,
                         mkldnn_available=True, openmp="GNU libgomp", parallel_backend="OpenMP",
                         intra_op_threads=64, inter_op_threads=64, bf16_supported=True),
        numpy=NumpyInfo(version="1.26.4", blas=[BlasLib(user_api="blas", internal_api="openblas",
                                                        library="libopenblas64_p-r0.so", num_threads=128)]),
        thread_env={"OMP_NUM_THREADS": "64", "HF_TOKEN_SECRET": "hf_supersecret123"},
        children_ran=True,
        notes=[f"read {home}/.config/pip/pip.conf on {hostname}"],
    )
    findings = [
        Finding(code="THR001", symbol="omp-threads-count-smt", category="threads", severity="warning",
                title="OMP_NUM_THREADS counts SMT siblings",
                why="PyTorch runs one thread per logical CPU; two threads share one core's FPU.",
                fix="Use one thread per physical core.", snippet="export OMP_NUM_THREADS=64",
                evidence={"topology.cores": 64, "software.os.hostname": hostname}),
        Finding(code="ISA001", symbol="avx512-usable", category="isa", severity="ok",
                title="AVX-512 kernels are used", why="torch reports cpu capability AVX512."),
        Finding(code="OS003", symbol="governor-not-performance", category="os", severity="info",
                title="CPU governor is schedutil", fix="Set the performance governor while training.",
                snippet="sudo cpupower frequency-set -g performance"),
    ]
    # The lab's real result shapes (lab/sweep.py, lab/jobs/gemm.py through lab/results.py).
    ladder = [(None, None, "PyTorch defaults", "default", 4410.0)] + [
        (t, None, f"{t} threads", "threads", s) for t, s in ((1, 210.0), (8, 1480.0), (16, 2610.0), (32, 4090.0),
                                                             (64, 5020.0), (128, 4410.0))] + [
        (8, list(range(8)), "one CCX, no SMT (CPUs 0-7)", "pinning", 1710.0),
        (64, list(range(64)), "all cores, no SMT (CPUs 0-63)", "pinning", 5230.0)]
    sweep = BenchRun(kind="sweep", settings={"model": "mlp", "batch_size": 64},
                     metrics={"points": [{"variant": name, "group": group, "threads": t, "cpus": cpus,
                                          "threads_used": t or 128, "samples_per_s": sps, "status": "ok"}
                                         for t, cpus, name, group, sps in ladder],
                              "recommendation": {"threads": 64, "variant": "all cores, no SMT"}},
                     started_at="2026-11-30T09:00:00+00:00")
    gemm = BenchRun(kind="gemm", settings={"size": 2048},
                    metrics={"points": [{"backend": "torch", "precision": prec, "threads": t, "size": 2048,
                                         "gflops": g * (2.1 if prec == "bf16" else 1.0), "peak_gflops": 9000.0}
                                        for prec in ("fp32", "bf16")
                                        for t, g in ((1, 95.0), (16, 1380.0), (32, 2550.0), (64, 4410.0))]})
    return Report(
        meta=Meta(generated_at="2026-11-30T10:12:00+00:00", tool_version="0.1.0", root=f"{home}/captures/x",
                  platform="linux"),
        cpu=cpu, topology=epyc_topology(), software=sw, findings=findings, benchmarks=[sweep, gemm],
        recommendation=ThreadRecommendation(threads=64, interop_threads=1, variant="all cores, no SMT",
                                            samples_per_s=5020.0, default_samples_per_s=4410.0),
        notes=[f"probe ran as alice on {hostname}, NIC 00:1a:2b:3c:4d:5e, board serial: XK42-9911"],
    )
