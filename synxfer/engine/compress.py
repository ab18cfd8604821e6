"""Objects stored zstd-compressed (``TransferConfig(compress="zstd")``, ``--compress zstd``).

An upload with ``compress`` set stores the file's bytes as one zstd frame
(with zstd's content checksum, XXH64 of the original bytes) and says so in
the object's metadata:

``synxfer-encoding``
    ``zstd``.
``synxfer-size``
    The original file's size in bytes (the object's size is the compressed one).

beside the usual ``mtime`` and ``synxfer-part-size`` (the part size of the
*stored* bytes, which the download's checks line up on). The compressed
stream is cut into parts by size as it is produced -- every part but the
last is exactly the part size, as S3 requires (>= 5 MiB) -- not compressed
per raw part. The whole stream fits one part: it goes in one request.

Compression runs in worker threads, one part at a time and in order (the
stream is sequential); each part is read from the file, compressed into a
pooled buffer the scheduler lent it, and checksummed in one thread call.
Parts then go up concurrently. Each raw byte is read once; memory is the
parts in flight (the scheduler's budget) plus one compressor's state (a few
MiB at the default level 3) per file in flight.

A download of an object carrying ``synxfer-encoding: zstd`` fetches the
stored bytes with the usual checks (:mod:`.verify`) and, in the same
worker-thread call that hashes each range, decompresses it into the temp
file, in order. Output beyond ``synxfer-size`` stops it at once; at the end
the stored bytes' checksum, zstd's own checksum of the original and the
size must all agree, and only then is the temp file renamed into place.
A compressed multipart upload is journaled and resumes (see
:func:`upload_compressed`); a compressed download starts again (its
decoder needs the stored bytes in order, which the temp file does not keep).

``zstandard`` is the ``zstd`` extra (``pip install 'synxfer[zstd]'``;
docs/decisions/0011-zstd-compression.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
from collections.abc import Callable, Mapping
from operator import attrgetter
from pathlib import Path
from types import ModuleType
from typing import Any

from .._exceptions import ConfigError, IntegrityError, NotFound, SourceChangedError
from .._models import CompletedPart, MultipartUpload, ObjectInfo, WriteOptions
from ..backend import Backend, Checksum, ChecksumAlgorithm
from ._os import pread
from .checksums import new_hash
from .core import Engine, keep_existing
from .journal import UploadEntry
from .localfile import (
    LocalFile,
    commit_temp,
    identity,
    place,
    pwrite_all,
    source_changed,
    temp_path_for,
)
from .meta import MTIME_KEY, PART_SIZE_KEY, format_mtime, upload_options
from .parts import Part, checksum_of, etag_parts, plan_part_size
from .scheduler import Lease
from .verify import Plan, Settled, Sums, gave_up, raise_mismatch_of, retry_mismatch, unit_value

__all__ = [
    "COMPRESSIONS",
    "DEFAULT_LEVEL",
    "ENCODING_KEY",
    "ORIGINAL_SIZE_KEY",
    "ZSTD",
    "Undecodable",
    "download_compressed",
    "is_compressed",
    "original_size",
    "require_zstd",
    "stored_encoding",
    "upload_compressed",
    "write_decompressed",
]

log = logging.getLogger("synxfer")

ENCODING_KEY = "synxfer-encoding"
ORIGINAL_SIZE_KEY = "synxfer-size"
ZSTD = "zstd"
#: The values ``TransferConfig.compress`` takes (besides None).
COMPRESSIONS = (ZSTD,)
DEFAULT_LEVEL = 3

#: Raw bytes read from the file per read call while compressing.
_READ_SIZE = 1 << 20
#: Decompressed bytes written per write call.
_WRITE_SIZE = 1 << 20

_INSTALL_HINT = "pip install 'synxfer[zstd]'"


def require_zstd(what: str = "zstd compression (TransferConfig(compress=...))") -> ModuleType:
    """The ``zstandard`` module, or :class:`ConfigError` naming ``what`` needs it."""
    try:
        import zstandard
    except ImportError:
        raise ConfigError(f"{what} needs the zstandard package: {_INSTALL_HINT}") from None
    return zstandard


def stored_encoding(metadata: Mapping[str, str]) -> str | None:
    """The ``synxfer-encoding`` an object's metadata names, lowercased; None without one."""
    value = metadata.get(ENCODING_KEY)
    return value.strip().lower() if value else None


def is_compressed(info: ObjectInfo) -> bool:
    """Whether ``info``'s metadata says synxfer stored it compressed (listings
    without metadata say nothing: False)."""
    return stored_encoding(info.metadata) is not None


def original_size(info: ObjectInfo) -> int:
    """The size of the file ``info`` stands for: ``synxfer-size`` for an object
    synxfer stored compressed (when its metadata is known), else its size."""
    if not is_compressed(info):
        return info.size
    value = info.metadata.get(ORIGINAL_SIZE_KEY, "").strip()
    return int(value) if value.isdigit() else info.size


def _expected_size(url: str, info: ObjectInfo) -> int:
    """``synxfer-size`` of a compressed object, or IntegrityError if it has none."""
    encoding = stored_encoding(info.metadata)
    if encoding != ZSTD:
        raise IntegrityError(
            f"{url} is stored with {ENCODING_KEY}: {encoding}, which this synxfer cannot "
            "decode; nothing was written"
        )
    value = info.metadata.get(ORIGINAL_SIZE_KEY, "").strip()
    if not value.isdigit():
        raise IntegrityError(
            f"{url} is stored zstd-compressed but its {ORIGINAL_SIZE_KEY} metadata is "
            f"missing or not a number ({value!r}); nothing was written"
        )
    return int(value)


# -- upload -----------------------------------------------------------------------


class _Reader:
    """The file's bytes from offset 0, by positional reads, counted."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.offset = 0

    def read(self, n: int = -1) -> bytes:
        data = pread(self.fd, _READ_SIZE if n < 0 else n, self.offset)
        self.offset += len(data)
        return data


class _Compressing:
    """One file's zstd stream. Its methods block: call them from worker
    threads, one at a time (the engine calls them in part order)."""

    def __init__(self, zstd: ModuleType, fd: int, size: int, level: int) -> None:
        self.source = _Reader(fd)
        compressor = zstd.ZstdCompressor(level=level, write_checksum=True)
        self.stream = compressor.stream_reader(self.source, size=size, read_size=_READ_SIZE)
        self.eof = False
        self.counted = 0

    def read_since(self) -> int:
        """The file's bytes read since the last call: what the part just
        filled moves the file's progress along (its events count the file's
        bytes, so they add up to its size; the network counts the stored ones)."""
        n = self.source.offset - self.counted
        self.counted = self.source.offset
        return n

    def fill(
        self, buf: memoryview, algorithm: ChecksumAlgorithm | None, md5: bool = False
    ) -> tuple[bytes | bytearray, Checksum | None, str | None]:
        """The next compressed bytes, up to ``len(buf)``, their checksum and,
        with ``md5``, their MD5 (hex: what a resumed upload compares with the
        ETag of the part an earlier run sent).

        A full part is ``buf``'s own bytearray (no copy); the stream's short
        last piece is copied out (``bytes``, at most one part) since backends
        take whole buffers.
        """
        view = memoryview(buf)
        n = 0
        while n < len(view):
            got = self.stream.readinto(view[n:])
            if not got:
                self.eof = True
                break
            n += got
        checksum = checksum_of(algorithm, view[:n])
        digest = hashlib.md5(view[:n]).hexdigest() if md5 else None
        obj = view.obj
        if n == len(view) and isinstance(obj, bytearray) and len(obj) == n:
            return obj, checksum, digest
        return bytes(view[:n]), checksum, digest


async def upload_compressed(
    engine: Engine,
    path: Path,
    backend: Backend,
    key: str,
    options: WriteOptions,
    content_type: str | None,
) -> int:
    """Upload ``path`` to ``key`` zstd-compressed; returns the bytes sent (compressed).

    The file's identity is taken when it is opened and checked after its
    last byte is read, before the object is committed (as uploads do).

    A multipart upload is journaled like any other (its entry names the
    codec, ``zstd-<level>``), so an interrupted one resumes: the file is
    compressed again from its start (the stream is cut at the same
    offsets), and a part the server already holds is not sent again when
    the MD5 of the part just compressed is its ETag (or, where ETags are
    not MD5s, its checksum the one journaled): the server keeps the bytes
    this run would send, whatever zstandard version compressed them.
    """
    from .upload import abort_upload, journal_new_upload  # upload imports this module

    cfg = engine.config
    scheduler = engine.scheduler
    caps = backend.capabilities
    zstd = require_zstd()
    level = cfg.compress_level
    algorithm = caps.part_checksum
    f = await LocalFile.open(path, os.O_RDONLY, scheduler.executor)
    try:
        st = await f.fstat()
        size = st.st_size
        before = identity(st)
        # zstd's worst case for incompressible data is a little above the input.
        bound = size + (size >> 7) + (1 << 17)
        part_size = plan_part_size(bound, cfg.part_size, caps) if caps.multipart else bound
        comp = _Compressing(zstd, f.fd, size, level)
        metadata = {
            MTIME_KEY: format_mtime(st.st_mtime_ns),
            ENCODING_KEY: ZSTD,
            ORIGINAL_SIZE_KEY: str(size),
        }
        dest = backend.url(key)
        codec = f"{ZSTD}-{level}"

        async def check_unchanged() -> None:
            if comp.source.offset != size or not await f.unchanged_since(before):
                raise source_changed(path)

        async def failed(exc: BaseException, upload: MultipartUpload) -> None:
            # As upload.upload_path: interrupted, the journal keeps the upload
            # for the next run; failed, it is forgotten once aborted.
            if isinstance(exc, asyncio.CancelledError):
                if not engine.resumable:
                    await abort_upload(backend, upload)
            elif await abort_upload(backend, upload):
                await engine.journal.upload_done(dest)

        async with scheduler.reserve(part_size) as first:
            # Whether an earlier run left this upload: looked up while part 1 compresses.
            earlier = asyncio.ensure_future(engine.journal.upload_get(dest))
            try:
                data, checksum, _ = await scheduler.io_holding(comp.fill, first.view(), algorithm)
            except BaseException:
                earlier.cancel()
                raise
            entry = await earlier
            raw = comp.read_since()
            if comp.eof and len(data) <= caps.max_single_put:
                if entry is not None:
                    await _forget(engine, backend, key, entry.upload_id)
                metadata[PART_SIZE_KEY] = "0"
                await check_unchanged()
                opts = upload_options(options, metadata, content_type)
                await backend.put(key, data, opts, checksum)
                engine.progress(len(data), "up", advanced=raw)
                return len(data)
            if not caps.multipart:
                raise ConfigError(
                    f"{path} compressed is more than {backend.url('')} takes in one "
                    f"request ({caps.max_single_put} bytes)"
                )
            metadata[PART_SIZE_KEY] = str(part_size)
            opts = upload_options(options, metadata, content_type)
            upload: MultipartUpload | None = None
            held: dict[int, CompletedPart] = {}
            if entry is not None:
                same = (entry.src, entry.identity, entry.part_size, entry.codec) == (
                    str(path),
                    before,
                    part_size,
                    codec,
                )
                # An upload with a chosen checksum is never resumed (as upload.py).
                same = same and options.checksum_algorithm is None
                upload, held = await _held_parts(engine, backend, key, entry, same)
            if upload is None:
                upload = await backend.create_multipart(key, opts)
                await journal_new_upload(engine, backend, upload, path, before, part_size, codec)
            else:
                log.info("resuming %s: %d part(s) on the server to compare", dest, len(held))
            done: list[CompletedPart] = []
            sender = _Sender(engine, backend, upload, held, done)
            try:
                if 1 in held:  # compare part 1 with the server's (one more hash)
                    data, checksum, md5 = await scheduler.io_holding(_rehash, data, algorithm, True)
                    sent = await sender.part(1, data, checksum, md5, raw)
                else:
                    sent = await sender.part(1, data, checksum, None, raw)
            except BaseException as exc:
                await failed(exc, upload)
                raise
        try:
            sent += await _send_rest(comp, sender, part_size)
            await check_unchanged()
            await backend.complete_multipart(upload, sorted(done, key=attrgetter("number")))
        except BaseException as exc:
            await failed(exc, upload)
            raise
        await engine.journal.upload_done(dest)
        return sent
    finally:
        await f.close()


def _rehash(
    data: bytes | bytearray, algorithm: ChecksumAlgorithm | None, md5: bool
) -> tuple[bytes | bytearray, Checksum | None, str | None]:
    """``data``, its checksum and MD5 (a worker thread)."""
    return data, checksum_of(algorithm, memoryview(data)), hashlib.md5(data).hexdigest()


async def _forget(engine: Engine, backend: Backend, key: str, upload_id: str) -> None:
    """Abort an earlier run's upload this one will not continue, and forget
    it once gone (an abort refused leaves the entry, to be tried again)."""
    from .upload import abort_upload  # upload imports this module

    if await abort_upload(backend, MultipartUpload(key, upload_id)):
        await engine.journal.upload_done(backend.url(key))


async def _held_parts(
    engine: Engine, backend: Backend, key: str, entry: UploadEntry, same: bool
) -> tuple[MultipartUpload | None, dict[int, CompletedPart]]:
    """The earlier run's upload to continue and the parts the server holds
    of it (ListParts, with the journaled checksum where the listing has
    none), or ``(None, {})`` when it cannot be continued (another file,
    version, level or part size; gone from the server): then it is aborted
    and forgotten."""
    upload = MultipartUpload(key, entry.upload_id)
    if same and backend.capabilities.list_parts:
        try:
            listed = await backend.list_parts(upload)
        except NotFound:
            await engine.journal.upload_done(backend.url(key))
            return None, {}
        held: dict[int, CompletedPart] = {}
        for p in listed:
            _etag, _size, checksum = entry.parts.get(p.number, (None, None, None))
            if not p.checksum and checksum:
                p = CompletedPart(p.number, p.etag, p.size, checksum)
            held[p.number] = p
        return upload, held
    await _forget(engine, backend, key, entry.upload_id)
    return None, {}


class _Sender:
    """Sends the parts of one compressed upload, journaling each, and keeps
    those the server already holds with the same bytes (a resumed upload)."""

    def __init__(
        self,
        engine: Engine,
        backend: Backend,
        upload: MultipartUpload,
        held: dict[int, CompletedPart],
        done: list[CompletedPart],
    ) -> None:
        self.engine = engine
        self.backend = backend
        self.upload = upload
        self.held = held
        self.done = done
        self.dest = backend.url(upload.key)

    def wants_md5(self, number: int) -> bool:
        return number in self.held

    def holds(
        self, number: int, data: bytes | bytearray, checksum: Checksum | None, md5: str | None
    ) -> CompletedPart | None:
        """The server's part ``number`` if it is ``data``: its ETag is the
        MD5 of ``data``, or (an ETag that is no MD5) its checksum is."""
        listed = self.held.get(number)
        if listed is None or listed.size != len(data):
            return None
        etag = listed.etag.strip('"').lower()
        same = (
            md5 == etag
            if etag_parts(etag) == 0
            else checksum is not None and listed.checksum == checksum.value
        )
        if not same:
            return None
        if listed.checksum or checksum is None:
            return listed
        # Neither listed nor journaled (acknowledged after the last run's last
        # journal write): the checksum completing the upload needs is this one.
        return CompletedPart(listed.number, listed.etag, listed.size, checksum.value)

    async def part(
        self,
        number: int,
        data: bytes | bytearray,
        checksum: Checksum | None,
        md5: str | None,
        raw: int,
    ) -> int:
        """Part ``number`` (``raw`` bytes of the file) kept or sent; the bytes sent."""
        kept = self.holds(number, data, checksum, md5)
        if kept is not None:
            self.done.append(kept)
            self.engine.progress(0, "up", advanced=raw)
            return 0
        completed = await self.backend.upload_part(self.upload, number, data, checksum)
        self.done.append(completed)
        await self.engine.journal.upload_part(
            self.dest,
            self.upload.upload_id,
            number,
            completed.etag,
            completed.size,
            completed.checksum,
        )
        self.engine.progress(completed.size, "up", advanced=raw)
        return completed.size


async def _send_rest(comp: _Compressing, sender: _Sender, part_size: int) -> int:
    """Parts 2.. of the stream; returns their bytes sent.

    The scheduler reserves each part's memory before its task exists; the
    parts are filled in order (each waits for the one before), then sent
    concurrently. The stream's length is not known ahead, so parts are
    offered while it has not ended: the few offered past its end find it
    ended and send nothing.
    """
    engine = sender.engine
    algorithm = sender.backend.capabilities.part_checksum
    scheduler = engine.scheduler
    sent = 0
    turns: dict[int, asyncio.Event] = {1: asyncio.Event()}
    turns[1].set()

    def parts() -> Any:
        index = 1
        while not comp.eof:
            turns[index + 1] = asyncio.Event()
            yield Part(index, index * part_size, part_size)
            index += 1

    async def send(part: Part, lease: Lease) -> int:
        await turns[part.index].wait()
        try:
            if comp.eof:
                return 0
            md5 = sender.wants_md5(part.number)
            data, checksum, digest = await scheduler.io_holding(
                comp.fill, lease.view(), algorithm, md5
            )
            raw = comp.read_since()  # before the next part's fill starts
        finally:
            turns[part.index + 1].set()
        if not data:
            # The stream ended exactly at the previous part's end.
            if raw:
                engine.progress(0, "up", advanced=raw)
            return 0
        return await sender.part(part.number, data, checksum, digest, raw)

    async def sent_part(part: Part, n: int) -> None:
        nonlocal sent
        sent += n

    try:
        await scheduler.map_parts(parts(), send, sent_part)
    except BaseExceptionGroup as group:
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
            leaf = leaf.exceptions[0]
        if isinstance(leaf, SourceChangedError):
            raise leaf from None
        raise
    return sent


# -- download -----------------------------------------------------------------------


class _Sink:
    """Decompressed bytes into ``fd`` from offset 0, refusing more than ``limit``."""

    def __init__(self, fd: int, limit: int, url: str) -> None:
        self.fd = fd
        self.limit = limit
        self.url = url
        self.written = 0

    def write(self, data: Any) -> int:
        n = len(data)
        if self.written + n > self.limit:
            raise IntegrityError(
                f"{self.url} decompresses to more than its {ORIGINAL_SIZE_KEY} ({self.limit} bytes)"
            )
        pwrite_all(self.fd, data, self.written)
        self.written += n
        return n


class Undecodable(Settled):
    """Stored bytes that match their checksum yet do not decode to the file
    their metadata describes: fetching them again cannot help (not retried)."""


class _Decompressing:
    """One download's zstd stream into its temp file (worker threads, in order).

    The first error (a corrupt stream, output beyond ``synxfer-size``) stops
    the decompression and is kept; :meth:`finish` raises it, after the
    caller has checked the stored bytes (whose mismatch is retried first).
    """

    def __init__(self, zstd: ModuleType, fd: int, limit: int, url: str) -> None:
        self.zstd = zstd
        self.url = url
        self.sink = _Sink(fd, limit, url)
        self.writer = zstd.ZstdDecompressor().stream_writer(
            self.sink, write_size=_WRITE_SIZE, closefd=False
        )
        self.error: IntegrityError | None = None

    def feed(self, data: memoryview) -> None:
        if self.error is not None:
            return
        try:
            self.writer.write(data)
        except IntegrityError as exc:
            self.error = exc
        except self.zstd.ZstdError as exc:
            self.error = IntegrityError(f"{self.url}: the stored zstd stream is corrupt ({exc})")

    def finish(self) -> None:
        """Raise :class:`Undecodable` unless the stream decoded whole (zstd
        checks its own checksum of the original) to exactly ``synxfer-size``."""
        if self.error is None:
            self.writer.flush()
            if self.sink.written != self.sink.limit:
                self.error = IntegrityError(
                    f"{self.url} decompressed to {self.sink.written} bytes, not its "
                    f"{ORIGINAL_SIZE_KEY} of {self.sink.limit} (a truncated stream)"
                )
        if self.error is not None:
            raise Undecodable(self.error)


def write_decompressed(
    dest: Path,
    tmp: Path,
    data: memoryview,
    *,
    info: ObjectInfo,
    url: str,
    exclusive: bool,
    check: Callable[[memoryview], None] | None,
    mtime_ns: int | None,
    etag: str | None,
    keep_existing: bool = False,
) -> None:
    """:func:`.localfile.write_whole_file` for a compressed object held whole
    in ``data``: ``check`` the stored bytes first, then decompress into
    ``tmp``, check the size, tag, rename. ONE blocking call (a worker
    thread); on any failure ``tmp`` is removed."""
    zstd = require_zstd(f"{url} is stored zstd-compressed: downloading it")
    limit = _expected_size(url, info)
    if check is not None:
        check(data)

    def fill(fd: int) -> None:
        out = _Decompressing(zstd, fd, limit, url)
        out.feed(data)
        out.finish()

    commit_temp(
        dest,
        tmp,
        fill,
        exclusive=exclusive,
        mtime_ns=mtime_ns,
        etag=etag,
        keep_existing=keep_existing,
    )


async def download_compressed(
    engine: Engine,
    backend: Backend,
    key: str,
    dest: Path,
    info: ObjectInfo,
    p: Plan,
    if_match: str | None,
) -> tuple[int, bool]:
    """A compressed object fetched in the ranges of ``p`` (planned for the
    checksum it is verified against), decompressed in order into a temp
    file beside ``dest``, renamed in only when the stored bytes' checksum,
    zstd's checksum and ``synxfer-size`` agree. Data that does not is
    fetched again (the whole stream) under the retry policy. Returns the
    stored bytes fetched and whether they were verified."""
    scheduler = engine.scheduler
    url = backend.url(key)
    zstd = require_zstd(f"{url} is stored zstd-compressed: downloading it")
    limit = _expected_size(url, info)
    kind = p.kind
    tmp = temp_path_for(dest)
    f = await LocalFile.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, scheduler.executor, parents=True
    )
    fetched = 0
    attempts = 0
    committed = False
    try:

        async def one_pass() -> None:
            nonlocal fetched, attempts
            attempts += 1
            sums = Sums(p)
            await scheduler.io(os.ftruncate, f.fd, 0)
            out = _Decompressing(zstd, f.fd, limit, url)
            turns = {part.index: asyncio.Event() for part in p.ranges}

            def consume(part: Part, data: memoryview) -> int | bytes | None:
                value: int | bytes | None = None
                if p.chained:
                    unit = p.unit_of[part.index]
                    if p.units[unit][0] == part.index:
                        assert kind is not None
                        sums.hashers[unit] = new_hash(kind)
                    hasher = sums.hashers[unit]
                    hasher.update(data)
                    if p.last_of_unit(part.index):
                        value = hasher.digest()
                else:
                    value = unit_value(kind, data)
                out.feed(data)
                return value

            async def fetch(part: Part, lease: Lease) -> int | bytes | None:
                view = lease.view()
                await backend.read_into(key, part.offset, view, if_match=if_match)
                if part.index > 0:
                    await turns[part.index - 1].wait()
                try:
                    return await scheduler.io_holding(consume, part, view)
                finally:
                    turns[part.index].set()

            async def fetched_part(part: Part, value: int | bytes | None) -> None:
                nonlocal fetched
                fetched += part.length
                if p.last_of_unit(part.index):
                    sums.record(p.unit_of[part.index], value)
                engine.progress(part.length, "down")

            try:
                await scheduler.map_parts(p.ranges, fetch, fetched_part, even_buffers=True)
            except BaseExceptionGroup as group:
                raise_mismatch_of(group)
                raise
            if p.exp is not None:
                await scheduler.io(sums.check, url)
            await scheduler.io(out.finish)

        try:
            await retry_mismatch(engine, "download", one_pass)
        except Undecodable as bad:
            raise gave_up(bad.error, attempts, dest) from None
        except IntegrityError as exc:
            raise gave_up(exc, attempts, dest) from None
        from .download import _mtime_ns

        await f.finish(_mtime_ns(info), info.etag)
        await f.close()
        await scheduler.io(place, tmp, dest, keep_existing())
        committed = True
        return fetched, p.exp is not None or backend.capabilities.verified_reads
    finally:
        if not committed:
            await f.close()
            with contextlib.suppress(OSError):
                os.unlink(tmp)
