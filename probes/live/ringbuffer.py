"""Fixed-size numpy ring buffers: hours of live monitoring in constant memory.

The monitor appends one value (or one row of per-CPU values) per tick and asks
for the last ``n`` in time order. Storage is allocated once; the oldest values
are overwritten. ``NaN`` marks "no value" (a sensor that was unavailable at that
tick), so a plot shows a gap instead of a false zero.
"""

from __future__ import annotations

import numpy as np


class _Ring:
    """The bookkeeping both buffers share: a preallocated array whose first axis is time."""

    def __init__(self, shape: tuple[int, ...], dtype: type):
        self._data = np.full(shape, np.nan, dtype=dtype)
        self._next = 0          # index the next entry goes to
        self._count = 0

    @property
    def capacity(self) -> int:
        return self._data.shape[0]

    @property
    def nbytes(self) -> int:
        return self._data.nbytes

    def __len__(self) -> int:
        return self._count

    def _advance(self) -> None:
        self._next = (self._next + 1) % self.capacity
        self._count = min(self._count + 1, self.capacity)

    def clear(self) -> None:
        self._data[:] = np.nan
        self._next = 0
        self._count = 0

    def last(self, n: int | None = None) -> np.ndarray:
        """The newest ``n`` entries (all held when None), oldest first, as a copy."""
        n = self._count if n is None else max(0, min(n, self._count))
        if n == 0:
            return self._data[:0].copy()
        start = (self._next - n) % self.capacity
        if start + n <= self.capacity:
            return self._data[start:start + n].copy()
        return np.concatenate((self._data[start:], self._data[: self._next]), axis=0)


class RingBuffer(_Ring):
    """The last ``capacity`` floats, oldest overwritten first."""

    def __init__(self, capacity: int, dtype: type = np.float64):
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        super().__init__((capacity,), dtype)

    def append(self, value: float | None) -> None:
        self._data[self._next] = np.nan if value is None else value
        self._advance()

    def latest(self) -> float | None:
        if self._count == 0:
            return None
        value = float(self._data[(self._next - 1) % self.capacity])
        return None if np.isnan(value) else value


class RingBuffer2D(_Ring):
    """The last ``capacity`` rows of ``width`` values each (one row per tick, one column per CPU)."""

    def __init__(self, capacity: int, width: int, dtype: type = np.float32):
        if capacity < 1 or width < 1:
            raise ValueError(f"capacity and width must be at least 1, not {capacity} x {width}")
        super().__init__((capacity, width), dtype)

    @property
    def width(self) -> int:
        return self._data.shape[1]

    def append(self, row) -> None:
        """Store one row; a shorter row is padded with NaN, a longer one is cut."""
        row = np.asarray(row, dtype=self._data.dtype)
        target = self._data[self._next]
        k = min(row.shape[0], self.width)
        target[:k] = row[:k]
        target[k:] = np.nan
        self._advance()
