"""Moving one file: upload (single put or multipart) and download (ranged GETs).

Both directions follow the same shape: reserve a part's bytes in the budget,
*then* create the part's task, so tasks and memory stay bounded however big
the file is. Each byte of a source file is read once, and its checksum is
computed in the same worker-thread call that read it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from .._exceptions import IntegrityError, PreconditionFailed, SourceChangedError
from .._models import CompletedPart, MultipartUpload, ObjectInfo, WriteOptions
from ..backend import Backend
from .core import Engine
from .localfile import LocalFile, identity, temp_path_for
from .meta import MTIME_KEY, PART_SIZE_KEY, format_mtime, stored_mtime, stored_part_size
from .parts import etag_parts, multipart_etag, part_ranges, plan_part_size

__all__ = ["download_object", "upload_path"]

log = logging.getLogger("synxfer")

#: Seconds allowed for aborting a multipart upload during cleanup.
_ABORT_TIMEOUT = 60.0


# -- upload --------------------------------------------------------------------


async def upload_path(engine: Engine, path: Path, backend: Backend, key: str) -> int:
    """Upload the local file ``path`` to ``key``; returns the bytes sent.

    The file's identity (device, inode, size, mtime) is taken when it is
    opened and checked again after the last byte is read and before the
    object is committed; if it changed, nothing is committed.
    """
    caps = backend.capabilities
    cfg = engine.config
    f = await LocalFile.open(path, os.O_RDONLY, engine.executor)
    try:
        st = await f.fstat()
        size = st.st_size
        before = identity(st)
        metadata = {MTIME_KEY: format_mtime(st.st_mtime_ns)}

        async def check_unchanged() -> None:
            now = identity(await f.fstat())
            try:
                on_disk = await asyncio.get_running_loop().run_in_executor(
                    engine.executor, os.stat, path
                )
            except FileNotFoundError:
                on_disk = None
            if now != before or on_disk is None or identity(on_disk)[:2] != before[:2]:
                raise SourceChangedError(
                    f"{path} changed while it was being uploaded; nothing was committed "
                    f"for it -- run the command again to send the new version"
                )

        multipart = caps.multipart and (
            size >= cfg.multipart_threshold or size > caps.max_single_put
        )
        if not multipart:
            metadata[PART_SIZE_KEY] = "0"
            granted = await engine.budget.acquire(size)
            buf = engine.buffers.get(size)
            try:
                n, checksum = await f.read_into(buf, 0, caps.part_checksum)
                if n != size:
                    raise SourceChangedError(f"{path} shrank while it was being uploaded")
                await check_unchanged()
                await backend.put(key, buf, WriteOptions(metadata), checksum)
            finally:
                engine.buffers.put(buf)
                engine.budget.release(granted)
            engine.progress(size)
            return size

        part_size = plan_part_size(size, cfg.part_size, caps)
        metadata[PART_SIZE_KEY] = str(part_size)
        upload = await backend.create_multipart(key, WriteOptions(metadata))
        try:
            parts = await _send_parts(engine, f, backend, upload, size, part_size)
            await check_unchanged()
            await backend.complete_multipart(upload, parts)
        except BaseException:
            await _abort(backend, upload)
            raise
        return size
    finally:
        await f.close()


async def _send_parts(
    engine: Engine,
    f: LocalFile,
    backend: Backend,
    upload: MultipartUpload,
    size: int,
    part_size: int,
) -> list[CompletedPart]:
    algorithm = backend.capabilities.part_checksum
    ranges = part_ranges(size, part_size)
    done: list[CompletedPart | None] = [None] * len(ranges)

    async def send(index: int, offset: int, length: int, granted: int) -> None:
        buf = engine.buffers.get(length)
        try:
            n, checksum = await f.read_into(buf, offset, algorithm)
            if n != length:
                raise SourceChangedError(f"{f.path} shrank while it was being uploaded")
            done[index] = await backend.upload_part(upload, index + 1, buf, checksum)
        finally:
            engine.buffers.put(buf)
            engine.budget.release(granted)
        engine.progress(length)

    async with asyncio.TaskGroup() as tg:
        for index, (offset, length) in enumerate(ranges):
            # Reserve the part's memory before its task exists: back-pressure.
            granted = await engine.budget.acquire(length)
            tg.create_task(send(index, offset, length, granted))
    return [p for p in done if p is not None]


async def _abort(backend: Backend, upload: MultipartUpload) -> None:
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


# -- download ------------------------------------------------------------------


async def download_object(
    engine: Engine,
    backend: Backend,
    key: str,
    dest: Path,
    size: int,
    etag: str | None = None,
    on_info: Callable[[ObjectInfo], None] | None = None,
) -> int:
    """Download ``key`` (expected ``size`` bytes) to ``dest``; returns bytes written.

    Parts are written with positional writes into a hidden temp file beside
    ``dest``, checked, given the source's mtime, then renamed over ``dest``
    atomically. On any failure the temp file is removed: no file that looks
    whole is ever left behind. Every ranged GET after the first carries the
    first response's ETag (If-Match), so an object replaced mid-download is
    detected instead of stitched together.
    """
    cfg = engine.config
    caps = backend.capabilities
    loop = asyncio.get_running_loop()
    part_size = plan_part_size(size, cfg.part_size, caps) if caps.ranged_reads else max(size, 1)
    ranges = part_ranges(size, part_size)

    await loop.run_in_executor(engine.executor, _makedirs, dest.parent)
    tmp = temp_path_for(dest)
    f = await LocalFile.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, engine.executor)
    committed = False
    try:
        await f.allocate(size)
        digests: list[bytes | None] = [None] * len(ranges)

        # The first part tells us the object's etag and metadata.
        length0 = ranges[0][1]
        granted = await engine.budget.acquire(length0)
        try:
            res = await backend.read(key, 0, None if len(ranges) == 1 else length0, if_match=etag)
            info = res.info
            if info.size != size:
                raise PreconditionFailed(
                    f"changed on the server during the download (size {size} -> {info.size}); "
                    f"run the command again",
                    url=backend.url(key),
                )
            _check_length(backend, key, 0, length0, res.data)
            digests[0] = await f.write(0, res.data, md5=True)
            del res
        finally:
            engine.budget.release(granted)
        engine.progress(length0)
        if on_info is not None:
            on_info(info)

        verify = _expected_etag_parts(info, size, part_size, len(ranges))
        if_match = info.etag or etag

        async def fetch(index: int, offset: int, length: int, granted: int) -> None:
            try:
                r = await backend.read(key, offset, length, if_match=if_match)
                _check_length(backend, key, offset, length, r.data)
                digests[index] = await f.write(offset, r.data, md5=verify is not None)
                del r
            finally:
                engine.budget.release(granted)
            engine.progress(length)

        if len(ranges) > 1:
            async with asyncio.TaskGroup() as tg:
                for index, (offset, length) in enumerate(ranges[1:], start=1):
                    g = await engine.budget.acquire(length)
                    tg.create_task(fetch(index, offset, length, g))

        if verify is not None:
            _verify_etag(backend, key, info.etag, verify, digests)

        mtime_ns = stored_mtime(info.metadata)
        if mtime_ns is None and info.mtime is not None:
            mtime_ns = int(info.mtime * 1_000_000_000)
        await f.finish(mtime_ns)
        await f.close()
        await loop.run_in_executor(engine.executor, os.replace, tmp, dest)
        committed = True
        return size
    finally:
        if not committed:
            await f.close()
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _makedirs(path: Path) -> None:
    os.makedirs(path, exist_ok=True)


def _check_length(backend: Backend, key: str, offset: int, length: int, data: bytes) -> None:
    if len(data) != length:
        raise IntegrityError(
            f"{backend.url(key)}: expected {length} bytes at offset {offset}, got {len(data)}"
        )


def _expected_etag_parts(info: ObjectInfo, size: int, part_size: int, nranges: int) -> int | None:
    """How the ETag can be checked: 0 = plain MD5, N = N-part MD5, None = cannot.

    Only objects synxfer uploaded (they carry ``synxfer-part-size``) are
    checked: for them the ETag is known to be MD5-based on S3-compatible
    stores without KMS encryption, and the ranges line up with the parts.
    """
    stored = stored_part_size(info.metadata)
    n = etag_parts(info.etag)
    if stored is None or n is None:
        return None
    if n == 0 and stored == 0 and nranges == 1:
        return 0
    if n > 0 and stored == part_size and n == nranges and size > 0:
        return n
    return None


def _verify_etag(
    backend: Backend, key: str, etag: str | None, parts: int, digests: list[bytes | None]
) -> None:
    got = [d for d in digests if d is not None]
    if len(got) != len(digests):
        raise IntegrityError(f"{backend.url(key)}: a part was not checksummed")
    actual = got[0].hex() if parts == 0 else multipart_etag(got)
    if actual != etag:
        raise IntegrityError(
            f"{backend.url(key)}: downloaded data does not match the object's ETag "
            f"({actual} != {etag}); the partial download was discarded"
        )


def md5_file_etag(path: Path, part_size: int, parts: int) -> str:
    """The S3-style ETag of a local file (blocking; run in a worker thread).

    ``parts == 0`` gives the plain MD5; otherwise the md5-of-part-md5s form.
    Used by ``--checksum`` comparisons.
    """
    with open(path, "rb") as fh:
        if parts == 0:
            h = hashlib.md5(usedforsecurity=False)
            while chunk := fh.read(1 << 20):
                h.update(chunk)
            return h.hexdigest()
        digests = []
        while True:
            h = hashlib.md5(usedforsecurity=False)
            remaining = part_size
            while remaining:
                chunk = fh.read(min(remaining, 1 << 20))
                if not chunk:
                    break
                h.update(chunk)
                remaining -= len(chunk)
            if remaining == part_size:
                break
            digests.append(h.digest())
            if remaining:
                break
        return multipart_etag(digests)
