"""RetryLayer: retry transient errors with exponential backoff and full jitter."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from .._config import RetryPolicy
from .._exceptions import TransientError
from ..backend import Backend
from ._base import Layer

__all__ = ["RetryLayer", "attempts_of_last_call"]

log = logging.getLogger("synxfer.retry")

_last_attempts: contextvars.ContextVar[int] = contextvars.ContextVar(
    "synxfer_last_attempts", default=1
)


def attempts_of_last_call() -> int:
    """How many attempts the last call through a RetryLayer in this task took.

    More than one for a non-idempotent call (creating a multipart upload)
    means an earlier attempt may have been applied by the server although
    its reply was lost.
    """
    return _last_attempts.get()


T = TypeVar("T")

#: Called before each retry with the operation name, the attempt that failed
#: (1-based) and its error.
RetryHook = Callable[[str, int, BaseException], None]


class RetryLayer(Layer):
    """Retries only :class:`~synxfer.TransientError`; anything else passes through.

    Each retry waits a random time in ``[0, min(max_delay, initial * 2**n)]``
    ("full jitter"), so many clients hitting a throttled server spread out.
    Waiting happens outside any concurrency slot held by inner layers.
    """

    def __init__(
        self, inner: Backend, policy: RetryPolicy, on_retry: RetryHook | None = None
    ) -> None:
        super().__init__(inner)
        self.policy = policy
        self.on_retry = on_retry

    async def _call(self, op: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            assert exc is not None
            log.info("retrying %s (attempt %d failed): %s", op, state.attempt_number, exc)
            if self.on_retry is not None:
                self.on_retry(op, state.attempt_number, exc)

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.policy.attempts),
            wait=wait_random_exponential(
                multiplier=self.policy.initial_delay, max=self.policy.max_delay
            ),
            retry=retry_if_exception_type(TransientError),
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            return await retrying(fn, *args)
        finally:
            _last_attempts.set(int(retrying.statistics.get("attempt_number", 1)))
