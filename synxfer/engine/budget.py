"""ByteBudget: an async semaphore counted in bytes, strictly first-in first-out."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

__all__ = ["BufferPool", "ByteBudget"]


class ByteBudget:
    """Bounds the bytes of file data held in memory across a whole client.

    ``acquire(n)`` waits until ``n`` bytes are free and returns the amount
    actually reserved (``n`` clamped to the capacity, so a part larger than
    the whole budget still proceeds, alone). Waiters are served strictly in
    order, so a large request is never starved by a stream of small ones.
    ``peak`` records the most bytes ever reserved at once.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"budget capacity must be >= 1 byte (got {capacity})")
        self.capacity = capacity
        self._available = capacity
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()
        self.peak = 0

    @property
    def in_use(self) -> int:
        return self.capacity - self._available

    async def acquire(self, n: int) -> int:
        n = max(0, min(n, self.capacity))
        if not self._waiters and n <= self._available:
            self._take(n)
            return n
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (n, fut)
        self._waiters.append(entry)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                # Granted just as we were cancelled: give it back.
                self.release(n)
            else:
                # A release may already have dropped our cancelled entry.
                with contextlib.suppress(ValueError):
                    self._waiters.remove(entry)
                self._wake()
            raise
        return n

    def release(self, n: int) -> None:
        self._available += n
        if self._available > self.capacity:
            raise RuntimeError("ByteBudget released more than was acquired")
        self._wake()

    def _take(self, n: int) -> None:
        self._available -= n
        self.peak = max(self.peak, self.capacity - self._available)

    def _wake(self) -> None:
        while self._waiters and self._waiters[0][0] <= self._available:
            n, fut = self._waiters.popleft()
            if fut.done():
                continue
            self._take(n)
            fut.set_result(None)


class BufferPool:
    """Reusable ``bytearray`` part buffers, at most ``capacity // size`` kept.

    Full-size parts are read into pooled buffers, so a long transfer reuses
    the same few blocks instead of allocating and freeing a part-sized
    object per part (which glibc's allocator tends to keep, bloating RSS).
    Other sizes are allocated exactly. Buffers are handed out only to holders
    of a budget reservation, so the pool never exceeds the budget.
    """

    def __init__(self, size: int, capacity: int) -> None:
        self.size = size
        self._keep = max(1, capacity // size)
        self._free: list[bytearray] = []

    def get(self, n: int) -> bytearray:
        if n == self.size and self._free:
            return self._free.pop()
        return bytearray(n)

    def put(self, buf: bytearray) -> None:
        if len(buf) == self.size and len(self._free) < self._keep:
            self._free.append(buf)
