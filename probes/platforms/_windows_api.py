"""The Windows calls behind a Windows report, through ctypes (no compiler, no pywin32).

Only :mod:`._windows` imports this, and only on Windows: each function returns
the raw material a capture stores (bytes, numbers, text), and
:mod:`._windows` turns that into the report, the same way for this machine
and for a capture read on Linux. Every call is bounded (a retry loop with a
cap, subprocesses with a timeout) and failures come back as ``None`` plus a
reason, never an exception.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

ERROR_INSUFFICIENT_BUFFER = 122
RELATION_ALL = 0xFFFF
RELATION_NUMA_NODE_EX = 6
POWERCFG_TIMEOUT_S = 10.0


def grow_until_it_fits(call: Callable[[int], tuple[bytes | None, int, int]], *,
                       tries: int = 8) -> tuple[bytes | None, str | None]:
    """The Win32 "ask for the size, then call again" dance, with a cap on how often the size may grow.

    ``call(size)`` runs the API with a buffer of ``size`` bytes (0: no buffer) and returns
    (the filled bytes or None, the length Windows wrote back, the last error). A machine
    that hot-adds processors between two calls answers ERROR_INSUFFICIENT_BUFFER again,
    so the loop asks once more with the new size. Returns (the bytes, None) or (None, why).
    """
    size = 0
    for _ in range(tries):
        data, needed, error = call(size)
        if data is not None:
            return data, None
        if error != ERROR_INSUFFICIENT_BUFFER or needed <= 0:
            return None, f"GetLogicalProcessorInformationEx failed (Windows error {error})"
        if needed > 16 << 20:
            return None, f"GetLogicalProcessorInformationEx asks for {needed:,} bytes: refused"
        size = needed
    return None, f"GetLogicalProcessorInformationEx kept asking for a bigger buffer ({tries} tries)"


def logical_processor_information_ex() -> tuple[bytes | None, str | None]:
    """The raw ``GetLogicalProcessorInformationEx(RelationAll)`` buffer of this machine.

    Followed by the ``RelationNumaNodeEx`` records where Windows has them (Windows 11 /
    Server 2022): a NUMA node that spans processor groups lists all of its groups only
    there. Windows 10 refuses that relationship; the buffer is then RelationAll's alone.
    """
    import ctypes
    from ctypes import wintypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    api = kernel32.GetLogicalProcessorInformationEx
    api.argtypes = (wintypes.DWORD, ctypes.c_void_p, ctypes.POINTER(wintypes.DWORD))
    api.restype = wintypes.BOOL

    def caller(relation: int):
        def call(size: int) -> tuple[bytes | None, int, int]:
            length = wintypes.DWORD(size)
            buffer = ctypes.create_string_buffer(size) if size else None
            if api(relation, buffer, ctypes.byref(length)):
                return (buffer.raw[:length.value] if buffer is not None else b""), length.value, 0
            return None, int(length.value), ctypes.get_last_error()
        return call

    data, why = grow_until_it_fits(caller(RELATION_ALL))
    if data is not None:
        numa_ex, _refused = grow_until_it_fits(caller(RELATION_NUMA_NODE_EX))
        data += numa_ex or b""
    return data, why


class _GroupAffinity:
    """GROUP_AFFINITY, built lazily (ctypes.Structure needs ctypes at class creation)."""

    cls = None

    @classmethod
    def get(cls):
        if cls.cls is None:
            import ctypes

            class GROUP_AFFINITY(ctypes.Structure):   # noqa: N801 - the Win32 name
                _fields_ = [("Mask", ctypes.c_size_t), ("Group", ctypes.c_ushort), ("Reserved", ctypes.c_ushort * 3)]

            cls.cls = GROUP_AFFINITY
        return cls.cls


def process_affinity() -> dict:
    """Where this process may run: its groups, and its mask in the group of the calling thread.

    ``{"group": G, "mask": M, "groups": [..], "process_mask": P, "system_mask": S}``;
    ``process_mask`` is 0 when the process has threads in several groups (Windows 11
    and Server 2022 start processes across all groups on machines with more than 64 CPUs).
    """
    import ctypes
    from ctypes import wintypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    out: dict = {}
    process, thread = kernel32.GetCurrentProcess(), kernel32.GetCurrentThread()
    affinity = _GroupAffinity.get()()
    if kernel32.GetThreadGroupAffinity(wintypes.HANDLE(thread), ctypes.byref(affinity)):
        out["group"], out["mask"] = int(affinity.Group), int(affinity.Mask)
    proc_mask, sys_mask = ctypes.c_size_t(0), ctypes.c_size_t(0)
    if kernel32.GetProcessAffinityMask(wintypes.HANDLE(process), ctypes.byref(proc_mask), ctypes.byref(sys_mask)):
        out["process_mask"], out["system_mask"] = int(proc_mask.value), int(sys_mask.value)
    count = ctypes.c_ushort(64)
    groups = (ctypes.c_ushort * 64)()
    if kernel32.GetProcessGroupAffinity(wintypes.HANDLE(process), ctypes.byref(count), groups):
        out["groups"] = [int(groups[i]) for i in range(count.value)]
    return out


def system_facts() -> dict:
    """Windows version, edition and memory: what ``windows/system.json`` holds (docs/capture.md)."""
    import platform

    facts: dict = {"kind": "cpudoctor-windows-system", "format": 1}
    release, version, _sp, _ptype = platform.win32_ver()
    facts["release"], facts["version"] = release or None, version or None
    try:
        facts["edition"] = platform.win32_edition() or None
    except (AttributeError, OSError):
        facts["edition"] = None
    facts["machine"] = platform.machine() or None
    # "AMD64 Family 25 Model 33 Stepping 0, AuthenticAMD": vendor and family at once, without CPUID
    facts["processor_identifier"] = os.environ.get("PROCESSOR_IDENTIFIER") or platform.processor() or None
    facts.update(_registry_facts())
    try:
        import psutil

        mem, swap = psutil.virtual_memory(), psutil.swap_memory()
        facts["memory"] = {"total": int(mem.total), "available": int(mem.available),
                           "swap_total": int(swap.total), "swap_used": int(swap.used)}
    except Exception as exc:  # noqa: BLE001 - memory is one fact among many
        facts["memory_error"] = f"{type(exc).__name__}: {exc}"
    try:
        facts["affinity"] = process_affinity()
    except (OSError, AttributeError) as exc:
        facts["affinity_error"] = str(exc)
    return facts


def _registry_facts() -> dict:
    """The release name (23H2) and the firmware's maker and model (the registry's copy of DMI; no serials)."""
    out: dict = {}
    try:
        import winreg
    except ImportError:
        return out
    for key, names in ((r"SOFTWARE\Microsoft\Windows NT\CurrentVersion", {"DisplayVersion": "display_version"}),
                       (r"HARDWARE\DESCRIPTION\System\BIOS", {"SystemManufacturer": "system_manufacturer",
                                                                 "SystemProductName": "system_product"})):
        try:
            with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, key) as handle:
                for value, field in names.items():
                    try:
                        data, _kind = winreg.QueryValueEx(handle, value)
                    except OSError:
                        continue
                    if isinstance(data, str):
                        out[field] = data[:120]
        except OSError:
            continue
    return out


def powercfg_active_scheme() -> tuple[str | None, str | None]:
    """The text of ``powercfg /getactivescheme`` (the active power plan), or (None, why)."""
    if sys.platform != "win32":
        return None, "powercfg exists on Windows only"
    from cpudoctor.kits.child.captured import run_captured

    done = run_captured(["powercfg", "/getactivescheme"], POWERCFG_TIMEOUT_S, what="powercfg")
    if done.status in ("cannot-run", "timeout", "flood"):
        return None, f"powercfg could not run ({done.error or done.status})"
    # powercfg writes in the console's OEM code page; the GUID is ASCII whatever the language.
    try:
        text = done.stdout.decode("oem", errors="replace")     # the "oem" codec exists on Windows only
    except LookupError:
        text = done.stdout.decode("utf-8", errors="replace")
    if done.returncode != 0 or not text.strip():
        return None, f"powercfg /getactivescheme exited with {done.returncode}"
    return text, None
