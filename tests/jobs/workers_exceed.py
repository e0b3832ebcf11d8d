"""Set up wrong: a DataLoader with four busy worker processes per CPU the job may use (8 on 2 CPUs).

Fix (printed by CPU Doctor, naming the line marked below): at most the usable CPUs; --workers N applies it.
"""
import os

import torch
from torch.utils.data import DataLoader, Dataset
from _loop import args, loop

a = args({"--workers": {"type": int, "default": 4 * len(os.sched_getaffinity(0))}})


class Decoded(Dataset):
    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        s = 0.0
        for k in range(300_000):                # CPU work per sample (decoding, augmentation): workers stay busy
            s += (k * i) % 7
        return torch.full((64,), s), i % 2


loader = iter(DataLoader(Decoded(), batch_size=8, num_workers=a.workers))      # the mistake (default count)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 2))


def step():
    x, y = next(loader)
    torch.nn.functional.cross_entropy(model(x), y).backward()


loop(step, a.seconds)
