"""TimeoutLayer: give up on requests that move data too slowly (stall detection).

A connection that goes silent is dropped by the backend's own read timeout.
A server that trickles a few bytes now and then never trips it; this layer
does: every data request gets ``base + bytes / min_throughput`` seconds, and
one that overruns is cancelled and reported as a :class:`~synxfer.TransientError`
(so the retry layer above sends it again, to a fresh connection).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .._exceptions import TransientError
from ..backend import Backend
from ._base import Layer

__all__ = ["TimeoutLayer"]

T = TypeVar("T")


class TimeoutLayer(Layer):
    """Deadlines for data requests: ``put``, ``upload_part`` and ``read``.

    ``unknown_size`` stands in for the length of a read without one (the
    engine reads whole objects only below its part size). Other operations
    (listings, completes, server-side copies, which can legitimately take
    long) are left to the backend's own timeouts.
    """

    def __init__(self, inner: Backend, base: float, min_throughput: int, unknown_size: int) -> None:
        super().__init__(inner)
        if min_throughput <= 0:
            raise ValueError("min_throughput must be > 0 bytes per second")
        self.base = base
        self.min_throughput = min_throughput
        self.unknown_size = unknown_size

    def _nbytes(self, op: str, args: tuple[Any, ...]) -> int | None:
        if op == "put":
            return len(args[1])
        if op == "upload_part":
            return len(args[2])
        if op == "read_into":
            return len(args[2])
        if op == "read":
            return self.unknown_size if args[2] is None else int(args[2])
        return None

    async def _call(self, op: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        nbytes = self._nbytes(op, args)
        if nbytes is None:
            return await fn(*args)
        limit = self.base + nbytes / self.min_throughput
        try:
            async with asyncio.timeout(limit):
                return await fn(*args)
        except TimeoutError:
            raise TransientError(
                f"{op} of {nbytes} bytes stalled: not done in {limit:.1f} s "
                f"(slower than {self.min_throughput} bytes/s); retrying",
                url=self.url(args[0] if isinstance(args[0], str) else args[0].key),
            ) from None
