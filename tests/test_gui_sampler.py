"""The live sampler (no Qt), its ring buffers, and the QTimer driver."""

from __future__ import annotations

import logging
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest

from gui_support import no_qt_leaks  # noqa: F401 - fixture
from live_sources import sysfs_online_cpus

from cpudoctor.probes.live import sampler as sampler_mod
from cpudoctor.probes.live.sample import Sample
from cpudoctor.probes.live.ringbuffer import RingBuffer, RingBuffer2D
from cpudoctor.probes.live.sampler import Sampler

T = namedtuple("scputimes", "user nice system idle iowait irq softirq steal guest guest_nice")


def _times(busy: float, idle: float) -> T:
    return T(busy, 0.0, 0.0, idle, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def fake_tree(tmp_path: Path) -> Path:
    """Two online CPUs (0 and 2; 1 is offline), cpufreq, k10temp plus an NVMe sensor."""
    cpu = tmp_path / "sys/devices/system/cpu"
    _write(cpu / "online", "0,2\n")
    _write(cpu / "cpu0/cpufreq/scaling_cur_freq", "3400000\n")
    _write(cpu / "cpu2/cpufreq/scaling_cur_freq", "4650000\n")
    hw = tmp_path / "sys/class/hwmon"
    _write(hw / "hwmon0/name", "nvme\n")
    _write(hw / "hwmon0/temp1_input", "41000\n")
    _write(hw / "hwmon1/name", "k10temp\n")
    _write(hw / "hwmon1/temp1_input", "61250\n")
    _write(hw / "hwmon1/temp1_label", "Tctl\n")
    _write(hw / "hwmon1/temp3_input", "55000\n")
    _write(hw / "hwmon1/temp3_label", "Tccd1\n")
    return tmp_path


@pytest.fixture
def fake_times(monkeypatch):
    state = {"times": [_times(10, 90), _times(20, 80)]}
    monkeypatch.setattr(sampler_mod.psutil, "cpu_times", lambda percpu=False: list(state["times"]))
    monkeypatch.setattr(sampler_mod.sys, "platform", "linux")
    return state


def test_load_clocks_temps_from_tree(fake_tree, fake_times):
    s = Sampler(fake_tree)
    # CPU 0: +30 busy of +40 total = 75 %; CPU 2: +0 busy of +10 = 0 %
    fake_times["times"] = [_times(40, 100), _times(20, 90)]
    sample = s.sample()
    assert sample.cpu_ids == [0, 2]
    assert sample.cpu_percent == pytest.approx([75.0, 0.0])
    assert sample.freq_mhz == pytest.approx([3400.0, 4650.0])
    # only the CPU chip, never the NVMe drive
    assert sample.temps_c == {"k10temp Tctl": 61.25, "k10temp Tccd1": 55.0}
    assert sample.total_percent == pytest.approx(37.5)
    assert sample.mem_total_bytes and sample.mem_used_bytes is not None
    assert 0 < sample.mem_used_bytes <= sample.mem_total_bytes


def test_cpuinfo_mhz_fallback_and_missing_sensors_are_none(tmp_path, fake_times):
    _write(tmp_path / "sys/devices/system/cpu/online", "0-1\n")
    _write(tmp_path / "proc/cpuinfo",
           "processor\t: 0\ncpu MHz\t\t: 2596.120\n\nprocessor\t: 1\ncpu MHz\t\t: 2596.120\n")
    sample = Sampler(tmp_path).sample()
    assert sample.freq_mhz == pytest.approx([2596.12, 2596.12])
    assert sample.temps_c == {}                    # unavailable, not zero
    (tmp_path / "proc/cpuinfo").unlink()
    assert Sampler(tmp_path).sample().freq_mhz is None


def test_coretemp_keeps_package_values_only(tmp_path, fake_times):
    hw = tmp_path / "sys/class/hwmon/hwmon2"
    _write(hw / "name", "coretemp\n")
    _write(hw / "temp1_input", "48000\n")
    _write(hw / "temp1_label", "Package id 0\n")
    _write(hw / "temp2_input", "45000\n")
    _write(hw / "temp2_label", "Core 0\n")
    assert Sampler(tmp_path).sample().temps_c == {"coretemp Package id 0": 48.0}


def test_missing_sensor_logged_once_per_state_change(fake_tree, fake_times, caplog, monkeypatch):
    monkeypatch.setattr(Sampler, "REDISCOVER_S", 0.0)
    s = Sampler(fake_tree)
    tctl = fake_tree / "sys/class/hwmon/hwmon1/temp1_input"
    tccd = fake_tree / "sys/class/hwmon/hwmon1/temp3_input"
    with caplog.at_level(logging.INFO, logger=sampler_mod.__name__):
        for _ in range(3):
            s.sample()
        tctl.unlink()
        tccd.unlink()
        for _ in range(5):
            assert s.sample().temps_c == {}
        _write(tctl, "60000\n")
        for _ in range(3):
            assert s.sample().temps_c == {"k10temp Tctl": 60.0}
    temp_lines = [r.getMessage() for r in caplog.records if "temperatures" in r.getMessage()]
    assert len(temp_lines) == 2, temp_lines        # went away once, came back once
    assert "unavailable" in temp_lines[0] and "available again" in temp_lines[1]


def test_cpu_hotplug_restarts_interval(fake_tree, fake_times):
    s = Sampler(fake_tree)
    fake_times["times"] = [_times(40, 100), _times(20, 90), _times(5, 5)]
    sample = s.sample()
    assert len(sample.cpu_percent) == 3 and sample.cpu_percent == [0.0, 0.0, 0.0]


def _kernel_has_clocks(cpus: list[int]) -> bool:
    """cpufreq's scaling_cur_freq on every CPU, or a "cpu MHz" line per CPU in /proc/cpuinfo (KVM guests)."""
    sysfs = Path("/sys/devices/system/cpu")
    if all((sysfs / f"cpu{n}/cpufreq/scaling_cur_freq").is_file() for n in cpus):
        return True
    text = Path("/proc/cpuinfo").read_text(errors="replace")
    return sum(1 for line in text.splitlines() if line.startswith("cpu MHz")) >= len(cpus)


def _kernel_has_cpu_sensor() -> bool:
    """A CPU hwmon chip (k10temp, coretemp, ...) with a non-zero temperature input."""
    for chip in Path("/sys/class/hwmon").glob("*"):
        try:
            if (chip / "name").read_text().strip() not in sampler_mod.CPU_HWMON_CHIPS:
                continue
            if any(int(t.read_text()) > 0 for t in chip.glob("temp*_input")):
                return True
        except (OSError, ValueError):
            continue
    return False


@pytest.mark.hardware
def test_real_machine_sample_matches_the_kernel():
    """CPUs, clocks, sensors and memory as the kernel lists them here; a VM or a container without cpufreq
    or sensors gets None / {} (shown as unavailable), a desktop gets readings."""
    online = sysfs_online_cpus()
    sample = Sampler().sample()
    assert sample.cpu_ids == online and len(sample.cpu_percent) == len(online)
    assert all(0.0 <= p <= 100.0 for p in sample.cpu_percent)
    assert (sample.freq_mhz is not None) is _kernel_has_clocks(online)
    if sample.freq_mhz is not None:
        assert len(sample.freq_mhz) == len(online) and all(f > 0 for f in sample.freq_mhz)
    assert bool(sample.temps_c) is _kernel_has_cpu_sensor()
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
    assert sample.mem_total_bytes == int(meminfo["MemTotal"].split()[0]) * 1024


def test_ringbuffer_order_and_wrap():
    rb = RingBuffer(4)
    assert len(rb) == 0 and rb.latest() is None and rb.last().size == 0
    for v in range(1, 4):
        rb.append(v)
    assert rb.last().tolist() == [1, 2, 3]
    for v in range(4, 8):
        rb.append(v)
    assert rb.last().tolist() == [4, 5, 6, 7]
    assert rb.last(2).tolist() == [6, 7]
    rb.append(None)
    assert rb.latest() is None and np.isnan(rb.last()[-1])


def test_ringbuffer2d_rows_and_padding():
    rb = RingBuffer2D(3, 4)
    rb.append([1, 2])                                # short row: padded with NaN
    rb.append([1, 2, 3, 4, 5])                       # long row: cut
    rows = rb.last()
    assert rows.shape == (2, 4)
    assert rows[0, :2].tolist() == [1, 2] and np.isnan(rows[0, 2:]).all()
    assert rows[1].tolist() == [1, 2, 3, 4]
    for i in range(5):
        rb.append([i] * 4)
    assert rb.last()[:, 0].tolist() == [2, 3, 4]


def test_buffers_stay_bounded_after_100k_samples():
    rb = RingBuffer(3600)
    rb2 = RingBuffer2D(3600, 64)
    size1, size2 = rb.nbytes, rb2.nbytes
    row = np.arange(64, dtype=np.float32)
    for i in range(100_000):
        rb.append(float(i))
        rb2.append(row)
    assert len(rb) == 3600 and len(rb2) == 3600
    assert rb.nbytes == size1 and rb2.nbytes == size2
    assert rb.last()[0] == 100_000 - 3600 and rb.last()[-1] == 99_999


def test_live_sampler_publishes_samples(qtbot, fake_tree, fake_times):
    from cpudoctor.gui.model import AppModel
    from cpudoctor.gui.sampler import LiveSampler

    model = AppModel()
    live = LiveSampler(model, rate_hz=10.0, sampler=Sampler(fake_tree))
    try:
        with qtbot.waitSignal(model.sample, timeout=30_000) as blocker:
            live.start()
        assert isinstance(blocker.args[0], Sample)
        assert live.running
        live.set_rate(50)                            # clamped to 10 Hz
        assert live.rate_hz == 10.0
        live.set_rate(0.1)
        assert live.rate_hz == 0.5
        live.pause()
        assert not live.running
    finally:
        live.pause()


def test_slow_clock_reads_are_rate_limited(fake_tree, fake_times, monkeypatch):
    s = Sampler(fake_tree)
    calls = []

    def slow():
        calls.append(1)
        sampler_mod.time.sleep(0.01)
        return [1000.0, 1000.0]

    monkeypatch.setattr(s, "_freqs", slow)
    monkeypatch.setattr(Sampler, "SLOW_CLOCKS_S", 0.001)
    for _ in range(5):
        assert s.sample().freq_mhz == [1000.0, 1000.0]   # cached values, still reported
    assert len(calls) == 1
