"""Uploading one local file: a single put, or a multipart upload that can resume.

Parts go through the scheduler (:meth:`~.scheduler.Scheduler.map_parts`),
which reserves each part's bytes and lends it a pooled buffer before the
part's task exists, so tasks and memory stay bounded however big the file
is. Each byte of the file is read once, and its checksum is computed in the
same worker-thread call that read it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import mimetypes
import os
from pathlib import Path

from .._exceptions import NotFound
from .._models import CompletedPart, MultipartUpload, WriteOptions
from ..backend import Backend, Capabilities
from .compress import upload_compressed
from .core import Engine
from .localfile import LocalFile, identity, read_whole_file, source_changed
from .meta import MTIME_KEY, PART_SIZE_KEY, format_mtime, guess_content_type, upload_options
from .parts import Part, checksum_of, etag_parts, plan_part_size, split
from .prehash import PrePass, prehash_file, with_digests
from .scheduler import Lease

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

    With ``TransferConfig.compress`` set, the object is stored compressed
    (:func:`.compress.upload_compressed`) and the bytes sent are the
    compressed ones.
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
    if cfg.compress is not None:
        return await upload_compressed(engine, path, backend, key, base, guessed)
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
        # The service wants the file's MD5 before the upload starts (prehash.py).
        pre = await prehash_file(engine, f, size, part_size) if caps.needs_content_md5 else None
        # An upload with a chosen checksum is never resumed: the journal does
        # not record the algorithm, nor the parts' checksums of it that its
        # completion needs; an earlier one is aborted and the file sent again.
        fresh = base.checksum_algorithm is not None
        upload, done = await _resume_upload(engine, backend, key, f, before, part_size, fresh)
        if upload is None:
            # Orphans of a retried create are the retry layer's business.
            options = with_digests(upload_options(base, metadata, guessed), pre)
            upload = await backend.create_multipart(key, options)
            await journal_new_upload(engine, backend, upload, path, before, part_size)
        try:
            sent = await _send_parts(engine, f, backend, upload, size, part_size, done, pre)
            await check_unchanged()
            await backend.complete_multipart(upload, sorted(done.values(), key=_number))
        except asyncio.CancelledError:
            # Interrupted (Ctrl-C, shutdown): with a journal the upload resumes
            # on the next run; without one nothing could, so discard it.
            if not engine.resumable:
                await abort_upload(backend, upload)
            raise
        except BaseException:
            # Forgotten only once gone: an abort refused (credentials revoked
            # mid-run, say) leaves the entry, so the next run resumes it.
            if await abort_upload(backend, upload):
                await engine.journal.upload_done(dest)
            raise
        await engine.journal.upload_done(dest)
        return sent
    finally:
        await f.close()


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
            dest, str(path), ident, upload.upload_id, part_size, codec
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
    fresh: bool = False,
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

    A journal entry for another file, another version of this one (size,
    mtime or inode differ) or another part size is stale: its upload is
    aborted and forgotten.
    """
    dest = backend.url(key)
    entry = await engine.journal.upload_get(dest)
    if entry is None:
        return None, {}
    upload = MultipartUpload(key, entry.upload_id)
    same = entry.src == str(f.path) and entry.identity == ident and entry.part_size == part_size
    same = same and not fresh and not entry.codec  # a compressed upload's parts are not ranges
    if same and backend.capabilities.list_parts:
        try:
            on_server = {p.number: p for p in await backend.list_parts(upload)}
        except NotFound:
            on_server = None  # the upload was completed or aborted meanwhile
        if on_server is not None:
            done: dict[int, CompletedPart] = {}
            recheck: list[Part] = []
            for part in split(ident[2], part_size):
                listed = on_server.get(part.number)
                if listed is None or listed.size != part.length:
                    continue
                etag, size, checksum = entry.parts.get(part.number, (None, None, None))
                if (etag, size) == (listed.etag, listed.size):
                    done[part.number] = _with_checksum(listed, checksum)
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
    elif not await abort_upload(backend, upload):
        return None, {}  # the new upload's entry replaces this one
    await engine.journal.upload_done(dest)
    return None, {}


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
    dest = backend.url(upload.key)
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
        await engine.journal.upload_part(
            dest, upload.upload_id, part.number, result.etag, result.size, result.checksum
        )
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
