"""Worker processes on fewer CPUs than the job, narrowed without any binding variable (no torch needed).

``--who child``: each worker narrows itself to the job's first CPU as it starts (as a library calling
sched_setaffinity in the child would) while the main process keeps every CPU.
``--who parent``: the main process narrows itself to its first CPU before it starts the workers, which
inherit that set. Either way the workers take turns on one CPU.
``--give-back CODE``: CPU Doctor's printed fix, the worker_init_fn's lambda, run in each worker as it starts.
"""
import multiprocessing as mp
import os
import time

from _loop import args

a = args({"--who": dict(choices=("child", "parent"), default="child"), "--give-back": dict(default="")})
FIRST = min(os.sched_getaffinity(0))


def narrow():
    os.sched_setaffinity(0, {FIRST})


def start_worker():
    if a.who == "child":
        narrow()
    if a.give_back:
        eval(a.give_back)(None)           # the printed worker_init_fn, as a DataLoader would call it


def work(seconds):
    end, s = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        s += sum(range(1000))
    return s


if __name__ == "__main__":
    if a.who == "parent":
        narrow()
    with mp.get_context("fork").Pool(2, initializer=start_worker) as pool:
        pool.map(work, [a.seconds, a.seconds])
    print("steps_per_s=1.00", flush=True)
