"""The one retry loop: a :class:`~synxfer.RetryPolicy` as a tenacity ``AsyncRetrying``.

Shared by the RetryLayer (transient backend errors) and the engine (data
that did not match its checksum is fetched again), so both retry with the
same attempts and the same backoff: exponential, with full jitter.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from ._config import RetryPolicy

__all__ = ["RetryHook", "retrying"]

log = logging.getLogger("synxfer.retry")

#: Called before each retry with the operation name, the attempt that failed
#: (1-based) and its error.
RetryHook = Callable[[str, int, BaseException], None]


def retrying(
    policy: RetryPolicy,
    op: str,
    retry_on: type[BaseException] | tuple[type[BaseException], ...],
    on_retry: RetryHook | None = None,
) -> AsyncRetrying:
    """An ``AsyncRetrying`` that tries ``policy.attempts`` times, retrying
    only ``retry_on`` errors, waits a random time in ``[0, min(max_delay,
    initial_delay * 2**n)]`` between attempts, calls ``on_retry(op, attempt,
    error)`` before each wait, and re-raises the last error.

    Use it as ``await retrying(...)(fn, *args)`` or ``async for attempt in
    retrying(...): with attempt: ...``.
    """

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        assert exc is not None
        log.info("retrying %s (attempt %d failed): %s", op, state.attempt_number, exc)
        if on_retry is not None:
            on_retry(op, state.attempt_number, exc)

    return AsyncRetrying(
        stop=stop_after_attempt(policy.attempts),
        wait=wait_random_exponential(multiplier=policy.initial_delay, max=policy.max_delay),
        retry=retry_if_exception_type(retry_on),
        before_sleep=before_sleep,
        reraise=True,
    )
