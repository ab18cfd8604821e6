"""Copying one object between two remote locations, never touching local disk.

Within one bucket, the backend copies server-side (S3 CopyObject or
UploadPartCopy, GCS rewrite): no byte crosses the client. Between backends
(s3 → gs, or two buckets), ranged reads of the source feed part uploads to
the destination through memory, under the client's limits: parts go through
the scheduler (:meth:`~.scheduler.Scheduler.map_parts`), which reserves each
part's bytes before its task exists, so an object of any size costs at most
the budget.

Checksums are reconciled at both ends. Each part carries the checksum the
destination asks for (computed in a worker thread from the buffer being
sent, which the destination verifies); the stream is checked against what
the source vouches for (its S3-style ETag or ``checksums``) before the
upload is committed, and against what the destination reports afterwards.
"""

from __future__ import annotations

import base64
import hashlib
import logging

from .._exceptions import IntegrityError, PreconditionFailed
from .._models import CompletedPart, ObjectInfo, WriteOptions
from ..backend import Backend, Checksum, ChecksumAlgorithm
from .core import Engine
from .download import PartSums
from .meta import MTIME_KEY, PART_SIZE_KEY, copy_options, format_mtime
from .parts import Part, checksum_of, crc32c_value, have_crc32c, plan_part_size, split
from .scheduler import Lease
from .upload import abort_upload

__all__ = ["copy_object"]

log = logging.getLogger("synxfer")


async def copy_object(
    engine: Engine,
    src: Backend,
    src_key: str,
    dst: Backend,
    dst_key: str,
    size: int,
    etag: str | None = None,
    *,
    options: WriteOptions | None = None,
) -> int:
    """Copy ``src_key`` (``size`` bytes) to ``dst_key``; returns bytes streamed.

    The copy keeps the source's content type and metadata, with ``options``
    (None: ``TransferConfig.write_options``) over them (see
    :func:`~.meta.copy_options`).
    """
    base = engine.config.write_options if options is None else options
    if src is dst and src.capabilities.server_side_copy:
        info = await src.stat(src_key)
        await dst.copy(src_key, dst_key, copy_options(base, info, {}))
        return 0
    return await _stream(engine, src, src_key, dst, dst_key, size, etag, base)


def _sum_part(
    data: bytes, algorithm: ChecksumAlgorithm | None, md5: bool, crc: bool
) -> tuple[Checksum | None, bytes | None, int | None]:
    """The destination's part checksum plus the sums the source check needs (one thread hop)."""
    return (
        checksum_of(algorithm, data),
        hashlib.md5(data, usedforsecurity=False).digest() if md5 else None,
        crc32c_value(data) if crc else None,
    )


async def _stream(
    engine: Engine,
    src: Backend,
    src_key: str,
    dst: Backend,
    dst_key: str,
    size: int,
    etag: str | None,
    base: WriteOptions,
) -> int:
    cfg = engine.config
    caps = dst.capabilities
    scheduler = engine.scheduler
    multipart = caps.multipart and (size >= cfg.multipart_threshold or size > caps.max_single_put)
    part_size = plan_part_size(size, cfg.part_size, caps) if multipart else max(size, 1)
    if not src.capabilities.ranged_reads:
        part_size = max(size, 1)  # one read of the whole object, clamped by the budget
        multipart = multipart and size <= caps.max_single_put
    parts = split(size, part_size)
    lengths = [part.length for part in parts]
    sums = PartSums(len(parts))
    algorithm = caps.part_checksum
    url = src.url(src_key)

    async def fetch(part: Part, if_match: str | None) -> tuple[bytes, ObjectInfo, Checksum | None]:
        offset, length = part.offset, part.length
        res = await src.read(src_key, offset, length or None, if_match=if_match)
        if len(res.data) != length:
            raise IntegrityError(
                f"{url}: expected {length} bytes at offset {offset}, got {len(res.data)}"
            )
        if part.index == 0:
            if res.info.size != size:
                raise PreconditionFailed(
                    f"changed during the copy (size {size} -> {res.info.size})", url=url
                )
            sums.plan(res.info, size, part_size)
            # The destination's whole-object CRC32C is checked after the copy.
            sums.want_crc = sums.want_crc or (algorithm == "crc32c" and have_crc32c())
        checksum, md5, crc = await scheduler.io(
            _sum_part, res.data, algorithm, sums.want_md5, sums.want_crc
        )
        sums.record(part.index, md5, crc)
        engine.progress(length, "down")
        return res.data, res.info, checksum

    # The first range carries the source's metadata, which the new object needs.
    async with scheduler.reserve(parts[0].length):
        data, info, checksum = await fetch(parts[0], etag)
        options = copy_options(base, info, _metadata(info, part_size if multipart else 0))
        if not multipart:
            sums.verify(url, info, lengths)
            result = await dst.put(dst_key, data, options, checksum)
            engine.progress(len(data), "up")
            await _reconcile(dst, dst_key, result, sums, lengths)
            return size
        # Orphans of a retried create are the retry layer's business.
        upload = await dst.create_multipart(dst_key, options)
        try:
            first = await dst.upload_part(upload, 1, data, checksum)
        except BaseException:
            await abort_upload(dst, upload)
            raise
        engine.progress(len(data), "up")
        del data

    done: dict[int, CompletedPart] = {1: first}
    if_match = info.etag or etag

    async def move(part: Part, lease: Lease) -> None:
        chunk, _, part_checksum = await fetch(part, if_match)
        done[part.number] = await dst.upload_part(upload, part.number, chunk, part_checksum)
        engine.progress(len(chunk), "up")

    try:
        await scheduler.map_parts(parts[1:], move)
        sums.verify(url, info, lengths)  # before anything is committed
        result = await dst.complete_multipart(upload, [done[n] for n in sorted(done)])
    except BaseException:
        await abort_upload(dst, upload)
        raise
    await _reconcile(dst, dst_key, result, sums, lengths)
    return size


def _metadata(info: ObjectInfo, part_size: int) -> dict[str, str]:
    """synxfer's metadata of the copy: a source time even if the source had none
    stored, and the copy's part size (the rest of the source's is kept by
    :func:`~.meta.copy_options`)."""
    metadata: dict[str, str] = {}
    if MTIME_KEY not in info.metadata and info.mtime is not None:
        metadata[MTIME_KEY] = format_mtime(int(info.mtime * 1_000_000_000))
    metadata[PART_SIZE_KEY] = str(part_size)
    return metadata


async def _reconcile(
    dst: Backend,
    dst_key: str,
    result: ObjectInfo,
    sums: PartSums,
    lengths: list[int],
) -> None:
    """Check what the destination vouches for against what was streamed.

    A mismatch means the destination holds something other than the bytes
    read: the object is deleted, so nothing wrong stays visible.
    """
    reported = result.checksums or (await dst.stat(dst_key)).checksums
    checks: list[tuple[str, str | None, str]] = []
    if "crc32c" in reported:
        checks.append(("CRC32C", sums.crc32c_b64(lengths), reported["crc32c"]))
    digests = sums.md5s()
    if "md5" in reported and digests is not None and len(digests) == 1:
        checks.append(("MD5", base64.b64encode(digests[0]).decode(), reported["md5"]))
    for what, streamed, stored in checks:
        if streamed is not None and streamed != stored:
            await dst.delete(dst_key)
            raise IntegrityError(
                f"{dst.url(dst_key)}: the destination's {what} ({stored}) does not match the "
                f"bytes copied ({streamed}); the copy was deleted"
            )
