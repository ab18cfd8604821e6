"""Uploading one local file: a single put, or a multipart upload that can resume.

Parts go through the scheduler (:meth:`~.scheduler.Scheduler.map_parts`),
which reserves each part's bytes and lends it a pooled buffer before the
part's task exists, so tasks and memory stay bounded however big the file
is. Each byte of the file is read once, and its checksum is computed in the
same worker-thread call that read it.
"""

from __future__ import annotations

import asyncio
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
from .parts import Part, plan_part_size, split
from .prehash import PrePass, prehash_file, with_digests
from .scheduler import Lease

__all__ = ["abort_upload", "upload_path"]

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
        upload, done = await _resume_upload(engine, backend, key, path, before, part_size)
        if upload is None:
            # Orphans of a retried create are the retry layer's business.
            options = with_digests(upload_options(base, metadata, guessed), pre)
            upload = await backend.create_multipart(key, options)
            await _journal_new_upload(engine, backend, upload, path, before, part_size)
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
            await abort_upload(backend, upload)
            await engine.journal.upload_done(dest)
            raise
        await engine.journal.upload_done(dest)
        return sent
    finally:
        await f.close()


async def _journal_new_upload(
    engine: Engine,
    backend: Backend,
    upload: MultipartUpload,
    path: Path,
    ident: tuple[int, int, int, int],
    part_size: int,
) -> None:
    """Journal an upload just created, or abort it if that is interrupted.

    Until its journal row is known to be written, the upload is known to
    nothing but this call: a cancellation (or any error) here would leak it
    for ever. Whether the journal's thread wrote the row or not, the upload
    is then aborted (shielded, bounded in time) and the row removed.
    """
    dest = backend.url(upload.key)
    try:
        await engine.journal.upload_start(dest, str(path), ident, upload.upload_id, part_size)
    except BaseException:
        await abort_upload(backend, upload)
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
    path: Path,
    ident: tuple[int, int, int, int],
    part_size: int,
) -> tuple[MultipartUpload | None, dict[int, CompletedPart]]:
    """An upload of ``path`` to ``key`` left by an earlier run, and its parts
    that both the journal and the server (ListParts) hold with the same ETag.

    A journal entry for another file, another version of this one (size,
    mtime or inode differ) or another part size is stale: its upload is
    aborted and forgotten.
    """
    dest = backend.url(key)
    entry = await engine.journal.upload_get(dest)
    if entry is None:
        return None, {}
    upload = MultipartUpload(key, entry.upload_id)
    same = entry.src == str(path) and entry.identity == ident and entry.part_size == part_size
    if same and backend.capabilities.list_parts:
        try:
            on_server = {p.number: p for p in await backend.list_parts(upload)}
        except NotFound:
            on_server = None  # the upload was completed or aborted meanwhile
        if on_server is not None:
            done = {
                n: on_server[n]
                for n, (etag, size) in entry.parts.items()
                if n in on_server and (on_server[n].etag, on_server[n].size) == (etag, size)
            }
            log.info("resuming %s: %d part(s) already on the server", dest, len(done))
            return upload, done
    else:
        await abort_upload(backend, upload)
    await engine.journal.upload_done(dest)
    return None, {}


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
            dest, upload.upload_id, part.number, result.etag, result.size
        )
        engine.progress(part.length, "up")

    todo = (part for part in split(size, part_size) if part.number not in done)
    await engine.scheduler.map_parts(todo, send, sent_part)
    return sent


async def abort_upload(backend: Backend, upload: MultipartUpload) -> None:
    """Abort a multipart upload even while being cancelled; never raises."""
    try:
        async with asyncio.timeout(_ABORT_TIMEOUT):
            await asyncio.shield(backend.abort_multipart(upload))
    except BaseException as exc:
        log.warning(
            "could not abort multipart upload %s of %s: %s",
            upload.upload_id,
            backend.url(upload.key),
            exc,
        )
        if isinstance(exc, asyncio.CancelledError):
            raise
