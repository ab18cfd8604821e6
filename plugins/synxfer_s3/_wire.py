"""S3's wire format: the XML bodies it sends and parses, and the headers of
requests and answers (ETags, checksums, metadata, object info). No I/O:
the requests themselves are :mod:`._core`'s.

XML: the answers the data path needs are parsed, the few bodies it sends
are built. Parsing uses the C ElementTree parser and walks the few elements wanted by
their (namespace-qualified) tag, with no schema or model machinery. Dates
are parsed without dateutil: ISO 8601 (listings) with
:func:`datetime.fromisoformat`, HTTP dates (``Last-Modified``) with the
SDK's :func:`synxfer.backend.parse_http_date`.

Keys in listings requested with ``encoding-type=url`` come back
URL-encoded (``+`` for a space); they are decoded when, and only when, the
answer says ``<EncodingType>url</EncodingType>``.

Headers. Checksums come in two kinds, and are reported under different names so no
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
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import NamedTuple
from urllib.parse import quote, unquote_plus

from synxfer import BackendError, ObjectInfo
from synxfer.backend import parse_http_date

__all__ = [
    "CHECKSUM_ALGORITHMS",
    "COMPOSITE_SUFFIX",
    "S3_NS",
    "BucketList",
    "CompleteResult",
    "CopyResult",
    "DeleteError",
    "ErrorInfo",
    "ListedBucket",
    "ListedObject",
    "ListedPart",
    "ListedUpload",
    "ListedVersion",
    "ObjectList",
    "PartList",
    "UploadList",
    "VersionList",
    "XmlError",
    "add_checksums",
    "b64md5",
    "check_header",
    "complete_multipart_body",
    "conditional_write",
    "copy_source",
    "create_bucket_body",
    "delete_body",
    "error_in_ok_body",
    "etag_md5",
    "header_checksums",
    "object_info",
    "parse_complete",
    "parse_copy",
    "parse_delete_result",
    "parse_error",
    "parse_initiate",
    "parse_iso_date",
    "parse_list_buckets",
    "parse_list_object_versions",
    "parse_list_objects_v2",
    "parse_list_parts",
    "parse_list_uploads",
    "quote_etag",
    "result_checksums",
    "unquote_etag",
]

S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"

Data = bytes | bytearray | memoryview


class XmlError(ValueError):
    """An answer that is not the XML it should be."""


# -- dates --------------------------------------------------------------------


def parse_iso_date(text: str | None) -> float | None:
    """``2024-01-02T03:04:05.000Z`` -> seconds since the epoch (None if absent/bad)."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


# -- helpers ------------------------------------------------------------------


def _root(data: Data) -> tuple[ET.Element, str]:
    """The root element and its namespace prefix (``{ns}`` or ``""``)."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        snippet = bytes(data[:120]).decode("utf-8", "replace")
        raise XmlError(f"unparseable XML ({exc}): {snippet!r}") from None
    tag = root.tag
    ns = tag[: tag.index("}") + 1] if tag.startswith("{") else ""
    return root, ns


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _text(elem: ET.Element, tag: str) -> str | None:
    child = elem.find(tag)
    if child is None:
        return None
    return child.text or ""


def _expect(root: ET.Element, ns: str, name: str) -> None:
    """Refuse an ``<Error>`` where ``<name>`` belongs. Other root names pass:
    S3-compatible servers do not all spell them as S3 does (moto answers
    ListParts with ``<ListPartsResponse>``), and botocore does not check."""
    if _local(root.tag) == "Error":
        raise XmlError(f"expected <{name}> but got an <Error>")


def _url_decode(text: str) -> str:
    """``encoding-type=url`` decoding (``+`` is a space), skipped when there is nothing to do."""
    if "%" in text:
        return unquote_plus(text)
    return text.replace("+", " ") if "+" in text else text


def _int(text: str | None, default: int = 0) -> int:
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise XmlError(f"expected an integer, got {text[:40]!r}") from None


def _true(text: str | None) -> bool:
    return (text or "").strip().lower() == "true"


def _unquote_etag(etag: str | None) -> str | None:
    if etag is None:
        return None
    etag = etag.strip()
    if len(etag) >= 2 and etag[0] == '"' and etag[-1] == '"':
        return etag[1:-1]
    if etag.startswith("&quot;") and etag.endswith("&quot;"):  # double-escaped by a server
        return etag[6:-6]
    return etag


_CHECKSUM_TAGS = {
    "ChecksumCRC32": "crc32",
    "ChecksumCRC32C": "crc32c",
    "ChecksumCRC64NVME": "crc64nvme",
    "ChecksumSHA1": "sha1",
    "ChecksumSHA256": "sha256",
}


def _checksums(elem: ET.Element, ns: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for tag, name in _CHECKSUM_TAGS.items():
        value = _text(elem, ns + tag)
        if value:
            found[name] = value
    return found


# -- Error --------------------------------------------------------------------


class ErrorInfo(NamedTuple):
    """An S3 ``<Error>``: its code, message and the fields that help explain it."""

    code: str
    message: str = ""
    region: str | None = None
    endpoint: str | None = None
    request_id: str | None = None


def parse_error(data: Data) -> ErrorInfo | None:
    """The ``<Error>`` in ``data``, or None if it is not one (HTML, empty...)."""
    if not data:
        return None
    try:
        root, ns = _root(data)
    except XmlError:
        return None
    if _local(root.tag) != "Error":
        return None
    return ErrorInfo(
        code=_text(root, ns + "Code") or "",
        message=_text(root, ns + "Message") or "",
        region=_text(root, ns + "Region"),
        endpoint=_text(root, ns + "Endpoint"),
        request_id=_text(root, ns + "RequestId"),
    )


def error_in_ok_body(data: Data) -> ErrorInfo | None:
    """An ``<Error>`` sent with a 200 (CompleteMultipartUpload, CopyObject, ...)."""
    head = bytes(data[:512])
    if b"<Error" not in head:
        return None
    return parse_error(data)


# -- ListObjectsV2 --------------------------------------------------------------


class ListedObject(NamedTuple):
    """One ``<Contents>`` entry."""

    key: str
    size: int
    mtime: float | None
    etag: str | None
    storage_class: str | None = None
    checksum_algorithm: str | None = None


class ObjectList(NamedTuple):
    """One ListObjectsV2 page."""

    objects: list[ListedObject]
    prefixes: list[str]
    truncated: bool
    next_token: str | None
    key_count: int


def parse_list_objects_v2(data: Data) -> ObjectList:
    """A ListObjectsV2 answer (``ListBucketResult``), keys URL-decoded if encoded."""
    root, ns = _root(data)
    _expect(root, ns, "ListBucketResult")
    encoded = (_text(root, ns + "EncodingType") or "").lower() == "url"
    decode = _url_decode if encoded else None
    t_contents, t_prefixes = ns + "Contents", ns + "CommonPrefixes"
    t_key, t_size, t_mtime, t_etag = ns + "Key", ns + "Size", ns + "LastModified", ns + "ETag"
    t_class, t_alg, t_prefix = ns + "StorageClass", ns + "ChecksumAlgorithm", ns + "Prefix"
    objects: list[ListedObject] = []
    prefixes: list[str] = []
    for child in root:
        tag = child.tag
        if tag == t_contents:
            key = ""
            size = 0
            mtime: float | None = None
            etag = storage = alg = None
            for f in child:
                ftag = f.tag
                if ftag == t_key:
                    key = f.text or ""
                elif ftag == t_size:
                    size = _int(f.text)
                elif ftag == t_mtime:
                    mtime = parse_iso_date(f.text)
                elif ftag == t_etag:
                    etag = _unquote_etag(f.text)
                elif ftag == t_class:
                    storage = f.text
                elif ftag == t_alg:
                    alg = f.text
            if decode is not None:
                key = decode(key)
            objects.append(ListedObject(key, size, mtime, etag, storage, alg))
        elif tag == t_prefixes:
            prefix = _text(child, t_prefix) or ""
            prefixes.append(decode(prefix) if decode is not None else prefix)
    truncated = _true(_text(root, ns + "IsTruncated"))
    token = _text(root, ns + "NextContinuationToken") or None
    return ObjectList(
        objects=objects,
        prefixes=prefixes,
        truncated=truncated,
        next_token=token,
        key_count=_int(_text(root, ns + "KeyCount"), len(objects) + len(prefixes)),
    )


# -- ListObjectVersions -----------------------------------------------------------


class ListedVersion(NamedTuple):
    """One ``<Version>`` or ``<DeleteMarker>`` entry (``delete_marker``; size 0)."""

    key: str
    version_id: str
    is_latest: bool
    delete_marker: bool
    size: int
    mtime: float | None
    etag: str | None


class VersionList(NamedTuple):
    """One ListObjectVersions page; the next starts at both markers."""

    versions: list[ListedVersion]
    truncated: bool
    next_key_marker: str | None
    next_version_marker: str | None


def parse_list_object_versions(data: Data) -> VersionList:
    """A ListObjectVersions answer (``ListVersionsResult``), versions and delete
    markers in document order (key order, newest first within a key), keys
    and the next key marker URL-decoded if encoded."""
    root, ns = _root(data)
    _expect(root, ns, "ListVersionsResult")
    encoded = (_text(root, ns + "EncodingType") or "").lower() == "url"
    t_version, t_marker = ns + "Version", ns + "DeleteMarker"
    versions: list[ListedVersion] = []
    for child in root:
        if child.tag not in (t_version, t_marker):
            continue
        key = _text(child, ns + "Key") or ""
        versions.append(
            ListedVersion(
                key=_url_decode(key) if encoded else key,
                version_id=_text(child, ns + "VersionId") or "null",
                is_latest=_true(_text(child, ns + "IsLatest")),
                delete_marker=child.tag == t_marker,
                size=_int(_text(child, ns + "Size")),
                mtime=parse_iso_date(_text(child, ns + "LastModified")),
                etag=_unquote_etag(_text(child, ns + "ETag")),
            )
        )
    next_key = _text(root, ns + "NextKeyMarker") or None
    if next_key is not None and encoded:
        next_key = _url_decode(next_key)
    return VersionList(
        versions=versions,
        truncated=_true(_text(root, ns + "IsTruncated")),
        next_key_marker=next_key,
        next_version_marker=_text(root, ns + "NextVersionIdMarker") or None,
    )


# -- multipart ------------------------------------------------------------------


def parse_initiate(data: Data) -> str:
    """The UploadId of an ``InitiateMultipartUploadResult``."""
    root, ns = _root(data)
    _expect(root, ns, "InitiateMultipartUploadResult")
    upload_id = _text(root, ns + "UploadId")
    if not upload_id:
        raise XmlError("InitiateMultipartUploadResult without an UploadId")
    return upload_id


class CompleteResult(NamedTuple):
    """A ``CompleteMultipartUploadResult``."""

    etag: str | None
    location: str | None
    checksums: dict[str, str]


def parse_complete(data: Data) -> CompleteResult:
    """A CompleteMultipartUpload answer (raise :func:`error_in_ok_body` first)."""
    root, ns = _root(data)
    _expect(root, ns, "CompleteMultipartUploadResult")
    return CompleteResult(
        etag=_unquote_etag(_text(root, ns + "ETag")),
        location=_text(root, ns + "Location"),
        checksums=_checksums(root, ns),
    )


class ListedPart(NamedTuple):
    """One ``<Part>`` of a ListParts answer."""

    number: int
    etag: str
    size: int
    mtime: float | None
    checksums: dict[str, str]


class PartList(NamedTuple):
    """One ListParts page."""

    parts: list[ListedPart]
    truncated: bool
    next_marker: int | None


def parse_list_parts(data: Data) -> PartList:
    root, ns = _root(data)
    _expect(root, ns, "ListPartsResult")
    t_part = ns + "Part"
    parts = [
        ListedPart(
            number=_int(_text(p, ns + "PartNumber")),
            etag=_unquote_etag(_text(p, ns + "ETag")) or "",
            size=_int(_text(p, ns + "Size")),
            mtime=parse_iso_date(_text(p, ns + "LastModified")),
            checksums=_checksums(p, ns),
        )
        for p in root.iter(t_part)
    ]
    truncated = _true(_text(root, ns + "IsTruncated"))
    marker = _text(root, ns + "NextPartNumberMarker")
    return PartList(parts, truncated, _int(marker) if marker else None)


class ListedBucket(NamedTuple):
    """One ``<Bucket>`` of a ListBuckets answer."""

    name: str
    created: float | None


class BucketList(NamedTuple):
    """One ListBuckets page; ``next_token`` is None on the last one (and
    always from servers that do not page it)."""

    buckets: list[ListedBucket]
    next_token: str | None


def parse_list_buckets(data: Data) -> BucketList:
    root, ns = _root(data)
    _expect(root, ns, "ListAllMyBucketsResult")
    buckets = [
        ListedBucket(
            name=_text(b, ns + "Name") or "",
            created=parse_iso_date(_text(b, ns + "CreationDate")),
        )
        for b in root.iter(ns + "Bucket")
    ]
    if any(not b.name for b in buckets):
        raise XmlError("a <Bucket> without a <Name>")
    return BucketList(buckets, _text(root, ns + "ContinuationToken") or None)


class ListedUpload(NamedTuple):
    """One ``<Upload>`` of a ListMultipartUploads answer."""

    key: str
    upload_id: str
    initiated: float | None


class UploadList(NamedTuple):
    """One ListMultipartUploads page."""

    uploads: list[ListedUpload]
    truncated: bool
    next_key_marker: str | None
    next_upload_id_marker: str | None


def parse_list_uploads(data: Data) -> UploadList:
    root, ns = _root(data)
    _expect(root, ns, "ListMultipartUploadsResult")
    encoded = (_text(root, ns + "EncodingType") or "").lower() == "url"

    def key_of(text: str | None) -> str:
        return _url_decode(text or "") if encoded else (text or "")

    uploads = [
        ListedUpload(
            key=key_of(_text(u, ns + "Key")),
            upload_id=_text(u, ns + "UploadId") or "",
            initiated=parse_iso_date(_text(u, ns + "Initiated")),
        )
        for u in root.iter(ns + "Upload")
    ]
    next_key = _text(root, ns + "NextKeyMarker")
    return UploadList(
        uploads=uploads,
        truncated=_true(_text(root, ns + "IsTruncated")),
        next_key_marker=key_of(next_key) if next_key else None,
        next_upload_id_marker=_text(root, ns + "NextUploadIdMarker") or None,
    )


# -- DeleteObjects ------------------------------------------------------------------


class DeleteError(NamedTuple):
    """A key DeleteObjects could not delete."""

    key: str
    code: str
    message: str


def parse_delete_result(data: Data) -> tuple[list[str], list[DeleteError]]:
    """``(deleted keys, errors)`` of a ``DeleteResult``."""
    root, ns = _root(data)
    _expect(root, ns, "DeleteResult")
    deleted: list[str] = []
    errors: list[DeleteError] = []
    t_deleted, t_error, t_key = ns + "Deleted", ns + "Error", ns + "Key"
    for child in root:
        if child.tag == t_deleted:
            deleted.append(_text(child, t_key) or "")
        elif child.tag == t_error:
            errors.append(
                DeleteError(
                    key=_text(child, t_key) or "",
                    code=_text(child, ns + "Code") or "Unknown",
                    message=_text(child, ns + "Message") or "",
                )
            )
    return deleted, errors


# -- CopyObject / UploadPartCopy ----------------------------------------------------


class CopyResult(NamedTuple):
    """A ``CopyObjectResult`` or ``CopyPartResult``."""

    etag: str | None
    mtime: float | None
    checksums: dict[str, str]


def parse_copy(data: Data) -> CopyResult:
    root, ns = _root(data)
    _expect(root, ns, "CopyObjectResult")
    return CopyResult(
        etag=_unquote_etag(_text(root, ns + "ETag")),
        mtime=parse_iso_date(_text(root, ns + "LastModified")),
        checksums=_checksums(root, ns),
    )


# -- request bodies -------------------------------------------------------------------

# XML 1.0 cannot carry most control characters, even as character references.
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _escape(text: str, what: str) -> str:
    """``text`` as XML character data. A carriage return becomes ``&#13;``
    (a raw one would be read back as a line feed); other characters XML 1.0
    cannot represent raise ValueError naming ``what``."""
    if _XML_INVALID.search(text):
        raise ValueError(f"{what} {text!r} has a character XML 1.0 cannot carry")
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")
    )


def complete_multipart_body(
    parts: Iterable[tuple[int, str] | tuple[int, str, dict[str, str]]],
) -> bytes:
    """The CompleteMultipartUpload body for ``(number, etag[, checksums])`` parts.

    ETags are quoted if they are not already; ``checksums`` map algorithm
    names (``crc32c``...) to base64 values, sent as ``<ChecksumCRC32C>`` etc.
    """
    out = [f'<CompleteMultipartUpload xmlns="{S3_NS}">']
    names = {v: k for k, v in _CHECKSUM_TAGS.items()}
    for part in parts:
        number, etag = part[0], part[1]
        quoted = etag if etag.startswith('"') else f'"{etag}"'
        out.append(f"<Part><ETag>{_escape(quoted, 'ETag')}</ETag>")
        if len(part) > 2:
            for alg, value in part[2].items():
                tag = names.get(alg)
                if tag is None:
                    raise ValueError(f"unknown checksum algorithm {alg!r}")
                out.append(f"<{tag}>{_escape(value, 'checksum')}</{tag}>")
        out.append(f"<PartNumber>{int(number)}</PartNumber></Part>")
    out.append("</CompleteMultipartUpload>")
    return "".join(out).encode()


def delete_body(keys: Iterable[str], *, quiet: bool = True) -> bytes:
    """The DeleteObjects body for ``keys`` (escaped; ``quiet``: report errors only)."""
    out = [f'<Delete xmlns="{S3_NS}">']
    if quiet:
        out.append("<Quiet>true</Quiet>")
    out.extend(f"<Object><Key>{_escape(k, 'key')}</Key></Object>" for k in keys)
    out.append("</Delete>")
    return "".join(out).encode()


def create_bucket_body(region: str | None) -> bytes | None:
    """The CreateBucket body: a LocationConstraint naming ``region``, or none
    for ``us-east-1`` (S3 refuses that one as a constraint) and no region."""
    if not region or region == "us-east-1":
        return None
    return (
        f'<CreateBucketConfiguration xmlns="{S3_NS}">'
        f"<LocationConstraint>{_escape(region, 'region')}</LocationConstraint>"
        "</CreateBucketConfiguration>"
    ).encode()


# -- headers ----------------------------------------------------------------

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
