"""Request slots: how a backend that fans out inside one call stays under the
scheduler's request limit.

Most primitives send one request, and the scheduler holds one slot of its
request limit for the whole call. Some calls send several: an S3 copy of a
large object (one UploadPartCopy per part), a GCS compose tree, a block-store
write to every replica. A backend lists such operations in
:attr:`Capabilities.fan_out`; the scheduler then holds *no* slot for the call
itself, and the backend takes one slot per request it sends::

    async with self.options.requests.slot():
        await self._send_one(...)

so ``max_threads`` is the true number of requests in flight whatever the
backend does. A backend used on its own (in a test, a script) gets
:data:`UNLIMITED`, whose slots are free.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

__all__ = ["UNLIMITED", "RequestLimiter"]


@runtime_checkable
class RequestLimiter(Protocol):
    """One shared limit on requests in flight, lent to a backend by the scheduler."""

    def slot(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold one request slot for the duration of the ``async with`` block."""
        ...


class _Unlimited:
    """Slots that are always free: a backend used outside a scheduler."""

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        yield

    def __repr__(self) -> str:
        return "UNLIMITED"


#: The limiter of a backend that no scheduler drives.
UNLIMITED: RequestLimiter = _Unlimited()
