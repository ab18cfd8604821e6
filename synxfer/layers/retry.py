"""RetryLayer: retry transient errors with exponential backoff and full jitter.

It also cleans up after the one retry that can leave something behind.
Creating a multipart upload is not idempotent: if an attempt was applied by
the server but its reply was lost, the retry creates a second upload and
the first is orphaned (invisible, but billed until aborted). So after a
create that needed more than one attempt, the layer lists the key's uploads
in progress and aborts those begun since its first attempt, except the one
it returns.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .._config import RetryPolicy
from .._exceptions import SynxferError, TransientError
from .._models import MultipartUpload, WriteOptions
from .._retry import RetryHook, call_with_retries
from ..backend import Backend
from ._base import Layer

__all__ = ["RetryLayer"]

log = logging.getLogger("synxfer.retry")

T = TypeVar("T")

#: An orphan may have begun this long before our first attempt, by the
#: server's clock (client and server clocks differ a little).
_ORPHAN_CLOCK_SLACK = 60.0
#: A server time further than this from ours is not a clock to compare with
#: (moto, for one, reports a fixed date).
_IMPLAUSIBLE_CLOCK = 86_400.0
#: Seconds allowed for aborting one orphaned upload.
_ABORT_TIMEOUT = 60.0


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
        return await call_with_retries(self.policy, op, TransientError, self.on_retry, fn, *args)

    async def create_multipart(self, key: str, options: WriteOptions) -> MultipartUpload:
        """Start a multipart upload; after a retried create, abort its orphans."""
        started = time.time()
        attempts = 0

        async def attempt(key: str, options: WriteOptions) -> MultipartUpload:
            nonlocal attempts
            attempts += 1
            return await self.inner.create_multipart(key, options)

        upload = await self._call("create_multipart", attempt, key, options)
        if attempts > 1:
            try:
                await self._abort_orphans(upload, started)
            except asyncio.CancelledError:
                # The caller never learns of ``upload``: it is an orphan too.
                await self._abort(upload)
                raise
        return upload

    async def _abort_orphans(self, upload: MultipartUpload, since: float) -> None:
        """Abort uploads of ``upload.key`` begun since ``since`` that are not ``upload``.

        Best effort: uploads begun before our first attempt (by the server's
        clock, when it agrees with ours within a day) are left alone; a
        backend that cannot list uploads, or a listing that fails, leaves
        them all (a lifecycle rule is the backstop).
        """
        try:
            pending = await self.list_uploads(upload.key)
        except (NotImplementedError, SynxferError) as exc:
            log.info("could not look for orphaned uploads of %s: %s", self.url(upload.key), exc)
            return
        now = time.time()
        for other in pending:
            ours = other.upload.upload_id == upload.upload_id
            when = other.initiated
            if when is not None and abs(now - when) > _IMPLAUSIBLE_CLOCK:
                when = None  # the server's clock cannot be compared with ours
            older = when is not None and when < since - _ORPHAN_CLOCK_SLACK
            if not ours and not older:
                await self._abort(other.upload)
                log.info(
                    "aborted multipart upload %s of %s: created by an attempt whose reply was lost",
                    other.upload.upload_id,
                    self.url(upload.key),
                )

    async def _abort(self, upload: MultipartUpload) -> None:
        """Abort a multipart upload even while being cancelled; raises only CancelledError."""
        try:
            async with asyncio.timeout(_ABORT_TIMEOUT):
                await asyncio.shield(self.abort_multipart(upload))
        except BaseException as exc:
            log.warning(
                "could not abort multipart upload %s of %s: %s",
                upload.upload_id,
                self.url(upload.key),
                exc,
            )
            if isinstance(exc, asyncio.CancelledError):
                raise
