"""Object tags on S3: the ``x-amz-tagging`` header of a new object, and
GetObjectTagging / PutObjectTagging for a copy in parts.

A copy keeps the source's tags: CopyObject does so by itself (its
``x-amz-tagging-directive`` is COPY unless tags are given, then REPLACE),
but UploadPartCopy copies bytes only. So, as aws-cli does
(``SetTagsSubscriber``), a copy in parts reads the source's tags and sends
them on CreateMultipartUpload when they fit the 2 KiB S3 allows that
header, else sets them with PutObjectTagging once the copy is complete.
"""

from __future__ import annotations

import asyncio
import logging
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

from synxfer import BackendError

from ._wire import b64md5

if TYPE_CHECKING:
    from ._core import S3Wire

__all__ = [
    "MAX_TAGGING_HEADER",
    "ensure_tags",
    "get_object_tagging",
    "keep_tags",
    "put_object_tagging",
    "tagging_body",
    "tagging_header",
    "tags_to_keep",
]

_log = logging.getLogger("synxfer.s3")

#: The largest ``x-amz-tagging`` header S3 takes (aws-cli's limit too).
MAX_TAGGING_HEADER = 2 * 1024


def tagging_header(tags: Mapping[str, str]) -> str:
    """``k=v&k2=v2``, each part URL-encoded (a space is ``%20``), as S3 wants."""
    return "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in tags.items())


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def tagging_body(tags: Mapping[str, str]) -> bytes:
    """The ``<Tagging>`` document of PutObjectTagging."""
    items = "".join(
        f"<Tag><Key>{_escape(k)}</Key><Value>{_escape(v)}</Value></Tag>" for k, v in tags.items()
    )
    return f"<Tagging><TagSet>{items}</TagSet></Tagging>".encode()


def parse_tagging(data: bytes | bytearray) -> dict[str, str]:
    """The tags of a GetObjectTagging answer (namespaced or not); an empty
    answer has none (Ceph RGW 16 sends no body for an object without tags)."""
    if not bytes(data).strip():
        return {}
    try:
        root = ET.fromstring(bytes(data))
    except ET.ParseError as exc:
        raise ValueError(f"unparseable Tagging XML: {exc}") from None
    tags: dict[str, str] = {}
    for elem in root.iter():
        if elem.tag.rsplit("}", 1)[-1] != "Tag":
            continue
        key = value = None
        for child in elem:
            name = child.tag.rsplit("}", 1)[-1]
            if name == "Key":
                key = child.text or ""
            elif name == "Value":
                value = child.text or ""
        if key is not None:
            tags[key] = value or ""
    return tags


async def get_object_tagging(wire: S3Wire, bucket: str, key: str) -> dict[str, str]:
    """GetObjectTagging: the object's tags (none: ``{}``)."""
    response = await wire._request(
        "GetObjectTagging", "GET", bucket, key, query=(("tagging", None),)
    )
    try:
        return parse_tagging(response.body)
    except ValueError as exc:
        raise BackendError(f"GetObjectTagging: {exc}", url=wire.url(bucket, key)) from None


async def put_object_tagging(wire: S3Wire, bucket: str, key: str, tags: Mapping[str, str]) -> None:
    """PutObjectTagging (with the Content-MD5 S3 requires of it)."""
    body = tagging_body(tags)
    md5 = await asyncio.to_thread(b64md5, body)
    await wire._request(
        "PutObjectTagging",
        "PUT",
        bucket,
        key,
        query=(("tagging", None),),
        headers={"content-md5": md5},
        body=body,
    )


async def ensure_tags(wire: S3Wire, bucket: str, key: str, tags: Mapping[str, str]) -> bool:
    """Make a copy's tags the ones given: Ceph RGW 16 ignores CopyObject's
    ``x-amz-tagging-directive: REPLACE`` and keeps the source's (measured),
    so they are read back and, where they differ, set with PutObjectTagging.
    True when they had to be set so (said in the DEBUG log)."""
    if await get_object_tagging(wire, bucket, key) == dict(tags):
        return False
    await put_object_tagging(wire, bucket, key, tags)
    _log.debug(
        "%s: the store kept the source's tags on a copy with new ones (REPLACE "
        "ignored); set them with PutObjectTagging",
        wire.url(bucket, key),
    )
    return True


#: Per endpoint: whether CopyObject with ``x-amz-metadata-directive: REPLACE``
#: keeps the source's tags (S3, stock moto, SeaweedFS) or drops them (Ceph
#: RGW 16, measured). Learned on the first such copy of a tagged object.
_KEEPS_TAGS: dict[str, bool] = {}


async def tags_to_keep(wire: S3Wire, src_bucket: str, src_key: str) -> dict[str, str] | None:
    """Before a CopyObject that replaces metadata and gives no tags (every
    copy synxfer's engine makes: it keeps the source's mtime): the source's
    tags, unless the endpoint is known to keep them itself (None then).
    Until a copy of a tagged object has shown what an endpoint other than
    AWS's does, this costs a GetObjectTagging per copy."""
    if _KEEPS_TAGS.get(wire.endpoint_url):
        return None
    host = urlsplit(wire.endpoint_url).hostname or ""
    if host.endswith((".amazonaws.com", ".amazonaws.com.cn")):
        return None  # S3 itself keeps them: no request to learn it
    return await get_object_tagging(wire, src_bucket, src_key) or None


async def keep_tags(wire: S3Wire, bucket: str, key: str, tags: Mapping[str, str]) -> None:
    """After such a copy: where the endpoint is known to drop the source's
    ``tags``, set them; where it is not known yet, look and learn."""
    endpoint = wire.endpoint_url
    if endpoint not in _KEEPS_TAGS:
        kept = await get_object_tagging(wire, bucket, key) == dict(tags)
        _KEEPS_TAGS[endpoint] = kept
        if kept:
            return
        _log.info(
            "%s drops a copy's tags when its metadata is replaced (Ceph RGW 16 does): "
            "synxfer sets them after each copy",
            endpoint,
        )
    await put_object_tagging(wire, bucket, key, tags)
