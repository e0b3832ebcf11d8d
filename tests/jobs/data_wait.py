"""Set up wrong: the loop loads its own data (num_workers=0) from a slow source. Fix: workers that work ahead.

The source's latency is set from this machine's own step time (a batch takes 1.2 steps to read, in one wait
per batch), so the job is data-bound without workers (about 55 % of its time waiting) and two workers read
1.7 times as fast as it trains, on any machine, fast or slow: on a fixed latency a fast CPU would stay
data-bound with any number of workers and the fix could never show. One wait per batch, not per sample:
sixteen sub-millisecond sleeps overshoot, and on 2 CPUs the workers' CPU time is taken by the training.
"""
import statistics
import time

import torch
from torch.utils.data import DataLoader, Dataset
from _loop import args, loop

a = args({"--workers": {"type": int, "default": 2}})
BATCH = 16
model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 2))


def train_on(x, y):
    torch.nn.functional.cross_entropy(model(x), y).backward()


def step_seconds() -> float:
    """The median time of a training step on ready data, here and now."""
    x, y = torch.randn(256 * BATCH).view(BATCH, 256).repeat(32, 1), torch.zeros(32 * BATCH, dtype=torch.long)
    times = []
    for _ in range(3):
        train_on(x, y)                         # warm-up: first-call allocation, primitive creation
    for _ in range(7):
        t0 = time.perf_counter()
        train_on(x, y)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


class SlowReads(Dataset):
    """Each item is a whole batch (the loader's batch_size=None), read with one wait."""

    def __init__(self, latency: float):
        self.latency = latency

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        time.sleep(self.latency)               # waiting on storage or a decoder, not the CPU
        return torch.randn(BATCH, 256), torch.arange(BATCH) % 2


def expand(x, y):
    return x.repeat(32, 1), y.repeat(32)       # each row read becomes 32 rows: compute per read grows


data = SlowReads(latency=1.2 * step_seconds())
loader = (DataLoader(data, batch_size=None, num_workers=a.workers, persistent_workers=True, prefetch_factor=4)
          if a.fixed else DataLoader(data, batch_size=None, num_workers=0))
batches = iter(loader)


def step():
    train_on(*expand(*next(batches)))


loop(step, a.seconds)
