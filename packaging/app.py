"""Entry point of the standalone app that ``make dist`` builds (PyInstaller runs this file).

One executable for everything: no arguments opens the window, ``report``,
``doctor``, ``envs``, ... are the CLI (:func:`cpudoctor.cli.main` decides),
and the hidden ``--run-module`` / ``--run-script`` run CPU Doctor's own child
processes (see :mod:`cpudoctor.kits.child.own`). Kept tiny: every child
process of the app starts here, so nothing is imported before it is needed.
"""

import sys

from cpudoctor.kits.child.own import restore_library_path, run_hidden_entry


def main() -> int:
    restore_library_path()            # children (the user's Python, xdg-open) get the user's LD_LIBRARY_PATH
    hidden = run_hidden_entry(sys.argv[1:])
    if hidden is not None:
        return hidden
    from cpudoctor.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    raise SystemExit(main())
