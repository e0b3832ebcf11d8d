"""Plain bash lines as PowerShell or cmd: the idioms the advisor's snippets use, and Linux-only lines named.

:func:`cpudoctor.advisor.snippets.translate` turns exports, unsets and pinned launches into their
Windows forms; this module does the rest of a snippet line by line, so that nothing a PowerShell or
cmd user pastes is bash. A line with a Windows form gets it (a filtered ``pip list``, a virtual
environment's activation, cmd's double quotes); a line that only means something on Linux (``sudo``,
``/proc``, ``cpupower``, ``LD_PRELOAD``, a hypervisor host's ``virsh``) becomes a comment that says
where it runs, instead of an error at the prompt.
"""

from __future__ import annotations

import re

# pip list 2>/dev/null | grep -i -E 'a|b'  (the OpenMP inventories of BLAS001/OMP001/OMP003)
_PIP_GREP_RE = re.compile(r"^(?P<cmd>.+?)\s+2>/dev/null\s*\|\s*grep\s+-i\s+-E\s+'(?P<pattern>[^']+)'\s*$")
# pip list --format=freeze | grep -o '^PREFIX[^=]*' | xargs -r python -m pip uninstall -y  (TORCH002's CUDA libraries)
_PIP_PREFIX_UNINSTALL_RE = re.compile(
    r"^(?P<py>python3?) -m pip list --format=freeze \| grep -o '\^(?P<prefix>[\w.-]+)\[\^=\]\*' \| "
    r"xargs -r (?P=py) -m pip uninstall -y$")
# python -m venv DIR && . DIR/bin/activate  (ISA004's fresh environment)
_VENV_RE = re.compile(r"^(?P<make>python3?\s+-m\s+venv\s+(?P<dir>[\w.-]+))\s*&&\s*(?:\.|source)\s+(?P=dir)/bin/activate\s*$")
# Words and paths that exist only on Linux (or on a Linux hypervisor host).
_LINUX_ONLY_RE = re.compile(
    r"(?:^|[\s|;&(])(?:sudo|apt|apt-get|dnf|yum|cpupower|ldconfig|swapoff|swapon|sysctl|tee|xargs|grep|awk|sed|cat|"
    r"taskset|numactl|lscpu|nproc|ulimit|export|unset|source|qm|virsh|tuned-adm|modprobe|echo)\b"
    r"|/proc/|/sys/|/dev/null|/etc/|\$\(|`|\bLD_PRELOAD\b|bin/activate")
_HOST_ONLY_RE = re.compile(r"^\s*(?:qm|virsh)\b")
# The PowerShell a Windows rule writes itself (TOPO004's one process per processor group): comments,
# $env:NAME = 'value', and cmd /c 'start ...' -- each has a cmd form.
_PS_ENV_RE = re.compile(r"^\$env:(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*'(?P<value>[^'\"%^&|<>]*)'$")
_PS_CMD_RE = re.compile(r"^cmd /c '(?P<line>[^']+)'$")


def windows_lines(line: str, shell: str) -> list[str]:
    """``line`` (one line of a bash snippet that is not an export, unset or launch) for ``shell``."""
    indent = line[: len(line) - len(line.lstrip())]
    text = line.strip()
    comment = "rem" if shell == "cmd" else "#"
    m = _PIP_GREP_RE.match(text)
    if m:
        cmd = m.group("cmd")
        if shell == "powershell":
            return [f"{indent}{cmd} 2>$null | Select-String -Pattern '{m.group('pattern')}'"]
        words = " ".join(m.group("pattern").split("|"))
        return [f'{indent}{_cmd_quotes(cmd)} 2>nul | findstr /i "{words}"']
    m = _PIP_PREFIX_UNINSTALL_RE.match(text)
    if m:
        py, prefix = m.group("py"), m.group("prefix")
        if shell == "powershell":
            return [f"{indent}{py} -m pip list --format=freeze | Select-String -Pattern '^{prefix}[^=]*' | "
                    f"ForEach-Object {{ {py} -m pip uninstall -y $_.Matches[0].Value }}"]
        return [f'{indent}for /f "delims==" %p in (\'{py} -m pip list --format^=freeze ^| findstr /b "{prefix}"\') '
                f"do {py} -m pip uninstall -y %p"]
    m = _VENV_RE.match(text)
    if m:
        folder = m.group("dir")
        if shell == "powershell":
            return [f"{indent}{m.group('make')}", f"{indent}.\\{folder}\\Scripts\\Activate.ps1"]
        return [f"{indent}{m.group('make')}", f"{indent}call {folder}\\Scripts\\activate.bat"]
    if shell == "cmd" and "  # " in text and not text.startswith("#") and not linux_only(text):
        code, note = text.split("  # ", 1)          # cmd has no end-of-line comment: the note goes above
        return [f"{indent}rem {note.strip()}", *windows_lines(indent + code.rstrip(), shell)]
    # a Linux-only line becomes a comment whole, its note with it (above it, the note would read as the
    # comment of the line before: ALLOC001's "Fedora: ..." sat over the apt line it belongs to)
    if linux_only(text):
        where = "on the Linux host that runs the VM" if _HOST_ONLY_RE.match(text) else "in a Linux shell only"
        return [f"{indent}{comment} {where}: {text}"]
    return [indent + (_cmd_quotes(text) if shell == "cmd" else text)]


def powershell_as_cmd(snippet: str) -> str | None:
    """A Windows rule's own PowerShell as cmd lines, when every line is one of the idioms cmd also has
    (``#`` comments, ``$env:NAME = 'value'``, ``cmd /c '...'``); else None (it stays PowerShell)."""
    out = []
    for line in snippet.splitlines():
        text = line.strip()
        env, run = _PS_ENV_RE.match(text), _PS_CMD_RE.match(text)
        if not text:
            out.append("")
        elif text.startswith("#"):
            out.append("rem " + text.lstrip("#").strip())
        elif env:
            out.append(f"set {env.group('name')}={env.group('value')}")
        elif run:
            out.append(run.group("line"))
        else:
            return None
    return "\n".join(out)


def linux_only(text: str) -> bool:
    """True when a command line uses a Linux command, path or bash syntax (not a comment)."""
    stripped = text.strip()
    if not stripped or stripped.startswith("#") or stripped.lower().startswith("rem "):
        return False
    code = stripped.split("  #", 1)[0]          # a trailing "# note" is not a command
    return bool(_LINUX_ONLY_RE.search(code))


def _cmd_quotes(text: str) -> str:
    """bash's single quotes as cmd's double quotes (cmd does not know single quotes: ``'numpy<2.4'`` would
    redirect); a quoted word holding a double quote is left alone."""
    return re.sub(r"'([^'\"]*)'", r'"\1"', text)
