"""Server-side copy: CopyObject, or UploadPartCopy in parts for big objects.

The source is in the backend's bucket (``copy``) or in another bucket the
same endpoint serves with the same credentials (``copy_from``).

``copy`` is in the S3 backend's ``capabilities.fan_out``: the scheduler
holds no request slot around it, and every request sent here (the HEAD of
the source, CopyObject or create / each UploadPartCopy / complete / abort)
takes one slot of ``options.requests``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING

from synxfer import CompletedPart, ConfigError, ObjectInfo, WriteOptions
from synxfer.backend import bounded_map

from ._chosen import note_copy
from ._tagging import (
    MAX_TAGGING_HEADER,
    ensure_tags,
    get_object_tagging,
    keep_tags,
    put_object_tagging,
    tagging_header,
    tags_to_keep,
)

if TYPE_CHECKING:
    from ._backend import S3Backend

__all__ = ["copy_object"]


async def copy_object(
    backend: S3Backend, src_bucket: str, src_key: str, dst_key: str, options: WriteOptions
) -> ObjectInfo:
    """Copy ``src_key`` of ``src_bucket`` to ``dst_key`` in ``backend``'s bucket
    (see ``S3Backend.copy`` and ``S3Backend.copy_from``)."""
    requests = backend.options.requests
    async with requests.slot():
        if src_bucket == backend.bucket:
            src = await backend.stat(src_key)
        else:
            src = await backend.wire.head_object(src_bucket, src_key)
    # Stored headers (metadata, content type, Cache-Control...) are replaced
    # when any is given; storage class, encryption and ACL apply either way.
    replace = bool(
        options.metadata
        or options.content_type
        or options.cache_control
        or options.content_encoding
        or options.content_disposition
    )
    metadata = dict(options.metadata) if replace else dict(src.metadata)
    content_type = options.content_type if replace else src.content_type
    if src.size > backend.max_copy_size:
        if options.checksum_algorithm is not None:
            raise ConfigError(
                f"{backend.url(dst_key)}: a server-side copy of more than "
                f"{backend.max_copy_size} bytes goes in parts, which take no "
                f"WriteOptions(checksum_algorithm=...): leave it out for this copy"
            )
        given = dataclasses.replace(options, metadata=metadata, content_type=content_type)
        return await _copy_in_parts(backend, src_bucket, src, dst_key, given)
    keep: dict[str, str] | None = None
    if replace and not options.tags:  # Ceph RGW 16 drops tags on a metadata REPLACE
        async with requests.slot():
            keep = await tags_to_keep(backend.wire, src_bucket, src_key)
    async with requests.slot():
        result = await backend.wire.copy_object(
            backend.bucket,
            dst_key,
            src_bucket,
            src_key,
            if_match=src.etag,
            metadata=metadata,
            content_type=content_type,
            replace_metadata=replace,
            options=options,
        )
    if options.tags:  # Ceph RGW 16 ignores the REPLACE tagging directive
        async with requests.slot():
            await ensure_tags(backend.wire, backend.bucket, dst_key, options.tags)
    elif keep:
        async with requests.slot():
            await keep_tags(backend.wire, backend.bucket, dst_key, keep)
    note_copy(backend, dst_key, options, result.checksums)
    return ObjectInfo(
        key=dst_key,
        size=src.size,
        mtime=result.mtime,
        etag=result.etag,
        metadata=metadata,
        content_type=content_type,
    )


async def _copy_in_parts(
    backend: S3Backend, src_bucket: str, src: ObjectInfo, dst_key: str, options: WriteOptions
) -> ObjectInfo:
    part_size = backend.copy_part_size_for(src.size)
    requests = backend.options.requests  # one slot per request (see the module docstring)
    wire, bucket = backend.wire, backend.bucket
    late_tags: dict[str, str] = {}  # set once complete (see ._tagging)
    if not options.tags:  # UploadPartCopy copies no tags: the source's, as CopyObject keeps them
        async with requests.slot():
            tags = await get_object_tagging(wire, src_bucket, src.key)
        if tags:
            try:
                if len(tagging_header(tags)) > MAX_TAGGING_HEADER:
                    raise ConfigError("too long for the x-amz-tagging header")
                options = dataclasses.replace(options, tags=tags)
            except ConfigError:  # too long, or tags another store took and S3 would not
                late_tags = tags
    async with requests.slot():
        # No checksum declared: the parts are the server's own copies.
        upload = await backend._create(dst_key, options, checksums=False)

    async def copy_part(part: tuple[int, int]) -> CompletedPart:
        number, first = part
        last = min(first + part_size, src.size) - 1
        async with requests.slot():
            result = await wire.upload_part_copy(
                bucket,
                dst_key,
                upload.upload_id,
                number,
                src_bucket,
                src.key,
                first=first,
                last=last,
                if_match=src.etag or "*",
            )
        return CompletedPart(number, result.etag or "", last - first + 1)

    try:
        parts = await bounded_map(
            copy_part,
            enumerate(range(0, src.size, part_size), start=1),
            max(1, min(8, backend.options.max_connections)),
        )
        async with requests.slot():
            info = await backend.complete_multipart(upload, parts)
        if late_tags:
            async with requests.slot():
                await put_object_tagging(wire, bucket, dst_key, late_tags)
    except BaseException:
        with contextlib.suppress(Exception):
            async with requests.slot():
                await backend.abort_multipart(upload)
        raise
    return ObjectInfo(
        key=dst_key,
        size=src.size,
        mtime=info.mtime,
        etag=info.etag,
        metadata=options.metadata,
        content_type=options.content_type,
    )
