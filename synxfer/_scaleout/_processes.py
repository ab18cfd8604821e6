"""Shards on the cores of one machine: a standard-library process pool.

Workers are started with ``spawn`` (never ``fork``: the driver has a running
event loop and threads). Each runs one shard at a time in a fresh event
loop. They ignore SIGINT -- Ctrl-C reaches the driver, which stops each
worker once, with SIGTERM, and waits for it: a worker cancels its transfers
as a one-process run does on Ctrl-C, so its journal keeps what it did and a
rerun resumes. Events come back through one pipe (a ``SimpleQueue``, whose
``put`` has delivered when it returns), read by a thread of the driver.

Like every ``spawn`` user, a script calling this must guard its entry point
with ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import multiprocessing.queues
import os
import signal
import threading
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

from .._models import TransferResult
from ._shards import PackedEvent, ShardSpec, run_shard

if TYPE_CHECKING:
    from ._shards import DeliverEvents

__all__ = ["ProcessRunner"]

log = logging.getLogger("synxfer")

#: Exit status of a worker stopped by the driver (128 + SIGTERM).
INTERRUPTED = 143
#: Times a shard whose worker died is run again in a new pool.
RETRIES = 1
#: Seconds a stopped worker gets to cancel its transfers before it is killed.
STOP_GRACE = 30.0

_events: multiprocessing.queues.SimpleQueue[Any] | None = None


def _init_worker(events: multiprocessing.queues.SimpleQueue[Any]) -> None:
    global _events
    _events = events
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides; it sends SIGTERM


def _send(batch: list[PackedEvent]) -> None:
    assert _events is not None
    _events.put(batch)


def _task(spec: ShardSpec) -> TransferResult:
    try:
        return run_shard(spec, _send if spec.event_kinds else None)
    except asyncio.CancelledError:
        # Stopped by the driver's SIGTERM: the shard has cancelled its
        # transfers and closed its journal; the pool is being torn down, so
        # this process ends now rather than wait for work that will not come.
        os._exit(INTERRUPTED)


class ProcessRunner:
    """Runs shards in ``processes`` worker processes of this machine."""

    def __init__(self, processes: int) -> None:
        self.slots = processes
        self.share = processes
        self._pool: ProcessPoolExecutor | None = None

    async def run(
        self, specs: Sequence[ShardSpec], deliver: DeliverEvents
    ) -> list[TransferResult | BaseException]:
        """Each shard's result, or why it did not finish. Shards whose worker
        died (the pool broke under them) run again in a new pool, :data:`RETRIES`
        times: a shard is idempotent, the re-run sends only what did not land."""
        outcomes: dict[int, TransferResult | BaseException] = {}
        pending = list(specs)
        for attempt in range(RETRIES + 1):
            again = []
            for spec, outcome in zip(pending, await self._run(pending, deliver), strict=True):
                if isinstance(outcome, BrokenProcessPool) and attempt < RETRIES:
                    log.warning("shard %d lost its worker (%s); again", spec.index, outcome)
                    again.append(spec)
                else:
                    outcomes[spec.index] = outcome
            if not again:
                break
            pending = again
        return [outcomes[spec.index] for spec in specs]

    async def _run(
        self, specs: Sequence[ShardSpec], deliver: DeliverEvents
    ) -> list[TransferResult | BaseException]:
        loop = asyncio.get_running_loop()
        ctx = multiprocessing.get_context("spawn")
        events: multiprocessing.queues.SimpleQueue[Any] = ctx.SimpleQueue()
        pool = self._pool = ProcessPoolExecutor(
            min(self.slots, len(specs)),
            mp_context=ctx,
            initializer=_init_worker,
            initargs=(events,),
        )

        def read() -> None:
            while True:
                batch = events.get()
                if batch is None:
                    return
                loop.call_soon_threadsafe(deliver, batch)

        reader = threading.Thread(target=read, name="synxfer-shard-events", daemon=True)
        reader.start()
        futures = [loop.run_in_executor(pool, _task, spec) for spec in specs]
        try:
            outcomes: list[TransferResult | BaseException] = await asyncio.gather(
                *futures, return_exceptions=True
            )
        except BaseException:
            _stop(pool)
            raise
        finally:
            await asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True)
            self._pool = None
            events.put(None)
            await asyncio.to_thread(reader.join)
            await asyncio.sleep(0)  # deliver the last batches before returning
            events.close()
        return outcomes

    async def close(self) -> None:
        if self._pool is not None:
            _stop(self._pool)
            self._pool = None


def _stop(pool: ProcessPoolExecutor) -> None:
    """Stop the pool: no new shard starts; SIGTERM every worker (its shard is
    cancelled, its journal kept), wait up to :data:`STOP_GRACE` for each, then kill."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        with contextlib.suppress(OSError, ValueError):
            if proc.pid is not None and proc.is_alive():
                os.kill(proc.pid, signal.SIGTERM)
    for proc in processes:
        with contextlib.suppress(ValueError):
            proc.join(STOP_GRACE)
            if proc.is_alive():
                proc.kill()
                proc.join(1.0)
