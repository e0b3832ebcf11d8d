"""Set up wrong: DataLoader workers whose transforms run OpenCV, each worker with OpenCV's pool sized for every CPU.

Each sample is a blur and a resize of a 512x512 image in the worker (OpenCV parallelises both over its own pool:
cv2.getNumThreads() threads per worker). ``--init CODE``: CPU Doctor's printed worker_init_fn, exec'd and passed
to the DataLoader. The first line printed is what cv2.getNumThreads() said inside a worker.
"""
import numpy as np
import torch
import cv2
from torch.utils.data import DataLoader, Dataset
from _loop import args, loop

a = args({"--init": dict(default="")})


class Blurred(Dataset):
    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        img = np.random.default_rng(i).random((512, 512, 3), dtype=np.float32)
        out = cv2.resize(cv2.GaussianBlur(img, (15, 15), 0), (256, 256))
        return torch.from_numpy(out).mean(), cv2.getNumThreads()


init = None
if a.init:
    scope = {}
    exec(a.init, scope)                     # the printed snippet defines worker_init_fn
    init = scope["worker_init_fn"]
loader = iter(DataLoader(Blurred(), batch_size=4, num_workers=2, worker_init_fn=init))
model = torch.nn.Linear(1, 1)
x, pools = next(loader)
print(f"worker_cv2_threads={int(pools[0])}", flush=True)


def step():
    x, _ = next(loader)
    model(x.unsqueeze(1)).sum().backward()


loop(step, a.seconds)
