"""Run a job with the verbose-window hook installed as the job's probe will install it (issue 34's probe calls
probes/child/scripts/verbose_window.install when the job imports torch): ``python _windowed.py JOB.py ARGS``."""
import os
import runpy
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "probes", "child", "scripts"))
import torch  # noqa: E402

import verbose_window  # noqa: E402

verbose_window.install(torch)
job = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(job)))
runpy.run_path(job, run_name="__main__")
