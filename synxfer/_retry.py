"""The one retry loop: a :class:`~synxfer.RetryPolicy` as a tenacity ``AsyncRetrying``.

Shared by the RetryLayer (transient backend errors) and the engine (data
that did not match its checksum is fetched again), so both retry with the
same attempts and the same backoff: exponential, with full jitter.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from ._config import RetryPolicy

if TYPE_CHECKING:
    from tenacity import AsyncRetrying, RetryCallState

__all__ = ["Retrier", "RetryHook", "call_with_retries", "retrying"]

T = TypeVar("T")

log = logging.getLogger("synxfer.retry")

#: Called before each retry with the operation name, the attempt that failed
#: (1-based) and its error.
RetryHook = Callable[[str, int, BaseException], None]


def retrying(
    policy: RetryPolicy,
    op: str,
    retry_on: type[BaseException] | tuple[type[BaseException], ...],
    on_retry: RetryHook | None = None,
    *,
    _first_attempt: int = 1,
) -> AsyncRetrying:
    """An ``AsyncRetrying`` that tries ``policy.attempts`` times, retrying
    only ``retry_on`` errors, waits a random time in ``[0, min(max_delay,
    initial_delay * 2**n)]`` between attempts, calls ``on_retry(op, attempt,
    error)`` before each wait, and re-raises the last error.

    Use it as ``await retrying(...)(fn, *args)`` or ``async for attempt in
    retrying(...): with attempt: ...``.
    """

    # Imported here: tenacity imports tornado when it is installed (Dask
    # brings it), tens of milliseconds of start-up that a run with no retry
    # never needs (:func:`call_with_retries` makes the first attempt without it).
    from tenacity import (
        AsyncRetrying,
        retry_if_exception_type,
        stop_after_attempt,
        wait_random_exponential,
    )

    skipped = _first_attempt - 1  # attempts made before this loop took over

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        assert exc is not None
        _report(op, state.attempt_number + skipped, exc, on_retry)

    return AsyncRetrying(
        stop=stop_after_attempt(policy.attempts - skipped),
        wait=wait_random_exponential(
            multiplier=policy.initial_delay * 2**skipped, max=policy.max_delay
        ),
        retry=retry_if_exception_type(retry_on),
        before_sleep=before_sleep,
        reraise=True,
    )


def _report(op: str, attempt: int, exc: BaseException, on_retry: RetryHook | None) -> None:
    log.info("retrying %s (attempt %d failed): %s", op, attempt, exc)
    if on_retry is not None:
        on_retry(op, attempt, exc)


async def call_with_retries(
    policy: RetryPolicy,
    op: str,
    retry_on: type[BaseException] | tuple[type[BaseException], ...],
    on_retry: RetryHook | None,
    fn: Callable[..., Awaitable[T]],
    *args: object,
) -> T:
    """``await fn(*args)`` under ``policy``: exactly :func:`retrying`'s attempts,
    waits and hook calls, but the first attempt is a plain call.

    Most calls succeed at once, and tenacity's machinery (a state object,
    several coroutine-function checks through :mod:`inspect`) costs about a
    quarter of a millisecond per call: at a thousand small files a second
    that is a quarter of a core. So tenacity takes over only after a failure,
    continuing the same schedule (attempt numbers and backoff go on from 2).
    """
    try:
        return await fn(*args)
    except retry_on as exc:
        if policy.attempts <= 1:
            raise
        _report(op, 1, exc, on_retry)
        import random  # here: the first retry, not every run's start-up

        await asyncio.sleep(random.uniform(0, min(policy.max_delay, policy.initial_delay)))
    rest = retrying(policy, op, retry_on, on_retry, _first_attempt=2)
    return await rest(fn, *args)


class Retrier:
    """``await Retrier(policy, op, retry_on, on_retry)(fn, *args)``: :func:`call_with_retries`
    bound to a policy, for code that builds the retry once and calls it later."""

    __slots__ = ("on_retry", "op", "policy", "retry_on")

    def __init__(
        self,
        policy: RetryPolicy,
        op: str,
        retry_on: type[BaseException] | tuple[type[BaseException], ...],
        on_retry: RetryHook | None = None,
    ) -> None:
        self.policy = policy
        self.op = op
        self.retry_on = retry_on
        self.on_retry = on_retry

    async def __call__(self, fn: Callable[..., Awaitable[T]], *args: object) -> T:
        return await call_with_retries(
            self.policy, self.op, self.retry_on, self.on_retry, fn, *args
        )
