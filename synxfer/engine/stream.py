"""Streams: an object written from a byte stream of unknown length, and an
object read as ordered chunks (``synxfer cp - URL``, ``synxfer cat URL``,
``Client.put_bytes`` / ``put_stream`` / ``get_bytes`` / ``open``).

Writing (:func:`upload_stream`). The stream is read in order, one part at a
time, in a worker thread that fills a buffer the scheduler lent (its bytes
reserved in the budget first) and checksums it in the same call; parts then
go up concurrently. A stream that ends inside the first part is one put
(an empty stream is an empty object); otherwise a multipart upload, whose
parts are offered while the stream has not ended -- never all up front --
and aborted (shielded) on any failure or cancellation, so nothing
half-written is ever visible. A stream cannot be read twice, so it does
not resume.

The size is not known ahead, so the part size is a schedule, not a
division: parts are ``first`` bytes (:func:`first_part_size`; with an
expected size, large enough for it to fit) up to half the backend's part
limit, then double every twentieth of that limit, up to the largest part
(:func:`stream_part_size`): 10,000 parts starting at 8 MiB hold about
6 TiB, past S3's object limit. Such an object's layout is not uniform, so
no ``synxfer-part-size`` is recorded for a multipart stream: a download
checks it against what the store vouches for (its ETag's parts are asked
of the store, as for any other tool's object).

A backend that needs the whole content's MD5 before an upload starts
(``Capabilities.needs_content_md5``: syn://), or that has no multipart
upload, gets the stream spooled to a temporary file first (bounded memory;
disk use is the stream's size), then uploaded as a file.

Reading (:class:`ObjectStream`). A HEAD tells the size and what the object
is checked against (:func:`.verify.gather_claims`); its ranges are fetched
ahead through :meth:`~.scheduler.Scheduler.map_parts` (each reserved in the
budget before its task exists) and handed out in order; a range's buffer
goes back to the pool when the consumer asks for the next one, so memory
is the budget whatever the object's size or the consumer's speed. Each
range's checksum is computed in a worker thread as it arrives (a hash over
several ranges in order); after the last range the object's checksum is
compared. Bytes already handed out cannot be taken back: a mismatch is an
:class:`~synxfer.IntegrityError` at the end of the stream, never a silent
success. Closing the stream early cancels the ranges in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import mimetypes
import os
import tempfile
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from operator import attrgetter
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from .._exceptions import ConfigError, IntegrityError
from .._models import CompletedPart, MultipartUpload, ObjectInfo, WriteOptions
from ..backend import Backend, Capabilities, Checksum, ChecksumAlgorithm
from .checksums import new_hash
from .core import Engine
from .meta import PART_SIZE_KEY, guess_content_type, upload_options
from .parts import Part, checksum_of, plan_part_size
from .scheduler import Lease
from .upload import abort_upload, upload_path
from .verify import Plan, Sums, gather_claims, plan, primary, unit_value, unverified_reason

__all__ = [
    "BytesReader",
    "ObjectReader",
    "ObjectStream",
    "Readable",
    "Writable",
    "first_part_size",
    "stream_part_size",
    "upload_stream",
]

log = logging.getLogger("synxfer")


class Readable(Protocol):
    """A blocking binary source (``sys.stdin.buffer``, an open file,
    ``io.BytesIO``): ``readinto`` fills some of ``buffer`` and returns the
    count, 0 at the end. Called from worker threads, one call at a time."""

    def readinto(self, buffer: memoryview, /) -> int | None: ...


class Writable(Protocol):
    """A blocking binary sink (``sys.stdout.buffer``, an open file): ``write``
    takes some of ``data`` and returns the count. Called from worker threads."""

    def write(self, data: memoryview, /) -> int | None: ...

    def flush(self) -> None: ...


class BytesReader:
    """:class:`Readable` over bytes in memory, without copying them first."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self._view = memoryview(data).cast("B")
        self._pos = 0

    def readinto(self, buffer: memoryview, /) -> int:
        n = min(len(buffer), len(self._view) - self._pos)
        buffer[:n] = self._view[self._pos : self._pos + n]
        self._pos += n
        return n


# -- the part-size schedule ---------------------------------------------------------


def _schedule(caps: Capabilities) -> tuple[int, int]:
    """(parts of the first size, parts per doubling after them)."""
    step = max(1, caps.max_parts // 20)
    return max(1, caps.max_parts - 10 * step), step


def first_part_size(expected_size: int | None, requested: int, caps: Capabilities) -> int:
    """The size of a stream's first parts: ``requested`` (the backend's
    rules applied, :func:`.parts.plan_part_size`), grown so that
    ``expected_size`` bytes fit in the parts of that size
    (aws-cli's ``--expected-size``)."""
    uniform, _ = _schedule(caps)
    return plan_part_size(
        expected_size or 0, requested, dataclasses.replace(caps, max_parts=uniform)
    )


def stream_part_size(number: int, first: int, caps: Capabilities) -> int:
    """The size of part ``number`` (1-based) of a stream whose first parts
    are ``first`` bytes: ``first`` for the first half of the backend's part
    limit, then doubling every twentieth of it, never above its largest
    part (kept a multiple of ``part_size_multiple``)."""
    uniform, step = _schedule(caps)
    if number <= uniform:
        return first
    unit = max(caps.part_size_multiple, 1)
    largest = max(caps.max_part_size // unit * unit, first)
    return min(first << -(-(number - uniform) // step), largest)


# -- writing -------------------------------------------------------------------------


class _Filler:
    """The stream's bytes, in order, into lent buffers. Blocking: called from
    worker threads one at a time, in part order."""

    def __init__(self, source: Readable) -> None:
        self.source = source
        self.eof = False
        self.total = 0

    def fill(
        self, buf: bytearray, algorithm: ChecksumAlgorithm | None
    ) -> tuple[bytes | bytearray, Checksum | None]:
        """The next bytes of the stream, up to ``len(buf)``, and their checksum.

        A full buffer is sent as it is; a short last piece is copied out
        (at most one part) since backends take whole buffers.
        """
        view = memoryview(buf)
        n = 0
        while n < len(view):
            got = self.source.readinto(view[n:])
            if not got:
                self.eof = True
                break
            n += got
        self.total += n
        checksum = checksum_of(algorithm, view[:n])
        return (buf if n == len(buf) else bytes(view[:n])), checksum


async def upload_stream(
    engine: Engine,
    backend: Backend,
    key: str,
    source: Readable,
    *,
    options: WriteOptions | None = None,
    expected_size: int | None = None,
) -> int:
    """Write what ``source`` gives until its end to ``key``; returns the bytes sent.

    ``options``: the object's (None: ``TransferConfig.write_options``);
    without a content type there, the key's name's is guessed unless
    ``TransferConfig.guess_mime_type`` is off. ``expected_size``: about how
    many bytes the stream holds, so the first parts are large enough (the
    stream may be shorter or longer).
    """
    caps = backend.capabilities
    cfg = engine.config
    scheduler = engine.scheduler
    if expected_size is not None and expected_size < 0:
        raise ConfigError(f"--expected-size / expected_size={expected_size}: give a size >= 0")
    base = cfg.write_options if options is None else options
    if caps.needs_content_md5 or not caps.multipart:
        return await _upload_spooled(engine, backend, key, source, base)
    guessed = None
    if base.content_type is None and cfg.guess_mime_type:
        if not mimetypes.inited:
            await scheduler.io(mimetypes.init)  # reads the system's tables once
        guessed = guess_content_type(PurePosixPath(key).name)
    first = first_part_size(expected_size, cfg.part_size, caps)
    filler = _Filler(source)
    algorithm = caps.part_checksum
    async with scheduler.reserve(first) as lease:
        data, checksum = await scheduler.io_holding(filler.fill, lease.buffer(), algorithm)
        if filler.eof:
            opts = upload_options(base, {PART_SIZE_KEY: "0"}, guessed)
            await backend.put(key, data, opts, checksum)
            engine.progress(len(data), "up")
            return len(data)
        # No synxfer-part-size: the layout may not be uniform (module docstring).
        upload = await backend.create_multipart(key, upload_options(base, {}, guessed))
        try:
            done = [await backend.upload_part(upload, 1, data, checksum)]
        except BaseException:
            await abort_upload(backend, upload)
            raise
        sent = len(data)
    engine.progress(sent, "up")
    try:
        sent += await _send_rest(engine, filler, backend, upload, first, done)
        await backend.complete_multipart(upload, sorted(done, key=attrgetter("number")))
    except BaseException:
        await abort_upload(backend, upload)
        raise
    return sent


async def _send_rest(
    engine: Engine,
    filler: _Filler,
    backend: Backend,
    upload: MultipartUpload,
    first: int,
    done: list[CompletedPart],
) -> int:
    """Parts 2.. of the stream; returns their bytes.

    Each part's memory is reserved before its task exists; parts are filled
    in order (each waits for the one before), then sent concurrently. Parts
    are offered while the stream has not ended: the few offered past its end
    find it ended and send nothing.
    """
    caps = backend.capabilities
    algorithm = caps.part_checksum
    scheduler = engine.scheduler
    url = backend.url(upload.key)
    sent = 0
    turns: dict[int, asyncio.Event] = {1: asyncio.Event()}
    turns[1].set()

    def parts() -> Iterator[Part]:
        index, offset = 1, first
        while not filler.eof and index < caps.max_parts:
            length = stream_part_size(index + 1, first, caps)
            turns[index + 1] = asyncio.Event()
            yield Part(index, offset, length)
            index += 1
            offset += length

    async def send(part: Part, lease: Lease) -> CompletedPart | None:
        await turns[part.index].wait()
        try:
            if filler.eof:
                return None
            data, checksum = await scheduler.io_holding(filler.fill, lease.buffer(), algorithm)
        finally:
            turns[part.index + 1].set()
        if not data:
            return None  # the stream ended exactly at the previous part's end
        return await backend.upload_part(upload, part.number, data, checksum)

    async def sent_part(part: Part, result: CompletedPart | None) -> None:
        nonlocal sent
        if result is not None:
            done.append(result)
            sent += result.size
            engine.progress(result.size, "up")

    try:
        await scheduler.map_parts(parts(), send, sent_part)
    except BaseExceptionGroup as group:
        _raise_single(group)
        raise
    if not filler.eof:
        # Every part the backend allows is full: is there more?
        extra = await scheduler.io(filler.fill, bytearray(1), None)
        if extra[0]:
            raise ConfigError(
                f"the stream is larger than {url} takes in {caps.max_parts} parts "
                f"({filler.total - 1} bytes sent so far); nothing was written. Give "
                "--expected-size (expected_size=) so that its parts are large enough"
            )
    return sent


def _raise_single(group: BaseExceptionGroup[BaseException]) -> None:
    """Raise the one error (other than cancellations) a task group holds, if one."""
    errors = group.subgroup(
        lambda e: not isinstance(e, asyncio.CancelledError | BaseExceptionGroup)
    )
    if errors is None:
        return
    leaves: list[BaseException] = []
    stack: list[BaseException] = [errors]
    while stack:
        e = stack.pop()
        if isinstance(e, BaseExceptionGroup):
            stack.extend(e.exceptions)
        else:
            leaves.append(e)
    if len(leaves) == 1:
        raise leaves[0] from None


def _spool(source: Readable, buf: bytearray, fd: int) -> int:
    """Copy the stream's next ``len(buf)`` bytes (fewer at its end) to ``fd``;
    returns how many. Blocking: a worker thread."""
    view = memoryview(buf)
    n = 0
    while n < len(view):
        got = source.readinto(view[n:])
        if not got:
            break
        n += got
    written = 0
    while written < n:
        written += os.write(fd, view[written:n])
    return n


async def _upload_spooled(
    engine: Engine, backend: Backend, key: str, source: Readable, options: WriteOptions
) -> int:
    """The stream written to a temporary file (in ``$TMPDIR``, named with
    the key's suffix so its content type is guessed the same), then
    uploaded as a file, then removed: for a service that wants the content's
    MD5 before the upload starts (syn://) or a backend with no multipart
    upload. Memory is one part; disk is the stream's size."""
    scheduler = engine.scheduler
    suffix = PurePosixPath(key).suffix
    fd, name = await scheduler.io(tempfile.mkstemp, suffix, ".synxfer-stream-")
    path = Path(name)
    try:
        try:
            async with scheduler.reserve(engine.config.part_size) as lease:
                buf = lease.buffer()
                while await scheduler.io_holding(_spool, source, buf, fd):
                    pass
        finally:
            await scheduler.io(os.close, fd)
        log.info("%s: the stream was spooled to %s before its upload", backend.url(key), path)
        return await upload_path(engine, path, backend, key, options=options)
    finally:
        with contextlib.suppress(OSError):
            await scheduler.io(os.unlink, path)


# -- reading -------------------------------------------------------------------------


class ObjectStream:
    """One object's bytes in order, fetched ahead in ranges within the budget.

    :meth:`views` hands out each range as a view of a pooled buffer, valid
    until the next one is asked for; :meth:`chunks` as ``bytes`` of the
    caller's own. ``info`` (after the first chunk, or :meth:`start`) is the
    object's; ``verified`` (after the last) says whether a checksum the
    store vouches for (or a backend that checks its reads) matched the
    bytes: False when nothing could check them (logged as a warning).
    """

    def __init__(
        self, engine: Engine, backend: Backend, key: str, info: ObjectInfo | None = None
    ) -> None:
        self.engine = engine
        self.backend = backend
        self.key = key
        self.url = backend.url(key)
        #: The object's info: given (a HEAD the caller made), else :meth:`start`'s.
        self.info: ObjectInfo | None = info
        self.verified: bool | None = None
        self._plan: Plan | None = None

    def __repr__(self) -> str:
        return f"<ObjectStream {self.url}>"

    async def start(self) -> ObjectInfo:
        """HEAD the object (unless its info was given) and plan its ranges
        (once); its info."""
        if self._plan is not None and self.info is not None:
            return self.info
        backend = self.backend
        caps = backend.capabilities
        info = self.info if self.info is not None else await backend.stat(self.key)
        claims = await gather_claims(backend, self.key, info, info.etag)
        exp, layout = primary(claims)
        if exp is not None and exp.composite and layout is None:
            exp = None  # pragma: no cover - primary() gives a layout with a composite claim
        size = info.size
        if caps.ranged_reads:
            part_size = plan_part_size(size, self.engine.config.part_size, caps)
        else:
            part_size = max(size, 1)
        self._plan = plan(size, part_size, exp, layout)
        self.info = info
        return info

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """The object's bytes in order, each chunk copied out of the pool
        (in a worker thread) as ``bytes`` of the caller's own."""
        scheduler = self.engine.scheduler
        views = self.views()
        try:
            async for view in views:
                if view:
                    yield await scheduler.io_holding(bytes, view)
        finally:
            await views.aclose()

    async def views(self) -> AsyncGenerator[memoryview, None]:
        """The object's ranges in order, as views of pooled buffers: each is
        valid until the next is asked for (then its buffer is reused)."""
        info = await self.start()
        p = self._plan
        assert p is not None
        engine = self.engine
        scheduler = engine.scheduler
        backend = self.backend
        key = self.key
        kind = p.kind
        sums = Sums(p)
        loop = asyncio.get_running_loop()
        ready: dict[int, asyncio.Future[memoryview]] = {}
        consumed: dict[int, asyncio.Event] = {}
        hashed: dict[int, asyncio.Event] = {}

        def slot(index: int) -> asyncio.Future[memoryview]:
            fut = ready.get(index)
            if fut is None:
                fut = ready[index] = loop.create_future()
            return fut

        def event(events: dict[int, asyncio.Event], index: int) -> asyncio.Event:
            ev = events.get(index)
            if ev is None:
                ev = events[index] = asyncio.Event()
            return ev

        def chained_value(part: Part, data: memoryview) -> bytes | None:
            unit = p.unit_of[part.index]
            if p.units[unit][0] == part.index:
                assert kind is not None
                sums.hashers[unit] = new_hash(kind)
            hasher = sums.hashers[unit]
            hasher.update(data)
            return hasher.digest() if p.last_of_unit(part.index) else None

        async def fetch(part: Part, lease: Lease) -> int | bytes | None:
            view = lease.view()
            await backend.read_into(key, part.offset, view, if_match=info.etag)
            if p.chained:
                # A hash over several ranges: in order, each after the one before.
                if part.index > 0:
                    await event(hashed, part.index - 1).wait()
                value: int | bytes | None = await scheduler.io_holding(chained_value, part, view)
                event(hashed, part.index).set()
            elif kind is not None:
                value = await scheduler.io_holding(unit_value, kind, view)
            else:
                value = None
            slot(part.index).set_result(view)
            await event(consumed, part.index).wait()  # the lease is held until then
            return value

        async def fetched(part: Part, value: int | bytes | None) -> None:
            if p.last_of_unit(part.index):
                sums.record(p.unit_of[part.index], value)
            engine.progress(part.length, "down")

        async def produce() -> None:
            try:
                await scheduler.map_parts(p.ranges, fetch, fetched, even_buffers=True)
            except BaseExceptionGroup as group:
                _raise_single(group)
                raise
            if p.exp is not None:
                try:
                    await scheduler.io(sums.check, self.url)
                except IntegrityError as exc:
                    raise IntegrityError(
                        f"{exc}; the {info.size} bytes streamed are not the object's: "
                        "discard them and read it again"
                    ) from None

        producer = asyncio.ensure_future(produce())
        try:
            for index in range(len(p.ranges)):
                fut = slot(index)
                if not fut.done():
                    waiters: list[asyncio.Future[Any]] = [fut, producer]
                    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                if not fut.done():
                    producer.result()  # it ended first: its error
                    raise RuntimeError(f"{self.url}: range {index} was never fetched")
                yield fut.result()
                event(consumed, index).set()
            await producer
        finally:
            if not producer.done():
                producer.cancel()  # the consumer stopped early: cancel the ranges in flight
                await asyncio.wait([producer])
            if not producer.cancelled():
                producer.exception()  # retrieved (raised above when it counts)
        if p.exp is not None or backend.capabilities.verified_reads:
            self.verified = True
        else:
            self.verified = False
            log.warning(
                "%s was streamed without verification: %s", self.url, unverified_reason(info)
            )


async def write_to(stream: ObjectStream, out: Writable) -> int:
    """Write the object's bytes to ``out`` in order, each range in a worker
    thread, then flush; returns the bytes written. An error writing (a
    closed pipe: BrokenPipeError) stops the stream and cancels its ranges."""
    scheduler = stream.engine.scheduler
    total = 0
    views = stream.views()
    try:
        async for view in views:
            await scheduler.io_holding(_write_all, out, view)
            total += len(view)
    finally:
        await views.aclose()
    await scheduler.io(out.flush)
    return total


def _write_all(out: Writable, view: memoryview) -> None:
    while view:
        n = out.write(view)
        if n is None:
            raise BlockingIOError(f"{out!r} is non-blocking and took nothing")
        view = view[n:]


class ObjectReader:
    """What :meth:`synxfer.Client.open` returns: the object's bytes as
    ``bytes`` chunks, in order (``async for chunk in reader``), fetched ahead
    in ranges within the client's memory budget.

    Use it as an async context manager (``async with client.open(url) as r``)
    to be sure that leaving early cancels the ranges in flight at once.
    ``info`` is the object's (once iteration started); ``verified`` (after
    the last chunk) whether a checksum the store vouches for matched. A
    mismatch raises :class:`~synxfer.IntegrityError` after the last chunk:
    the chunks already given cannot be recalled, so discard them.
    """

    def __init__(self, opener: Callable[[], Awaitable[ObjectStream]]) -> None:
        self._opener = opener
        self._stream: ObjectStream | None = None
        self._chunks: AsyncGenerator[bytes, None] | None = None

    async def _open(self) -> ObjectStream:
        if self._stream is None:
            self._stream = await self._opener()
        return self._stream

    @property
    def info(self) -> ObjectInfo | None:
        return None if self._stream is None else self._stream.info

    @property
    def verified(self) -> bool | None:
        return None if self._stream is None else self._stream.verified

    async def __aenter__(self) -> ObjectReader:
        await (await self._open()).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncGenerator[bytes, None]:
        if self._chunks is not None:
            raise RuntimeError("an ObjectReader is read once; call Client.open again")
        self._chunks = self._iterate()
        return self._chunks

    async def _iterate(self) -> AsyncGenerator[bytes, None]:
        chunks = (await self._open()).chunks()
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            await chunks.aclose()

    async def aclose(self) -> None:
        """Stop reading: the ranges in flight are cancelled."""
        if self._chunks is not None:
            await self._chunks.aclose()
