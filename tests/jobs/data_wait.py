"""Set up wrong: the loop loads its own data (num_workers=0) from a slow source. Fix: workers that work ahead."""
import time

import torch
from torch.utils.data import DataLoader, Dataset
from _loop import args, loop

a = args({"--workers": {"type": int, "default": 4}})


class SlowReads(Dataset):
    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        time.sleep(0.002)                      # waiting on storage or a decoder, not the CPU
        return torch.randn(64), i % 2


loader = (DataLoader(SlowReads(), batch_size=16, num_workers=a.workers, persistent_workers=True, prefetch_factor=4)
          if a.fixed else DataLoader(SlowReads(), batch_size=16, num_workers=0))
model = torch.nn.Linear(64, 2)
batches = iter(loader)


def step():
    x, y = next(batches)
    torch.nn.functional.cross_entropy(model(x), y).backward()


loop(step, a.seconds)
