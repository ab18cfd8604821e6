"""S3Wire: the S3 requests synxfer's data path sends, signed and parsed here.

Built on :mod:`._sigv4` (signing), :mod:`._http` (the connection pool and
receive-into), :mod:`._xml` (bodies) and :mod:`._credentials`. No botocore
on this path: a request costs a URL, a dict of headers, one signature and
one HTTP exchange.

Errors are mapped onto synxfer's exception tree with the tables of
:mod:`._errors` (the same classification as the aiobotocore backend):
missing objects and uploads -> :class:`~synxfer.NotFound`, missing buckets
-> :class:`~synxfer.BucketNotFound`, refused or badly signed requests and a
skewed clock -> :class:`~synxfer.PermissionDenied`, failed ``If-Match`` ->
:class:`~synxfer.PreconditionFailed`, 5xx, throttling, timeouts, resets ->
:class:`~synxfer.TransientError`. Each mapped error carries the S3 error
code (see :func:`s3_code`) and HTTP status. An ``<Error>`` inside a 200
answer (CompleteMultipartUpload, CopyObject, UploadPartCopy) is an error.

Addressing: ``path`` (``host/bucket/key``), ``virtual``
(``bucket.host/key``) or ``auto`` (virtual on DNS names for DNS-safe
buckets, path for IP addresses, ``localhost`` and other buckets).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import ipaddress
import os
import re
import ssl
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal
from urllib.parse import quote, urlsplit

from synxfer.backend import (
    BackendError,
    BucketNotFound,
    ConfigError,
    ObjectInfo,
    TransientError,
)

from ._credentials import CredentialSource
from ._http import Body, HttpClient, HttpResponse
from ._sigv4 import SigV4Signer, amz_date, canonical_query, host_header, quote_path
from ._xml import (
    CompleteResult,
    CopyResult,
    DeleteError,
    ObjectList,
    PartList,
    UploadList,
    XmlError,
    complete_multipart_body,
    delete_body,
    error_in_ok_body,
    parse_complete,
    parse_copy,
    parse_delete_result,
    parse_error,
    parse_http_date,
    parse_initiate,
    parse_list_objects_v2,
    parse_list_parts,
    parse_list_uploads,
)

__all__ = ["CHECKSUM_ALGORITHMS", "Addressing", "PartSpec", "S3Wire", "s3_code"]

Addressing = Literal["auto", "path", "virtual"]

#: A part for CompleteMultipartUpload: ``(number, etag)`` or with checksums.
PartSpec = tuple[int, str] | tuple[int, str, dict[str, str]]

#: Checksum algorithms S3 takes in ``x-amz-checksum-<name>`` headers.
CHECKSUM_ALGORITHMS = ("crc32", "crc32c", "crc64nvme", "sha1", "sha256")

_CONTENT_RANGE = re.compile(r"^bytes\s+(\d+)-(\d+)/(\d+|\*)$")
_DNS_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
_META = "x-amz-meta-"


def s3_code(exc: BaseException) -> str | None:
    """The S3 error code (``NoSuchKey``...) of an error raised by :class:`S3Wire`."""
    code = getattr(exc, "s3_code", None)
    return code if isinstance(code, str) else None


def _coded(exc: BackendError, code: str) -> BackendError:
    exc.s3_code = code  # type: ignore[attr-defined]
    return exc


class _Address:
    """Where a bucket's requests go: connection key, Host header, path prefix."""

    __slots__ = ("host", "host_header", "port", "prefix", "scheme")

    def __init__(self, scheme: str, host: str, port: int, host_header: str, prefix: str) -> None:
        self.scheme = scheme
        self.host = host
        self.port = port
        self.host_header = host_header
        self.prefix = prefix


class S3Wire:
    """Signed S3 requests over a pooled HTTP/1.1 client.

    ``endpoint_url`` (``http(s)://host[:port][/base]``) defaults to AWS's
    regional endpoint. ``credentials`` is asked for credentials before each
    request (cheap; it refreshes when botocore says so). ``label`` is the
    URL scheme used in error messages (``s3``, ``scp``...). ``clock`` (a
    ``time.time``-like function) is for tests of clock skew. Over ``https``
    the server must be trusted by ``ssl_context``, else by the system's
    store or ``ca_bundle`` (default: ``AWS_CA_BUNDLE``, as botocore does).
    """

    def __init__(
        self,
        *,
        region: str,
        credentials: CredentialSource,
        endpoint_url: str | None = None,
        addressing: Addressing = "auto",
        http: HttpClient | None = None,
        max_connections: int = 16,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        label: str = "s3",
        clock: Callable[[], float] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        ca_bundle: str | None = None,
    ) -> None:
        if addressing not in ("auto", "path", "virtual"):
            raise ConfigError(f"addressing must be auto, path or virtual (got {addressing!r})")
        self.region = region
        self.label = label
        self.addressing = addressing
        self._credentials = credentials
        self._signer = SigV4Signer(region)
        self._clock = clock
        if endpoint_url is None:
            suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
            endpoint_url = f"https://s3.{region}.{suffix}"
        parts = urlsplit(endpoint_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"invalid endpoint URL {endpoint_url!r}: expected http(s)://host")
        self.endpoint_url = endpoint_url
        self._scheme = parts.scheme
        self._host = parts.hostname
        try:
            port = parts.port
        except ValueError as exc:
            raise ConfigError(f"invalid endpoint URL {endpoint_url!r}: {exc}") from None
        self._port = port or (443 if parts.scheme == "https" else 80)
        self._explicit_port = port
        self._base = parts.path.rstrip("/")
        self._host_is_ip = _is_ip(self._host) or self._host == "localhost"
        self._owns_http = http is None
        self._http = http or HttpClient(
            max_connections=max_connections,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            ssl_context=ssl_context,
            ca_bundle=ca_bundle or os.environ.get("AWS_CA_BUNDLE") or None,
        )
        self._addresses: dict[str, _Address] = {}

    def __repr__(self) -> str:
        return f"<S3Wire {self.endpoint_url} region={self.region!r} addressing={self.addressing}>"

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> S3Wire:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def url(self, bucket: str, key: str = "") -> str:
        """``s3://bucket/key``, for messages."""
        return f"{self.label}://{bucket}/{key}"

    # -- addressing and signing ------------------------------------------------

    def _address(self, bucket: str) -> _Address:
        address = self._addresses.get(bucket)
        if address is None:
            if not bucket:
                raise ConfigError("S3 requests need a bucket")
            virtual = self.addressing == "virtual" or (
                self.addressing == "auto"
                and not self._host_is_ip
                and _DNS_BUCKET.match(bucket) is not None
                and ".." not in bucket
                and not (self._scheme == "https" and "." in bucket)
            )
            host = f"{bucket}.{self._host}" if virtual else self._host
            prefix = self._base + ("" if virtual else "/" + quote_path(bucket))
            address = _Address(
                self._scheme,
                host,
                self._port,
                host_header(host, self._explicit_port, self._scheme),
                prefix,
            )
            self._addresses[bucket] = address
        return address

    async def _request(
        self,
        op: str,
        method: str,
        bucket: str,
        key: str | None,
        *,
        query: Iterable[tuple[str, str | None]] = (),
        headers: dict[str, str] | None = None,
        body: Body | None = None,
        sink: memoryview | None = None,
        sink_status: int = 0,
    ) -> HttpResponse:
        address = self._address(bucket)
        if key is None:
            path = address.prefix or "/"
        else:
            if not key:
                raise ValueError(f"{op} needs a non-empty key")
            path = f"{address.prefix}/{quote_path(key)}"
        canonical, url_query = canonical_query(query)
        target = f"{path}?{url_query}" if url_query else path
        creds = await self._credentials.get()
        signed = self._signer.sign(
            method,
            address.host_header,
            path,
            canonical,
            headers if headers is not None else {},
            access_key=creds.access_key,
            secret_key=creds.secret_key,
            token=creds.token,
            timestamp=None if self._clock is None else amz_date(self._clock()),
        )
        where = self.url(bucket, key or "")
        try:
            response = await self._http.request(
                method,
                address.scheme,
                address.host,
                address.port,
                target,
                signed,
                body,
                sink=sink,
                sink_status=sink_status,
                label=where,
            )
        except ValueError as exc:  # a header value HTTP cannot carry
            raise BackendError(f"{op}: {exc}", url=where) from None
        if response.status >= 300:
            raise self._error(op, response, bucket, key or "")
        return response

    def _error(self, op: str, response: HttpResponse, bucket: str, key: str) -> BackendError:
        from ._errors import CREDENTIALS_HINT, bucket_not_found, classify

        status = response.status
        info = parse_error(response.body) if response.body else None
        code = info.code if info is not None and info.code else str(status)
        message = info.message if info is not None else ""
        url = self.url(bucket, key)
        cls = classify(code, status)
        if cls is BucketNotFound:
            return _coded(bucket_not_found(bucket, url, status), code)
        head = f"HTTP {code}" if code.isdigit() else f"{code} (HTTP {status})"
        text = f"{head} on {op}" + (f": {message}" if message else "")
        if code in {"InvalidAccessKeyId", "SignatureDoesNotMatch"}:
            text += f"; check the credentials ({CREDENTIALS_HINT})"
        elif code == "RequestTimeTooSkewed":
            text += "; check this machine's clock"
        elif 300 <= status < 400 or code in {"PermanentRedirect", "AuthorizationHeaderMalformed"}:
            region = response.headers.get("x-amz-bucket-region") or (
                info.region if info is not None else None
            )
            if region and region != self.region:
                text += f"; the bucket is in region {region!r}: set --region {region}"
        return _coded(cls(text, url=url, status=status), code)

    def _ok_body_error(self, op: str, data: bytes | bytearray, bucket: str, key: str) -> None:
        """Raise the ``<Error>`` in a 200 answer, if there is one."""
        info = error_in_ok_body(data)
        if info is None:
            return
        from ._errors import classify

        code = info.code or "InternalError"
        cls = classify(code, None)
        text = f"{code} (in a 200 answer) on {op}" + (f": {info.message}" if info.message else "")
        raise _coded(cls(text, url=self.url(bucket, key)), code)

    def _bad_xml(self, op: str, exc: XmlError, bucket: str, key: str = "") -> BackendError:
        return BackendError(f"unexpected answer to {op}: {exc}", url=self.url(bucket, key))

    # -- objects -------------------------------------------------------------------

    async def head_object(
        self,
        bucket: str,
        key: str,
        *,
        if_match: str | None = None,
        checksum_mode: bool = False,
    ) -> ObjectInfo:
        """HeadObject: size, mtime, ETag, metadata, content type (and checksums)."""
        headers: dict[str, str] = {}
        if if_match:
            headers["if-match"] = _quote_etag(if_match)
        if checksum_mode:
            headers["x-amz-checksum-mode"] = "ENABLED"
        response = await self._request("HeadObject", "HEAD", bucket, key, headers=headers)
        return _object_info(key, response.headers, None)

    async def head_bucket(self, bucket: str) -> None:
        """HeadBucket: returns if the bucket exists and is accessible, else raises."""
        await self._request("HeadBucket", "HEAD", bucket, None)

    def _get_headers(
        self, offset: int, length: int | None, if_match: str | None, checksum_mode: bool
    ) -> dict[str, str]:
        headers: dict[str, str] = {}
        if offset > 0 or length is not None:
            last = "" if length is None else str(offset + length - 1)
            headers["range"] = f"bytes={offset}-{last}"
        if if_match:
            headers["if-match"] = _quote_etag(if_match)
        if checksum_mode:
            headers["x-amz-checksum-mode"] = "ENABLED"
        return headers

    async def get_object_into(
        self,
        bucket: str,
        key: str,
        buffer: bytearray | memoryview,
        *,
        offset: int = 0,
        length: int | None = None,
        if_match: str | None = None,
        checksum_mode: bool = False,
    ) -> tuple[int, ObjectInfo]:
        """GetObject into ``buffer``: ``(bytes received, object info)``.

        Reads ``[offset, offset+length)`` (to the end without ``length``;
        the whole object with neither), straight from the socket into
        ``buffer`` -- which must hold the range (or, for a whole-object read,
        the object: a larger object raises BackendError). ``info.size`` is
        the whole object's size. ``if_match`` (an ETag) makes a changed
        object raise PreconditionFailed.
        """
        if offset < 0 or (length is not None and length < 0):
            raise ValueError(f"invalid range: offset={offset}, length={length}")
        view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
        if length == 0:
            return 0, await self.head_object(
                bucket, key, if_match=if_match, checksum_mode=checksum_mode
            )
        if length is not None:
            if length > len(view):
                raise ValueError(f"a {length}-byte range does not fit a {len(view)}-byte buffer")
            view = view[:length]
        headers = self._get_headers(offset, length, if_match, checksum_mode)
        ranged = "range" in headers
        response = await self._request(
            "GetObject",
            "GET",
            bucket,
            key,
            headers=headers,
            sink=view,
            sink_status=206 if ranged else 200,
        )
        if ranged and response.status == 200:
            # The server ignored Range: take our range out of the whole body.
            data = response.body
            chunk = data[offset : len(data) if length is None else offset + length]
            if len(chunk) > len(view):
                raise BackendError(
                    f"server ignored Range and sent {len(data)} bytes; the range "
                    f"from {offset} does not fit a {len(view)}-byte buffer",
                    url=self.url(bucket, key),
                )
            view[: len(chunk)] = chunk
            return len(chunk), _object_info(key, response.headers, len(data))
        return response.length, self._checked_info(key, bucket, response, ranged)

    async def get_object(
        self,
        bucket: str,
        key: str,
        *,
        offset: int = 0,
        length: int | None = None,
        if_match: str | None = None,
        checksum_mode: bool = False,
    ) -> tuple[bytes | bytearray, ObjectInfo]:
        """GetObject into a new buffer of the body's size: ``(data, info)``."""
        if offset < 0 or (length is not None and length < 0):
            raise ValueError(f"invalid range: offset={offset}, length={length}")
        if length == 0:
            info = await self.head_object(
                bucket, key, if_match=if_match, checksum_mode=checksum_mode
            )
            return b"", info
        headers = self._get_headers(offset, length, if_match, checksum_mode)
        ranged = "range" in headers
        response = await self._request("GetObject", "GET", bucket, key, headers=headers)
        if ranged and response.status == 200:
            data = response.body
            end = len(data) if length is None else offset + length
            return data[offset:end], _object_info(key, response.headers, len(data))
        return response.body, self._checked_info(key, bucket, response, ranged)

    def _checked_info(
        self, key: str, bucket: str, response: HttpResponse, ranged: bool
    ) -> ObjectInfo:
        headers = response.headers
        size: int | None = None
        content_range = headers.get("content-range")
        if content_range is not None:
            m = _CONTENT_RANGE.match(content_range.strip())
            if m is None or m.group(3) == "*":
                raise BackendError(
                    f"unparseable Content-Range {content_range!r}", url=self.url(bucket, key)
                )
            first, last, size = int(m.group(1)), int(m.group(2)), int(m.group(3))
            if last - first + 1 != response.length:
                raise TransientError(
                    f"short read: got {response.length} of {last - first + 1} bytes "
                    f"at offset {first}",
                    url=self.url(bucket, key),
                )
        elif ranged:
            raise BackendError(
                "206 answer without a Content-Range header", url=self.url(bucket, key)
            )
        return _object_info(key, headers, size)

    async def put_object(
        self,
        bucket: str,
        key: str,
        body: Body,
        *,
        content_md5: str | None = None,
        checksums: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
        content_type: str | None = None,
    ) -> ObjectInfo:
        """PutObject from ``body`` (sent from the caller's buffer, not copied).

        ``content_md5`` (base64) and ``checksums`` (``{"crc32c": base64}``,
        sent as ``x-amz-checksum-*``) are verified by the server.
        """
        headers = self._write_headers(bucket, key, metadata, content_type)
        _add_checksums(headers, content_md5, checksums)
        response = await self._request("PutObject", "PUT", bucket, key, headers=headers, body=body)
        return ObjectInfo(
            key=key,
            size=memoryview(body).nbytes,
            etag=_unquote_etag(response.headers.get("etag")),
            metadata=dict(metadata or {}),
            content_type=content_type,
            checksums=_header_checksums(response.headers),
        )

    def _write_headers(
        self,
        bucket: str,
        key: str,
        metadata: Mapping[str, str] | None,
        content_type: str | None,
    ) -> dict[str, str]:
        headers: dict[str, str] = {}
        if metadata:
            for name, value in metadata.items():
                _check_header(f"metadata {name!r}", name + value, self.url(bucket, key))
                headers[_META + name.lower()] = value
        if content_type:
            _check_header("content type", content_type, self.url(bucket, key))
            headers["content-type"] = content_type
        return headers

    async def delete_object(self, bucket: str, key: str) -> None:
        """DeleteObject. A missing key is not an error (S3 answers 204; some stores 404)."""
        try:
            await self._request("DeleteObject", "DELETE", bucket, key)
        except BucketNotFound:
            raise
        except BackendError as exc:
            if exc.status != 404:
                raise

    async def delete_objects(
        self, bucket: str, keys: Sequence[str], *, quiet: bool = True
    ) -> list[DeleteError]:
        """DeleteObjects (up to 1000 keys): the keys that could not be deleted."""
        if not keys:
            return []
        if len(keys) > 1000:
            raise ValueError(f"DeleteObjects takes at most 1000 keys (got {len(keys)})")
        try:
            body = delete_body(keys, quiet=quiet)
        except ValueError as exc:
            raise BackendError(f"DeleteObjects: {exc}", url=self.url(bucket)) from None
        md5 = await asyncio.to_thread(_b64md5, body)
        response = await self._request(
            "DeleteObjects",
            "POST",
            bucket,
            None,
            query=(("delete", None),),
            headers={"content-md5": md5},
            body=body,
        )
        try:
            return parse_delete_result(response.body)[1]
        except XmlError as exc:
            raise self._bad_xml("DeleteObjects", exc, bucket) from None

    async def copy_object(
        self,
        bucket: str,
        key: str,
        src_bucket: str,
        src_key: str,
        *,
        if_match: str | None = None,
        metadata: Mapping[str, str] | None = None,
        content_type: str | None = None,
        replace_metadata: bool = False,
    ) -> CopyResult:
        """CopyObject (up to 5 GiB). Metadata is copied unless ``replace_metadata``."""
        headers = self._write_headers(bucket, key, metadata if replace_metadata else None, None)
        if replace_metadata and content_type:
            headers["content-type"] = content_type
        headers["x-amz-copy-source"] = _copy_source(src_bucket, src_key)
        headers["x-amz-metadata-directive"] = "REPLACE" if replace_metadata else "COPY"
        if if_match:
            headers["x-amz-copy-source-if-match"] = _quote_etag(if_match)
        response = await self._request("CopyObject", "PUT", bucket, key, headers=headers)
        self._ok_body_error("CopyObject", response.body, bucket, key)
        try:
            return parse_copy(response.body)
        except XmlError as exc:
            raise self._bad_xml("CopyObject", exc, bucket, key) from None

    # -- multipart -------------------------------------------------------------------

    async def create_multipart_upload(
        self,
        bucket: str,
        key: str,
        *,
        metadata: Mapping[str, str] | None = None,
        content_type: str | None = None,
        checksum_algorithm: str | None = None,
        checksum_type: str | None = None,
    ) -> str:
        """CreateMultipartUpload: the new upload's id.

        ``checksum_algorithm`` (``crc32c``...) announces per-part checksums;
        ``checksum_type`` is ``COMPOSITE`` or ``FULL_OBJECT``.
        """
        headers = self._write_headers(bucket, key, metadata, content_type)
        if checksum_algorithm:
            headers["x-amz-checksum-algorithm"] = checksum_algorithm.upper()
        if checksum_type:
            headers["x-amz-checksum-type"] = checksum_type.upper()
        response = await self._request(
            "CreateMultipartUpload",
            "POST",
            bucket,
            key,
            query=(("uploads", None),),
            headers=headers,
        )
        try:
            return parse_initiate(response.body)
        except XmlError as exc:
            raise self._bad_xml("CreateMultipartUpload", exc, bucket, key) from None

    async def upload_part(
        self,
        bucket: str,
        key: str,
        upload_id: str,
        number: int,
        body: Body,
        *,
        content_md5: str | None = None,
        checksums: Mapping[str, str] | None = None,
    ) -> str:
        """UploadPart: the part's ETag (quotes stripped)."""
        headers: dict[str, str] = {}
        _add_checksums(headers, content_md5, checksums)
        response = await self._request(
            "UploadPart",
            "PUT",
            bucket,
            key,
            query=(("partNumber", str(number)), ("uploadId", upload_id)),
            headers=headers,
            body=body,
        )
        etag = _unquote_etag(response.headers.get("etag"))
        if not etag:
            raise BackendError(
                f"UploadPart {number}: the answer has no ETag", url=self.url(bucket, key)
            )
        return etag

    async def upload_part_copy(
        self,
        bucket: str,
        key: str,
        upload_id: str,
        number: int,
        src_bucket: str,
        src_key: str,
        *,
        first: int | None = None,
        last: int | None = None,
        if_match: str | None = None,
    ) -> CopyResult:
        """UploadPartCopy of bytes ``[first, last]`` (all of the source without them)."""
        headers = {"x-amz-copy-source": _copy_source(src_bucket, src_key)}
        if first is not None and last is not None:
            headers["x-amz-copy-source-range"] = f"bytes={first}-{last}"
        if if_match:
            headers["x-amz-copy-source-if-match"] = _quote_etag(if_match)
        response = await self._request(
            "UploadPartCopy",
            "PUT",
            bucket,
            key,
            query=(("partNumber", str(number)), ("uploadId", upload_id)),
            headers=headers,
        )
        self._ok_body_error("UploadPartCopy", response.body, bucket, key)
        try:
            return parse_copy(response.body)
        except XmlError as exc:
            raise self._bad_xml("UploadPartCopy", exc, bucket, key) from None

    async def complete_multipart_upload(
        self, bucket: str, key: str, upload_id: str, parts: Iterable[PartSpec]
    ) -> CompleteResult:
        """CompleteMultipartUpload with ``parts`` in the order given (sort them first).

        An ``<Error>`` in the 200 answer (S3 sends one when assembly fails
        after it started answering) raises like an error status would.
        """
        try:
            body = complete_multipart_body(parts)
        except ValueError as exc:
            raise BackendError(
                f"CompleteMultipartUpload: {exc}", url=self.url(bucket, key)
            ) from None
        response = await self._request(
            "CompleteMultipartUpload",
            "POST",
            bucket,
            key,
            query=(("uploadId", upload_id),),
            body=body,
        )
        self._ok_body_error("CompleteMultipartUpload", response.body, bucket, key)
        try:
            result = parse_complete(response.body)
        except XmlError as exc:
            raise self._bad_xml("CompleteMultipartUpload", exc, bucket, key) from None
        if result.etag is None:
            etag = _unquote_etag(response.headers.get("etag"))
            if etag:
                result = CompleteResult(etag, result.location, result.checksums)
        return result

    async def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        """AbortMultipartUpload (raises NotFound if the upload is gone)."""
        await self._request(
            "AbortMultipartUpload",
            "DELETE",
            bucket,
            key,
            query=(("uploadId", upload_id),),
        )

    async def list_parts(
        self,
        bucket: str,
        key: str,
        upload_id: str,
        *,
        marker: int = 0,
        max_parts: int | None = None,
    ) -> PartList:
        """One ListParts page after part ``marker``."""
        query: list[tuple[str, str | None]] = [("uploadId", upload_id)]
        if marker:
            query.append(("part-number-marker", str(marker)))
        if max_parts is not None:
            query.append(("max-parts", str(max_parts)))
        response = await self._request("ListParts", "GET", bucket, key, query=query)
        try:
            return parse_list_parts(response.body)
        except XmlError as exc:
            raise self._bad_xml("ListParts", exc, bucket, key) from None

    async def list_multipart_uploads(
        self,
        bucket: str,
        *,
        prefix: str = "",
        key_marker: str = "",
        upload_id_marker: str = "",
        max_uploads: int | None = None,
    ) -> UploadList:
        """One ListMultipartUploads page (keys URL-decoded if the server encoded them)."""
        query: list[tuple[str, str | None]] = [("uploads", None)]
        if prefix:
            query.append(("prefix", prefix))
        if key_marker:
            query.append(("key-marker", key_marker))
        if upload_id_marker:
            query.append(("upload-id-marker", upload_id_marker))
        if max_uploads is not None:
            query.append(("max-uploads", str(max_uploads)))
        response = await self._request("ListMultipartUploads", "GET", bucket, None, query=query)
        try:
            return parse_list_uploads(response.body)
        except XmlError as exc:
            raise self._bad_xml("ListMultipartUploads", exc, bucket, prefix) from None

    # -- listing --------------------------------------------------------------------------

    async def list_objects_v2(
        self,
        bucket: str,
        *,
        prefix: str = "",
        continuation_token: str | None = None,
        start_after: str | None = None,
        delimiter: str | None = None,
        max_keys: int | None = None,
        encoding_type_url: bool = True,
    ) -> ObjectList:
        """One ListObjectsV2 page.

        With ``encoding_type_url`` (the default, as botocore does) the server
        URL-encodes keys, so keys with characters XML cannot carry survive;
        they are decoded here.
        """
        query: list[tuple[str, str | None]] = [("list-type", "2")]
        if prefix:
            query.append(("prefix", prefix))
        if continuation_token:
            query.append(("continuation-token", continuation_token))
        if start_after:
            query.append(("start-after", start_after))
        if delimiter:
            query.append(("delimiter", delimiter))
        if max_keys is not None:
            query.append(("max-keys", str(max_keys)))
        if encoding_type_url:
            query.append(("encoding-type", "url"))
        response = await self._request("ListObjectsV2", "GET", bucket, None, query=query)
        try:
            page = parse_list_objects_v2(response.body)
        except XmlError as exc:
            raise self._bad_xml("ListObjectsV2", exc, bucket, prefix) from None
        if page.truncated and not page.next_token:
            raise BackendError(
                "listing is truncated but the server sent no continuation token",
                url=self.url(bucket, prefix),
            )
        return page


# -- helpers -----------------------------------------------------------------------------


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _quote_etag(etag: str) -> str:
    return etag if etag.startswith('"') or etag == "*" else f'"{etag}"'


def _unquote_etag(etag: str | None) -> str | None:
    return etag.strip('"') if etag else None


def _copy_source(bucket: str, key: str) -> str:
    return quote(f"{bucket}/{key}", safe="/~")


def _b64md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode("ascii")


def _check_header(what: str, value: str, url: str) -> None:
    if not value.isascii() or not value.isprintable():
        raise BackendError(
            f"{what} cannot be sent as an S3 header: use printable ASCII only", url=url
        )


def _add_checksums(
    headers: dict[str, str], content_md5: str | None, checksums: Mapping[str, str] | None
) -> None:
    if content_md5:
        headers["content-md5"] = content_md5
    if checksums:
        for algorithm, value in checksums.items():
            name = algorithm.lower()
            if name not in CHECKSUM_ALGORITHMS:
                raise ValueError(f"unknown checksum algorithm {algorithm!r}")
            headers[f"x-amz-checksum-{name}"] = value


def _header_checksums(headers: Mapping[str, str]) -> dict[str, str]:
    """Whole-object checksums in ``x-amz-checksum-*`` answer headers.

    Composite checksums of multipart objects (``value-N``, or
    ``x-amz-checksum-type: COMPOSITE``) are not checksums of the bytes and
    are left out.
    """
    if headers.get("x-amz-checksum-type", "FULL_OBJECT").upper() != "FULL_OBJECT":
        return {}
    found: dict[str, str] = {}
    for name in CHECKSUM_ALGORITHMS:
        value = headers.get(f"x-amz-checksum-{name}")
        if value and "-" not in value:
            found[name] = value
    return found


def _object_info(key: str, headers: Mapping[str, str], size: int | None) -> ObjectInfo:
    """ObjectInfo from HEAD/GET answer headers (``size``: the whole object's, if known)."""
    if size is None:
        length = headers.get("content-length", "")
        size = int(length) if length.isdigit() else 0
    metadata = {k[len(_META) :]: v for k, v in headers.items() if k.startswith(_META)}
    return ObjectInfo(
        key=key,
        size=size,
        mtime=parse_http_date(headers.get("last-modified")),
        etag=_unquote_etag(headers.get("etag")),
        metadata=metadata,
        content_type=headers.get("content-type"),
        checksums=_header_checksums(headers),
    )
