"""CLI subcommands, one module each.

Each module has ``register(subparsers)`` which adds its parser and sets
``func=run``; ``run(args) -> int`` returns the exit code. Errors meant for the
user are raised as :class:`CliError` and printed as one line, exit code 2.
"""

from __future__ import annotations

from pathlib import Path

# Order is the order of `cpudoctor --help`.
COMMANDS: tuple[str, ...] = ("report", "inspect", "doctor", "explain", "compare", "capture", "install_desktop", "bench")


class CliError(Exception):
    """Bad usage or input: printed as one line, exit code ``code`` (default 2)."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def root_arg(value: str | None) -> Path:
    """Validate ``--root DIR``: it must be a readable folder."""
    root = Path(value or "/").expanduser()
    if not root.exists():
        raise CliError(f"--root {value}: no such folder")
    if not root.is_dir():
        raise CliError(f"--root {value}: not a folder (give the folder that holds proc/ and sys/)")
    try:
        next(iter(root.iterdir()), None)
    except OSError as exc:
        raise CliError(f"--root {value}: cannot read it ({exc.strerror})") from None
    return root


def emit(text: str | bytes, output: str | None) -> None:
    """Print to stdout, or write atomically to ``output`` (CliError on failure)."""
    import sys

    from cpudoctor.fileio import WriteError, atomic_write

    if not output or output == "-":
        if isinstance(text, bytes):
            sys.stdout.buffer.write(text)
            sys.stdout.flush()
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    try:
        atomic_write(output, text)
    except WriteError as exc:
        raise CliError(str(exc.strerror or exc)) from None
