"""Set up wrong: the script sets OpenMP binding itself before importing torch, then forks DataLoader workers.

libgomp pins the main thread to one CPU at `import torch` and every worker inherits it; `env -u OMP_PROC_BIND`
outside changes nothing. Fix (printed by CPU Doctor, naming the lines marked below): delete them (--fixed).
"""
import os

from _loop import args, loop

a = args()
if not a.fixed:
    os.environ["OMP_PROC_BIND"] = "true"        # the mistake
    os.environ["OMP_PLACES"] = "cores"          # the mistake
import torch  # noqa: E402 - the binding must be set before the OpenMP runtime loads
from torch.utils.data import DataLoader, Dataset  # noqa: E402


class Augmented(Dataset):
    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        s = 0.0
        for k in range(3000):                   # CPU work in the worker (decoding, augmentation)
            s += (k * i) % 7
        return torch.full((32,), s), i % 2


loader = iter(DataLoader(Augmented(), batch_size=8, num_workers=2))
model = torch.nn.Linear(32, 2)


def step():
    x, y = next(loader)
    torch.nn.functional.cross_entropy(model(x), y).backward()


loop(step, a.seconds)
