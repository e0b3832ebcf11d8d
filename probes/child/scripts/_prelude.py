"""The import path a plain ``python train.py`` would have, for a child run with ``python -I``.

``-I`` keeps CPU Doctor's own Python settings (PYTHONHOME, PYTHONSTARTUP,
its folders) out of the environment under test, but also drops two things the
user's own script sees: the entries of ``PYTHONPATH`` and, outside a virtual
environment, the user site folder (``pip install --user``). Both are put back
where a normal start puts them: PYTHONPATH right after the script's folder,
the user site before the environment's site-packages. Standard library only;
runs on Python 3.8 and later.
"""

import os
import sys

_DONE = []


def user_import_path():
    """Put PYTHONPATH and the user site back on ``sys.path`` (once)."""
    if _DONE:
        return
    _DONE.append(True)
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for offset, path in enumerate(extra):
        if path not in sys.path:
            sys.path.insert(1 + offset, path)
    in_venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
    if in_venv or os.environ.get("PYTHONNOUSERSITE"):
        return
    try:
        import site

        usersite = site.getusersitepackages()
    except Exception:  # noqa: BLE001 - no user site on this platform or build
        return
    if not usersite or not os.path.isdir(usersite) or usersite in sys.path:
        return
    before = len(sys.path)
    site.addsitedir(usersite)                    # also runs its .pth files, as a normal start would
    added = sys.path[before:]
    del sys.path[before:]
    first_site = next((i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))),
                      len(sys.path))
    sys.path[first_site:first_site] = added
