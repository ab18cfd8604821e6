"""The scheduler's primitives and the request limiter it lends.

End-to-end bounds (requests, files, bytes seen by a server) are in
test_bounds.py; these tests pin the primitives themselves, and show that the
LimitLayer holds no request slot for an operation a real backend declares as
fanned out (the backend takes one per request instead) and one for any other.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import mmap
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import synxfer
from synxfer import KiB, MiB, WriteOptions
from synxfer.backend import BackendOptions, RequestLimiter
from synxfer.engine.budget import BufferPool
from synxfer.engine.parts import Part, split
from synxfer.engine.scheduler import CallBatch, Lease, RequestSlots, Scheduler
from synxfer.layers import LimitLayer, RetryLayer
from synxfer_file import FileBackend


@pytest.fixture
async def scheduler() -> AsyncIterator[Scheduler]:
    s = Scheduler(synxfer.TransferConfig(max_threads=4, part_size=10, memory_budget=30))
    try:
        yield s
    finally:
        s.close()


async def test_map_parts_reserves_before_each_task(scheduler: Scheduler) -> None:
    """At most budget // part parts run, and no task exists for a part not yet reserved."""
    running = peak = 0
    tasks_before = len(asyncio.all_tasks())
    peak_tasks = 0

    async def work(part: Part, lease: Lease) -> int:
        nonlocal running, peak, peak_tasks
        running += 1
        peak = max(peak, running)
        peak_tasks = max(peak_tasks, len(asyncio.all_tasks()) - tasks_before)
        assert scheduler.budget.in_use <= scheduler.budget.capacity
        assert len(lease.buffer()) == part.length
        await asyncio.sleep(0.01)
        running -= 1
        return part.index

    seen: list[int] = []

    async def then(part: Part, index: int) -> None:
        seen.append(index)

    await scheduler.map_parts(split(95, 10), work, then)
    assert sorted(seen) == list(range(10))
    assert peak == 3  # 30 bytes of budget, 10-byte parts
    assert peak_tasks == 3
    assert scheduler.budget.in_use == 0
    assert scheduler.budget.peak == 30


async def test_map_parts_releases_before_then(scheduler: Scheduler) -> None:
    held: list[int] = []

    async def work(part: Part, lease: Lease) -> None:
        held.append(scheduler.budget.in_use)

    async def then(part: Part, _: None) -> None:
        held.append(scheduler.budget.in_use)

    await scheduler.map_parts([Part(0, 0, 7)], work, then)
    # A 7-byte part is charged its buffer's size class: here the part size.
    assert held == [10, 0]


async def test_first_error_cancels_the_rest_and_releases_everything(
    scheduler: Scheduler,
) -> None:
    started: list[int] = []
    cancelled: list[int] = []
    buffers: list[bytearray] = []

    async def work(part: Part, lease: Lease) -> None:
        buffers.append(lease.buffer())
        started.append(part.index)
        if part.index == 1:
            raise OSError("disk on fire")
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(part.index)
            raise

    with pytest.raises(ExceptionGroup) as info:
        await scheduler.map_parts(split(100, 10), work)
    assert [str(e) for e in info.value.exceptions] == ["disk on fire"]
    assert started == [0, 1, 2]  # the rest never got a task
    assert sorted(cancelled) == [0, 2]
    assert scheduler.budget.in_use == 0
    # Every buffer lent went back to the pool (part 2 reused part 1's).
    lent = {id(b) for b in buffers}
    again = [scheduler.buffers.get(10) for _ in lent]
    assert {id(b) for b in again} == lent


async def test_map_files_takes_a_slot_before_each_task() -> None:
    s = Scheduler(synxfer.TransferConfig(max_threads=2, max_files=3))
    try:
        running = peak = 0
        tasks_before = len(asyncio.all_tasks())
        peak_tasks = 0

        async def work(item: int) -> None:
            nonlocal running, peak, peak_tasks
            running += 1
            peak = max(peak, running)
            peak_tasks = max(peak_tasks, len(asyncio.all_tasks()) - tasks_before)
            await asyncio.sleep(0.005)
            running -= 1

        await s.map_files(range(20), work)
        assert peak == 3
        assert peak_tasks == 3
    finally:
        s.close()


async def test_map_files_frees_the_slot_of_a_task_cancelled_before_it_starts() -> None:
    """A failing item cancels the rest, including a task created but not yet
    started; every slot comes back all the same."""
    s = Scheduler(synxfer.TransferConfig(max_threads=2, max_files=1))
    try:
        ran: list[int] = []

        async def work(item: int) -> None:
            ran.append(item)
            await asyncio.sleep(0)
            if item == 0:
                raise ValueError("item 0 fails")
            await asyncio.sleep(10)

        with pytest.raises(ExceptionGroup):
            await asyncio.wait_for(s.map_files(range(5), work), 5)
        assert ran == [0]

        # The slot is free again.
        async def record(item: int) -> None:
            ran.append(item)

        await asyncio.wait_for(s.map_files(range(3), record), 5)
        assert ran == [0, 0, 1, 2]
    finally:
        s.close()


async def test_reserve_releases_on_error(scheduler: Scheduler) -> None:
    held: list[int] = []

    async def fail() -> None:
        async with scheduler.reserve(25) as lease:
            held.append(scheduler.budget.in_use)
            lease.buffer()
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await fail()
    assert held == [25]
    assert scheduler.budget.in_use == 0


async def test_request_slots() -> None:
    slots = RequestSlots(2)
    assert isinstance(slots, RequestLimiter)
    async with slots.slot(), slots.slot():
        assert slots.in_use == 2
        third = asyncio.create_task(_hold(slots))
        await asyncio.sleep(0.05)
        assert not third.done()  # waits for a free slot
    await asyncio.wait_for(third, 5)
    assert slots.in_use == 0
    with pytest.raises(ValueError, match="must be >= 1"):
        RequestSlots(0)


async def _hold(slots: RequestSlots) -> None:
    async with slots.slot():
        pass


# -- the LimitLayer and fanned-out operations, on the real file backend -------------


class SlotPerRequestFileBackend(FileBackend):
    """The file backend with ``copy`` declared fan-out, as a backend that sends
    several requests per copy would: it takes one slot of the scheduler's
    limiter (``options.requests``) per request it sends (here one)."""

    capabilities = dataclasses.replace(FileBackend.capabilities, fan_out=frozenset({"copy"}))

    async def copy(self, src_key: str, dst_key: str, options: WriteOptions) -> synxfer.ObjectInfo:
        async with self.options.requests.slot():
            return await super().copy(src_key, dst_key, options)


async def test_limit_layer_holds_no_slot_for_fan_out_ops(tmp_path: Path) -> None:
    limiter = RequestSlots(1)
    async with FileBackend(str(tmp_path)) as raw:
        raw.capabilities = dataclasses.replace(raw.capabilities, fan_out=frozenset({"copy"}))
        layer = LimitLayer(raw, limiter)
        await layer.put("a", b"abc", WriteOptions())
        async with limiter.slot():  # the only slot, held elsewhere
            # The fan-out op goes straight to the backend ...
            info = await asyncio.wait_for(layer.copy("a", "b", WriteOptions()), 5)
            assert info.size == 3
            # ... any other op waits for a slot.
            stat = asyncio.create_task(layer.stat("b"))
            await asyncio.sleep(0.1)
            assert not stat.done()
        assert (await asyncio.wait_for(stat, 5)).size == 3


async def test_limit_layer_holds_a_slot_for_other_ops(tmp_path: Path) -> None:
    """Without the fan-out declaration, the same copy waits for a slot."""
    limiter = RequestSlots(1)
    async with FileBackend(str(tmp_path)) as raw:
        layer = LimitLayer(raw, limiter)
        await layer.put("a", b"abc", WriteOptions())
        async with limiter.slot():
            copy = asyncio.create_task(layer.copy("a", "b", WriteOptions()))
            await asyncio.sleep(0.1)
            assert not copy.done()
            assert not (tmp_path / "b").exists()
        assert (await asyncio.wait_for(copy, 5)).size == 3


async def test_a_backend_taking_slots_per_request_never_deadlocks(tmp_path: Path) -> None:
    """One slot in all: the layer holds none for the fan-out copy, so the
    backend's own slot is free; with the slot held elsewhere, the copy waits."""
    limiter = RequestSlots(1)
    options = BackendOptions(requests=limiter)
    async with SlotPerRequestFileBackend(str(tmp_path), options) as raw:
        layer = RetryLayer(LimitLayer(raw, limiter), synxfer.RetryPolicy(attempts=1))
        await layer.put("a", b"abcd", WriteOptions())
        info = await asyncio.wait_for(layer.copy("a", "b", WriteOptions()), 5)
        assert info.size == 4
        async with limiter.slot():
            copy = asyncio.create_task(layer.copy("a", "c", WriteOptions()))
            await asyncio.sleep(0.1)
            assert not copy.done()  # the backend waits for its request slot
        assert (await asyncio.wait_for(copy, 5)).size == 4


async def test_client_lends_its_limiter_to_layer_and_backend(tmp_path: Path) -> None:
    async with synxfer.Client(synxfer.TransferConfig(max_threads=3)) as c:
        backend, _ = await c.backend(f"file://{tmp_path}/x")
        limiter = c._engine.scheduler.requests
        assert isinstance(backend, RetryLayer)
        limit = backend.inner
        assert isinstance(limit, LimitLayer)
        assert limit.limiter is limiter
        inner = limit.inner
        assert isinstance(inner, FileBackend)
        assert inner.options.requests is limiter
        assert isinstance(limiter, RequestSlots)
        assert limiter.limit == 3


# -- the buffer pool -------------------------------------------------------------


def test_pool_classes_and_charges() -> None:
    pool = BufferPool(8 * MiB, 64 * MiB)
    assert pool.classes == tuple(8 * MiB >> k for k in range(8))  # 8 MiB .. 64 KiB
    assert pool.charge(0) == 0
    assert pool.charge(1) == 64 * KiB
    assert pool.charge(MiB) == MiB
    assert pool.charge(MiB + 1) == 2 * MiB
    assert pool.charge(8 * MiB) == 8 * MiB
    assert pool.charge(8 * MiB + 1) == 8 * MiB + 1  # above a part: exact
    odd = BufferPool(5 * MiB + 1, 64 * MiB)  # not halvable: one class
    assert odd.classes == (5 * MiB + 1,)
    assert odd.charge(10) == 5 * MiB + 1


def test_pool_reuses_a_buffer_for_any_size_in_its_class() -> None:
    pool = BufferPool(8 * MiB, 64 * MiB)
    first = pool.get(700 * KiB)
    assert len(first) == MiB
    pool.put(first)
    for n in (513 * KiB, MiB, 1000 * KiB):
        again = pool.get(n)
        assert again is first
        pool.put(again)
    assert pool.allocated == 1
    big = pool.get(9 * MiB)  # above the part size: exact, kept for the same size
    assert len(big) == 9 * MiB
    pool.put(big)
    assert pool.get(10 * MiB) is not big
    assert pool.get(9 * MiB) is big


def test_pool_keeps_exact_buffers_within_its_capacity() -> None:
    """Buffers above the part size are reused by size; sizes that come and go
    leave no empty free lists behind, and what the pool owns stays bounded."""
    pool = BufferPool(MiB, 8 * MiB)
    for n in range(2 * MiB, 2 * MiB + 40):  # 40 different sizes, one at a time
        buf = pool.get(n)
        assert len(buf) == n
        pool.put(buf)
        assert pool._idle + pool._out <= pool.capacity
    assert len(pool._free) <= len(pool.classes) + 4  # at most 4 idle 2 MiB buffers
    held = [pool.get(3 * MiB) for _ in range(2)]
    for b in held:
        pool.put(b)
    assert pool._out == 0
    assert pool._idle <= pool.capacity
    again = pool.get(3 * MiB)
    assert any(again is b for b in held)
    assert pool.allocated == 40 + 2


def test_pool_never_owns_more_than_its_capacity() -> None:
    """Idle buffers of one class are dropped to make room for another, so a
    shift from big to small objects cannot double the memory held."""
    pool = BufferPool(1 * MiB, 2 * MiB)
    big = [pool.get(MiB), pool.get(MiB)]
    for b in big:
        pool.put(b)  # 2 MiB idle: the whole capacity
    small = [pool.get(100 * KiB) for _ in range(4)]  # 128 KiB class
    assert all(len(b) == 128 * KiB for b in small)
    assert pool._idle + pool._out <= pool.capacity
    assert pool._idle == MiB  # one big buffer had to go
    for b in small:
        pool.put(b)
    assert pool._idle <= pool.capacity


def test_pool_lends_fresh_large_buffers_unzeroed() -> None:
    """A buffer :meth:`lend` makes fresh is mapped, not zeroed: none of its
    pages is resident until the holder writes it (a bytearray's are, all of
    them, by the zeroing the event loop paid for). Small ones stay bytearrays;
    a holder that hands the buffer on (``get``) never gets a mapping, and
    both kinds share one capacity."""
    pool = BufferPool(8 * MiB, 24 * MiB)
    lent = pool.lend(8 * MiB)
    assert isinstance(lent, mmap.mmap)
    assert len(lent) == 8 * MiB
    assert _resident_pages(lent) == 0
    memoryview(lent)[: 2 * MiB] = b"x" * (2 * MiB)  # the receive's copy faults them in
    # The written pages, and no more than a huge page beyond them (THP "always").
    assert 2 * MiB // mmap.PAGESIZE <= _resident_pages(lent) <= 4 * MiB // mmap.PAGESIZE
    made = bytearray(8 * MiB)
    assert _resident_pages(made) >= 8 * MiB // mmap.PAGESIZE - 1  # zeroed = touched
    assert isinstance(pool.lend(100 * KiB), bytearray)
    pool.put(lent)
    assert pool.lend(7 * MiB) is lent  # reused for any size of its class
    pool.put(lent)
    got = pool.get(8 * MiB)  # a payload: a bytearray, never the idle mapping
    assert isinstance(got, bytearray)
    assert pool._idle + pool._out <= pool.capacity
    pool.put(got)
    assert pool.lend(8 * MiB) is got  # a lender takes either kind: the warmest
    assert pool.allocated == 3


def _resident_pages(buf: mmap.mmap | bytearray) -> int:
    """Pages of ``buf`` in memory (``mincore``), by the kernel's count."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    page = mmap.PAGESIZE
    view = (ctypes.c_char * len(buf)).from_buffer(buf)
    address = ctypes.addressof(view)
    start = address - address % page
    length = address + len(buf) - start
    pages = (length + page - 1) // page
    vec = (ctypes.c_ubyte * pages)()
    if libc.mincore(ctypes.c_void_p(start), ctypes.c_size_t(length), vec) != 0:
        raise OSError(ctypes.get_errno(), "mincore")
    del view
    return sum(v & 1 for v in vec)


async def test_lease_view_is_a_slice_of_a_pooled_buffer(scheduler: Scheduler) -> None:
    async with scheduler.reserve(7) as lease:
        view = lease.view()
        assert len(view) == 7
        assert view.obj is lease._buffer
        assert scheduler.budget.in_use == 10  # the class charged: here the part size
    assert scheduler.budget.in_use == 0
    async with scheduler.reserve(4) as lease:
        assert lease.view().obj is view.obj  # the same buffer, reused
    assert scheduler.buffers.allocated == 1


# -- worker-thread calls that use a lent buffer ------------------------------------


async def test_io_holding_waits_for_the_thread_when_cancelled(scheduler: Scheduler) -> None:
    """A cancelled caller is released only once the thread is done with the
    buffer, so the buffer cannot be lent again while a thread still uses it."""
    started = threading.Event()
    release = threading.Event()
    finished = threading.Event()

    def work() -> None:
        started.set()
        release.wait(30)
        finished.set()

    task = asyncio.create_task(scheduler.io_holding(work))
    await asyncio.to_thread(started.wait, 30)  # the call is running, not just queued
    task.cancel()
    await asyncio.sleep(0.01)
    assert not task.done(), "released while the thread still runs"
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished.is_set()


class CountingExecutor(concurrent.futures.ThreadPoolExecutor):
    """A thread pool that counts its submissions (thread hops)."""

    submitted = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


async def test_batched_calls_share_thread_hops() -> None:
    """Calls queued while a drainer runs join it: 40 short calls on worker
    threads (never the loop's) in a handful of hops, each result and error
    handed to its own caller."""
    with CountingExecutor(max_workers=2) as executor:
        batch = CallBatch(executor, limit=2)
        loop_thread = threading.get_ident()
        gate = threading.Event()
        threads: set[int] = set()

        def call(i: int) -> int:
            threads.add(threading.get_ident())
            gate.wait(30)  # the first call holds its drainer until all are queued
            if i % 10 == 3:
                raise ValueError(f"call {i}")
            return i * i

        tasks = [asyncio.create_task(batch.run(functools.partial(call, i))) for i in range(40)]
        await asyncio.sleep(0.01)
        gate.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    for i, result in enumerate(results):
        if i % 10 == 3:
            assert isinstance(result, ValueError)
            assert str(result) == f"call {i}"
        else:
            assert result == i * i
    assert loop_thread not in threads
    # One drainer, a second once more than GROUP calls waited; maybe one more
    # if a call came in as a drainer finished. One hop a call would be 40.
    assert executor.submitted <= 4, executor.submitted


async def test_a_long_batched_call_is_handed_back_before_the_next_ends() -> None:
    """A call that took LINGER or more is handed back at once, not held
    until the calls queued behind it are done."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as executor:
        batch = CallBatch(executor, limit=1)
        release = threading.Event()

        def long() -> str:
            time.sleep(CallBatch.LINGER * 10)
            return "long"

        def blocked() -> str:
            release.wait(10)  # released once the long call's result is in
            return "blocked"

        first = asyncio.create_task(batch.run(long))
        second = asyncio.create_task(batch.run(blocked))
        try:
            assert await asyncio.wait_for(first, 5) == "long"
        finally:
            release.set()
        assert await second == "blocked"


async def test_a_batched_call_cancelled_before_it_starts_never_runs() -> None:
    """Cancelled while queued: taken out of the queue; cancelled while
    running: released only once the call is done (it may use a lent buffer)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as executor:
        batch = CallBatch(executor, limit=1)
        started, release = threading.Event(), threading.Event()
        ran: list[str] = []

        def first() -> None:
            started.set()
            release.wait(30)
            ran.append("first")

        running = asyncio.create_task(batch.run(first))
        await asyncio.to_thread(started.wait, 30)
        queued = asyncio.create_task(batch.run(lambda: ran.append("queued")))
        await asyncio.sleep(0)
        queued.cancel()
        running.cancel()
        await asyncio.sleep(0.01)
        assert queued.done()
        assert not running.done(), "released while its call still runs"
        release.set()
        for task in (queued, running):
            with pytest.raises(asyncio.CancelledError):
                await task
        assert await batch.run(lambda: "later") == "later"  # the batch still works
    assert ran == ["first"]
    with pytest.raises(RuntimeError, match="closed"):  # and says so once the pool is shut
        await batch.run(lambda: "too late")


async def test_the_io_executor_has_io_threads_workers() -> None:
    """File I/O and hashing run in ``io_threads`` threads, not ``max_threads``."""
    s = Scheduler(synxfer.TransferConfig(max_threads=6, io_threads=2))
    try:
        gate = threading.Barrier(3, timeout=0.5)
        names: set[str] = set()

        def work() -> bool:
            names.add(threading.current_thread().name)
            try:
                gate.wait()  # a third thread never comes
            except threading.BrokenBarrierError:
                return False
            return True

        results = await asyncio.gather(*(s.io(work) for _ in range(4)))
    finally:
        s.close()
    assert not any(results)
    assert len(names) == 2
