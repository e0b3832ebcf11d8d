"""Shared by the serving jobs: a small model, requests of one sample each, and the serving loop's figures."""
import torch

from _loop import args, loop

WIDTH = 512


def build():
    """The served model: a small MLP (a few hundred thousand parameters), as a classifier head behind an API."""
    return torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU(), torch.nn.Linear(WIDTH, WIDTH),
                               torch.nn.GELU(), torch.nn.Linear(WIDTH, 16))


def request():
    """One request: a single sample (batch 1)."""
    return torch.randn(1, WIDTH)


def serve(handle, seconds):
    """Handle requests for ``seconds``; prints requests per second as ``steps_per_s`` (tests/jobs/_loop.py)."""
    loop(lambda: handle(request()), seconds, min_steps=40)


__all__ = ["args", "build", "request", "serve"]
