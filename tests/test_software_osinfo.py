"""OS facts from fake roots: every path is built from ``root``, nothing from the live machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import HWLOC_MACHINES, machine_root

from cpudoctor.probes.software.osinfo import (
    kernel_from_proc_version,
    parse_meminfo,
    parse_os_release,
    parse_thp,
    probe_os,
    wsl_version,
)

WSL2 = "Linux version 5.15.153.1-microsoft-standard-WSL2 (root@941d701f84f1) (gcc (GCC) 11.2.0) #1 SMP Fri Mar 29 23:14:13 UTC 2024"
WSL1 = "Linux version 4.4.0-19041-Microsoft (Microsoft@Microsoft.com) (gcc version 5.4.0 (GCC) ) #1237-Microsoft Sat Sep 11 14:32:00 PST 2021"
NATIVE = "Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) 12.2.0) #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)"


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_parsers():
    assert parse_os_release('NAME="Ubuntu"\nVERSION_ID="22.04"\n') == ("Ubuntu", "22.04")
    assert parse_os_release(None) == (None, None)
    assert wsl_version(WSL2) == 2 and wsl_version(WSL1) == 1 and wsl_version(NATIVE) is None
    assert kernel_from_proc_version(NATIVE) == "6.1.0-18-amd64"
    assert parse_thp("always [madvise] never") == "madvise" and parse_thp("[always] madvise never") == "always"
    assert parse_thp("garbage") is None
    mem = parse_meminfo("MemTotal:       24684092 kB\nSwapTotal: 0 kB\nHugePages_Total: 3\n")
    assert mem == {"MemTotal": 24684092 * 1024, "SwapTotal": 0, "HugePages_Total": 3}


def test_wsl2_root(tmp_path):
    write(tmp_path, "/proc/version", WSL2)
    write(tmp_path, "/etc/os-release", 'NAME="Ubuntu"\nVERSION_ID="24.04"\n')
    info, notes = probe_os(tmp_path)
    assert info.wsl == 2 and info.vm is True and info.virtualization == "hyperv"
    assert info.system == "Linux" and info.kernel == "5.15.153.1-microsoft-standard-WSL2"
    assert (info.distro, info.distro_version) == ("Ubuntu", "24.04")
    assert info.libc is None  # never taken from the live process for a captured tree


def test_wsl_env_only_counts_for_live_environ(tmp_path):
    write(tmp_path, "/proc/version", NATIVE)
    assert probe_os(tmp_path)[0].wsl is None
    info, notes = probe_os(tmp_path, environ={"WSL_DISTRO_NAME": "Ubuntu"})
    assert info.wsl == 2 and any("WSL_DISTRO_NAME" in n for n in notes)


def test_docker_container_with_cgroup_v2_limit(tmp_path):
    write(tmp_path, "/.dockerenv", "")
    write(tmp_path, "/proc/1/cgroup", "0::/\n")
    write(tmp_path, "/proc/self/cgroup", "0::/\n")
    write(tmp_path, "/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids")
    write(tmp_path, "/sys/fs/cgroup/memory.max", "8589934592\n")
    info, _ = probe_os(tmp_path)
    assert info.container == "docker"
    assert info.cgroup_memory_limit_bytes == 8 << 30


def test_cgroup_v1_docker_path_and_unlimited(tmp_path):
    cid = "3f4e" * 16
    write(tmp_path, "/proc/1/cgroup", f"12:memory:/docker/{cid}\n11:cpu,cpuacct:/docker/{cid}\n")
    write(tmp_path, "/proc/self/cgroup", f"12:memory:/docker/{cid}\n")
    write(tmp_path, f"/sys/fs/cgroup/memory/docker/{cid}/memory.limit_in_bytes", "4294967296\n")
    write(tmp_path, "/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
    info, _ = probe_os(tmp_path)
    assert info.container == "docker"
    assert info.cgroup_memory_limit_bytes == 4 << 30
    write(tmp_path, f"/sys/fs/cgroup/memory/docker/{cid}/memory.limit_in_bytes", "9223372036854771712\n")
    assert probe_os(tmp_path)[0].cgroup_memory_limit_bytes is None


def test_cgroup_v2_parent_limit_binds(tmp_path):
    write(tmp_path, "/proc/self/cgroup", "0::/user.slice/user-1000.slice/session-2.scope\n")
    write(tmp_path, "/sys/fs/cgroup/cgroup.controllers", "memory")
    write(tmp_path, "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope/memory.max", "max\n")
    write(tmp_path, "/sys/fs/cgroup/user.slice/user-1000.slice/memory.max", "17179869184\n")
    assert probe_os(tmp_path)[0].cgroup_memory_limit_bytes == 16 << 30


@pytest.mark.parametrize(
    "files, expected",
    [
        ({"/run/.containerenv": ""}, "podman"),
        ({"/proc/1/cgroup": "0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-ab.scope\n"}, "kubernetes"),
        ({"/run/systemd/container": "lxc\n"}, "lxc"),
        ({"/proc/1/cgroup": "0::/init.scope\n"}, None),
    ],
)
def test_container_markers(tmp_path, files, expected):
    for rel, text in files.items():
        write(tmp_path, rel, text)
    assert probe_os(tmp_path)[0].container == expected


def test_kubernetes_env_only_when_live(tmp_path):
    write(tmp_path, "/.dockerenv", "")
    assert probe_os(tmp_path)[0].container == "docker"
    assert probe_os(tmp_path, environ={"KUBERNETES_SERVICE_HOST": "10.0.0.1"})[0].container == "kubernetes"


def test_governor_driver_boost_thp_meminfo(tmp_path):
    for n, gov in ((0, "performance"), (1, "performance"), (2, "powersave")):
        write(tmp_path, f"/sys/devices/system/cpu/cpufreq/policy{n}/scaling_governor", gov)
        write(tmp_path, f"/sys/devices/system/cpu/cpufreq/policy{n}/scaling_driver", "amd-pstate-epp")
        write(tmp_path, f"/sys/devices/system/cpu/cpufreq/policy{n}/boost", "1")
    write(tmp_path, "/sys/kernel/mm/transparent_hugepage/enabled", "always madvise [never]\n")
    write(tmp_path, "/proc/meminfo", "MemTotal: 65536000 kB\nMemFree: 1000 kB\nMemAvailable: 32768000 kB\n"
                                     "SwapTotal: 2097148 kB\nSwapFree: 1048574 kB\n")
    info, notes = probe_os(tmp_path)
    assert info.governor == "performance" and info.cpufreq_driver == "amd-pstate-epp"
    assert any("different governors" in n for n in notes)
    assert info.boost is True
    assert info.thp == "never"
    assert info.mem_total_bytes == 65536000 * 1024 and info.mem_available_bytes == 32768000 * 1024
    assert info.swap_total_bytes == 2097148 * 1024 and info.swap_used_bytes == 1048574 * 1024
    # A global boost switch wins over per-policy files; acpi-cpufreq writes it.
    write(tmp_path, "/sys/devices/system/cpu/cpufreq/boost", "0")
    assert probe_os(tmp_path)[0].boost is False


def test_intel_pstate_no_turbo(tmp_path):
    write(tmp_path, "/sys/devices/system/cpu/cpufreq/policy0/scaling_driver", "intel_pstate")
    write(tmp_path, "/sys/devices/system/cpu/intel_pstate/no_turbo", "1")
    assert probe_os(tmp_path)[0].boost is False


def test_vm_from_hypervisor_flag_and_dmi(tmp_path):
    write(tmp_path, "/proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu sse sse2 hypervisor avx\n")
    write(tmp_path, "/sys/class/dmi/id/sys_vendor", "QEMU")
    write(tmp_path, "/sys/class/dmi/id/product_name", "Standard PC (Q35 + ICH9, 2009)")
    info, _ = probe_os(tmp_path)
    assert info.vm is True and info.virtualization == "qemu"


def test_empty_root_is_unknown_not_a_crash(tmp_path):
    info, notes = probe_os(tmp_path)
    assert info.system is None and info.mem_total_bytes is None and info.governor is None and info.thp is None
    assert info.vm is None and info.container is None
    assert len(notes) >= 3


@pytest.mark.parametrize("name", HWLOC_MACHINES)
def test_corpus_physical_machines_are_not_vms(corpus, name):
    # Every hwloc tree is a physical machine: no 'hypervisor' flag, DMI names a board maker.
    info, notes = probe_os(machine_root(name))
    assert info.system == "Linux" and info.kernel is None
    assert info.vm is False and info.virtualization is None
    assert info.container is None and info.wsl is None
    # Captured trees lack cpufreq governors and /proc/version: unknown with a note, never a crash.
    assert info.governor is None and any("cpufreq" in n for n in notes)


@pytest.mark.parametrize("kernel", ["WSL1", "WSL2"])
def test_the_wsl_finding_gives_wsl1_no_wslconfig_block(tmp_path, kernel):
    """Issue 41 item 10: a WSL1 tree's finding printed a `[wsl2]` .wslconfig block, which WSL1 does not read (it
    has no VM to size). Fake trees as each WSL shows itself (/proc/version, meminfo, cpuinfo), read as --root."""
    from cpudoctor.pipeline import Source, build_report

    write(tmp_path, "/proc/version", {"WSL1": WSL1, "WSL2": WSL2}[kernel] + "\n")
    write(tmp_path, "/proc/meminfo", "MemTotal:       16303876 kB\nMemAvailable:   15000000 kB\nSwapTotal: 0 kB\n")
    write(tmp_path, "/proc/cpuinfo", "".join(f"processor\t: {n}\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n"
                                             "model name\t: AMD Ryzen 9 5950X 16-Core Processor\n"
                                             "flags\t\t: fpu sse sse2 avx avx2 fma hypervisor\n\n" for n in range(4)))
    write(tmp_path, "/etc/os-release", 'NAME="Ubuntu"\nVERSION_ID="22.04"\n')
    report = build_report(Source.tree(tmp_path), children=False)
    [f] = [f for f in report.findings if f.code == "ENV001"]
    if kernel == "WSL1":
        assert "[wsl2]" not in f.snippet and ".wslconfig" not in f.snippet and "size the VM" not in f.title
        assert "wsl --set-version" in f.snippet and "WSL2" in f.title
    else:
        assert "[wsl2]" in f.snippet and "memory=" in f.snippet and "processors=4" in f.snippet
