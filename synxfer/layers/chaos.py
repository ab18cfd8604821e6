"""ChaosLayer: inject failures into backend calls, for tests."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Collection
from typing import Any, TypeVar

from .._exceptions import BackendError, TransientError
from ..backend import Backend
from ._base import Layer

__all__ = ["ChaosLayer"]

T = TypeVar("T")


class ChaosLayer(Layer):
    """Fails a share of calls with an error *before* they reach the backend.

    ``rate`` is the probability per call (seeded, so runs repeat); ``ops``
    limits which operations are hit (all when empty); ``error`` builds the
    exception. ``injected`` counts what was injected.
    """

    def __init__(
        self,
        inner: Backend,
        rate: float,
        *,
        seed: int = 0,
        ops: Collection[str] = (),
        error: Callable[[str], BackendError] | None = None,
    ) -> None:
        super().__init__(inner)
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be within [0, 1] (got {rate})")
        self.rate = rate
        self.ops = frozenset(ops)
        self.rng = random.Random(seed)
        self.error = error or (lambda op: TransientError(f"injected fault in {op}", status=503))
        self.injected = 0

    async def _call(self, op: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        if (not self.ops or op in self.ops) and self.rng.random() < self.rate:
            self.injected += 1
            raise self.error(op)
        return await fn(*args)
