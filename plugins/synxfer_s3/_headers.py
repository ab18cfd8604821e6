"""S3 request and answer headers: ETags, checksums, metadata, object info.

Checksums come in two kinds, and are reported under different names so no
reader mistakes one for the other:

* a **full-object** checksum (a single PUT's, or a multipart object's with
  ``x-amz-checksum-type: FULL_OBJECT``) is a checksum of the object's bytes,
  reported as its algorithm: ``{"crc32c": "…"}``;
* a **composite** checksum of a multipart object (S3's default for CRC32C
  parts: the checksum of the parts' checksums, written ``value-N``) is not
  a checksum of the bytes; it is reported as ``{"crc32c-composite":
  "value-N"}``. Two objects uploaded with the same part layout have equal
  composite values exactly when their parts are equal.

A checksum is composite when the answer says ``x-amz-checksum-type:
COMPOSITE``, when its value ends in ``-N``, or when no type is given and the
ETag is a multipart one (``…-N``): some servers (moto) send a part-derived
value of a multipart object with neither mark.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from urllib.parse import quote

from synxfer import BackendError, ObjectInfo

from ._xml import parse_http_date

__all__ = [
    "CHECKSUM_ALGORITHMS",
    "COMPOSITE_SUFFIX",
    "add_checksums",
    "b64md5",
    "check_header",
    "conditional_write",
    "copy_source",
    "etag_md5",
    "header_checksums",
    "object_info",
    "quote_etag",
    "result_checksums",
    "unquote_etag",
]

#: Checksum algorithms S3 takes in ``x-amz-checksum-<name>`` headers.
CHECKSUM_ALGORITHMS = ("crc32", "crc32c", "crc64nvme", "sha1", "sha256")
#: Appended to an algorithm's name for a composite (checksum-of-checksums) value.
COMPOSITE_SUFFIX = "-composite"

_META = "x-amz-meta-"
_MULTIPART_ETAG = re.compile(r"^[0-9a-fA-F]{32}-\d+$")
_PARTS_SUFFIX = re.compile(r"-\d+$")


def quote_etag(etag: str) -> str:
    return etag if etag.startswith('"') or etag == "*" else f'"{etag}"'


def unquote_etag(etag: str | None) -> str | None:
    return etag.strip('"') if etag else None


def conditional_write(if_none_match: bool) -> dict[str, str]:
    """The header of a write that must not replace an object
    (``WriteOptions.if_none_match``): S3 answers 412 PreconditionFailed
    when the key exists. Stock moto 5.2, SeaweedFS and AWS refuse such a
    PutObject and CompleteMultipartUpload; decision 0036 lists the
    servers measured and the HEAD that covers the rest."""
    return {"if-none-match": "*"} if if_none_match else {}


def copy_source(bucket: str, key: str) -> str:
    """``x-amz-copy-source``: ``bucket/key`` URL-encoded as S3 wants it."""
    return quote(f"{bucket}/{key}", safe="/~")


def b64md5(data: bytes | bytearray | memoryview) -> str:
    """Content-MD5 of ``data`` (call from a worker thread for anything but tiny bodies)."""
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode("ascii")


def check_header(what: str, value: str, url: str) -> None:
    """Refuse a value an HTTP header cannot carry, naming ``what`` and ``url``."""
    if not value.isascii() or not value.isprintable():
        raise BackendError(
            f"{what} cannot be sent as an S3 header: use printable ASCII only", url=url
        )


def add_checksums(
    headers: dict[str, str], content_md5: str | None, checksums: Mapping[str, str] | None
) -> None:
    """Add ``Content-MD5`` and ``x-amz-checksum-<algorithm>`` headers."""
    if content_md5:
        headers["content-md5"] = content_md5
    if checksums:
        for algorithm, value in checksums.items():
            name = algorithm.lower()
            if name not in CHECKSUM_ALGORITHMS:
                raise ValueError(f"unknown checksum algorithm {algorithm!r}")
            headers[f"x-amz-checksum-{name}"] = value


def _is_composite(value: str, kind: str, multipart: bool) -> bool:
    if kind == "COMPOSITE" or _PARTS_SUFFIX.search(value):
        return True
    return kind != "FULL_OBJECT" and multipart


def header_checksums(headers: Mapping[str, str]) -> dict[str, str]:
    """The checksums in ``x-amz-checksum-*`` answer headers (see the module docstring)."""
    found: dict[str, str] = {}
    kind = ""
    multipart = False
    for name in CHECKSUM_ALGORITHMS:
        value = headers.get(f"x-amz-checksum-{name}")
        if not value:
            continue
        if not found:  # look these up only for objects that have a checksum
            kind = headers.get("x-amz-checksum-type", "").upper()
            multipart = _MULTIPART_ETAG.match(unquote_etag(headers.get("etag")) or "") is not None
        if _is_composite(value, kind, multipart):
            found[name + COMPOSITE_SUFFIX] = value
        else:
            found[name] = value
    return found


def result_checksums(checksums: Mapping[str, str], multipart: bool) -> dict[str, str]:
    """Checksums from an XML result (CompleteMultipartUpload, CopyObject), named
    as :func:`header_checksums` names them."""
    return {
        name + COMPOSITE_SUFFIX if _is_composite(value, "", multipart) else name: value
        for name, value in checksums.items()
    }


def encryption(headers: Mapping[str, str]) -> str | None:
    """The server-side encryption an answer reports: ``AES256``, ``aws:kms``,
    ``aws:kms:dsse``, ``SSE-C`` (customer-provided key), or None."""
    if headers.get("x-amz-server-side-encryption-customer-algorithm"):
        return "SSE-C"
    return headers.get("x-amz-server-side-encryption") or None


#: Encryption under which an S3 ETag is not an MD5 of the data.
_OPAQUE_ETAG = ("aws:kms", "aws:kms:dsse", "SSE-C")
_MD5_ETAG = re.compile(r"^([0-9a-fA-F]{32})(?:-(\d+))?$")
_MD5_HEX = re.compile(r"^[0-9a-fA-F]{32}$")


def etag_checksums(etag: str | None, sse: str | None) -> dict[str, str]:
    """The MD5s an S3 ETag vouches for: ``md5`` for a single-part object
    (the data's MD5), ``md5-composite`` (``value-N``) for a multipart one
    (the MD5 of its N parts' MD5s); nothing under SSE-KMS or SSE-C, whose
    ETags are not MD5s, or for an ETag of another form."""
    m = _MD5_ETAG.match(etag or "")
    if m is None or sse in _OPAQUE_ETAG:
        return {}
    value = base64.b64encode(bytes.fromhex(m.group(1))).decode("ascii")
    if m.group(2) is None:
        return {"md5": value}
    return {"md5-composite": f"{value}-{m.group(2)}"}


def etag_md5(etag: str | None, sse: str | None) -> str | None:
    """The MD5 (hex, lower case) of the stored bytes that a PutObject or
    UploadPart ETag states, or None where it states none: under SSE-KMS or
    SSE-C, or an ETag that is not 32 hex digits."""
    if etag is None or sse in _OPAQUE_ETAG or not _MD5_HEX.match(etag):
        return None
    return etag.lower()


def object_info(key: str, headers: Mapping[str, str], size: int | None) -> ObjectInfo:
    """ObjectInfo from HEAD/GET answer headers (``size``: the whole object's, if known).

    Checksums are the ``x-amz-checksum-*`` ones and the MD5s the ETag
    vouches for (:func:`etag_checksums`).
    """
    if size is None:
        length = headers.get("content-length", "")
        size = int(length) if length.isdigit() else 0
    metadata = {k[len(_META) :]: v for k, v in headers.items() if k.startswith(_META)}
    etag = unquote_etag(headers.get("etag"))
    sse = encryption(headers)
    return ObjectInfo(
        key=key,
        size=size,
        mtime=parse_http_date(headers.get("last-modified")),
        etag=etag,
        metadata=metadata,
        content_type=headers.get("content-type"),
        checksums={**header_checksums(headers), **etag_checksums(etag, sse)},
        encryption=sse,
        version_id=headers.get("x-amz-version-id"),
    )
