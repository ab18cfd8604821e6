"""Shards: a plan split into balanced pieces, each run by its own engine.

A :class:`ShardSpec` is everything one engine needs, as plain values that
pickle: the operation (source and destination as paths or URLs), the items,
the engine's share of the limits and how the driver's client opened its
backends (:class:`ClientSettings`; scale-out never imports the client). It carries no
credential: a worker resolves those from its own environment when its
client opens a backend, exactly as the driver did.

:func:`run_shard` is what a worker runs (in a pool process or a Dask
worker): a fresh event loop, a fresh engine and :class:`synxfer._backends.Backends`
built as the driver's client built its own, the shard's items through
:func:`synxfer.engine.tree.run_items` (so they are compared again, and a
re-run transfers only what has not landed), events sent back in batches.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import heapq
import signal
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .._backends import Backends
from .._config import TransferConfig
from .._models import Action, Event, EventKind, FileFailure, TransferResult
from ..engine.compare import Compare
from ..engine.core import Engine
from ..engine.items import Item
from ..engine.journal import default_state_dir
from ..engine.tree import TreeHost, open_op, run_items

if TYPE_CHECKING:
    from ..backend import Backend

__all__ = [
    "ClientSettings",
    "DeliverEvents",
    "Runner",
    "ShardSpec",
    "engine_config",
    "merge",
    "read_pins",
    "run_shard",
    "shard_failed",
    "shard_host",
    "split",
]

#: Seconds between two batches of events sent back by a worker.
FLUSH_INTERVAL = 0.1
#: Events in one batch at most.
BATCH = 1000
#: Seconds between two looks at whether the driver asked a worker to stop.
STOP_POLL = 0.5

Send = Callable[[list["PackedEvent"]], object]
Stopped = Callable[[], bool]


class Runner(Protocol):
    """Runs shard specs somewhere (a process pool, a Dask cluster)."""

    #: Shards to cut the plan into (engines that run at once, in all).
    slots: int
    #: Engines that run at once on one machine: each gets 1/share of the limits.
    share: int

    async def run(
        self, specs: Sequence[ShardSpec], deliver: DeliverEvents
    ) -> list[TransferResult | BaseException]: ...

    async def close(self) -> None: ...


class DeliverEvents(Protocol):
    def __call__(self, batch: Sequence[PackedEvent]) -> None: ...


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """How the driver's client opens backends, minus anything secret (none is
    here: credentials are found by each backend in its process's environment;
    SSE-C keys are refused before a run is scaled out). ``layers`` travel to
    workers by module and name."""

    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    endpoints: Mapping[str, str] | None = None
    backend_options: Mapping[str, Mapping[str, str]] | None = None
    follow_symlinks: bool = False
    layers: tuple[Callable[[Backend], Backend], ...] = ()


@dataclass(frozen=True, slots=True)
class ShardSpec:
    """One engine's work: ``items`` from ``src`` to ``dst`` (a local directory
    or a URL prefix each), compared by ``mode``."""

    index: int
    kind: Action
    src: str
    dst: str
    items: tuple[Item, ...]
    mode: Compare
    config: TransferConfig
    settings: ClientSettings
    remote_count: int | None = None
    event_kinds: frozenset[EventKind] = frozenset()
    #: The user's state directory; None: the worker's own default. The shard's
    #: journal is ``<it>/shards/<index>``: one writer per journal.
    state_dir: str | None = None

    def journal_dir(self) -> Path:
        return shard_journal_dir(self.state_dir, self.index)


def shard_journal_dir(state_dir: str | None, index: int) -> Path:
    base = Path(state_dir) if state_dir else default_state_dir()
    return base / "shards" / str(index)


def engine_config(config: TransferConfig, share: int) -> TransferConfig:
    """``config`` for one of ``share`` engines on one machine: its part of
    every machine-wide limit (requests, I/O threads, files, memory, and the
    bandwidth limit: each engine gets ``bwlimit / share``, so together they
    keep to the client's)."""
    return replace(
        config,
        max_threads=max(1, config.max_threads // share),
        max_files=max(1, config.max_files // share),
        io_threads=max(1, config.io_threads // share),
        memory_budget=max(1, config.memory_budget // share),
        bwlimit=max(1, config.bwlimit // share) if config.bwlimit else 0,
        processes=1,
    )


# --------------------------------------------------------------------------- splitting


def split(items: Sequence[Item], n: int, pins: Sequence[int | None] = ()) -> list[list[Item]]:
    """``items`` in ``n`` shards (some maybe empty), balanced by bytes and by count.

    An item weighs its share of the bytes plus its share of the files; the
    heaviest go first, each to the lightest shard (so one huge file ends up
    alone, or nearly). ``pins[i]``, when given and below ``n``, puts item
    ``i`` in that shard: a file whose transfer a shard's journal holds goes
    back to that shard and resumes. Each shard is in name order; a shard's
    position is its index (and names its journal).
    """
    n = max(1, n)
    shards: list[list[Item]] = [[] for _ in range(n)]
    if not items:
        return shards
    total = sum(it.size for it in items) or 1
    count = len(items)

    def weight(it: Item) -> float:
        return it.size / total + 1 / count

    load = [0.0] * n
    free: list[Item] = []
    for i, it in enumerate(items):
        pin = pins[i] if i < len(pins) else None
        if pin is not None and 0 <= pin < n:
            shards[pin].append(it)
            load[pin] += weight(it)
        else:
            free.append(it)
    heap = [(load[i], i) for i in range(n)]
    heapq.heapify(heap)
    for it in sorted(free, key=weight, reverse=True):
        w, i = heapq.heappop(heap)
        shards[i].append(it)
        heapq.heappush(heap, (w + weight(it), i))
    return [sorted(s, key=lambda it: it.src) for s in shards]


def read_pins(state_dir: str | None, n: int, dests: Sequence[str]) -> list[int | None]:
    """For each destination, the shard (below ``n``) whose journal holds its
    unfinished transfer, else None (blocking: SQLite, read only).

    A journal that cannot be read pins nothing: resuming is an optimisation.
    """
    where: dict[str, int] = {}
    for index in range(n):
        path = shard_journal_dir(state_dir, index) / "journal.sqlite3"
        if not path.exists():
            continue
        try:
            db = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=5)
            try:
                rows = db.execute("SELECT dest FROM uploads UNION ALL SELECT dest FROM downloads")
                for (dest,) in rows:
                    where.setdefault(str(dest), index)
            finally:
                db.close()
        except sqlite3.Error:
            continue
    return [where.get(d) for d in dests]


# --------------------------------------------------------------------------- results


def merge(into: TransferResult, part: TransferResult) -> None:
    """Add one shard's counts and failures to the run's result.

    Every counter (an ``int`` field: files, bytes per direction, retries,
    and any counter added later) is summed and lists are joined; ``elapsed``
    and ``dryrun`` are the driver's.
    """
    for f in fields(TransferResult):
        if f.name in ("elapsed", "dryrun"):
            continue
        mine, theirs = getattr(into, f.name), getattr(part, f.name)
        if isinstance(mine, list):
            mine.extend(theirs)
        elif isinstance(mine, int) and not isinstance(mine, bool):
            setattr(into, f.name, mine + theirs)


def shard_failed(spec: ShardSpec, exc: BaseException) -> list[FileFailure]:
    """Every item of a shard that did not finish, as failures saying why."""
    why = f"shard {spec.index} did not finish: {type(exc).__name__}: {exc}"
    out = []
    for it in spec.items:
        src = spec.src.rstrip("/") + "/" + it.src
        out.append(FileFailure(src, spec.kind, why))
    return out


# --------------------------------------------------------------------------- the worker side


#: An :class:`Event` as plain values (msgpack-able, for Dask's queue too): every
#: field of :class:`Event` in order, enums by value.
PackedEvent = tuple[str | int | bool | None, ...]

_EVENT_FIELDS = tuple(f.name for f in fields(Event))


def pack_event(e: Event) -> PackedEvent:
    """``e`` as plain values: every field (``files`` of a PLANNED event,
    ``verified`` of a download's DONE included)."""
    return tuple(
        value.value if isinstance(value, enum.Enum) else value
        for value in (getattr(e, name) for name in _EVENT_FIELDS)
    )


def unpack_event(p: Sequence[object]) -> Event:
    """The :class:`Event` :func:`pack_event` packed."""
    values = dict(zip(_EVENT_FIELDS, p, strict=True))
    values["kind"] = EventKind(values["kind"])
    values["action"] = Action(values["action"])
    return Event(**values)  # type: ignore[arg-type]


class _Forwarder:
    """The worker's ``on_event``: collects the kinds the driver wants and
    sends them in batches, every :data:`FLUSH_INTERVAL` (:meth:`start`) and
    at the end (:meth:`close`)."""

    def __init__(self, kinds: frozenset[EventKind], send: Send) -> None:
        self.event_kinds = kinds
        self.send = send
        self.pending: list[PackedEvent] = []
        self._stop = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None

    def __call__(self, event: Event) -> None:
        self.pending.append(pack_event(event))

    def start(self) -> None:
        self._pump = asyncio.create_task(self._run())

    async def close(self) -> None:
        """Send everything still pending. The pump is stopped, never
        cancelled: a cancelled ``to_thread`` whose thread had not started
        would drop the batch it had already taken from :attr:`pending`."""
        self._stop.set()
        if self._pump is not None:
            await self._pump  # its last round sends the rest
        else:
            await self._flush()

    async def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), FLUSH_INTERVAL)
            await self._flush()

    async def _flush(self) -> None:
        while self.pending:
            batch, self.pending = self.pending[:BATCH], self.pending[BATCH:]
            await asyncio.to_thread(self.send, batch)


def run_shard(
    spec: ShardSpec, send: Send | None = None, stopped: Stopped | None = None
) -> TransferResult:
    """Run one shard to the end in a new event loop (blocking); its result.

    ``send`` takes batches of packed events; ``stopped`` (blocking, polled
    twice a second) says when the driver gave up. Either, or SIGTERM in a
    process's main thread, cancels the run as Ctrl-C cancels a one-process
    run: transfers stop, the journal keeps what they did.
    """
    try:
        return asyncio.run(_run_shard(spec, send, stopped))
    finally:
        main = threading.current_thread() is threading.main_thread()
        if main and _sigterm_ignored and signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
            # The SIGTERM came as the shard ended: the next one counts again.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


async def _watch(stopped: Stopped, task: asyncio.Task[Any]) -> None:
    while True:
        await asyncio.sleep(STOP_POLL)
        if await asyncio.to_thread(stopped):
            task.cancel()
            return


def _stop_on_sigterm(loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> None:
    """Cancel the shard once; ignore any later SIGTERM while it winds down.

    A worker usually gets two: one sent to the whole process group (by
    ``timeout``, a batch scheduler) and one from the driver stopping its
    pool. The second must neither kill the clean-up half-way nor reach the
    loop's handler while ``loop.close()`` has already closed the loop's
    wake-up socket (Python then prints "Exception ignored when trying to
    write to the signal wakeup fd" with a traceback). The driver kills a
    worker that outlives its grace period anyway.
    """
    global _sigterm_ignored
    loop.remove_signal_handler(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _sigterm_ignored = True
    task.cancel()


#: Whether :func:`_stop_on_sigterm` set SIGTERM to be ignored (undone after the shard).
_sigterm_ignored = False


@contextlib.asynccontextmanager
async def shard_host(
    config: TransferConfig,
    settings: ClientSettings,
    on_event: Callable[[Event], None] | None,
) -> AsyncIterator[TreeHost]:
    """One shard's engine and backends, built as the driver's client built its own."""
    engine = Engine(config, on_event)
    backends = Backends(
        config,
        engine,
        endpoint_url=settings.endpoint_url,
        region=settings.region,
        profile=settings.profile,
        layers=settings.layers,
        endpoints=settings.endpoints,
        backend_options=settings.backend_options,
    )
    try:
        yield TreeHost(engine, backends, settings.follow_symlinks)
    finally:
        try:
            await backends.aclose()
        finally:
            engine.close()


async def _run_shard(spec: ShardSpec, send: Send | None, stopped: Stopped | None) -> TransferResult:

    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if task is not None and threading.current_thread() is threading.main_thread():
        loop.add_signal_handler(signal.SIGTERM, _stop_on_sigterm, loop, task)
    forward = _Forwarder(spec.event_kinds, send) if send is not None and spec.event_kinds else None
    config = replace(spec.config, state_dir=str(spec.journal_dir()))
    watch: asyncio.Task[None] | None = None
    async with shard_host(config, spec.settings, forward) as host:
        if forward is not None:
            forward.start()
        if stopped is not None and task is not None:
            watch = asyncio.create_task(_watch(stopped, task))
        try:
            op = await open_op(host, spec.kind, spec.src, spec.dst, spec.mode)
            return await run_items(
                host.engine, op, spec.items, remote_count=spec.remote_count, private_journal=True
            )
        finally:
            if watch is not None:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch
            if forward is not None:
                with contextlib.suppress(Exception):
                    await forward.close()
