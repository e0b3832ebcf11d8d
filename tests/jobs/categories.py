"""One job per remaining category of the breakdown: --kind alloc | sleep | gil."""
import threading
import time

import torch
from _loop import args, loop

a = args({"--kind": {"default": "alloc"}})


def alloc():
    for _ in range(4):
        t = torch.empty(24 * 1024 * 1024)      # 96 MiB: above glibc's mmap threshold, fresh pages each time
        t[::1024] = 1.0                        # touch one value per 4 KiB page: the faults, not the math
        del t


def sleep():
    time.sleep(0.02)                           # waiting on something outside (a file, a socket, a timer)
    torch.ones(64).sum()


def spin():
    while True:
        sum(i * i for i in range(2000))        # pure Python in a second thread: holds the GIL


if a.kind == "gil":
    threading.Thread(target=spin, daemon=True).start()
x = torch.randn(32, 32)


def gil():
    for _ in range(50):
        x.add(1)                               # each op releases and re-takes the GIL


loop({"alloc": alloc, "sleep": sleep, "gil": gil}[a.kind], a.seconds)
