from pathlib import Path

from hypothesis import given, strategies as st

from cpudoctor.kits.cpulist import format_cpulist, parse_cpulist, parse_cpumask, parse_size
from cpudoctor.kits.rooted import read_int, read_text


def test_parse_cpulist_forms():
    assert parse_cpulist("0-3,8-11") == [0, 1, 2, 3, 8, 9, 10, 11]
    assert parse_cpulist("5") == [5]
    assert parse_cpulist("") == []
    assert parse_cpulist("0-6:2") == [0, 2, 4, 6]
    assert parse_cpulist("4-20\n\0") == list(range(4, 21))
    assert parse_cpulist(None) is None
    assert parse_cpulist("x-y") is None


def test_parse_cpumask():
    assert parse_cpumask("0000000f") == [0, 1, 2, 3]
    assert parse_cpumask("00000001,00000000") == [32]
    assert parse_cpumask("zz") is None


def test_parse_size():
    assert parse_size("32768K") == 32 << 20
    assert parse_size("5118K") == 5118 * 1024
    assert parse_size("6M") == 6 << 20
    assert parse_size("junk") is None


def test_read_strips_nul(tmp_path: Path):
    f = tmp_path / "online"
    f.write_bytes(b"0-3\n\0")
    assert read_text(f) == "0-3"
    (tmp_path / "n").write_bytes(b"42\n\0")
    assert read_int(tmp_path / "n") == 42
    assert read_text(tmp_path / "missing") is None
    assert read_int(tmp_path / "missing", 7) == 7


@given(st.sets(st.integers(min_value=0, max_value=600)))
def test_cpulist_roundtrip(cpus):
    assert parse_cpulist(format_cpulist(cpus)) == sorted(cpus)
