"""The variables that size a job's thread pools, and the one way a fix sets a thread count through them.

PyTorch sizes its OpenMP pool from ``OMP_NUM_THREADS`` and then lets
``MKL_NUM_THREADS`` override it (ATen's ``intraop_default_num_threads``);
OpenBLAS reads ``OPENBLAS_NUM_THREADS`` (then ``GOTO_NUM_THREADS``, then
``OMP_NUM_THREADS``); MKL ``MKL_NUM_THREADS`` and ``MKL_DOMAIN_NUM_THREADS``. A
fix that sets only ``OMP_NUM_THREADS=1`` in a shell that exports
``MKL_NUM_THREADS=3`` leaves PyTorch on 3 threads: the job still waits. So a
thread fix sets every count variable the job's libraries read to the new count,
and unsets the ones a count cannot be written into.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

# Set in every thread fix, in the order they are shown: what PyTorch, MKL and OpenBLAS read.
THREAD_VARS: tuple[str, ...] = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# Also plain counts: set to the new count when the job's environment has them.
OTHER_COUNT_VARS: tuple[str, ...] = ("GOTO_NUM_THREADS", "OPENBLAS_DEFAULT_NUM_THREADS")
# Counts in another form ("BLAS=4,FFT=1"): unset when the job's environment has them.
COUNT_FORMS: tuple[str, ...] = ("MKL_DOMAIN_NUM_THREADS",)


def thread_count_env(n: int, env: Mapping[str, str] | None) -> tuple[dict[str, str], list[str]]:
    """(variables to set, variables to unset) that give a job ``n`` threads in every pool it sizes from the
    environment ``env`` (the job's, allow-listed; None when unknown: only the three common ones are set)."""
    assign = {name: str(n) for name in THREAD_VARS}
    present = env or {}
    assign.update({name: str(n) for name in OTHER_COUNT_VARS if name in present})
    unset = [name for name in COUNT_FORMS if name in present]
    return assign, unset


def with_thread_count(n: int, env: Mapping[str, str] | None, command: str) -> str:
    """``OMP_NUM_THREADS=n MKL_NUM_THREADS=n OPENBLAS_NUM_THREADS=n COMMAND`` (``env -u X ...`` first when a
    count variable must go): one bash line that runs ``command`` with ``n`` threads whatever the shell exports."""
    assign, unset = thread_count_env(n, env)
    values = " ".join(f"{k}={shlex.quote(v)}" for k, v in assign.items())
    if unset:
        return " ".join(["env", *[f"-u {name}" for name in unset], values, command])
    return f"{values} {command}"
