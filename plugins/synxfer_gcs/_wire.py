"""The GCS JSON API's wire format: object resources, media headers, upload bodies.

Pure functions (no I/O): object resources and media-response headers to
:class:`~synxfer.ObjectInfo`, :class:`~synxfer.WriteOptions` to a resource,
and the ``multipart/related`` body of an upload, streamed without copying
the payload.

**Times.** synxfer's engine hands every backend the source file's time as
metadata ``mtime`` in decimal seconds (``1700000000.123456789``, rclone's
form on S3). On GCS rclone writes and reads ``mtime`` in RFC 3339 with
nanoseconds (Go's ``RFC3339Nano``, e.g. ``2023-11-14T22:13:20.123456789Z``),
so this backend stores it that way (:func:`stored_metadata`) and gives the
engine decimal seconds back (:func:`read_metadata`) whichever form an object
carries: RFC 3339 with any offset, decimal (objects synxfer wrote
before it switched), or, when there is no ``mtime``, gsutil's
``goog-reserved-file-mtime`` (whole seconds), which rclone reads too.
"""

from __future__ import annotations

import calendar
import contextlib
import json
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from synxfer import BackendError, ConfigError, ObjectInfo, WriteOptions

__all__ = [
    "OCTET",
    "OPTION_FIELDS",
    "content_type",
    "info_from_headers",
    "multipart_related",
    "object_info",
    "parse_json_body",
    "read_metadata",
    "resource",
    "rfc3339_seconds",
    "stored_metadata",
]

OCTET = "application/octet-stream"
#: WriteOptions fields this backend honours beside metadata and the content
#: type, and their names in an object resource. (``content_encoding`` is not
#: among them: GCS would transcode gzip-encoded objects on download, so their
#: bytes would no longer match their size and checksums.)
OPTION_FIELDS = {
    "storage_class": "storageClass",
    "cache_control": "cacheControl",
    "content_disposition": "contentDisposition",
}
_GOOG_HASH = re.compile(r"^\s*(crc32c|md5)=([A-Za-z0-9+/=]+)\s*$")

#: The metadata key of the source's modification time (synxfer's and rclone's).
MTIME = "mtime"
#: gsutil's: whole seconds since the epoch.
GSUTIL_MTIME = "goog-reserved-file-mtime"
_DECIMAL = re.compile(r"^(-?\d+)(?:\.(\d{1,9}))?$")
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))$"
)


def parse_json_body(status: int, content: bytes | bytearray, url: str) -> dict[str, Any]:
    """The JSON object of an answer's body; BackendError naming ``url`` if none."""
    try:
        doc = json.loads(content)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BackendError(
            f"unparseable response from the server (HTTP {status})", url=url
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
    metadata = read_metadata(
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
        mtime=rfc3339_seconds(doc.get("updated")),
        etag=str(generation) if generation is not None else None,
        metadata=metadata,
        content_type=doc.get("contentType") or None,
        checksums=checksums,
    )


def info_from_headers(key: str, headers: Mapping[str, str], size: int) -> ObjectInfo | None:
    """The object's info from a media response, or None without generation and CRC32C.

    ``headers``: lower-case names, a repeated header's values joined by
    ``", "`` (GCS sends ``x-goog-hash`` twice: crc32c and md5).
    """
    generation = headers.get("x-goog-generation", "").strip()
    hashes = _parse_goog_hash([headers.get("x-goog-hash", "")])
    if not generation.isdigit() or "crc32c" not in hashes:
        return None
    metadata = read_metadata(
        {
            name[len("x-goog-meta-") :]: value
            for name, value in headers.items()
            if name.lower().startswith("x-goog-meta-")
        }
    )
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
        doc["metadata"] = stored_metadata(options.metadata)
    doc.update(option_fields(options))
    return doc


def option_fields(options: WriteOptions) -> dict[str, str]:
    """The resource fields of ``options``' storage class, Cache-Control and
    Content-Disposition (those set)."""
    return {
        name: value
        for field, name in OPTION_FIELDS.items()
        if (value := getattr(options, field)) is not None
    }


def stored_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """Metadata as stored on GCS: ``mtime`` in RFC 3339 (rclone's form).

    A value that is not decimal seconds is stored as given.
    """
    stored = dict(metadata)
    ns = _decimal_ns(stored.get(MTIME, ""))
    if ns is not None:
        stored[MTIME] = format_rfc3339(ns)
    return stored


def read_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """Metadata as the engine reads it: ``mtime`` in decimal seconds.

    From RFC 3339 (rclone's, and synxfer's now), decimal (synxfer's
    older objects: kept as is), or gsutil's ``goog-reserved-file-mtime``
    when there is no ``mtime``. A value none of these parse is left alone.
    """
    result = dict(metadata)
    value = result.get(MTIME)
    if value is not None:
        ns = parse_rfc3339(value)
        if ns is not None:
            result[MTIME] = _decimal(ns)
        return result
    gsutil = result.get(GSUTIL_MTIME, "").strip()
    if _DECIMAL.match(gsutil) and "." not in gsutil:
        result[MTIME] = _decimal(int(gsutil) * 1_000_000_000)
    return result


def format_rfc3339(ns: int) -> str:
    """Nanoseconds since the epoch as Go's ``RFC3339Nano`` in UTC (no trailing zeros)."""
    sec, frac = divmod(ns, 1_000_000_000)
    text = datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        text += "." + f"{frac:09d}".rstrip("0")
    return text + "Z"


def parse_rfc3339(value: str) -> int | None:
    """Nanoseconds since the epoch from RFC 3339 (any offset, up to 9 digits); else None."""
    m = _RFC3339.match(value.strip())
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    try:
        datetime(year, month, day, hour, minute, min(second, 59))  # validates the date
    except ValueError:
        return None
    sec = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    if not m.group(8):
        offset = (int(m.group(10)) * 60 + int(m.group(11))) * 60
        sec -= offset if m.group(9) == "+" else -offset
    frac = int((m.group(7) or "0").ljust(9, "0"))
    return sec * 1_000_000_000 + frac


def _decimal_ns(value: str) -> int | None:
    m = _DECIMAL.match(value.strip())
    if m is None:
        return None
    whole = abs(int(m.group(1))) * 1_000_000_000 + int((m.group(2) or "0").ljust(9, "0"))
    return -whole if m.group(1).startswith("-") else whole


def _decimal(ns: int) -> str:
    """Decimal seconds, sign and magnitude, no trailing zeros (``-1.5`` s is ``-1.5``).

    The shortest form, so a time written as ``1700000000.5`` reads back
    exactly so; the engine parses any number of digits up to nine.
    """
    sec, frac = divmod(abs(ns), 1_000_000_000)
    text = f"{'-' if ns < 0 else ''}{sec}"
    return f"{text}.{f'{frac:09d}'.rstrip('0')}" if frac else text


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


def rfc3339_seconds(value: object) -> float | None:
    """Seconds since the epoch of an RFC 3339 time in a resource (None if absent or bad)."""
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
