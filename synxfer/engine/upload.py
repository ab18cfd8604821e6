"""Uploading one local file: a single put, or a multipart upload that can resume.

Parts go through the scheduler (:meth:`~.scheduler.Scheduler.map_parts`),
which reserves each part's bytes and lends it a pooled buffer before the
part's task exists, so tasks and memory stay bounded however big the file
is. Each byte of the file is read once, and its checksum is computed in the
same worker-thread call that read it.

A part's bytes come from one of two sources: the file's own ranges (read
in any order), or a codec's stored stream (:mod:`.compress`: encoded in
order, one part at a time, then sent concurrently). Both share the journal,
the resume from an earlier run's upload, and the abort on failure; the
journal entry names the codec, so an upload resumes only as it began.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import mimetypes
import os
from collections.abc import AsyncIterator, Iterable, Iterator
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING

from .._exceptions import ConfigError, NotFound, SourceChangedError
from .._models import CompletedPart, MultipartUpload, WriteOptions
from ..backend import Backend, Capabilities, Checksum, ChecksumAlgorithm
from .checksums import CRC_KINDS, crc_value, new_hash, to_bytes
from .compress import Codec, Encoder, Filled, codec_for
from .core import Engine
from .journal import UploadEntry
from .localfile import Identity, LocalFile, identity, read_whole_file, source_changed
from .meta import MTIME_KEY, PART_SIZE_KEY, format_mtime, guess_content_type, upload_options
from .parts import Part, checksum_of, etag_parts, plan_part_size, split
from .scheduler import Lease

if TYPE_CHECKING:
    from .prehash import PrePass

__all__ = ["abort_abandoned_uploads", "abort_upload", "journal_new_upload", "upload_path"]

log = logging.getLogger("synxfer")

#: Seconds allowed for aborting a multipart upload during cleanup.
_ABORT_TIMEOUT = 60.0


async def upload_path(
    engine: Engine,
    path: Path,
    backend: Backend,
    key: str,
    size: int | None = None,
    *,
    options: WriteOptions | None = None,
) -> int:
    """Upload the local file ``path`` to ``key``; returns the bytes sent.

    The file's identity (device, inode, size, mtime) is taken when it is
    opened and checked again after the last byte is read and before the
    object is committed; if it changed, nothing is committed.

    ``size`` is what a listing said the file holds: when it goes in one
    request, :func:`_put_whole` needs one worker-thread call and no journal.

    ``options`` are the object's options (None: ``TransferConfig.write_options``);
    without a content type there, the file name's is guessed unless
    ``TransferConfig.guess_mime_type`` is off.

    With ``TransferConfig.compress`` set, the object is stored encoded by
    that codec (:func:`_upload_encoded`) and the bytes sent are the stored ones.
    """
    caps = backend.capabilities
    cfg = engine.config
    scheduler = engine.scheduler
    base = cfg.write_options if options is None else options
    guessed = None
    if base.content_type is None and cfg.guess_mime_type:
        if not mimetypes.inited:
            await scheduler.io(mimetypes.init)  # reads the system's tables once
        guessed = guess_content_type(path.name)
    codec = codec_for(cfg.compress, cfg.compress_level)
    if codec is not None:
        return await _upload_encoded(engine, path, backend, key, base, guessed, codec)
    if size is not None and not _multipart(size, cfg.multipart_threshold, caps):
        sent = await _put_whole(engine, path, backend, key, size, base, guessed)
        if sent is not None:
            return sent
        # The file's size changed since it was listed: the general path.
    f = await LocalFile.open(path, os.O_RDONLY, scheduler.executor)
    try:
        st = await f.fstat()
        size = st.st_size
        before = identity(st)
        metadata = {MTIME_KEY: format_mtime(st.st_mtime_ns)}

        async def check_unchanged() -> None:
            if not await f.unchanged_since(before):
                raise source_changed(path)

        if not _multipart(size, cfg.multipart_threshold, caps):
            metadata[PART_SIZE_KEY] = "0"
            async with scheduler.reserve(size) as lease:
                buf = lease.buffer()
                n, checksum = await f.read_into(buf, 0, caps.part_checksum)
                if n != size:
                    raise source_changed(path, "it shrank")
                await check_unchanged()
                await backend.put(key, buf, upload_options(base, metadata, guessed), checksum)
            engine.progress(size, "up")
            return size

        part_size = plan_part_size(size, cfg.part_size, caps)
        metadata[PART_SIZE_KEY] = str(part_size)
        dest = backend.url(key)
        # The service wants the file's MD5 before the upload starts (prehash.py,
        # imported here: a file sent in one request never needs it).
        from .prehash import prehash_file, with_digests

        pre = await prehash_file(engine, f, size, part_size) if caps.needs_content_md5 else None
        chosen = base.checksum_algorithm
        upload, done = await _resume_upload(engine, backend, key, f, before, part_size, chosen)
        if upload is None:
            # Orphans of a retried create are the retry layer's business.
            options = with_digests(upload_options(base, metadata, guessed), pre)
            upload = await backend.create_multipart(key, options)
            await journal_new_upload(engine, backend, upload, path, before, part_size)
        async with _kept_or_aborted(engine, backend, upload):
            sent = await _send_parts(engine, f, backend, upload, size, part_size, done, pre)
            await check_unchanged()
            await backend.complete_multipart(upload, sorted(done.values(), key=_number))
        await engine.journal.upload_done(dest)
        return sent
    finally:
        await f.close()


@contextlib.asynccontextmanager
async def _kept_or_aborted(
    engine: Engine, backend: Backend, upload: MultipartUpload
) -> AsyncIterator[None]:
    """What becomes of a multipart upload the block fails in.

    Interrupted (Ctrl-C, shutdown): with a journal the upload resumes on the
    next run; without one nothing could, so it is discarded. Failed: it is
    aborted, and forgotten only once gone: an abort refused (credentials
    revoked mid-run, say) leaves the entry, so the next run resumes it.
    """
    try:
        yield
    except asyncio.CancelledError:
        if not engine.resumable:
            await abort_upload(backend, upload)
        raise
    except BaseException:
        if await abort_upload(backend, upload):
            await engine.journal.upload_done(backend.url(upload.key))
        raise


async def _upload_encoded(
    engine: Engine,
    path: Path,
    backend: Backend,
    key: str,
    options: WriteOptions,
    content_type: str | None,
    codec: Codec,
) -> int:
    """Upload ``path`` to ``key`` stored by ``codec``; returns the bytes sent (stored).

    The stored stream's length is known only once encoded, so part 1 is
    encoded first: a stream that ends within it goes in one request. Else it
    is a multipart upload like a plain file's -- journaled (the entry names
    the codec), kept on interruption, aborted on failure -- whose parts are
    cut from the stream by size (every part but the last is exactly the part
    size, planned for the codec's worst case so ``max_parts`` holds).

    A rerun resumes it: the file is encoded again from its start (the stream
    is cut at the same offsets), and a part the server already holds is not
    sent again when the MD5 of the part just encoded is its ETag (or, where
    ETags are not MD5s, its checksum the one journaled): the server keeps
    the bytes this run would send, whatever codec library version made them.
    """
    cfg = engine.config
    scheduler = engine.scheduler
    caps = backend.capabilities
    algorithm = caps.part_checksum
    f = await LocalFile.open(path, os.O_RDONLY, scheduler.executor)
    try:
        st = await f.fstat()
        size = st.st_size
        before = identity(st)
        bound = codec.bound(size)
        part_size = plan_part_size(bound, cfg.part_size, caps) if caps.multipart else bound
        encoder = codec.encoder(f.fd, size)
        metadata = {MTIME_KEY: format_mtime(st.st_mtime_ns), **codec.metadata(size)}
        dest = backend.url(key)

        async def check_unchanged() -> None:
            if encoder.consumed() != size or not await f.unchanged_since(before):
                raise source_changed(path)

        async with scheduler.reserve(part_size) as first:
            # Whether an earlier run left this upload: looked up while part 1 is encoded.
            earlier = asyncio.ensure_future(engine.journal.upload_get(dest))
            try:
                data, checksum, _ = await scheduler.io_holding(
                    encoder.fill, first.view(), algorithm, False
                )
            except BaseException:
                earlier.cancel()
                raise
            entry = await earlier
            raw = encoder.read_since()
            if encoder.eof and len(data) <= caps.max_single_put:
                if entry is not None and await abort_upload(
                    backend, MultipartUpload(key, entry.upload_id)
                ):
                    await engine.journal.upload_done(dest)
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
            fresh = options.checksum_algorithm is not None
            expected = (str(path), before, part_size, codec.name)
            upload, held = await _earlier_upload(engine, backend, key, entry, expected, fresh)
            if upload is None:
                upload = await backend.create_multipart(key, opts)
                await journal_new_upload(
                    engine, backend, upload, path, before, part_size, codec.name
                )
            else:
                log.info("resuming %s: %d part(s) on the server to compare", dest, len(held))
            parts = _EncodedParts(engine, backend, upload, encoder, held)
            async with _kept_or_aborted(engine, backend, upload):
                if 1 in held:  # compare part 1 with the server's (one more hash)
                    data, checksum, md5 = await scheduler.io_holding(_rehash, data, algorithm)
                    sent = await parts.keep_or_send(1, data, checksum, md5, raw)
                else:
                    sent = await parts.keep_or_send(1, data, checksum, None, raw)
        async with _kept_or_aborted(engine, backend, upload):
            sent += await parts.send_rest(part_size)
            await check_unchanged()
            await backend.complete_multipart(upload, sorted(parts.done, key=attrgetter("number")))
        await engine.journal.upload_done(dest)
        return sent
    finally:
        await f.close()


def _rehash(data: bytes | bytearray, algorithm: ChecksumAlgorithm | None) -> Filled:
    """``data``, its checksum and MD5 (a worker thread)."""
    view = memoryview(data)
    return data, checksum_of(algorithm, view), hashlib.md5(view, usedforsecurity=False).hexdigest()


class _EncodedParts:
    """The parts of one encoded upload: filled from the codec's stream in
    order, kept when the server already holds the same bytes (a resumed
    upload), else sent and journaled."""

    def __init__(
        self,
        engine: Engine,
        backend: Backend,
        upload: MultipartUpload,
        encoder: Encoder,
        held: dict[int, CompletedPart],
    ) -> None:
        self.engine = engine
        self.backend = backend
        self.upload = upload
        self.encoder = encoder
        self.held = held
        self.done: list[CompletedPart] = []

    def _held_as(
        self, number: int, data: bytes | bytearray, checksum: Checksum | None, md5: str | None
    ) -> CompletedPart | None:
        """The server's part ``number`` if it is ``data``: its ETag is the
        MD5 of ``data``, or (an ETag that is no MD5) its checksum is."""
        listed = self.held.get(number)
        if listed is None or listed.size != len(data):
            return None
        etag = listed.etag.strip('"').lower()
        if etag_parts(etag) == 0:
            same = md5 == etag
        else:
            same = checksum is not None and listed.checksum == checksum.value
        if not same:
            return None
        # Neither listed nor journaled (acknowledged after the last run's last
        # journal write): the checksum completing the upload needs is this one.
        return _with_checksum(listed, checksum.value if checksum else None)

    async def keep_or_send(
        self,
        number: int,
        data: bytes | bytearray,
        checksum: Checksum | None,
        md5: str | None,
        raw: int,
    ) -> int:
        """Part ``number`` (``raw`` bytes of the file) kept or sent; the bytes sent."""
        kept = self._held_as(number, data, checksum, md5)
        if kept is not None:
            self.done.append(kept)
            self.engine.progress(0, "up", advanced=raw)
            return 0
        completed = await self.backend.upload_part(self.upload, number, data, checksum)
        self.done.append(completed)
        await _journal_part(self.engine, self.backend, self.upload, completed)
        self.engine.progress(completed.size, "up", advanced=raw)
        return completed.size

    async def send_rest(self, part_size: int) -> int:
        """Parts 2.. of the stream; returns their bytes sent.

        The scheduler reserves each part's memory before its task exists; the
        parts are filled in order (each waits for the one before), then sent
        concurrently. The stream's length is not known ahead, so parts are
        offered while it has not ended: the few offered past its end find it
        ended and send nothing.
        """
        encoder = self.encoder
        algorithm = self.backend.capabilities.part_checksum
        scheduler = self.engine.scheduler
        sent = 0
        turns: dict[int, asyncio.Event] = {1: asyncio.Event()}
        turns[1].set()

        def parts() -> Iterator[Part]:
            index = 1
            while not encoder.eof:
                turns[index + 1] = asyncio.Event()
                yield Part(index, index * part_size, part_size)
                index += 1

        async def send(part: Part, lease: Lease) -> int:
            await turns[part.index].wait()
            try:
                if encoder.eof:
                    return 0
                md5 = part.number in self.held
                data, checksum, digest = await scheduler.io_holding(
                    encoder.fill, lease.view(), algorithm, md5
                )
                raw = encoder.read_since()  # before the next part's fill starts
            finally:
                turns[part.index + 1].set()
            if not data:
                # The stream ended exactly at the previous part's end.
                if raw:
                    self.engine.progress(0, "up", advanced=raw)
                return 0
            return await self.keep_or_send(part.number, data, checksum, digest, raw)

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


async def _journal_part(
    engine: Engine, backend: Backend, upload: MultipartUpload, part: CompletedPart
) -> None:
    """Record a part the server acknowledged (what a rerun keeps)."""
    await engine.journal.upload_part(
        backend.url(upload.key), upload.upload_id, part.number, part.etag, part.size, part.checksum
    )


async def journal_new_upload(
    engine: Engine,
    backend: Backend,
    upload: MultipartUpload,
    path: Path,
    ident: tuple[int, int, int, int],
    part_size: int,
    codec: str = "",
) -> None:
    """Journal an upload just created, or abort it if that is interrupted.

    Until its journal row is known to be written, the upload is known to
    nothing but this call: a cancellation (or any error) here would leak it
    for ever. Whether the journal's thread wrote the row or not, the upload
    is then aborted (shielded, bounded in time) and the row removed.
    """
    dest = backend.url(upload.key)
    try:
        await engine.journal.upload_start(
            dest, str(path), ident, upload.upload_id, part_size, codec, upload.checksum or ""
        )
    except BaseException:
        if not await abort_upload(backend, upload):
            raise  # the row, if it was written, still names the upload
        with contextlib.suppress(Exception):
            # Queued on the journal's one thread, after the write it undoes.
            await asyncio.shield(engine.journal.upload_done(dest))
        raise


def _multipart(size: int, threshold: int, caps: Capabilities) -> bool:
    """Whether a file of ``size`` bytes is sent in parts."""
    return caps.multipart and (size >= threshold or size > caps.max_single_put)


async def _put_whole(
    engine: Engine,
    path: Path,
    backend: Backend,
    key: str,
    size: int,
    options: WriteOptions,
    content_type: str | None,
) -> int | None:
    """A file sent in one request: ONE worker-thread call opens, reads, hashes
    and checks it (:func:`.localfile.read_whole_file`), then one put; no journal
    (nothing to resume). None if the file no longer has ``size`` bytes."""
    scheduler = engine.scheduler
    async with scheduler.reserve(size) as lease:
        buf = lease.buffer()
        got = await scheduler.io_holding(
            read_whole_file, path, buf, backend.capabilities.part_checksum
        )
        if got is None:
            return None
        checksum, mtime_ns = got
        metadata = {MTIME_KEY: format_mtime(mtime_ns), PART_SIZE_KEY: "0"}
        await backend.put(key, buf, upload_options(options, metadata, content_type), checksum)
    engine.progress(size, "up")
    return size


def _number(part: CompletedPart) -> int:
    return part.number


async def _resume_upload(
    engine: Engine,
    backend: Backend,
    key: str,
    f: LocalFile,
    ident: tuple[int, int, int, int],
    part_size: int,
    chosen: str | None = None,
) -> tuple[MultipartUpload | None, dict[int, CompletedPart]]:
    """An upload of ``f`` to ``key`` left by an earlier run, and the parts of
    it the server holds (ListParts) with the right bytes, to be kept.

    A listed part is kept when its size is the part's and its ETag is the
    one the journal recorded for it (the server vouched for those bytes when
    they were sent), or else the MD5 of that range of the file (computed
    now, off the loop: a part the server acknowledged after the journal's
    last write, say by kill -9). Servers that list no part checksums
    (stock moto, SeaweedFS, Ceph RGW) thus resume too; the checksum a
    completion needs comes from the journal or is computed with the MD5.

    An upload made with the checksum ``chosen`` (the journal recorded it)
    resumes only with the same choice, each part checked again
    (:func:`_parts_matching_chosen`).
    """
    dest = backend.url(key)
    entry = await engine.journal.upload_get(dest)
    upload, on_server = await _earlier_upload(
        engine, backend, key, entry, (str(f.path), ident, part_size, ""), False, chosen
    )
    if upload is None or entry is None:
        return None, {}
    if chosen is not None and upload.checksum is not None:
        parts = split(ident[2], part_size)
        return upload, await _parts_matching_chosen(engine, f, dest, parts, on_server, chosen)
    done: dict[int, CompletedPart] = {}
    recheck: list[Part] = []
    for part in split(ident[2], part_size):
        listed = on_server.get(part.number)
        if listed is None or listed.size != part.length:
            continue
        etag, size, _ = entry.parts.get(part.number, (None, None, None))
        if (etag, size) == (listed.etag, listed.size):
            done[part.number] = listed
        elif etag_parts(listed.etag) == 0:
            recheck.append(part)
    by_md5 = await _parts_matching_md5(engine, backend, f, recheck, on_server)
    done.update(by_md5)
    log.info(
        "resuming %s: %d part(s) already on the server (%d of them by their MD5)",
        dest,
        len(done),
        len(by_md5),
    )
    return upload, done


async def _earlier_upload(
    engine: Engine,
    backend: Backend,
    key: str,
    entry: UploadEntry | None,
    expected: tuple[str, Identity, int, str],
    fresh: bool,
    chosen: str | None = None,
) -> tuple[MultipartUpload | None, dict[int, CompletedPart]]:
    """The journaled upload ``entry`` to continue, and the parts the server
    lists of it (with the journaled checksum where the listing has none);
    ``(None, {})`` when there is none to continue.

    ``expected`` is this run's (source path, identity, part size, codec): an
    entry for another file, another version of it (size, mtime or inode
    differ), another part size or another codec is stale, as is any entry
    when ``fresh``, or made with another checksum than ``chosen`` (this
    run's ``checksum_algorithm``: the journal records the one an upload
    was made with, :func:`_same_choice`). An upload made with a chosen
    checksum gets the server's word for its parts' values only: the
    journal's are what was sent, not what the server holds.
    A stale entry's upload is aborted and forgotten (an abort refused leaves
    the entry, which the new upload's replaces); one gone from the server
    is forgotten.
    """
    if entry is None:
        return None, {}
    dest = backend.url(key)
    upload = MultipartUpload(key, entry.upload_id, entry.checksum or None)
    same = (entry.src, entry.identity, entry.part_size, entry.codec) == expected and not fresh
    same = same and _same_choice(dest, entry.checksum, chosen)
    if same and backend.capabilities.list_parts:
        try:
            listed = await backend.list_parts(upload)
        except NotFound:
            # The upload was completed or aborted meanwhile.
            await engine.journal.upload_done(dest)
            return None, {}
        held: dict[int, CompletedPart] = {}
        for p in listed:
            _etag, _size, checksum = entry.parts.get(p.number, (None, None, None))
            held[p.number] = p if upload.checksum else _with_checksum(p, checksum)
        return upload, held
    if await abort_upload(backend, upload):
        await engine.journal.upload_done(dest)
    return None, {}


def _algorithm(spec: str | None) -> str | None:
    """The algorithm a ``MultipartUpload.checksum`` names (``SHA256/COMPOSITE``: SHA256)."""
    return spec.partition("/")[0] or None if spec else None


def _same_choice(dest: str, journaled: str, chosen: str | None) -> bool:
    """Whether this run's ``--checksum-algorithm`` is the one the journaled
    upload was made with; if not, the upload cannot be completed as this run
    asks (its parts carry the other checksum, or none): say it starts over."""
    was = _algorithm(journaled)
    if was == chosen:
        return True
    log.warning(
        "%s: the interrupted upload was made with --checksum-algorithm %s, this run "
        "asks for %s: it is aborted and starts over",
        dest,
        was or "(none)",
        chosen or "(none)",
    )
    return False


def _chosen_value(kind: str, data: memoryview) -> str | None:
    """The base64 checksum S3 names ``kind`` of ``data`` (None for ``md5``,
    whose claim is the ETag). Blocking: an io thread's."""
    if kind == "md5":
        return None
    if kind in CRC_KINDS:
        raw = to_bytes(kind, crc_value(kind, data))
    else:
        h = new_hash(kind)
        h.update(data)
        raw = h.digest()
    return base64.b64encode(raw).decode("ascii")


def _vouched(listed: CompletedPart, value: str | None, md5: str) -> str | None:
    """What proves a listed part holds the bytes read now (``value``: their
    chosen checksum, ``md5``: their MD5 in hex), or None: the part is sent
    again. The checksum the server lists for it, where it lists one (S3);
    else its ETag, where that is a plain MD5 (stock moto, SeaweedFS and
    Ceph RGW list no part checksums)."""
    if listed.checksum:
        return "checksum" if listed.checksum == value else None
    if etag_parts(listed.etag) == 0 and listed.etag.strip('"').lower() == md5:
        return "md5"
    return None


async def _parts_matching_chosen(
    engine: Engine,
    f: LocalFile,
    dest: str,
    parts: Iterable[Part],
    on_server: dict[int, CompletedPart],
    chosen: str,
) -> dict[int, CompletedPart]:
    """The parts of an upload made with the checksum ``chosen`` to keep: each
    the server holds is read again (through the scheduler: the budget
    bounds it) and kept only if :func:`_vouched`; it carries the chosen
    value of the bytes read, which its completion lists (the journal's
    record is what was sent, not what the file holds now)."""
    kind = chosen.lower()
    kept: dict[int, CompletedPart] = {}
    proofs: dict[str, int] = {"checksum": 0, "md5": 0}
    held = [p for p in parts if p.number in on_server and on_server[p.number].size == p.length]

    async def check(part: Part, lease: Lease) -> CompletedPart | None:
        buf = lease.buffer()
        n, md5 = await f.read_into(buf, part.offset, "md5")
        if n != part.length or md5 is None:
            return None
        value = await engine.scheduler.io_holding(_chosen_value, kind, buf)
        listed = on_server[part.number]
        proof = _vouched(listed, value, base64.b64decode(md5.value).hex())
        if proof is None:
            return None
        proofs[proof] += 1
        return CompletedPart(part.number, listed.etag, listed.size, value)

    async def keep(part: Part, result: CompletedPart | None) -> None:
        if result is not None:
            kept[part.number] = result

    await engine.scheduler.map_parts(held, check, keep)
    log.info(
        "resuming %s (--checksum-algorithm %s): %d of the %d part(s) on the server kept "
        "(%d by the %s it lists, %d by their MD5 ETag), the others sent again",
        dest,
        chosen,
        len(kept),
        len(on_server),
        proofs["checksum"],
        chosen,
        proofs["md5"],
    )
    return kept


def _with_checksum(part: CompletedPart, checksum: str | None) -> CompletedPart:
    """``part`` with ``checksum`` where the server's listing gave none."""
    if part.checksum or not checksum:
        return part
    return CompletedPart(part.number, part.etag, part.size, checksum)


async def _parts_matching_md5(
    engine: Engine,
    backend: Backend,
    f: LocalFile,
    parts: list[Part],
    on_server: dict[int, CompletedPart],
) -> dict[int, CompletedPart]:
    """Those of ``parts`` whose listed ETag is the MD5 of their range of
    ``f``, with the checksum the backend wants for each (one read each, in
    the io threads, one part at a time: only parts the journal did not
    record get here -- those in flight when the last run ended)."""
    algorithm = backend.capabilities.part_checksum
    kept: dict[int, CompletedPart] = {}
    for part in parts:
        listed = on_server[part.number]
        async with engine.scheduler.reserve(part.length) as lease:
            buf = lease.buffer()
            n, md5 = await f.read_into(buf, part.offset, "md5")
            if n != part.length or md5 is None:
                continue
            if base64.b64decode(md5.value).hex() != listed.etag.lower():
                continue
            checksum = md5 if algorithm == "md5" else None
            if algorithm is not None and algorithm != "md5":
                checksum = await engine.scheduler.io_holding(checksum_of, algorithm, buf)
        kept[part.number] = _with_checksum(listed, checksum.value if checksum else None)
    return kept


async def _send_parts(
    engine: Engine,
    f: LocalFile,
    backend: Backend,
    upload: MultipartUpload,
    size: int,
    part_size: int,
    done: dict[int, CompletedPart],
    pre: PrePass | None = None,
) -> int:
    """Send every part not in ``done`` (adding them to it); returns bytes sent.

    With a pre-pass (``pre``), each part's checksum is checked against it
    and its pre-pass MD5 is sent (:meth:`.prehash.PrePass.check`)."""
    algorithm = backend.capabilities.part_checksum if pre is None else pre.algorithm
    sent = 0

    async def send(part: Part, lease: Lease) -> CompletedPart:
        buf = lease.buffer()
        n, checksum = await f.read_into(buf, part.offset, algorithm)
        if n != part.length:
            raise source_changed(f.path, "it shrank")
        if pre is not None:
            checksum = pre.check(part.number, checksum, f.path)
        return await backend.upload_part(upload, part.number, buf, checksum)

    async def sent_part(part: Part, result: CompletedPart) -> None:
        nonlocal sent
        done[part.number] = result
        sent += part.length
        await _journal_part(engine, backend, upload, result)
        engine.progress(part.length, "up")

    todo = (part for part in split(size, part_size) if part.number not in done)
    await engine.scheduler.map_parts(todo, send, sent_part)
    return sent


async def abort_upload(backend: Backend, upload: MultipartUpload) -> bool:
    """Abort a multipart upload even while being cancelled; never raises
    (but a cancellation). True when the upload is gone from the server
    (aborted now, or already unknown to it); False when the abort failed
    (refused, timed out): the caller keeps what it knows of the upload."""
    try:
        async with asyncio.timeout(_ABORT_TIMEOUT):
            await asyncio.shield(backend.abort_multipart(upload))
    except NotFound:
        return True  # a backend that reports an upload already gone
    except BaseException as exc:
        log.warning(
            "could not abort multipart upload %s of %s: %s",
            upload.upload_id,
            backend.url(upload.key),
            exc,
        )
        if isinstance(exc, asyncio.CancelledError):
            raise
        return False
    return True


async def abort_abandoned_uploads(
    engine: Engine, backend: Backend, prefix: str, wanted: set[str]
) -> None:
    """Abort the journaled uploads under ``prefix`` that this run will not
    resume (their files were deleted, excluded or are in place already):
    left alone they would hold storage on the server for ever. An entry is
    forgotten once its upload is gone; one whose abort failed stays, to be
    tried again (or resumed) by the next run."""
    for dest, upload_id in await engine.journal.uploads_under(backend.url(prefix)):
        if dest in wanted:
            continue
        key = dest[len(backend.url("")) :]
        if await abort_upload(backend, MultipartUpload(key, upload_id)):
            await engine.journal.upload_done(dest)
            log.info("aborted the abandoned multipart upload of %s", dest)
