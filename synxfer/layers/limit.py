"""LimitLayer: one shared cap on backend requests in flight."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..backend import Backend, RequestLimiter
from ._base import Layer

__all__ = ["LimitLayer"]

T = TypeVar("T")


class LimitLayer(Layer):
    """Holds one slot of ``limiter`` for the duration of every call.

    Pass the *same* limiter (the scheduler's) to every LimitLayer of a client
    so the cap is global across backends and files; never create one per
    call. Operations the backend lists in ``capabilities.fan_out`` send
    several requests per call: for them this layer holds no slot, and the
    backend takes one per request from the same limiter (lent to it as
    ``BackendOptions.requests``), so no call waits for a slot it holds.
    """

    def __init__(self, inner: Backend, limiter: RequestLimiter) -> None:
        super().__init__(inner)
        self.limiter = limiter
        self._fan_out = inner.capabilities.fan_out

    async def _call(self, op: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        if op in self._fan_out:
            return await fn(*args)
        async with self.limiter.slot():
            return await fn(*args)
