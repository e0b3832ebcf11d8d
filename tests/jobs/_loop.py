"""Shared by the test jobs: run ``step`` for ``--seconds`` and print steps per second (to stdout)."""
import argparse
import sys
import time


def args(extra=None):
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--fixed", action="store_true", help="apply the fix CPU Doctor prints")
    for name, kw in (extra or {}).items():
        p.add_argument(name, **kw)
    return p.parse_args()


def loop(step, seconds, min_steps=0):
    """Steps for ``seconds``, and at least ``min_steps`` (a job whose point is a number of steps, such as
    a series of input sizes, must get there on a loaded machine too)."""
    step()                                   # warm-up (first-call allocation, primitive creation)
    n, t0, c0 = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < seconds or n < min_steps:
        step()
        n += 1
    rate = n / (time.perf_counter() - t0)
    print(f"steps_per_s={rate:.2f}", flush=True)
    # the process's CPU time per step (all its threads): what the job itself spent, whatever others did
    print(f"cpu_ms_per_step={(time.process_time() - c0) * 1e3 / max(n, 1):.3f}", flush=True)
    sys.stdout.flush()
