"""A request limiter for tests of backends that fan out inside one call."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class CountingLimiter:
    """A :class:`~synxfer.backend.RequestLimiter` of ``limit`` slots that counts
    the slots taken in all, and the most held at once."""

    def __init__(self, limit: int) -> None:
        self._slots = asyncio.Semaphore(limit)
        self.held = self.peak = self.taken = 0

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self._slots:
            self.held += 1
            self.taken += 1
            self.peak = max(self.peak, self.held)
            try:
                yield
            finally:
                self.held -= 1
