"""Shards on a Dask cluster (``pip install 'synxfer[dask]'``).

The target is a ``distributed.Client`` the caller already has (synchronous;
it stays open), a scheduler address (``tcp://host:8786``), or ``local:N``: a
``LocalCluster`` of N single-threaded worker processes on this machine,
listening on 127.0.0.1 only, without dashboards, closed when the run ends.

A shard is one task (``retries=`` re-runs it after an error; a worker that
dies has its task rescheduled by the scheduler); its spec carries names,
limits and endpoints, never a credential: a worker's client finds those in
the worker's own environment. Events come back through a Dask ``Queue``.
Ctrl-C cancels the tasks and sets a Dask ``Event`` every running shard
polls, so it stops as a one-process run does and its journal (on its own
machine) keeps what it did.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .._exceptions import ConfigError
from .._models import TransferResult
from ._shards import ShardSpec, run_shard

if TYPE_CHECKING:
    from ._shards import DeliverEvents

__all__ = ["INSTALL_HINT", "DaskRunner", "require_dask"]

INSTALL_HINT = "pip install 'synxfer[dask]'"
#: Seconds to reach a scheduler before giving up (a ConfigError).
CONNECT_TIMEOUT = 10.0
#: Times a shard that raised is run again (a dead worker's task is rescheduled
#: by the scheduler itself, up to its ``allowed-failures``).
RETRIES = 2


def require_dask() -> Any:
    """The ``distributed`` module, or a ConfigError saying how to install it."""
    try:
        import distributed
    except ImportError as exc:
        raise ConfigError(
            f"--dask (dask=) needs Dask distributed, which is not installed ({exc}); "
            f"install it with: {INSTALL_HINT}"
        ) from None
    return distributed


def _task(spec: ShardSpec, queue: str, stop: str) -> TransferResult:
    """One shard on a Dask worker (in one of its threads)."""
    dd = require_dask()
    client = dd.get_client()
    events = dd.Queue(queue, client=client) if spec.event_kinds else None
    stopped = dd.Event(stop, client=client)
    return run_shard(spec, None if events is None else events.put, stopped.is_set)


class DaskRunner:
    """Runs shards as Dask tasks, one engine per worker thread."""

    def __init__(self, client: Any, cluster: Any | None, owns_client: bool) -> None:
        self.client = client
        self._cluster = cluster
        self._owns_client = owns_client
        nthreads: dict[str, int] = dict(client.nthreads())
        if not nthreads:
            raise ConfigError(f"the Dask scheduler at {client.scheduler.address} has no workers")
        per_host: Counter[str] = Counter()
        for address, n in nthreads.items():
            per_host[urlsplit(address).hostname or address] += n
        self.slots = sum(nthreads.values())
        self.share = max(per_host.values())

    @classmethod
    async def open(cls, target: object) -> DaskRunner:
        distributed = require_dask()
        if isinstance(target, distributed.Client):
            return await asyncio.to_thread(cls, target, None, False)
        if not isinstance(target, str) or not target:
            raise ConfigError(
                f"dask= takes a distributed.Client, a scheduler address or 'local:N' "
                f"(got {target!r})"
            )
        return await asyncio.to_thread(cls._connect, distributed, target)

    @classmethod
    def _connect(cls, distributed: Any, target: str) -> DaskRunner:
        # The client and cluster are ours: their INFO chatter (workers starting,
        # nannies closing) is not the user's business; warnings still show.
        quiet = logging.getLogger("distributed")
        quiet.setLevel(max(quiet.getEffectiveLevel(), logging.WARNING))
        if target.startswith("local:"):
            n = _local_workers(target)
            cluster = distributed.LocalCluster(
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                silence_logs=logging.WARNING,
            )
            try:
                return cls(distributed.Client(cluster), cluster, True)
            except BaseException:
                cluster.close()
                raise
        try:
            client = distributed.Client(target, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ValueError) as exc:
            raise ConfigError(
                f"cannot reach the Dask scheduler at {target!r} (--dask): {exc}"
            ) from None
        try:
            return cls(client, None, True)
        except BaseException:
            client.close()
            raise

    async def run(
        self, specs: Sequence[ShardSpec], deliver: DeliverEvents
    ) -> list[TransferResult | BaseException]:
        dd = require_dask()
        loop = asyncio.get_running_loop()
        run_id = uuid.uuid4().hex[:12]
        queue_name, stop_name = f"synxfer-events-{run_id}", f"synxfer-stop-{run_id}"
        events = dd.Queue(queue_name, client=self.client)
        stop = dd.Event(stop_name, client=self.client)

        def read() -> None:
            # Blocking gets until the driver's own None, put after every task
            # ended: a worker's puts return before its task does, so none is lost.
            while (batch := events.get()) is not None:
                loop.call_soon_threadsafe(deliver, batch)

        def submit() -> list[Any]:
            return [
                self.client.submit(
                    _task,
                    spec,
                    queue_name,
                    stop_name,
                    key=f"synxfer-shard-{spec.index}-{run_id}",
                    retries=RETRIES,
                    pure=False,
                )
                for spec in specs
            ]

        futures = await asyncio.to_thread(submit)
        reader = threading.Thread(target=read, name="synxfer-dask-events", daemon=True)
        reader.start()
        try:
            return await asyncio.to_thread(_outcomes, futures)
        except BaseException:
            with contextlib.suppress(Exception):
                stop.set()
                self.client.cancel(futures)
            raise
        finally:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(events.put, None)
            await asyncio.to_thread(reader.join, 30.0)
            await asyncio.sleep(0)  # deliver the last batches before returning

    async def close(self) -> None:
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        if self._owns_client:
            with contextlib.suppress(Exception):
                self.client.close()
        if self._cluster is not None:
            with contextlib.suppress(Exception):
                self._cluster.close()


def _outcomes(futures: Sequence[Any]) -> list[TransferResult | BaseException]:
    require_dask().wait(futures)
    out: list[TransferResult | BaseException] = []
    for f in futures:
        if f.status == "finished":
            out.append(f.result())
        else:
            try:
                exc = f.exception()
            except BaseException as raised:  # cancelled
                exc = raised
            out.append(exc if isinstance(exc, BaseException) else RuntimeError(f.status))
    return out


def _local_workers(target: str) -> int:
    text = target.removeprefix("local:")
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"--dask {target!r}: expected local:N with N >= 1 worker processes")
    return n
