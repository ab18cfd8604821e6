"""LimitLayer: one shared cap on backend requests in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..backend import Backend
from ._base import Layer

__all__ = ["LimitLayer"]

T = TypeVar("T")


class LimitLayer(Layer):
    """Holds a slot of ``semaphore`` for the duration of every call.

    Pass the *same* semaphore to every LimitLayer of a run so the cap is
    global across backends and files; never create one per call.
    """

    def __init__(self, inner: Backend, semaphore: asyncio.Semaphore) -> None:
        super().__init__(inner)
        self.semaphore = semaphore

    async def _call(self, op: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        async with self.semaphore:
            return await fn(*args)
