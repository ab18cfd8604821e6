"""ByteBudget: an async semaphore counted in bytes, strictly first-in first-out."""

from __future__ import annotations

import asyncio
import contextlib
import mmap
from collections import deque

__all__ = ["Block", "BufferPool", "ByteBudget"]

#: A pooled buffer: a ``bytearray``, or an anonymous mapping (:meth:`BufferPool.lend`).
Block = bytearray | mmap.mmap


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
    """Reusable part buffers in size classes, never more than ``capacity`` bytes of them.

    The classes are the part size and its halvings down to :data:`SMALLEST`
    (8 MiB, 4 MiB, ... 64 KiB for the default part size). A request for
    ``n <= size`` bytes is served by a buffer of the smallest class that holds
    it -- reused when one is free -- and the holder uses a slice of it
    (:meth:`view`), so a tree of small files reuses the same few blocks
    instead of allocating (and page-faulting) a fresh object per file, which
    glibc's allocator tends to keep, bloating RSS. A request above the part
    size (an object fetched whole in one GET, a little over a part) gets a
    buffer of exactly its size, kept for the next request of that size: a
    tree of same-sized files reuses them instead of zeroing and faulting in
    a fresh one per file on the event loop (docs/decisions/0019).

    Holders reserve :meth:`charge` bytes of the budget (the class size) before
    asking for a buffer, so the buffers in use stay within the budget; the pool
    also never owns more than ``capacity`` bytes (in use plus idle): a fresh
    buffer first evicts idle buffers of other classes, so a shift from large
    to small objects cannot double the memory held.
    """

    #: The smallest class: below it, a buffer costs little either way.
    SMALLEST = 64 * 1024
    #: A fresh buffer :meth:`lend` maps instead of zeroing: from here on,
    #: zeroing costs more than the mapping's two system calls.
    LAZY = 1024 * 1024

    def __init__(self, size: int, capacity: int) -> None:
        if size < 1:
            raise ValueError(f"a buffer size must be >= 1 byte (got {size})")
        self.size = size
        self.capacity = capacity
        classes = [size]
        while classes[-1] // 2 >= self.SMALLEST and classes[-1] % 2 == 0:
            classes.append(classes[-1] // 2)
        #: Class sizes, largest first.
        self.classes: tuple[int, ...] = tuple(classes)
        self._free: dict[int, list[Block]] = {c: [] for c in classes}
        self._idle = 0  # bytes in the free lists
        self._out = 0  # bytes of pooled buffers lent
        #: Buffers allocated (not reused) so far, for tests and diagnostics.
        self.allocated = 0

    def __repr__(self) -> str:
        return f"<BufferPool out={self._out} idle={self._idle} capacity={self.capacity}>"

    def charge(self, n: int) -> int:
        """Bytes of budget a holder of ``n`` bytes reserves: its class size."""
        if n <= 0:
            return 0
        if n > self.size:
            return n
        for c in reversed(self.classes):  # smallest first
            if c >= n:
                return c
        return self.size  # pragma: no cover - classes[0] == size >= n

    def get(self, n: int) -> bytearray:
        """A ``bytearray`` of at least ``n`` bytes: ``charge(n)`` bytes (exactly
        ``n`` above the part size). For a holder that hands the buffer itself
        on (an upload's payload); :meth:`lend` serves views."""
        if n <= 0:
            return bytearray()
        buf = self._take(self.charge(n), lazy=False)
        assert isinstance(buf, bytearray)  # _take(lazy=False) makes and takes no other
        return buf

    def lend(self, n: int) -> Block:
        """A buffer of at least ``n`` bytes, as :meth:`get`, for a holder that
        uses it only through a ``memoryview`` (a download receives into it).

        A fresh one of :data:`LAZY` bytes or more is an anonymous private
        mapping: the kernel zeroes its pages on first touch, which happens in
        the receive's own copy, so nothing touches them twice. A ``bytearray``
        is zeroed when made, on the event loop (and first touch of fresh pages
        can trap to the hypervisor on a VM), and a ranged download made three
        before its second and third GET went out
        (docs/decisions/0019-lazy-buffers.md).
        """
        if n <= 0:
            return bytearray()
        return self._take(self.charge(n), lazy=True)

    def _take(self, c: int, *, lazy: bool) -> Block:
        """A free buffer of ``c`` bytes, else a fresh one; with ``lazy``, of
        either kind (a fresh large one mapped), else a ``bytearray``."""
        free = self._free.get(c)
        self._out += c
        if free:
            i = len(free) - 1  # the most recently used: its pages are warm
            if not lazy:
                while i >= 0 and not isinstance(free[i], bytearray):
                    i -= 1
            if i >= 0:
                self._idle -= c
                buf = free.pop(i)
                if not free and c > self.size:
                    del self._free[c]  # exact sizes come and go: no empty lists kept
                return buf
        self._evict()
        self.allocated += 1
        if lazy and c >= self.LAZY and _ANONYMOUS:
            return mmap.mmap(-1, c, flags=mmap.MAP_PRIVATE | _ANONYMOUS)
        return bytearray(c)

    def put(self, buf: Block) -> None:
        """Take back a buffer :meth:`get` or :meth:`lend` gave (and forget any other)."""
        c = len(buf)
        if c not in self._free and c <= self.size:
            return  # not a class size: not one of ours
        self._out -= c
        if self._idle + self._out + c <= self.capacity:
            self._free.setdefault(c, []).append(buf)
            self._idle += c

    def _evict(self) -> None:
        """Drop idle buffers until what the pool owns fits within the capacity."""
        for c, free in list(self._free.items()):
            while free and self._idle + self._out > self.capacity:
                self._idle -= len(free.pop())
            if not free and c > self.size:
                del self._free[c]


#: ``MAP_ANONYMOUS`` where the platform has it (0: lend ``bytearray`` objects).
_ANONYMOUS: int = getattr(mmap, "MAP_ANONYMOUS", 0)
