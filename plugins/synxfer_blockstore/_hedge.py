"""Asking sites in turn, with failover on errors and stalls, and hedging slow requests.

The ``blocks://`` client reads everything -- manifests, listings, blocks --
through :func:`race`: the best site first, the next one when it fails or
stalls, and, with hedging on, the next one *as well* when the first is
slower than expected; the first answer wins.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from synxfer import BackendError, PermissionDenied, TransientError

from .rtt import SiteMonitor

__all__ = ["Unreachable", "race"]

T = TypeVar("T")


class Unreachable(TransientError):
    """A site could not be reached at all (connection refused, reset, DNS)."""


async def race(
    sites: Sequence[str],
    attempt: Callable[[str, float], Coroutine[Any, Any, T]],
    *,
    monitor: SiteMonitor,
    nbytes: int,
    url: str,
    what: str,
    hedge: bool,
    hedge_factor: float,
    stall_timeout: float,
    final: type[BaseException] | None = None,
    hedge_slots: asyncio.Semaphore | None = None,
) -> T:
    """``attempt(site, seconds)`` on ``sites`` in order until one succeeds.

    The next site is tried when an attempt fails or stalls (no answer in
    ``max(stall_timeout, 4 x expected time)``); with ``hedge``, it is also
    asked, once, when the current attempt takes ``hedge_factor`` times its
    expected time, and the first answer wins (the other is cancelled).
    PermissionDenied and ``final`` errors end the race at once. With
    ``hedge_slots`` a hedge needs a free slot of that semaphore (block
    transfers); the caller holds the slot of the first attempt.
    """
    loop = asyncio.get_running_loop()
    queue = list(sites)
    pending: dict[asyncio.Task[T], tuple[str, bool]] = {}
    errors: list[tuple[str, BaseException]] = []

    def launch(extra_slot: bool) -> None:
        site = queue.pop(0)
        expected = monitor.expected(site, nbytes, "load")
        seconds = max(stall_timeout, 4 * expected) if math.isfinite(expected) else 60.0
        pending[asyncio.create_task(attempt(site, seconds))] = (site, extra_slot)

    def hedge_at(started: float) -> float | None:
        if not (hedge and queue) or len(pending) != 1:
            return None
        primary = next(iter(pending.values()))[0]
        expected = monitor.expected(primary, nbytes, "load")
        if not math.isfinite(expected):
            return None
        return started + max(0.02, hedge_factor * expected)

    launch(False)
    started = loop.time()
    try:
        while pending:
            when = hedge_at(started)
            wait = None if when is None else max(0.0, when - loop.time())
            done, _ = await asyncio.wait(pending, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            if not done:  # slow: ask the next site too
                if hedge_slots is None:
                    launch(False)
                elif not hedge_slots.locked():
                    await hedge_slots.acquire()
                    launch(True)
                else:
                    started = loop.time()  # no free slot: look again later
                continue
            for task in done:
                site, extra = pending.pop(task)
                if extra and hedge_slots is not None:
                    hedge_slots.release()
                exc = task.exception()
                if exc is None:
                    return task.result()
                if isinstance(exc, PermissionDenied) or (final and isinstance(exc, final)):
                    raise exc
                if isinstance(exc, Unreachable):
                    monitor.record_failure(site)  # the prober brings it back
                errors.append((site, exc))
            if not pending and queue:
                launch(False)
                started = loop.time()
    finally:
        for task, (_, extra) in pending.items():
            task.cancel()
            if extra and hedge_slots is not None:
                hedge_slots.release()
        if pending:
            await asyncio.wait(pending)
            for task in pending:
                if not task.cancelled():
                    task.exception()
    detail = "; ".join(f"{site}: {exc}" for site, exc in errors) or "no site to ask"
    transient = not errors or any(isinstance(e, TransientError) for _, e in errors)
    cls = TransientError if transient else BackendError
    raise cls(f"{what} could not be read from any site: {detail}", url=url)
