"""``cpudoctor install-desktop [--uninstall]``: a double-clickable launcher on Linux desktops."""

from __future__ import annotations

import sys

from cpudoctor.commands import CliError


def register(subparsers) -> None:
    p = subparsers.add_parser("install-desktop", help="add CPU Doctor to the desktop's application menu (Linux)",
                              description="Write a .desktop entry and the app icon under $XDG_DATA_HOME "
                                          "(~/.local/share), or remove them with --uninstall.")
    p.add_argument("--uninstall", action="store_true", help="remove the entry and icon written earlier")
    p.set_defaults(func=run)


def run(args) -> int:
    from cpudoctor import desktop

    if sys.platform == "win32":
        raise CliError("on Windows, start CPU Doctor with the cpudoctor-gui launcher pip installed in your "
                       "environment's Scripts folder (pin it to Start); no .desktop entry is needed")
    try:
        if args.uninstall:
            removed = desktop.uninstall()
            print("Removed " + ", ".join(map(str, removed)) if removed else "Nothing to remove: not installed.")
            return 0
        p = desktop.install()
    except desktop.DesktopError as exc:
        raise CliError(str(exc)) from None
    print(f"Installed {p.entry}\n      and {p.icon}\nCPU Doctor is now in your application menu "
          f"(remove with: cpudoctor install-desktop --uninstall).")
    return 0
