"""Drive the live sampler from a QTimer on the GUI thread and publish ``model.sample``.

One tick costs well under a millisecond (a few /proc and /sys reads, no
sleeps), so a timer on the GUI thread is cheaper than a thread and its
hand-offs. The timer is coarse (no need for millisecond precision at 2 Hz),
which lets the OS batch wake-ups.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from cpudoctor.gui.model import AppModel
from cpudoctor.probes.live.sampler import Sampler

log = logging.getLogger(__name__)

MIN_HZ = 0.5
MAX_HZ = 10.0
DEFAULT_HZ = 2.0
RATES_HZ: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0, 10.0)


class LiveSampler(QObject):
    """Samples at ``rate_hz`` while running; ``pause()``/``resume()`` keep the rate."""

    running_changed = Signal(bool)
    rate_changed = Signal(float)

    def __init__(self, model: AppModel, rate_hz: float = DEFAULT_HZ, sampler: Sampler | None = None,
                 parent: QObject | None = None):
        super().__init__(parent)
        self.model = model
        self._sampler = sampler
        self._rate = DEFAULT_HZ
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.CoarseTimer)
        self._timer.timeout.connect(self.tick)
        self.set_rate(rate_hz)

    @property
    def rate_hz(self) -> float:
        return self._rate

    @property
    def running(self) -> bool:
        return self._timer.isActive()

    def set_rate(self, hz: float) -> None:
        """Clamp to 0.5-10 Hz and apply at once."""
        hz = float(min(MAX_HZ, max(MIN_HZ, hz)))
        changed = hz != self._rate
        self._rate = hz
        self._timer.setInterval(round(1000.0 / hz))
        if changed:
            self.rate_changed.emit(hz)

    def start(self) -> None:
        if self._sampler is None:
            self._sampler = Sampler()       # primes the load counters
        if not self._timer.isActive():
            self._timer.start()
            self.running_changed.emit(True)

    resume = start

    def pause(self) -> None:
        if self._timer.isActive():
            self._timer.stop()
            self.running_changed.emit(False)

    stop = pause

    def tick(self) -> None:
        """Take one sample and publish it (also callable directly, e.g. from a test)."""
        if self._sampler is None:
            self._sampler = Sampler()
        try:
            sample = self._sampler.sample()
        except Exception:  # noqa: BLE001 - a broken sensor must not kill the window
            log.exception("live sampling failed; stopping the monitor")
            self.pause()
            self.model.status_message.emit("Live monitoring stopped: sampling failed (see the log)")
            return
        self.model.sample.emit(sample)
