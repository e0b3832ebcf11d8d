"""Windows machines on Linux: the raw GetLogicalProcessorInformationEx buffer, parsed, against the Linux probe.

The buffers under tests/fixtures/windows/ are Wine's real answers for the x86
corpus trees (record/record.py: Wine reads the tree's sysfs, bind-mounted over
/sys in a private mount namespace) and hand-built machines Wine cannot record
(processor groups, EfficiencyClass: build_machines.py). Nothing here needs
Wine; the regeneration check at the end runs it when it is installed and says
why it skips when not.

Where Wine limits what can be compared (each is asserted, not skipped):
* one processor group of at most 64 CPUs: the 80-thread Cascade Lake tree
  comes back as its CPUs 0-63 only, the 96-CPU tree (which also lacks the
  ``online`` file Wine reads) not at all;
* Wine groups cores by ``thread_siblings``, like Windows: on Bulldozer a
  compute unit's two integer cores are one core of two threads (the Linux
  probe follows hwloc and counts two cores; they are its shared-L2 groups);
* EfficiencyClass is 0 everywhere (Wine 8 reads it only from
  /sys/devices/cpu_core, which no corpus tree has), and NUMA distances do not
  exist on Windows at all.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO, machine_root, run_cli
from cpudoctor.probes import probe_cpu, probe_topology
from cpudoctor.probes.platforms import _windows, _windows_api, platform_of, probe_os
from cpudoctor.probes.platforms import _windows_lpi as lpi

FIXTURES = REPO / "tests" / "fixtures" / "windows"
RECORDED = json.loads((FIXTURES / "recorded.json").read_text())
WINE_MACHINES = sorted(m for m, v in RECORDED["machines"].items() if v["status"] == "recorded")
BULLDOZER = {"hwloc-64amd64-4s2n4ca2co", "hwloc-x86linux-64amd64-4p2n4ca2co"}
OVER_64 = {"hwloc-memorysidecaches"}


def _view(topo, keep: set[int] | None = None) -> dict:
    """Packages, cores, L3 domains (CPU sets and sizes) and NUMA nodes, as comparable sets."""
    def cut(cpus):
        return tuple(sorted(c for c in cpus if keep is None or c in keep))

    return {
        "online": cut(topo.online_cpus),
        "packages": sorted(c for c in (cut(p.cpus) for p in topo.package_list) if c),
        "cores": sorted(c for c in (cut(c.cpus) for c in topo.core_list) if c),
        "l3": sorted((c, d.size_bytes) for c, d in ((cut(d.cpus), d) for d in topo.l3_domains) if c),
        "numa": sorted((n.id, c) for n, c in ((n, cut(n.cpus)) for n in topo.numa_nodes) if c),
    }


def _recorder():
    """tests/fixtures/windows/record/record.py as a module (it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location("wine_record", FIXTURES / "record" / "record.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("wine_record", module)     # its dataclasses look their module up there
    spec.loader.exec_module(sys.modules["wine_record"])
    return sys.modules["wine_record"]


def test_every_x86_corpus_tree_was_put_to_wine():
    corpus = machine_root("hwloc-16amd64-8n2c").parents[1]
    assert set(RECORDED["machines"]) == set(_recorder().x86_machines(corpus)) and len(RECORDED["machines"]) == 14
    assert RECORDED["machines"]["hwloc-96em64t-4no4pa3ca2co"]["status"] == "refused"
    assert not (machine_root("hwloc-96em64t-4no4pa3ca2co") / "sys/devices/system/cpu/online").exists()


@pytest.mark.parametrize("name", WINE_MACHINES)
def test_wine_buffer_gives_the_linux_probes_topology(name):
    windows, linux = probe_topology(FIXTURES / name), probe_topology(machine_root(name))
    assert windows.source == "windows" and linux.source == "sysfs"
    keep = set(range(64)) if name in OVER_64 else None
    w, lx = _view(windows), _view(linux, keep)
    assert w["online"] == lx["online"]
    assert w["packages"] == lx["packages"]
    assert w["l3"] == lx["l3"]                       # L3 (CCX) domains as CPU sets, with their sizes
    assert w["numa"] == lx["numa"]
    if name in BULLDOZER:                             # a compute unit = one Windows core of two threads
        assert w["cores"] == sorted(tuple(g) for g in linux.l2_groups) and len(w["cores"]) == 32
        assert all(len(c) == 1 for c in lx["cores"]) and len(lx["cores"]) == 64
    else:
        assert w["cores"] == lx["cores"]
    assert [g.id for g in windows.processor_groups] == [0]
    if name in OVER_64:
        assert linux.logical_cpus == 80 and windows.logical_cpus == 64      # Wine: one group of at most 64


def test_report_root_of_a_wine_capture_matches_the_tree(capsys):
    name = "hwloc-32intel64-2p8co2t+8ve"
    code, out, err = run_cli(capsys, "report", "--fast", "--root", str(FIXTURES / name), "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    linux = probe_topology(machine_root(name))
    assert (data["topology"]["packages"], data["topology"]["cores"], data["topology"]["logical_cpus"]) == (
        linux.packages, linux.cores, linux.logical_cpus)
    assert [d["cpus"] for d in data["topology"]["l3_domains"]] == [d.cpus for d in linux.l3_domains]
    assert data["cpu"]["brand"] == probe_cpu(machine_root(name)).brand
    assert data["software"]["os"]["system"] == "Windows"


# -- hand-built machines: processor groups and EfficiencyClass ---------------------------------------------------


def test_threadripper_3990x_on_windows_10_has_two_groups_and_half_the_cpus():
    topo = probe_topology(FIXTURES / "threadripper-3990x-win10")
    assert (topo.packages, topo.cores, topo.logical_cpus, topo.smt_threads_per_core) == (1, 64, 128, 2)
    assert [(g.id, g.first_cpu, g.cpus) for g in topo.processor_groups] == [
        (0, 0, list(range(64))), (1, 64, list(range(64, 128)))]
    assert [d.cpus for d in topo.l3_domains] == [list(range(8 * i, 8 * i + 8)) for i in range(16)]
    assert {d.size_bytes for d in topo.l3_domains} == {16 << 20}
    assert [(n.id, n.cpus) for n in topo.numa_nodes] == [(0, list(range(64))), (1, list(range(64, 128)))]
    assert topo.core_list[33].cpus == [66, 67] and topo.core_list[33].l3 == 8 and topo.core_list[33].numa == 1
    assert topo.affinity.allowed_cpus == list(range(64)) and topo.affinity.usable_cpus == 64
    assert topo.l3_is_ccx()


def test_windows_11_node_spans_both_groups_and_the_process_too():
    topo = probe_topology(FIXTURES / "threadripper-3990x-win11")
    assert [(n.id, len(n.cpus)) for n in topo.numa_nodes] == [(0, 128)]
    assert len(topo.processor_groups) == 2 and topo.affinity.usable_cpus == 128


def test_efficiency_class_gives_the_core_kinds():
    topo = probe_topology(FIXTURES / "core-i9-13900k-win11")
    assert (topo.cores, topo.logical_cpus) == (24, 32)
    assert [(k.source, k.perf, k.cpus) for k in topo.cpu_kinds] == [
        ("EfficiencyClass", 0, list(range(16, 32))), ("EfficiencyClass", 1, list(range(16)))]
    assert topo.l2_groups == [list(range(16 + 4 * i, 20 + 4 * i)) for i in range(4)]


def test_processor_group_finding_says_how_many_cpus_pytorch_gets(capsys):
    code, out, _ = run_cli(capsys, "doctor", "--root", str(FIXTURES / "threadripper-3990x-win10"), "--format", "json")
    findings = {f["code"]: f for f in json.loads(out)["findings"]}
    f = findings["TOPO004"]
    assert f["severity"] == "warning" and "64 of the 128 CPUs" in f["title"]
    assert "32 cores" in f["why"] and "Windows 11" in f["fix"]
    assert f["snippet_lang"] == "powershell" and "start \"rank 1\" /node 1" in f["snippet"]
    code, out, _ = run_cli(capsys, "doctor", "--root", str(FIXTURES / "threadripper-3990x-win11"), "--format", "json")
    f = {f["code"]: f for f in json.loads(out)["findings"]}["TOPO004"]
    assert f["severity"] == "info" and "Windows 11 lets one process use all" in f["title"]
    code, out, _ = run_cli(capsys, "doctor", "--root", str(FIXTURES / "core-i9-13900k-win11"), "--format", "json")
    assert "TOPO004" not in {f["code"] for f in json.loads(out)["findings"]}          # one group: nothing to say


def test_findings_of_a_windows_report_speak_powershell(capsys):
    code, out, _ = run_cli(capsys, "doctor", "--root", str(FIXTURES / "core-i9-13900k-win11"), "--format", "json")
    topo3 = {f["code"]: f for f in json.loads(out)["findings"]}["TOPO003"]
    assert topo3["snippet_lang"] == "powershell" and "taskset" in topo3["snippet_bash"]
    assert "$p.ProcessorAffinity = [IntPtr]0xFFFF" in topo3["snippet"] and "taskset" not in topo3["snippet"]


def test_windows_os_facts_and_power_plan():
    info, notes = probe_os(FIXTURES / "threadripper-3990x-win10")
    assert (info.system, info.distro, info.kernel) == ("Windows", "Windows 10", "10.0.19045")
    assert (info.power_plan, info.power_plan_guid) == ("Balanced", "381b4222-f694-41f0-9685-ff5bb260df2e")
    assert info.vm is False and info.mem_total_bytes == 256 << 30
    assert any("power plan" in n for n in notes)
    assert _windows.windows_name("10", "10.0.20348", "ServerDatacenter") == "Windows Server 2022"
    assert _windows.windows_name("10", "10.0.22631", "Professional") == "Windows 11"
    german = "GUID des Energieschemas: a1841308-3541-4fab-bc81-f71556f20b4a  (Energiesparmodus)"
    assert _windows.parse_active_scheme(german) == ("a1841308-3541-4fab-bc81-f71556f20b4a", "Power saver")
    assert _windows.parse_active_scheme("Power Scheme GUID: 9897998c-92de-4669-853f-b7cd3ecb2790  (AMD Ryzen"
                                        " Balanced)") == ("9897998c-92de-4669-853f-b7cd3ecb2790", "AMD Ryzen Balanced")


def test_platform_is_chosen_per_call_from_the_root(tmp_path):
    assert platform_of(FIXTURES / "core-i9-13900k-win11").platform == "windows"
    assert platform_of(machine_root("hwloc-16amd64-8n2c")).platform == "linux"
    assert platform_of(tmp_path).platform == "linux"           # an empty tree: the Linux reader says what is missing
    live = platform_of("/")
    assert live.live and live.platform == {"linux": "linux", "win32": "windows", "darwin": "macos"}.get(
        sys.platform, "other")


# -- the parser on damaged and hostile buffers ------------------------------------------------------------------


def test_damaged_buffers_keep_what_came_before():
    good = (FIXTURES / "hwloc-16amd64-8n2c" / _windows.LPI_FILE).read_bytes()
    whole = lpi.parse(good)
    assert whole.records > 0 and not whole.notes
    cut = lpi.parse(good[:-20])
    assert cut.records == whole.records - 1 and "damaged" in cut.notes[0]
    zero = lpi.parse(good[:48] + struct.pack("<II", 0, 0) + good[56:])
    assert zero.records == 1 and "claims 0 bytes" in zero.notes[0]          # a zero size never loops
    lying = bytearray(lpi.encode_cache(3, "unified", 1 << 20, [lpi.GroupMask(0, 0xF)]))
    lying[38:40] = struct.pack("<H", 500)                                   # GroupCount far beyond the record
    assert lpi.parse(bytes(lying)).caches[0].masks == [lpi.GroupMask(0, 0xF)]
    topo = _windows.topology_from_buffer(b"\x00" * 7)
    assert topo.logical_cpus is None and "no active processor" in topo.notes[-1]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600))
def test_any_bytes_parse_without_raising(data):
    info = lpi.parse(data)
    topo = _windows.topology_from_buffer(data)
    assert all(0 <= c < 64 * 65536 for c in topo.online_cpus)
    assert info.records <= len(data) // 8 + 1


def test_encode_and_parse_are_inverse():
    masks = [lpi.GroupMask(0, 0xF0), lpi.GroupMask(1, 0x3)]
    buf = (lpi.encode_processor("package", masks) + lpi.encode_numa(3, masks)
           + lpi.encode_groups([lpi.GroupInfo(64, 64, (1 << 64) - 1), lpi.GroupInfo(64, 2, 0x3)]))
    info = lpi.parse(buf)
    assert info.packages[0].masks == masks and info.numa_nodes[0].node == 3
    assert info.cpus(masks) == [4, 5, 6, 7, 64, 65] and info.group_of(65) == (1, 1)


def test_the_win32_size_dance_is_bounded():
    calls = []

    def grows(size):                      # a machine that hot-adds a processor between the calls
        calls.append(size)
        return (b"x" * size, size, 0) if size >= 200 else (None, size + 100, _windows_api.ERROR_INSUFFICIENT_BUFFER)

    assert _windows_api.grow_until_it_fits(grows) == (b"x" * 200, None) and calls == [0, 100, 200]
    assert _windows_api.grow_until_it_fits(lambda size: (None, 0, 87))[1] == (
        "GetLogicalProcessorInformationEx failed (Windows error 87)")
    never = _windows_api.grow_until_it_fits(lambda size: (None, size + 1, _windows_api.ERROR_INSUFFICIENT_BUFFER))
    assert never[0] is None and "bigger buffer" in never[1]


# -- regenerating the Wine fixtures ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.alongside
def test_wine_still_answers_what_the_fixtures_say(tmp_path):
    """Runs the recorder with --check on a few trees: Wine's buffer today equals the committed one."""
    record = _recorder()
    missing = record.tools_missing()
    if missing:
        pytest.skip(f"cannot run Wine here: {missing}; the committed fixtures are used as they are")
    corpus = machine_root("hwloc-16amd64-8n2c").parents[1]
    names = ["hwloc-16amd64-8n2c", "hwloc-offline-cpu0-node0", "hwloc-20em64t-hybrid-1p6c2t+2ca4co1t",
             "hwloc-96em64t-4no4pa3ca2co"]
    outcomes = record.record(corpus, names, tmp_path)
    assert record.check(outcomes) == []


def test_recorder_sources_build_where_mingw_is_installed(tmp_path):
    if shutil.which("x86_64-w64-mingw32-gcc") is None:
        pytest.skip("x86_64-w64-mingw32-gcc is not installed (Debian: apt-get install gcc-mingw-w64-x86-64)")
    done = subprocess.run(["x86_64-w64-mingw32-gcc", "-O2", "-Wall", "-Werror", "-o", str(tmp_path / "d.exe"),
                           str(FIXTURES / "record" / "lpi_dump.c")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "d.exe").read_bytes()[:2] == b"MZ"


@pytest.mark.parametrize("name", ["threadripper-3990x-win10", "../macos/apple-m3-max"])
def test_a_native_capture_reads_back_as_the_same_report(tmp_path, name):
    """What `cpudoctor capture` writes on Windows or a Mac, unpacked on Linux, gives the report of those files."""
    import tarfile

    from cpudoctor.capture import TOP, write_native
    from cpudoctor.pipeline import Source, build_report

    source = (FIXTURES / name).resolve()
    files = {str(p.relative_to(source)): p.read_bytes() for p in source.rglob("*") if p.is_file()}
    result = write_native(tmp_path / "c.tar.gz", files, "win32" if "win" in name else "darwin")
    assert result.files == len(files)
    with tarfile.open(result.path) as tar:
        tar.extractall(tmp_path, filter="data")
    meta = json.loads((tmp_path / TOP / "capture.json").read_text())
    assert meta["kind"] == "cpudoctor-capture" and meta["platform"] in ("win32", "darwin")
    again = build_report(Source.tree(tmp_path / TOP), children=False)
    original = build_report(Source.tree(source), children=False)
    assert again.topology == original.topology and again.cpu == original.cpu
    assert again.software.os == original.software.os
    assert [f.title for f in again.findings] == [f.title for f in original.findings]
    with pytest.raises(ValueError):
        from cpudoctor.probes.platforms import capture_files

        capture_files("linux")


def test_processor_group_launch_is_cmd_under_shell_cmd(capsys):
    """TOPO004 writes its own PowerShell; `--shell cmd` gets the same launch in cmd's words."""
    code, out, _ = run_cli(capsys, "doctor", "--root", str(FIXTURES / "threadripper-3990x-win10"), "--shell", "cmd",
                           "--format", "json")
    f = {f["code"]: f for f in json.loads(out)["findings"]}["TOPO004"]
    lines = f["snippet"].splitlines()
    assert f["snippet_lang"] == "cmd" and "set WORLD_SIZE=2" in lines and 'start "rank 1" /node 1 python train.py' in lines
    assert not any(ln.startswith(("$env:", "cmd /c", "#")) for ln in lines)
    code, out, _ = run_cli(capsys, "doctor", "--root", str(FIXTURES / "threadripper-3990x-win10"), "--shell",
                           "powershell", "--format", "json")
    f = {f["code"]: f for f in json.loads(out)["findings"]}["TOPO004"]
    assert f["snippet_lang"] == "powershell" and "$env:WORLD_SIZE = '2'" in f["snippet"]


def test_powershell_a_rule_wrote_stays_powershell_when_cmd_has_no_form():
    from cpudoctor.advisor.winshell import powershell_as_cmd

    assert powershell_as_cmd("# note\n$env:A = '1'\ncmd /c 'start \"x\" python t.py'") == \
        "rem note\nset A=1\nstart \"x\" python t.py"
    assert powershell_as_cmd("$p = Get-Process -Id $PID\n$p.ProcessorAffinity = [IntPtr]0xFF") is None
    assert powershell_as_cmd("$env:A = 'a&b'") is None             # cmd would run "b"


def test_the_windows_shell_switch_shows_the_processor_group_launch_in_cmd(capsys):
    from cpudoctor.render.finding_view import finding_view

    code, out, _ = run_cli(capsys, "doctor", "--root", str(FIXTURES / "threadripper-3990x-win10"), "--format", "json")
    from cpudoctor.model import Finding

    raw = {f["code"]: f for f in json.loads(out)["findings"]}["TOPO004"]
    finding = Finding(**{k: v for k, v in raw.items() if k in Finding.__dataclass_fields__})
    shown = finding_view(finding, "cmd").snippet
    assert shown.shell == "cmd" and 'start "rank 0" /node 0 python train.py' in shown.text.splitlines()
    assert finding_view(finding, "powershell").snippet.text == raw["snippet"]
