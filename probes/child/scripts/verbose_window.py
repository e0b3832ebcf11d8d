"""Inside a job: oneDNN's and oneMKL's verbose lines switched on for short windows only, so watching stays cheap.

The verbose lines that let ``cpudoctor run`` count a job's FLOPs cost the job
time: on a job of many small calls each line is a formatted ``write`` (15,878
oneDNN eltwise lines in 25 s took 12 % of a job's samples). Both libraries can be
switched at run time (``torch._C._verbose.mkldnn_set_verbose``,
``mkl_set_verbose``: what ``torch.backends.mkldnn.verbose(level)`` and
``torch.backends.mkl.verbose(level)`` call), so a job needs them on only for a
sample of its time: ``on`` seconds of every ``every`` (``CPUDOCTOR_VERBOSE_WINDOWS=
"on=2,every=10"``), the first window from the moment torch is seen (``first=S`` later: a job's first
steps are start-up), the lines off in between.

Each switch writes one marker line to the job's stdout through the same file
descriptor the libraries print to, in their prefix so ``run``'s filter keeps it
out of the job's output: ``onednn_verbose,v1,info,cpudoctor,window:on,<monotonic s>``
(``off``, and ``end`` at exit). The parent (:mod:`cpudoctor.probes.process.onednn_verbose`)
reads them as the wall time the lines cover, so rates and shares are of the
observed windows, not of the whole run.

The job's probe (the ``sitecustomize`` ``run`` installs) calls :func:`install`
when the job imports torch and :meth:`VerboseWindows.tick` from its step hook; a
script may call them itself. Standard library only; Python 3.8 and later; it
never raises into the job.
"""

import atexit
import os
import threading
import time

ENV = "CPUDOCTOR_VERBOSE_WINDOWS"
MARK = "onednn_verbose,v1,info,cpudoctor,window:{state},{t:.6f}\n"
MIN_ON_S = 0.2
TICK_S = 0.1


def parse_plan(text):
    """``"on=2,every=10"`` -> (2.0, 10.0, 0.0); ``first=S`` delays the first window by S seconds (a job's first
    steps are start-up: kernel choice, first touch); None for an empty, malformed or always-on plan."""
    try:
        items = dict(part.split("=", 1) for part in (text or "").replace(" ", "").split(",") if part)
        on, every, first = float(items["on"]), float(items["every"]), float(items.get("first", 0))
    except (KeyError, ValueError):
        return None
    if not (MIN_ON_S <= on < every) or every > 86400 or not 0 <= first <= 86400:
        return None
    return on, every, first


class VerboseWindows:
    """Switches the libraries' verbose output on for ``on_s`` of every ``every_s`` seconds."""

    def __init__(self, torch, on_s, every_s, first_s=0.0, clock=time.monotonic, write=None):
        self.on_s, self.every_s = float(on_s), float(every_s)
        self.clock = clock
        self._write = write or (lambda text: os.write(1, text.encode()))
        self._verbose = getattr(getattr(torch, "_C", None), "_verbose", None)
        self.start = clock() + float(first_s)
        self.state = None
        self.lock = threading.Lock()
        self.tick()

    def _set(self, on):
        level = 1 if on else 0
        for name in ("mkldnn_set_verbose", "mkl_set_verbose"):
            fn = getattr(self._verbose, name, None)
            if fn is not None:
                try:
                    fn(level)
                except Exception:  # noqa: BLE001 - a library built without it: the other still switches
                    pass

    def _mark(self, state, now):
        try:
            self._write(MARK.format(state=state, t=now))
        except Exception:  # noqa: BLE001 - a closed stdout: watching stops, the job goes on
            pass

    def tick(self, now=None):
        """Switch when a window's edge has passed (cheap: one clock read and a comparison)."""
        now = self.clock() if now is None else now
        want = now >= self.start and ((now - self.start) % self.every_s) < self.on_s
        if want == self.state:
            return
        with self.lock:
            if want == self.state:
                return
            if want:
                self._set(True)
                self._mark("on", now)
            else:
                if self.state:
                    self._mark("off", now)
                self._set(False)           # before the first window too: the lines the environment switched on
            self.state = want

    def end(self):
        if self.state:
            self._mark("off", self.clock())
        self._mark("end", self.clock())

    def run_in_thread(self):
        """Tick from a daemon thread (when no step hook calls :meth:`tick`)."""
        def loop():
            while True:
                time.sleep(TICK_S)
                self.tick()

        threading.Thread(target=loop, name="cpudoctor-verbose-window", daemon=True).start()
        return self


def install(torch, env=None, thread=True):
    """The windows the environment asks for (:data:`ENV`), started now; None when it asks for none."""
    plan = parse_plan((env if env is not None else os.environ).get(ENV))
    if plan is None:
        return None
    try:
        windows = VerboseWindows(torch, *plan)
        atexit.register(windows.end)
        return windows.run_in_thread() if thread else windows
    except Exception:  # noqa: BLE001 - watching must never stop the job
        return None
