"""The scheduler: one per client, owning every limit of every run.

Limits, all shared by every file and every run of a client:

* files in flight (``max_files``): :meth:`Scheduler.map_files` takes a
  file's slot *before* its task exists, so a plan of a million files never
  becomes a million tasks;
* requests in flight (``max_threads``): :attr:`Scheduler.requests`, the one
  :class:`~synxfer.backend.RequestLimiter` of the client. The client wraps
  every backend in a ``LimitLayer`` holding one of its slots per call, and
  lends the same limiter to backends (``BackendOptions.requests``) for the
  operations they fan out into several requests (``Capabilities.fan_out``),
  so ``max_threads`` is the true number of requests in flight;
* bytes of file data in memory (``memory_budget``): :meth:`Scheduler.map_parts`
  reserves a part's bytes (and lends a pooled buffer) *before* the part's task
  exists and releases them on every path; :meth:`Scheduler.reserve` does the
  same for a single block of work (a whole small file, the first range of a
  download). No other code acquires or releases budget;
* the I/O executor: ``io_threads`` worker threads (one per core by default)
  for file I/O and hashing, so the event loop never reads, writes or hashes
  file data;
* the buffer pool: part buffers in size classes, reused across parts and
  files (small objects use a slice of a pooled buffer), bounded by the
  budget, so memory stays flat instead of churning the allocator;
* bandwidth (``bwlimit``): one :class:`TokenBucket` for every byte the
  client moves, both directions together. Every lease (:meth:`Scheduler.reserve`,
  each part of :meth:`Scheduler.map_parts`) is charged its bytes before
  they move, so the bucket paces parts (and whole small files) across all
  files at once.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

from .._config import TransferConfig
from .budget import Block, BufferPool, ByteBudget
from .parts import Part

__all__ = ["CallBatch", "Lease", "RequestSlots", "Scheduler", "TokenBucket", "hold"]

T = TypeVar("T")
R = TypeVar("R")


async def hold(cfut: concurrent.futures.Future[T]) -> T:
    """Await a worker-thread call; when cancelled, wait for the thread first.

    A thread cannot be interrupted: releasing the caller while the thread
    still reads or fills a pooled buffer would let the pool lend that buffer
    to someone else under it. So on cancellation this waits for the call to
    end (or to be cancelled before it started), then raises.
    """
    fut = asyncio.wrap_future(cfut)
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        cfut.cancel()  # not started yet: it never will
        while not fut.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([fut])
        if not fut.cancelled():
            fut.exception()  # retrieved: the caller was cancelled, its result is moot
        raise


class _Call:
    """One call of a :class:`CallBatch`: the function, and the loop future of its result."""

    __slots__ = ("fn", "future")

    def __init__(self, fn: Callable[[], Any], future: asyncio.Future[Any]) -> None:
        self.fn = fn
        self.future = future


class CallBatch:
    """Short blocking calls run on worker threads, many per thread hop.

    Each :meth:`run` queues its call; a *drainer* (one executor task) runs
    queued calls one after another until the queue is empty, and hands their
    results back to the event loop in groups: one wake-up of the loop for up
    to :attr:`GROUP` calls, or for what finished within :attr:`LINGER`
    seconds (a call that itself took that long is handed back at once),
    instead of an executor submission, a thread wake-up and a loop wake-up
    per call. So a result waits for short calls after it for at most
    :attr:`LINGER`, or for one long call. One drainer runs while it keeps
    up; another starts when more than :attr:`GROUP` calls per drainer wait,
    up to ``limit`` (the executor's threads): on 2 cores, a second drainer
    gave nothing.

    For the per-file tail of a small download (write, hash, rename: tens of
    microseconds each), where a hop per file made threads, the loop and the
    server trade the cores, so batching saves both wall time and client CPU
    on many-file downloads (docs/decisions/0018 has the figures). A batch
    serves one event loop, the client's.

    A caller cancelled before its call started takes the call out of the
    queue (it never runs); one cancelled while its call runs waits for it
    to end, as :func:`hold` does, since the call may be using a lent buffer.
    """

    #: Results handed back to the loop at once, at most.
    GROUP = 8
    #: Seconds a finished result may wait for others before it is handed back.
    LINGER = 0.002

    def __init__(self, executor: concurrent.futures.Executor, limit: int) -> None:
        self._executor = executor
        self._limit = max(1, limit)
        self._queue: collections.deque[_Call] = collections.deque()
        self._drainers = 0  # changed on the loop's thread only

    async def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` on a worker thread, batched with other waiting calls."""
        loop = asyncio.get_running_loop()
        call = _Call(fn, loop.create_future())
        self._queue.append(call)
        if self._drainers < self._limit and len(self._queue) > self.GROUP * self._drainers:
            self._start(loop)
        try:
            result: T = await asyncio.shield(call.future)
            return result
        except asyncio.CancelledError:
            with contextlib.suppress(ValueError):  # not started yet: it never will
                self._queue.remove(call)
                call.future.cancel()
            while not call.future.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait([call.future])
            if not call.future.cancelled():
                call.future.exception()  # retrieved: the caller was cancelled
            raise

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._drainers += 1
        try:
            self._executor.submit(self._drain, loop)
        except RuntimeError as exc:  # the executor is shut down: fail what waits
            self._drainers -= 1
            while self._queue:
                call = self._queue.popleft()
                if not call.future.done():
                    call.future.set_exception(RuntimeError(f"the client is closed ({exc})"))

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """On a worker thread: run queued calls until none is left."""
        done: list[tuple[_Call, bool, Any]] = []
        since = 0.0
        while True:
            try:
                call = self._queue.popleft()
            except IndexError:
                break
            start = time.monotonic()
            try:
                done.append((call, True, call.fn()))
            except BaseException as exc:  # handed to the caller, whatever it is
                done.append((call, False, exc))
            now = time.monotonic()
            if len(done) == 1:
                since = start
            if len(done) >= self.GROUP or now - since >= self.LINGER:
                loop.call_soon_threadsafe(self._deliver, done, False)
                done = []
        loop.call_soon_threadsafe(self._deliver, done, True)

    def _deliver(self, done: list[tuple[_Call, bool, Any]], last: bool) -> None:
        """On the loop: settle finished calls; after a drainer's last, start
        another if calls came in after it looked."""
        for call, ok, value in done:
            if call.future.done():  # pragma: no cover - shielded; only if the loop is closing
                continue
            if ok:
                call.future.set_result(value)
            else:
                call.future.set_exception(value)
        if last:
            self._drainers -= 1
            if self._drainers < self._limit and len(self._queue) > self.GROUP * self._drainers:
                self._start(asyncio.get_running_loop())


class RequestSlots:
    """A :class:`~synxfer.backend.RequestLimiter` over one semaphore of ``limit`` slots.

    ``slot()`` returns the semaphore itself (an async context manager), so
    holding a slot costs no more than the semaphore does.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a request limit must be >= 1 (got {limit})")
        self.limit = limit
        self._semaphore = asyncio.Semaphore(limit)

    def slot(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self._semaphore

    @property
    def in_use(self) -> int:
        """Slots held right now."""
        return self.limit - self._semaphore._value

    def __repr__(self) -> str:
        return f"<RequestSlots {self.in_use}/{self.limit}>"


class TokenBucket:
    """A bandwidth limit: ``rate`` bytes a second on average, ``burst`` bytes at once.

    Charges are granted in the order they are made (virtual scheduling):
    :meth:`charge` takes ``nbytes`` from the bucket at once, possibly
    running it into debt, and returns how long the caller must wait until
    the debt is repaid at ``rate``. So for every time ``t`` after the
    bucket was made, the bytes granted by ``t`` are at most ``burst + rate
    * t``, however large the charges (a part bigger than the burst just
    waits longer), and nothing spins. ``clock`` is injectable for tests.
    """

    def __init__(
        self,
        rate: int,
        burst: int | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate < 1:
            raise ValueError(f"a bandwidth limit must be >= 1 byte/s (got {rate})")
        self.rate = rate
        #: Bytes that may go at once after a pause: one second's worth by default.
        self.burst = rate if burst is None else burst
        self._clock = clock
        self._level = float(self.burst)
        self._stamp = clock()
        #: Bytes charged so far (minus refunds of cancelled waits).
        self.granted = 0

    def charge(self, nbytes: int) -> float:
        """Take ``nbytes`` now; return the seconds to wait before they may move."""
        now = self._clock()
        self._level = min(float(self.burst), self._level + (now - self._stamp) * self.rate)
        self._stamp = now
        self._level -= nbytes
        self.granted += nbytes
        return max(0.0, -self._level / self.rate)

    def refund(self, nbytes: int) -> None:
        """Give back a charge whose bytes will not move (its waiter was cancelled)."""
        self._level += nbytes
        self.granted -= nbytes

    async def acquire(self, nbytes: int) -> None:
        """Wait until ``nbytes`` may move."""
        if nbytes <= 0:
            return
        delay = self.charge(nbytes)
        if delay <= 0:
            return
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            self.refund(nbytes)
            raise

    def __repr__(self) -> str:
        return f"<TokenBucket {self.rate} B/s burst={self.burst} granted={self.granted}>"


class Lease:
    """``nbytes`` of work, holding its share of the memory budget.

    The share is the pool's :meth:`~.budget.BufferPool.charge` for the
    buffer it may borrow (``lend`` bytes, at least ``nbytes``), so the
    buffers lent stay within the budget. :meth:`view` lends a slice of a
    pooled buffer (receive into it, write from it); :meth:`buffer` a buffer
    of exactly ``nbytes`` (pooled when that is a class size). Either goes
    back to the pool, and the bytes to the budget, when the lease is
    released (by the scheduler, on every path).
    """

    __slots__ = ("_buffer", "_granted", "_lend", "_scheduler", "nbytes")

    def __init__(self, scheduler: Scheduler, nbytes: int, granted: int, lend: int = 0) -> None:
        self._scheduler = scheduler
        self.nbytes = nbytes
        self._granted = granted
        self._lend = max(nbytes, lend)
        self._buffer: Block | None = None

    def view(self) -> memoryview:
        """``nbytes`` of a pooled buffer, writable, valid until the lease ends
        (:meth:`~.budget.BufferPool.lend`: a fresh one is not zeroed first)."""
        if self._buffer is None:
            self._buffer = self._scheduler.buffers.lend(self._lend)
        return memoryview(self._buffer)[: self.nbytes]

    def buffer(self) -> bytearray:
        """A writable buffer of exactly ``nbytes`` bytes, valid until the lease ends."""
        if self._buffer is None:
            pool = self._scheduler.buffers
            exact = pool.charge(self.nbytes) == self.nbytes
            self._buffer = pool.get(self.nbytes) if exact else bytearray(self.nbytes)
        if not isinstance(self._buffer, bytearray) or len(self._buffer) != self.nbytes:
            raise RuntimeError("Lease.buffer() after Lease.view() on the same lease")
        return self._buffer

    def _on_task_done(self, _: asyncio.Task[None]) -> None:
        self._release()

    def _release(self) -> None:
        """Give the buffer and the bytes back; idempotent."""
        if self._buffer is not None:
            self._scheduler.buffers.put(self._buffer)
            self._buffer = None
        granted, self._granted = self._granted, 0
        if granted:
            self._scheduler.budget.release(granted)


class Scheduler:
    """Every limit of one client: files, requests, bytes, threads, buffers."""

    def __init__(self, config: TransferConfig) -> None:
        self.config = config
        self.executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=config.io_threads, thread_name_prefix="synxfer-io"
        )
        self.requests = RequestSlots(config.max_threads)
        self.budget = ByteBudget(config.memory_budget)
        self.buffers = BufferPool(config.part_size, config.memory_budget)
        #: The bandwidth limit (``config.bwlimit``), or None for none.
        self.bandwidth = TokenBucket(config.bwlimit) if config.bwlimit else None
        self._files = asyncio.Semaphore(config.max_files)
        #: Short calls batched on the same threads (:meth:`io_batched`).
        self.batch = CallBatch(self.executor, config.io_threads)

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)

    def __repr__(self) -> str:
        c = self.config
        return (
            f"<Scheduler files={c.max_files} requests={self.requests.in_use}/{c.max_threads} "
            f"bytes={self.budget.in_use}/{self.budget.capacity}>"
        )

    # -- threads -------------------------------------------------------------

    async def io(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a worker thread (blocking file I/O, hashing)."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def io_holding(self, fn: Callable[..., T], *args: Any) -> T:
        """:meth:`io` for a call that uses a lent buffer: if the caller is
        cancelled, wait for the thread to finish with the buffer before the
        cancellation goes on (and the lease gives the buffer back)."""
        return await hold(self.executor.submit(fn, *args))

    async def io_batched(self, fn: Callable[[], T]) -> T:
        """``fn()`` on a worker thread, batched with other short calls
        (:class:`CallBatch`): for per-file work of tens of microseconds, where
        a thread hop each costs more than the work. Like :meth:`io_holding`,
        a cancelled caller waits for a call that started."""
        return await self.batch.run(fn)

    # -- files ---------------------------------------------------------------

    async def map_files(
        self, items: Iterable[T], work: Callable[[T], Coroutine[Any, Any, object]]
    ) -> None:
        """``work(item)`` for each item, at most ``max_files`` at once.

        An item's slot is taken before its task is created. ``work`` should
        handle its own failures: the first exception cancels the rest.
        """
        async with asyncio.TaskGroup() as tg:
            for item in items:
                await self._files.acquire()
                try:
                    task = tg.create_task(work(item))
                except BaseException:
                    self._files.release()
                    raise
                # A done callback, not a ``finally`` in the task: a task
                # cancelled before it starts never runs its body.
                task.add_done_callback(self._file_done)

    def _file_done(self, _: asyncio.Task[Any]) -> None:
        self._files.release()

    # -- bytes ---------------------------------------------------------------

    async def _lease(self, nbytes: int, lend: int = 0) -> Lease:
        """Wait until ``nbytes`` may move (the bandwidth limit, if any), then
        until the buffer to lend for them (``lend`` bytes, at least
        ``nbytes``, as the pool charges it) fits in the budget (clamped to its
        capacity)."""
        if self.bandwidth is not None:
            await self.bandwidth.acquire(nbytes)
        charge = self.buffers.charge(max(nbytes, lend))
        return Lease(self, nbytes, await self.budget.acquire(charge), lend)

    @contextlib.asynccontextmanager
    async def reserve(self, nbytes: int) -> AsyncIterator[Lease]:
        """Hold ``nbytes`` of the budget (and any buffer lent) for the block."""
        lease = await self._lease(nbytes)
        try:
            yield lease
        finally:
            lease._release()

    async def map_parts(
        self,
        parts: Iterable[Part],
        work: Callable[[Part, Lease], Awaitable[R]],
        then: Callable[[Part, R], Awaitable[None]] | None = None,
        *,
        even_buffers: bool = False,
    ) -> None:
        """Run ``work(part, lease)`` for every part, as many at once as the budget allows.

        Each part's ``length`` is reserved (waiting, in order, for the budget)
        before the part's task is created, so tasks and memory stay bounded
        however many parts there are. The reservation and its buffer are
        released as soon as ``work`` returns or raises; then
        ``then(part, result)`` does the part's bookkeeping (journal,
        progress) outside it. The first error cancels the other parts and
        is raised in an :class:`ExceptionGroup`.

        With ``even_buffers``, every part's :meth:`Lease.view` is a slice of
        a buffer the size of the largest part (and reserves that much): a
        short last part (an object's tail) reuses the others' buffers instead
        of making the pool drop one of them to allocate, and page-fault, its
        own, once per object.
        """
        lend = 0
        if even_buffers:
            parts = list(parts)
            lend = max((part.length for part in parts), default=0)

        async def one(part: Part, lease: Lease) -> None:
            try:
                result = await work(part, lease)
            finally:
                lease._release()
            if then is not None:
                await then(part, result)

        async with asyncio.TaskGroup() as tg:
            for part in parts:
                lease = await self._lease(part.length, lend)  # back-pressure: before the task
                try:
                    task = tg.create_task(one(part, lease))
                except BaseException:
                    lease._release()
                    raise
                # Also when the task ends: one cancelled before it started
                # (a sibling failed) never ran its ``finally``.
                task.add_done_callback(lease._on_task_done)
