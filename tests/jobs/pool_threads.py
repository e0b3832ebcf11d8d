"""Set up wrong: a process pool whose every process runs PyTorch on all CPUs. Fix: one thread per process."""
import multiprocessing as mp
import time

import torch
from _loop import args

a = args()


def init():
    if a.fixed:
        torch.set_num_threads(1)


def work(seconds):
    x = torch.randn(384, 384)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        x = torch.tanh(x @ x)
        n += 1
    return n


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    with ctx.Pool(3, initializer=init) as pool:
        t0 = time.perf_counter()
        done = sum(pool.map(work, [a.seconds] * 3))
    print(f"steps_per_s={done / (time.perf_counter() - t0):.2f}", flush=True)
