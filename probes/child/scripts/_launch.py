"""Run a standalone script as the user's own ``python SCRIPT`` would, from a ``python -I`` start.

``python -I _launch.py SCRIPT ARGS...``: the lab's jobs (lab/jobs/*.py) start
this way in the environment under test, so they get the import path of a
plain start (PYTHONPATH, the user site: :mod:`_prelude`) without CPU Doctor's
own Python settings. Standard library only; Python 3.8 and later.
"""

import os
import runpy
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import _prelude

    sys.path.remove(here)                      # this folder is ours, not the job's
    if len(sys.argv) < 2:
        sys.stderr.write("usage: python -I _launch.py SCRIPT [ARGS...]\n")
        raise SystemExit(2)
    script = os.path.abspath(sys.argv[1])
    sys.argv = [script] + sys.argv[2:]
    _prelude.user_import_path()
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
