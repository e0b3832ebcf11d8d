"""``python -m cpudoctor`` is the same as the ``cpudoctor`` command.

``python -m`` puts the working folder first on the import path. Run from the
folder that holds a clone named ``cpudoctor``, that clone (no ``__init__.py``
at its top) becomes a namespace package ``cpudoctor`` that hides the installed
one, and an editable install's finder (which Python asks after the path) then
finds this file but not ``cpudoctor.__version__``. The clone is not the package:
forget it, and the folders on the path that only hold such a namespace, and
import the real one.
"""

import os
import sys


def _unshadow() -> None:
    package = sys.modules.get("cpudoctor")
    if package is None or getattr(package, "__file__", None) is not None:
        return                                    # the real package (it has an __init__.py)
    for name in [m for m in sys.modules if m == "cpudoctor" or m.startswith("cpudoctor.")]:
        del sys.modules[name]
    for entry in list(sys.path):
        folder = os.path.join(entry or os.curdir, "cpudoctor")
        if os.path.isdir(folder) and not os.path.isfile(os.path.join(folder, "__init__.py")):
            sys.path.remove(entry)
    import importlib

    importlib.invalidate_caches()


_unshadow()

from cpudoctor.cli import main  # noqa: E402 - after the path is put right

raise SystemExit(main())
