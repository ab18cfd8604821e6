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
6 TiB, past S3's object limit. ``synxfer-part-size`` records ``first``, so
downloads line their checks up on the parts as for any synxfer upload.
That is the layout exactly unless the stream outgrew the first parts; and
then the object's parts count (in its ETag and composite checksums) is
below ``ceil(size / first)``, so the recorded layout is never taken for
it (:func:`.verify.gather_claims` checks the count): such an object is
checked against what the store vouches for, as any other tool's.

A backend that needs the whole content's MD5 before an upload starts
(``Capabilities.needs_content_md5``: syn://), or that has no multipart
upload, gets the stream spooled to a temporary file first (bounded memory;
disk use is the stream's size), then uploaded as a file.

Reading (:class:`ObjectStream`). A HEAD tells the size and what the object
is checked against (:func:`.verify.gather_claims`); its ranges are fetched
ahead through :meth:`~.scheduler.Scheduler.map_parts` (each reserved in the
budget before its task exists) and handed out in order; a range's buffer
goes back to the pool when the consumer asks for the next one, so memory
is the budget whatever the object's size or the consumer's speed. The
claims are computed over the bytes as they pass, in worker threads, in
order -- up to two, since bytes handed out cannot be fetched again to try
another claim after a mismatch (docs/decisions/0041-streams.md). Bytes
that match no claim are an :class:`~synxfer.IntegrityError` after the last
range, never a silent success. Closing the stream early cancels the ranges
in flight.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import logging
import mimetypes
import os
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from operator import attrgetter
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from .._exceptions import ConfigError, IntegrityError
from .._models import CompletedPart, MultipartUpload, ObjectInfo, WriteOptions
from ..backend import Backend, Capabilities, Checksum, ChecksumAlgorithm
from . import checksums as ck
from .checksums import CRC_KINDS, Hasher, new_hash
from .core import Engine
from .meta import PART_SIZE_KEY, guess_content_type, upload_options
from .parts import Part, checksum_of, plan_part_size, split
from .scheduler import Lease
from .upload import abort_upload, upload_path
from .verify import Claim, Expectation, Layout, gather_claims, unverified_reason

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
        # The first parts' size: the layout, unless the stream outgrew it
        # (then its parts count says so: module docstring).
        opts = upload_options(base, {PART_SIZE_KEY: str(first)}, guessed)
        upload = await backend.create_multipart(key, opts)
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
    import tempfile  # only here: it imports shutil, random, bz2, lzma

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


#: At most this many checksums are computed over a streamed object.
MAX_STREAM_CHECKS = 2


class _Running:
    """One claim (a checksum the store vouches for, over a part layout)
    computed over the object's bytes as they pass, in order. Blocking
    (:meth:`feed`, :meth:`value`): worker threads, one call at a time."""

    def __init__(self, exp: Expectation, layout: Layout | None, size: int) -> None:
        self.exp = exp
        self.kind = exp.kind
        self.bounds = layout.bounds(size) if exp.composite and layout else [(0, size)]
        self.part = 0
        self.pos = 0
        self.values: list[bytes] = []
        self._crc = 0
        self._hash: Hasher | None = None if self.kind in CRC_KINDS else new_hash(self.kind)

    def _close_part(self) -> None:
        if self._hash is not None:
            self.values.append(self._hash.digest())
            self._hash = new_hash(self.kind)
        else:
            self.values.append(ck.to_bytes(self.kind, self._crc))
            self._crc = 0
        self.part += 1

    def feed(self, data: memoryview) -> None:
        while len(data) and self.part < len(self.bounds):
            offset, length = self.bounds[self.part]
            take = min(len(data), offset + length - self.pos)
            chunk, data = data[:take], data[take:]
            if self._hash is not None:
                self._hash.update(chunk)
            else:
                self._crc = ck.crc_value(self.kind, chunk, self._crc)
            self.pos += take
            if self.pos == offset + length:
                self._close_part()

    def value(self) -> bytes:
        """The object's checksum from what was fed (all of it, by then)."""
        while self.part < len(self.bounds):  # an empty object's one part
            self._close_part()
        if not self.exp.composite:
            return self.values[0]
        return ck.composite(self.kind, self.values)


def _checks(claims: list[Claim]) -> tuple[list[tuple[Expectation, Layout | None]], bool]:
    """What to compute over a stream: the claims whose layout is known, best
    first (one per kind), else the likeliest layouts of the best inferred
    claim; at most :data:`MAX_STREAM_CHECKS`. True when they are inferred."""
    known: list[tuple[Expectation, Layout | None]] = []
    for claim in claims:
        if claim.inferred or any(e.kind == claim.exp.kind for e, _ in known):
            continue
        known.append((claim.exp, claim.layouts[0] if claim.layouts else None))
    if known:
        return known[:MAX_STREAM_CHECKS], False
    for claim in claims:
        return [(claim.exp, layout) for layout in claim.layouts[:MAX_STREAM_CHECKS]], True
    return [], False


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


class ObjectStream:
    """One object's bytes in order, fetched ahead in ranges within the budget.

    :meth:`views` hands out each range as a view of a pooled buffer, valid
    until the next one is asked for; :meth:`chunks` as ``bytes`` of the
    caller's own. ``info`` (after the first chunk, or :meth:`start`) is the
    object's; ``verified`` (after the last) says whether a checksum the
    store vouches for (or a backend that checks its reads) matched the
    bytes: False when nothing could check them (logged as a warning).

    The bytes cannot be fetched again once handed out, so every claim that
    can be checked is computed as they pass (at most two: the best one and
    one of another kind), not only the best: when two disagree (stock moto
    reports a wrong CRC for multipart objects), the one the bytes match is
    trusted and the other named in a warning, as downloads do
    (:class:`.verify.Vouching`). Bytes that match no claim whose layout is
    known raise :class:`~synxfer.IntegrityError` after the last range.
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
        self._ranges: list[Part] | None = None
        self._checks: list[tuple[Expectation, Layout | None]] = []
        self._inferred = False

    def __repr__(self) -> str:
        return f"<ObjectStream {self.url}>"

    async def start(self) -> ObjectInfo:
        """HEAD the object (unless its info was given), learn what checks it
        and plan its ranges (once); its info."""
        if self._ranges is not None and self.info is not None:
            return self.info
        backend = self.backend
        caps = backend.capabilities
        info = self.info if self.info is not None else await backend.stat(self.key)
        claims = await gather_claims(backend, self.key, info, info.etag)
        self._checks, self._inferred = _checks(claims)
        size = info.size
        if caps.ranged_reads:
            part_size = plan_part_size(size, self.engine.config.part_size, caps)
        else:
            part_size = max(size, 1)
        self._ranges = split(size, part_size)
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
        ranges = self._ranges
        assert ranges is not None
        engine = self.engine
        scheduler = engine.scheduler
        backend = self.backend
        key = self.key
        running = [_Running(exp, layout, info.size) for exp, layout in self._checks]
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

        def feed(data: memoryview) -> None:
            for r in running:
                r.feed(data)

        async def fetch(part: Part, lease: Lease) -> None:
            view = lease.view()
            await backend.read_into(key, part.offset, view, if_match=info.etag)
            if running:
                # The checksums run over the bytes in order: after the range before.
                if part.index > 0:
                    await event(hashed, part.index - 1).wait()
                await scheduler.io_holding(feed, view)
            event(hashed, part.index).set()
            slot(part.index).set_result(view)
            await event(consumed, part.index).wait()  # the lease is held until then

        async def fetched(part: Part, _: None) -> None:
            engine.progress(part.length, "down")

        async def produce() -> None:
            try:
                await scheduler.map_parts(ranges, fetch, fetched, even_buffers=True)
            except BaseExceptionGroup as group:
                _raise_single(group)
                raise

        producer = asyncio.ensure_future(produce())
        try:
            for index in range(len(ranges)):
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
        got = [await scheduler.io(r.value) for r in running]
        self._verdict(info, got)

    def _verdict(self, info: ObjectInfo, got: list[bytes]) -> None:
        """Set :attr:`verified` from the claims' values over the bytes streamed
        (``got``, in :attr:`_checks`' order); IntegrityError when they match
        no claim whose layout is known."""
        checks = self._checks
        matched = [exp for (exp, _), value in zip(checks, got, strict=True) if value == exp.value]
        if matched:
            self.verified = True
            wrong = [exp for exp, _ in checks if exp not in matched and not self._inferred]
            for exp in wrong:
                log.warning(
                    "%s: the object's %s does not match its bytes; its %s does: the store's "
                    "%s is wrong",
                    self.url,
                    exp.what,
                    matched[0].what,
                    exp.what,
                )
            return
        if checks and not self._inferred:
            compared = "; ".join(
                f"{exp.what} {_b64(value)} != {_b64(exp.value)}"
                for (exp, _), value in zip(checks, got, strict=True)
            )
            raise IntegrityError(
                f"{self.url}: the bytes streamed match none of the object's checksums "
                f"({compared}); the {info.size} bytes streamed are not the object's: "
                "discard them and read it again"
            )
        self.verified = bool(self.backend.capabilities.verified_reads)
        if not self.verified:
            why = "its part layout is unknown" if checks else unverified_reason(info)
            log.warning("%s was streamed without verification: %s", self.url, why)


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
