"""Redaction of identifying details before a report leaves the machine.

Reports get pasted into public bug trackers, so by default every export goes
through :func:`redact_report` (structured data) *and* :func:`Redactor.text`
(the rendered output, belt and braces): the host name becomes ``<hostname>``,
the user name ``<user>``, home folders ``~``, MAC addresses ``<mac>``, UUIDs
``<uuid>`` and serial numbers ``<serial>``. Only whitelisted environment
variables (thread/BLAS/OpenMP knobs) survive. Passing
``include_identifying=True`` is the explicit opt-in that keeps everything;
``Meta.redacted`` records which one happened.

Why both levels: the structured pass keeps the JSON honest (a hostname field
becomes a placeholder, not a mangled string), and the text pass catches the
same strings wherever a renderer or a probe note happened to copy them.
"""

from __future__ import annotations

import copy
import dataclasses
import getpass
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from cpudoctor.model import Report

# What --include-identifying (the window's "Include identifying details") keeps: only what a report can hold.
# The host name is never collected (OsInfo.hostname stays empty), so the opt-in never promises it.
IDENTIFYING = "user names, home folders, MAC addresses, UUIDs and serial numbers"
KEPT_WHEN_INCLUDED = f"{IDENTIFYING} where the report holds them (the host name is never collected)"
KEPT_SHORT = "user name, paths, serials"

HOSTNAME = "<hostname>"
USER = "<user>"
HOME = "~"
MAC = "<mac>"
UUID = "<uuid>"
SERIAL = "<serial>"

# Environment variables that describe threading / math-library behaviour and
# carry no identity. Names are matched exactly or by prefix; anything that
# smells of a credential is dropped even when the prefix matches.
ENV_EXACT = frozenset({
    "OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "OMP_DYNAMIC", "OMP_SCHEDULE",
    "OMP_WAIT_POLICY", "OMP_MAX_ACTIVE_LEVELS", "OMP_STACKSIZE", "OMP_THREAD_LIMIT",
    "GOMP_CPU_AFFINITY", "GOMP_SPINCOUNT", "KMP_AFFINITY", "KMP_BLOCKTIME", "KMP_HW_SUBSET",
    "KMP_SETTINGS", "KMP_DUPLICATE_LIB_OK", "MKL_NUM_THREADS", "MKL_DYNAMIC", "MKL_THREADING_LAYER",
    "MKL_ENABLE_INSTRUCTIONS", "MKL_DEBUG_CPU_TYPE", "MKL_CBWR", "OPENBLAS_NUM_THREADS",
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_VERBOSE", "GOTO_NUM_THREADS",
    "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS",
    "TORCH_NUM_THREADS", "TORCH_NUM_INTEROP_THREADS", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA", "ONEDNN_VERBOSE", "DNNL_VERBOSE", "ONEDNN_DEFAULT_FPMATH_MODE",
    "MALLOC_CONF", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "TF_ENABLE_ONEDNN_OPTS",
    "CUDA_VISIBLE_DEVICES", "PYTORCH_JIT", "LD_BIND_NOW",
})
ENV_PREFIXES = ("OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "BLIS_", "ONEDNN_", "DNNL_",
                "TORCH_", "PYTORCH_", "ATEN_", "NUMEXPR_", "TF_")
_SECRETISH = re.compile(r"TOKEN|SECRET|PASS|KEY|CRED|AUTH|COOKIE|SESSION|PRIVATE|CERT|URL|HOST|USER|HOME|PATH",
                        re.IGNORECASE)

_MAC_RE = re.compile(r"(?<![0-9A-Fa-f:-])(?:[0-9A-Fa-f]{2}([:-]))(?:[0-9A-Fa-f]{2}\1){4}[0-9A-Fa-f]{2}(?![0-9A-Fa-f:-])")
_UUID_RE = re.compile(r"\b[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\b")
_SERIAL_RE = re.compile(r"(?i)\b(serial(?:[ _-]?(?:number|no\.?|num))?|s/n|product_uuid|board_serial|chassis_serial)"
                        r"(\s*[:=]\s*|\s+)((?=[^\s,;]*\d)[^\s,;]{3,})")
# Home folders of any user, on any platform: /home/x, /Users/x, C:\Users\x (either slash).
_HOME_RE = re.compile(r"(?:(?<![\w.~-])/(?:home|Users)/(?!<user>)[^/\\\s\"'<>:&;]+"
                      r"|\b[A-Za-z]:[\\/]+Users[\\/]+(?!<user>)[^/\\\s\"'<>:&;]+)")
_KEY_IDENTIFYING = re.compile(r"(?i)serial|uuid|hostname|host_name|mac_?addr|username|user_name")

# User names that identify nobody; replacing them would mangle ordinary words
# ("root" appears in `--root`, report.meta.root, "/root" is not personal).
_GENERIC_USERS = frozenset({"root", "user", "admin", "nobody", "runner", "ubuntu", "debian", "guest",
                            "default", "docker", "jovyan", "vagrant", "pi"})
# Default host names of distributions and images: they identify nobody, and
# replacing them would turn "Debian GNU/Linux" into "<hostname> GNU/Linux".
_GENERIC_HOSTS = frozenset({"localhost", "debian", "ubuntu", "fedora", "centos", "rocky", "almalinux", "alma",
                            "archlinux", "arch", "linux", "raspberrypi", "kali", "pop-os", "manjaro", "opensuse",
                            "host", "server", "desktop", "laptop", "computer", "workstation", "node", "buildkitsandbox"})
_MIN_TOKEN = 3                             # shorter host/user names would hit ordinary words


def env_whitelisted(name: str) -> bool:
    """True when an environment variable may appear in a report."""
    if name in ENV_EXACT:
        return True
    return name.startswith(ENV_PREFIXES) and not _SECRETISH.search(name)


def filter_env(env: dict[str, str]) -> dict[str, str]:
    """The whitelisted subset of ``env``, using the software probe's own rules when present.

    The probe already filters when it records ``thread_env``; this runs again
    because a report may have been written by another (older, buggy, edited)
    tool before it is shared.
    """
    try:
        from cpudoctor.probes.software.envvars import filter_thread_env
    except ImportError:
        return {k: v for k, v in env.items() if env_whitelisted(k)}
    return {k: v for k, v in filter_thread_env(env).items() if env_whitelisted(k) or k == "LD_PRELOAD"}


@dataclass
class Identity:
    """The identifying strings of a machine and user, gathered once per export."""

    hostnames: set[str] = field(default_factory=set)
    users: set[str] = field(default_factory=set)
    homes: set[str] = field(default_factory=set)

    @classmethod
    def current(cls, report: Report | None = None) -> "Identity":
        """This machine's names, plus those recorded in ``report`` (it may come from elsewhere)."""
        ident = cls()
        for getter in (socket.gethostname, _fqdn, _uname_node):
            try:
                name = getter()
            except Exception:  # noqa: BLE001 - a missing resolver must not break an export
                continue
            if name:
                ident.hostnames.add(name)
                ident.hostnames.add(name.split(".")[0])
        for var in ("USER", "LOGNAME", "USERNAME"):
            if os.environ.get(var):
                ident.users.add(os.environ[var])
        try:
            ident.users.add(getpass.getuser())
        except Exception:  # noqa: BLE001 - no passwd entry in some containers
            pass
        for home in (os.environ.get("HOME"), os.environ.get("USERPROFILE"), _home()):
            if home:
                ident.homes.add(home.rstrip("/\\") or home)
                ident.users.add(Path(home).name)
        if report is not None and report.software is not None and report.software.os.hostname:
            host = report.software.os.hostname
            ident.hostnames.update({host, host.split(".")[0]})
        # A name that is also a word of the report's technical content (user "amd",
        # host "epyc") identifies nobody there, and replacing it would wreck the report.
        vocabulary = _technical_words(report) if report is not None else set()
        ident.hostnames = {h for h in ident.hostnames if len(h) >= _MIN_TOKEN
                           and h.lower() not in _GENERIC_HOSTS | vocabulary}
        ident.users = {u for u in ident.users if len(u) >= _MIN_TOKEN
                       and u.lower() not in _GENERIC_USERS | _GENERIC_HOSTS | vocabulary}
        ident.homes = {h for h in ident.homes if len(h) > 1 and h not in ("/", "/root")}
        return ident


def _technical_words(report: Report) -> set[str]:
    """Lower-case words of the chip, flags, OS and package names in ``report``."""
    c = report.cpu
    texts = [c.brand, c.vendor, c.vendor_id, c.microarchitecture, c.codename, c.product_line, c.arch, *c.flags]
    sw = report.software
    if sw is not None:
        texts += [sw.os.system, sw.os.distro, sw.os.kernel, sw.os.libc, sw.python.implementation,
                  *(p.name for p in sw.packages)]
    words: set[str] = set()
    for t in texts:
        if t:
            words.update(w.lower() for w in re.split(r"[^\w.+-]+", t) if w)
    return words


def _fqdn() -> str:
    # getfqdn can block on DNS; only use what the local resolver answers quickly.
    return ""


def _uname_node() -> str:
    return os.uname().nodename if hasattr(os, "uname") else ""


def _home() -> str:
    try:
        return str(Path.home())
    except (RuntimeError, KeyError):
        return ""


class Redactor:
    """Replaces identifying strings in text; one instance per export."""

    def __init__(self, identity: Identity | None = None):
        self.identity = identity or Identity.current()
        homes = sorted(self.identity.homes, key=len, reverse=True)
        self._home_re = (re.compile("|".join(re.escape(h) + r"(?=$|[/\\\s\"'<>:,;)\]])" for h in homes))
                         if homes else None)
        self._host_re = self._words(self.identity.hostnames)
        self._user_re = self._words(self.identity.users)

    @staticmethod
    def _words(names: set[str]) -> re.Pattern[str] | None:
        if not names:
            return None
        alts = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
        # Not inside a longer word or a placeholder; case-insensitive (host names are).
        return re.compile(rf"(?<![\w<])(?:{alts})(?![\w>])", re.IGNORECASE)

    def text(self, value: str, html: bool = False) -> str:
        """``value`` with every identifying string replaced by its placeholder.

        ``html``: the text is markup, so placeholders are inserted escaped
        (``&lt;hostname&gt;``) instead of becoming bogus tags.
        """
        if not value:
            return value
        ph = _escaped if html else (lambda s: s)
        if self._home_re is not None:
            value = self._home_re.sub(HOME, value)
        value = _HOME_RE.sub(HOME, value)
        value = _UUID_RE.sub(ph(UUID), value)
        value = _MAC_RE.sub(ph(MAC), value)
        value = _SERIAL_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{ph(SERIAL)}", value)
        if self._host_re is not None:
            value = self._host_re.sub(ph(HOSTNAME), value)
        if self._user_re is not None:
            value = self._user_re.sub(ph(USER), value)
        return value

    def data(self, value: Any, key: str = "") -> Any:
        """Redact plain JSON-like data (dicts from evidence/metrics/settings) recursively."""
        if isinstance(value, str):
            if key and _KEY_IDENTIFYING.search(key):
                return HOSTNAME if "host" in key.lower() else (USER if "user" in key.lower() else SERIAL)
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.data(v, str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.data(v, key) for v in value]
        if isinstance(value, tuple):
            return tuple(self.data(v, key) for v in value)
        return value

    def dataclass(self, obj: Any) -> Any:
        """Redact every string field of a dataclass tree in place and return it."""
        for f in dataclasses.fields(obj):
            val = getattr(obj, f.name)
            if dataclasses.is_dataclass(val) and not isinstance(val, type):
                self.dataclass(val)
            elif isinstance(val, list):
                setattr(obj, f.name, [self.dataclass(v) if dataclasses.is_dataclass(v) else self.data(v, f.name)
                                      for v in val])
            elif isinstance(val, (str, dict, tuple)):
                setattr(obj, f.name, self.data(val, f.name if isinstance(val, str) else ""))
        return obj


def redact_report(report: Report, include_identifying: bool = False,
                  identity: Identity | None = None) -> Report:
    """A copy of ``report`` fit for sharing; the original is never modified.

    With ``include_identifying`` the copy keeps every detail (the explicit
    opt-in) and ``meta.redacted`` is False. The thread-env whitelist is
    enforced either way: arbitrary environment variables never belong in a
    report, whatever the user ticks.
    """
    out = copy.deepcopy(report)
    if out.software is not None:
        out.software.thread_env = filter_env(out.software.thread_env)
    if include_identifying:
        out.meta.redacted = False
        return out
    redactor = Redactor(identity or Identity.current(report))
    if out.meta.root not in ("", "/"):
        # Where the captured tree lies on the reader's disk says nothing about the machine
        # and may name a person's folders: keep only the tree's own folder name.
        out.meta.root = "…/" + (PurePath(out.meta.root).name or "tree")
    if out.software is not None and out.software.os.hostname:
        out.software.os.hostname = HOSTNAME
    redactor.dataclass(out)
    out.meta.redacted = True
    return out


# Code as CommonMark delimits it (cpudoctor.kits.escape writes it so): a fenced block closed by
# the same fence, or an inline span closed by the same run of backticks (not a backslash-escaped one).
_CODE_RE = re.compile(r"^[ \t]*(`{3,})[^\n]*\n.*?^[ \t]*\1[ \t]*$"
                      r"|(?<![\\`])(`+)(?!`)[^\n]+?(?<!`)\2(?!`)",
                      re.MULTILINE | re.DOTALL)


def redact_markdown(redactor: "Redactor", text: str) -> str:
    """Redact Markdown: placeholders stay literal inside code, and are escaped (``\\<user\\>``) outside.

    A bare ``<hostname>`` in Markdown is an unknown HTML tag: GitHub strips it
    and Qt's reader swallows the rest of the paragraph.
    """
    out, pos = [], 0
    for m in _CODE_RE.finditer(text):
        out.append(_md_escape_placeholders(redactor.text(text[pos:m.start()])))
        out.append(redactor.text(m.group(0)))
        pos = m.end()
    out.append(_md_escape_placeholders(redactor.text(text[pos:])))
    return "".join(out)


_PLACEHOLDER_RE = re.compile(r"(?<!\\)<(hostname|user|mac|uuid|serial|path)(?<!\\)>")


def _md_escape_placeholders(text: str) -> str:
    return _PLACEHOLDER_RE.sub(r"\\<\1\\>", text)


class IdentifierScrubber:
    """Replaces serial numbers, UUIDs, MAC addresses and container IDs in captured files, consistently.

    For ``cpudoctor capture``: a tarball of /proc and /sys files must not carry
    the machine's serials (an ARM cpuinfo ``Serial`` line, a DMI name a vendor
    filled with the serial number) or instance IDs (a pod UUID, a container ID in
    a cgroup path). Each distinct value gets a stand-in of the same shape
    (``00000000-0000-0000-0000-000000000001``) and the same stand-in everywhere,
    in file contents and in file names alike, so a cgroup path in
    ``/proc/self/cgroup`` still names its folder. ``known`` adds literal values
    to replace wherever they occur (the DMI serials, read but never packed).
    """

    _PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
        ("uuid", re.compile(r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{8}([-_])[0-9A-Fa-f]{4}\1[0-9A-Fa-f]{4}\1[0-9A-Fa-f]{4}\1"
                            r"[0-9A-Fa-f]{12}(?![0-9A-Fa-f])")),
        ("container id", re.compile(r"(?<![0-9A-Fa-f])[0-9a-f]{64}(?![0-9A-Fa-f])")),
        ("mac address", _MAC_RE),
    )
    # "Serial : 100000003a8bd6f5" (ARM cpuinfo), "identification = 18A1B7" (s390 cpuinfo), "S/N: X".
    _KEYED = re.compile(r"(?im)^(?P<key>[ \t]*(?:serial(?:[ _-]?(?:number|no\.?|num))?|s/n|sn)[ \t]*[:=][ \t]*)"
                        r"(?P<value>\S.*?)[ \t]*$"
                        r"|(?P<key2>\bidentification\s*=\s*)(?P<value2>[0-9A-Fa-f]{4,})")
    # DMI fillers that name nothing (and would otherwise be replaced everywhere they occur).
    _FILLERS = frozenset({"", "0", "none", "default string", "to be filled by o.e.m.", "not specified",
                          "system serial number", "chassis serial number", "base board serial number",
                          "not applicable", "n/a", "na", "123456789", "0123456789", "unknown"})

    def __init__(self, known: list[str] | None = None):
        self.mapping: dict[str, str] = {}
        self.known = sorted({k.strip() for k in known or [] if k and len(k.strip()) >= 4
                             and k.strip().lower() not in self._FILLERS}, key=len, reverse=True)

    def _stand_in(self, kind: str, value: str) -> str:
        if value not in self.mapping:
            n = sum(1 for v in self.mapping.values() if v.startswith("~" + kind)) + 1
            self.mapping[value] = "~" + kind + f"#{n}"
        index = int(self.mapping[value].rsplit("#", 1)[1])
        if kind == "uuid":
            sep = value[8]
            return sep.join(("00000000", "0000", "0000", "0000", f"{index:012x}"))
        if kind == "container id":
            return f"{index:064x}"
        if kind == "mac address":
            sep = value[2]
            return sep.join(["02", "00", "00", "00", "00", f"{index % 256:02x}"])
        return SERIAL

    def text(self, value: str, names_only: bool = False) -> tuple[str, dict[str, int]]:
        """``value`` scrubbed, and what was replaced how often. ``names_only``: IDs only (a file name)."""
        changes: dict[str, int] = {}

        def count(kind: str) -> None:
            changes[kind] = changes.get(kind, 0) + 1

        for needle in self.known:
            if needle in value:
                changes["serial"] = changes.get("serial", 0) + value.count(needle)
                value = value.replace(needle, SERIAL if not names_only else "serial")
        for kind, pattern in self._PATTERNS:
            def repl(m: re.Match[str], kind: str = kind) -> str:
                count(kind)
                return self._stand_in(kind, m.group(0))
            value = pattern.sub(repl, value)
        if not names_only:
            def keyed(m: re.Match[str]) -> str:
                count("serial")
                key = m.group("key") if m.group("key") is not None else m.group("key2")
                return key + SERIAL
            value = self._KEYED.sub(keyed, value)
        return value, changes

    def data(self, blob: bytes) -> tuple[bytes, dict[str, int]]:
        """File contents scrubbed (bytes kept as they are apart from the replacements)."""
        text, changes = self.text(blob.decode("latin-1"))
        return (text.encode("latin-1", "replace") if changes else blob), changes


def redact_text(text: str, report: Report | None = None, identity: Identity | None = None,
                html: bool = False) -> str:
    """Redact already-rendered text (Markdown, plain text, or HTML with ``html=True``)."""
    return Redactor(identity or Identity.current(report)).text(text, html=html)


def _escaped(placeholder: str) -> str:
    return placeholder.replace("<", "&lt;").replace(">", "&gt;")
