"""Asyncio helpers that backends need again and again, written once.

* :func:`to_thread_holding` runs a blocking call that reads the engine's
  buffer in a worker thread, and does not return -- not even when cancelled
  -- before the thread is done with that buffer.
* :func:`bounded_map` applies a coroutine function to items, at most N at a
  time (or one slot each of a semaphore shared with other calls), creating a
  task only once a slot is free; results come in order and the first
  failure is raised as itself.
* :func:`first_error` picks the error to raise for a failed task group.
* :func:`shielded` runs clean-up to its end even when the caller is
  cancelled meanwhile.

A backend that fans out inside one call also takes a request slot per
request it sends (``async with options.requests.slot(): ...``, see
:mod:`synxfer.backend._requests`); :func:`bounded_map` bounds the call's own
tasks, the slots bound the whole client's requests.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import ParamSpec, TypeVar, cast

__all__ = ["bounded_map", "first_error", "shielded", "to_thread_holding"]

T = TypeVar("T")
X = TypeVar("X")
P = ParamSpec("P")


async def to_thread_holding(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` in a worker thread; wait for it even if cancelled.

    A thread cannot be interrupted. If the caller were released on
    cancellation while the thread still reads the caller's buffer, the engine
    could refill that buffer under it (see :data:`synxfer.backend.Payload`).
    So on cancellation this waits for the thread, drops its result, and then
    raises the CancelledError.
    """
    task = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved: the caller was cancelled, its result is moot
        raise


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The error to raise for a failed task group: its first leaf that is not a
    cancellation (or its first leaf, if all are)."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    for exc in leaves:
        if not isinstance(exc, asyncio.CancelledError):
            return exc
    return leaves[0] if leaves else group


async def bounded_map(
    fn: Callable[[X], Awaitable[T]],
    items: Iterable[X],
    limit: int | asyncio.Semaphore,
) -> list[T]:
    """``[await fn(item) for item in items]``, concurrently, ``limit`` at a time.

    ``limit`` is a number of tasks, or a semaphore to take one slot of per
    item (shared with other calls, to bound them together). A task is
    created only once its slot is free, so a million items never make a
    million tasks. Results are in the order of ``items``. The first failure
    cancels the tasks still running and is raised as itself (not as an
    ExceptionGroup).
    """
    if isinstance(limit, asyncio.Semaphore):
        slots = limit
    elif limit < 1:
        raise ValueError(f"bounded_map needs a limit >= 1 (got {limit})")
    else:
        slots = asyncio.Semaphore(limit)
    results: list[T | None] = []

    async def run(index: int, item: X) -> None:
        results[index] = await fn(item)

    def release(_: object) -> None:
        slots.release()

    try:
        async with asyncio.TaskGroup() as tg:
            for item in items:
                await slots.acquire()
                try:
                    results.append(None)
                    task = tg.create_task(run(len(results) - 1, item))
                except BaseException:
                    slots.release()
                    raise
                # A done callback, not a `finally` in `run`: a task cancelled
                # before it ever ran gives its slot back too.
                task.add_done_callback(release)
    except BaseExceptionGroup as group:
        raise first_error(group) from None
    return cast("list[T]", results)


async def shielded(cleanup: Awaitable[None], *, grace: float = 60.0) -> None:
    """Run ``cleanup`` to its end even if the caller is cancelled meanwhile.

    Its errors propagate as usual. If the caller is cancelled, this waits up
    to ``grace`` more seconds for the clean-up to finish (its errors are then
    dropped) and re-raises the CancelledError.
    """
    task = asyncio.ensure_future(cleanup)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(task), timeout=grace)
        raise
