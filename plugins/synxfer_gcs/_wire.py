"""The GCS JSON API's wire format: object resources, media headers, upload bodies.

Pure functions (no I/O): object resources and media-response headers to
:class:`~synxfer.ObjectInfo`, :class:`~synxfer.WriteOptions` to a resource,
and the ``multipart/related`` body of an upload, streamed without copying
the payload.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from synxfer.backend import BackendError, ConfigError, ObjectInfo, Payload, WriteOptions

__all__ = [
    "OCTET",
    "content_type",
    "info_from_headers",
    "multipart_related",
    "object_info",
    "parse_json",
    "resource",
    "stream_body",
]

OCTET = "application/octet-stream"
_GOOG_HASH = re.compile(r"^\s*(crc32c|md5)=([A-Za-z0-9+/=]+)\s*$")
#: Slice of the payload handed to the connection at a time.
_SEND_SLICE = 1 << 20


def parse_json(response: httpx.Response, url: str) -> dict[str, Any]:
    """The JSON object a (read) response holds; BackendError naming ``url`` if none."""
    try:
        doc = json.loads(response.content)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BackendError(
            f"unparseable response from the server (HTTP {response.status_code})", url=url
        ) from exc
    if not isinstance(doc, dict):
        raise BackendError("unexpected response from the server", url=url)
    return doc


def object_info(doc: Mapping[str, Any], key: str | None, url: Callable[[str], str]) -> ObjectInfo:
    """ObjectInfo from a GCS object resource (its generation is the ETag)."""
    name = str(doc.get("name", key or ""))
    try:
        size = int(doc.get("size", 0))
    except (TypeError, ValueError) as exc:
        raise BackendError(f"bad size {doc.get('size')!r}", url=url(name)) from exc
    raw_meta = doc.get("metadata")
    metadata = (
        {str(k): "" if v is None else str(v) for k, v in raw_meta.items()}
        if isinstance(raw_meta, dict)
        else {}
    )
    checksums = {}
    if doc.get("crc32c"):
        checksums["crc32c"] = str(doc["crc32c"])
    if doc.get("md5Hash"):
        checksums["md5"] = str(doc["md5Hash"])
    generation = doc.get("generation")
    return ObjectInfo(
        key=name,
        size=size,
        mtime=_rfc3339(doc.get("updated")),
        etag=str(generation) if generation is not None else None,
        metadata=metadata,
        content_type=doc.get("contentType") or None,
        checksums=checksums,
    )


def info_from_headers(key: str, headers: httpx.Headers, size: int) -> ObjectInfo | None:
    """The object's info from a media response, or None without generation and CRC32C."""
    generation = headers.get("x-goog-generation", "").strip()
    hashes = _parse_goog_hash(headers.get_list("x-goog-hash"))
    if not generation.isdigit() or "crc32c" not in hashes:
        return None
    metadata = {
        name[len("x-goog-meta-") :]: value
        for name, value in headers.multi_items()
        if name.lower().startswith("x-goog-meta-")
    }
    mtime: float | None = None
    with contextlib.suppress(TypeError, ValueError, IndexError):
        mtime = parsedate_to_datetime(headers.get("last-modified", "")).timestamp()
    return ObjectInfo(
        key=key,
        size=size,
        mtime=mtime,
        etag=generation,
        metadata=metadata,
        content_type=headers.get("content-type") or None,
        checksums=hashes,
    )


def content_type(value: str | None) -> str:
    """The content type to store: ``value``, or ``application/octet-stream``."""
    if not value:
        return OCTET
    if "\r" in value or "\n" in value:
        raise ConfigError(f"invalid content type {value!r}")
    return value


def resource(key: str, options: WriteOptions) -> dict[str, Any]:
    """The object resource of a new object ``key`` written with ``options``."""
    doc: dict[str, Any] = {"name": key, "contentType": content_type(options.content_type)}
    if options.metadata:
        doc["metadata"] = dict(options.metadata)
    return doc


def multipart_related(doc: Mapping[str, Any]) -> tuple[bytes, bytes, str]:
    """What goes before and after the media in a ``uploadType=multipart``
    request body, and the request's Content-Type."""
    boundary = f"synxfer-{secrets.token_hex(16)}"
    media_type = str(doc.get("contentType") or OCTET)
    head = (
        f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n"
        f"{json.dumps(doc, separators=(',', ':'))}\r\n"
        f"--{boundary}\r\nContent-Type: {media_type}\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    return head, tail, f"multipart/related; boundary={boundary}"


async def stream_body(head: bytes, data: Payload, tail: bytes) -> AsyncIterator[bytes]:
    """The request body, streamed without copying the payload.

    Slices of the caller's buffer go out one at a time and each is drained to
    the socket before the next, so neither a joined copy of the body nor a
    part-sized transport buffer ever exists. Nothing references the buffer
    once the request finishes (or is cancelled), so the caller may reuse it.
    """
    yield head
    view = memoryview(data)
    for start in range(0, len(view), _SEND_SLICE):
        yield view[start : start + _SEND_SLICE]  # type: ignore[misc]
    yield tail


def _rfc3339(value: object) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _parse_goog_hash(values: Sequence[str]) -> dict[str, str]:
    hashes: dict[str, str] = {}
    for value in values:
        for item in value.split(","):
            m = _GOOG_HASH.match(item)
            if m:
                hashes[m.group(1)] = m.group(2)
    return hashes
