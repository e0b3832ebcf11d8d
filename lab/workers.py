"""The sweep's training workers: one warmed-up ``train.py`` per variant, measuring segments on command.

Threads and the CPU set can only be chosen before torch starts working, so
each variant has its own process; it is started once, warmed up, and then
measures one segment each time the orchestrator asks (``measure SECONDS`` on
its stdin). When memory cannot hold every worker, the least recently used one
is stopped and started again when its turn comes.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Protocol

from cpudoctor.lab import protocol
from cpudoctor.lab.variants import Variant

WORKER_MEMORY_GUESS = 600 << 20   # bytes of a warmed-up training worker
NOT_READY = "its training worker was not warmed up before the time budget ended (a busy or slow machine)"


class Stop(Protocol):
    def is_set(self) -> bool: ...

    def wait(self, timeout: float) -> bool: ...


class Worker:
    """One variant's training worker (``train.py`` serving segments) behind the lab's job runner."""

    def __init__(self, variant: Variant, train: dict[str, Any], python: str | None):
        self.variant = variant
        self.train = train
        self.python = python
        self.job = None
        self.ready: dict[str, Any] | None = None
        self._ready = threading.Event()
        self._segments: queue.Queue = queue.Queue()
        self.last_used = 0.0

    def start(self) -> "Worker":
        from cpudoctor.lab.runner import Job, job_command

        self.ready = None
        self._ready.clear()
        self._segments = queue.Queue()
        args = {**self.train, "threads": self.variant.threads, "cpus": self.variant.cpus, "serve": True,
                "seconds": None, "steps": None, "eval_samples": 0}
        self.job = Job(job_command("train", args, self.python), self._on_message,
                       what=f"the training worker '{self.variant.name}'").start()
        return self

    def _on_message(self, msg: protocol.Message) -> None:
        if msg.type == protocol.PROGRESS and msg.data.get("phase") == "ready":
            self.ready = msg.data
            self._ready.set()
        elif msg.type == protocol.PROGRESS and msg.data.get("phase") == "segment":
            self._segments.put(msg.data)

    @property
    def alive(self) -> bool:
        proc = getattr(self.job, "_proc", None)
        return proc is not None and proc.poll() is None

    def failure(self) -> str | None:
        """Why the worker is gone, once it is; None while it runs."""
        if self.job is None or self.alive:
            return None
        return self.job.wait(5).message

    def wait_ready(self, stop: Stop, deadline: float) -> bool:
        """Wait until the worker is warm (True), it died, it was stopped or ``deadline`` (monotonic) passed."""
        while not self._ready.is_set():
            if stop.is_set() or time.monotonic() > deadline or not self.alive:
                return self._ready.is_set()
            self._ready.wait(0.05)
        return True

    def measure(self, seconds: float, stop: Stop, until: float | None = None) -> dict[str, Any] | None:
        """One segment: its samples/s and interference; None when stopped, the worker died or ``until``
        (monotonic: the sweep's hard stop) passed first (a segment ends only after a whole step, however long)."""
        assert self.job is not None
        if not self.job.send(protocol.measure_command(seconds)):
            return None
        deadline = time.monotonic() + max(60.0, seconds * 20)
        if until is not None:
            deadline = min(deadline, until)
        while time.monotonic() < deadline:
            try:
                seg = self._segments.get(timeout=0.05)
                self.last_used = time.monotonic()
                return seg
            except queue.Empty:
                if stop.is_set() or not self.alive:
                    return None
        return None

    def request_stop(self) -> None:
        if self.job is not None:
            self.job.request_stop()

    def reap(self) -> None:
        if self.job is not None:
            self.job.stop(ask_wait=0.25, term_wait=0.5)   # its segments are in; a step is not waited for


class WorkerPool:
    """The workers of a sweep; when memory cannot hold them all, the least recently used one makes room."""

    def __init__(self, variants: list[Variant], train: dict[str, Any], python: str | None, max_alive: int):
        self.workers = {v.name: Worker(v, train, python) for v in variants}
        self.max_alive = max(1, max_alive)

    def alive(self) -> list[Worker]:
        return [w for w in self.workers.values() if w.alive]

    def ensure(self, name: str, stop: Stop, deadline: float) -> Worker | None:
        """The worker of ``name``, started (and warmed up) if needed; None when it cannot start."""
        w = self.workers[name]
        if w.alive and w.ready is not None:
            return w
        others = sorted((x for x in self.alive() if x is not w), key=lambda x: x.last_used)
        while len(others) >= self.max_alive:
            others.pop(0).reap()
        w.start()
        return w if w.wait_ready(stop, deadline) else None

    def start_all(self, names: list[str], stop: Stop, deadline: float) -> dict[str, str]:
        """Start up to ``max_alive`` workers at once and wait until they are warm; failures by name."""
        first = names[: self.max_alive]
        for n in first:
            self.workers[n].start()
        failures = {}
        for n in first:
            w = self.workers[n]
            if not w.wait_ready(stop, deadline) and not stop.is_set():
                failures[n] = w.failure() or NOT_READY
        return failures

    def request_stop_all(self) -> None:
        for w in self.workers.values():
            w.request_stop()

    def reap_all(self) -> None:
        threads = [threading.Thread(target=w.reap, daemon=True) for w in self.workers.values() if w.job is not None]
        for t in threads:
            t.start()
        for t in threads:
            t.join(3.0)


def max_workers_alive(count: int, model: str) -> int:
    """How many warmed-up workers fit in half the available memory (all of them, usually)."""
    try:
        import psutil

        available = psutil.virtual_memory().available
    except Exception:  # noqa: BLE001 - no psutil or no figure: assume enough
        return count
    per = WORKER_MEMORY_GUESS * (3 if model == "resnet18" else 1)
    return max(1, min(count, int(available * 0.5 // per)))
