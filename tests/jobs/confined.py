"""Set up wrong when started with OMP_PROC_BIND=true: the DataLoader workers inherit the main thread's one CPU.

Fix (printed by CPU Doctor): unset the binding variables and choose CPUs with taskset.
"""
import torch
from torch.utils.data import DataLoader, Dataset
from _loop import args, loop

a = args()


class Augmented(Dataset):
    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        s = 0.0
        for k in range(3000):                 # CPU work in the worker (decoding, augmentation)
            s += (k * i) % 7
        return torch.full((32,), s), i % 2


loader = iter(DataLoader(Augmented(), batch_size=8, num_workers=2))
model = torch.nn.Linear(32, 2)


def step():
    x, y = next(loader)
    torch.nn.functional.cross_entropy(model(x), y).backward()


loop(step, a.seconds)
