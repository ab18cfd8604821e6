"""The S3 request client (:class:`S3Wire`): the requests synxfer's data path
sends, signed and parsed here.

Built on :mod:`._signed` (addressing, signing, sending, error answers),
:class:`synxfer.backend.HttpClient` (the connection pool and receive-into),
:mod:`._wire` (the wire format: XML bodies; ETags, checksums, object info in
headers) and :mod:`._credentials`.
No botocore on this path: a request costs a URL, a dict of headers, one
signature and one HTTP exchange.

Errors are mapped as :mod:`._signed` describes; an ``<Error>`` inside a 200
answer (CompleteMultipartUpload, CopyObject, UploadPartCopy) is an error.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from synxfer import (
    BackendError,
    BucketNotFound,
    ObjectInfo,
    PartInfo,
    TransientError,
    WriteOptions,
)
from synxfer.backend import Body, HttpResponse

from ._signed import Addressing, SignedClient, s3_code
from ._wire import (
    CHECKSUM_ALGORITHMS,
    BucketList,
    CompleteResult,
    CopyResult,
    DeleteError,
    ObjectList,
    PartList,
    UploadList,
    XmlError,
    add_checksums,
    b64md5,
    check_header,
    complete_multipart_body,
    conditional_write,
    copy_source,
    create_bucket_body,
    delete_body,
    encryption,
    header_checksums,
    object_info,
    parse_complete,
    parse_copy,
    parse_delete_result,
    parse_initiate,
    parse_list_buckets,
    parse_list_objects_v2,
    parse_list_parts,
    parse_list_uploads,
    quote_etag,
    unquote_etag,
)

__all__ = ["CHECKSUM_ALGORITHMS", "Addressing", "PartAnswer", "PartSpec", "S3Wire", "s3_code"]

#: A part for CompleteMultipartUpload: ``(number, etag)`` or with checksums.
PartSpec = tuple[int, str] | tuple[int, str, dict[str, str]]


class PartAnswer(NamedTuple):
    """What an UploadPart answer says of the stored part: its ETag, the
    checksums the server echoed (``{"crc32c": base64}``) and its encryption."""

    etag: str
    checksums: dict[str, str]
    encryption: str | None


_CONTENT_RANGE = re.compile(r"^bytes\s+(\d+)-(\d+)/(\d+|\*)$")
_META = "x-amz-meta-"
#: WriteOptions fields sent as a header of their own, on every write (CopyObject too).
_OPTION_HEADERS = (
    ("storage_class", "x-amz-storage-class"),
    ("sse", "x-amz-server-side-encryption"),
    ("sse_kms_key_id", "x-amz-server-side-encryption-aws-kms-key-id"),
    ("acl", "x-amz-acl"),
)
#: WriteOptions fields that are stored HTTP headers: on CopyObject, only with
#: the REPLACE metadata directive (as metadata and the content type).
_STORED_HEADERS = (
    ("cache_control", "cache-control"),
    ("content_encoding", "content-encoding"),
    ("content_disposition", "content-disposition"),
)


def _version(version_id: str | None) -> tuple[tuple[str, str | None], ...]:
    """The ``versionId`` query of a request on one object version (none: current)."""
    return () if version_id is None else (("versionId", version_id),)


class S3Wire(SignedClient):
    """Every S3 call synxfer's data path needs, signed and parsed here.

    See :class:`~._signed.SignedClient` for the constructor's arguments.
    """

    # -- objects -------------------------------------------------------------------

    async def head_object(
        self,
        bucket: str,
        key: str,
        *,
        if_match: str | None = None,
        checksum_mode: bool = False,
        version_id: str | None = None,
    ) -> ObjectInfo:
        """HeadObject: size, mtime, ETag, metadata, content type (and checksums);
        of version ``version_id`` if given."""
        headers: dict[str, str] = {}
        if if_match:
            headers["if-match"] = quote_etag(if_match)
        if checksum_mode:
            headers["x-amz-checksum-mode"] = "ENABLED"
        response = await self._request(
            "HeadObject", "HEAD", bucket, key, query=_version(version_id), headers=headers
        )
        return object_info(key, response.headers, None)

    async def head_object_part(
        self,
        bucket: str,
        key: str,
        number: int,
        *,
        if_match: str | None = None,
        version_id: str | None = None,
    ) -> PartInfo:
        """HeadObject with ``partNumber``: part ``number``'s size, offset (from
        Content-Range, when the server sends it), the parts count
        (``x-amz-mp-parts-count``; 1 for a single-part object) and the part's
        checksums (S3 reports a composite object's)."""
        headers = {"x-amz-checksum-mode": "ENABLED"}
        if if_match:
            headers["if-match"] = quote_etag(if_match)
        response = await self._request(
            "HeadObject",
            "HEAD",
            bucket,
            key,
            query=(("partNumber", str(number)), *_version(version_id)),
            headers=headers,
        )
        answer = response.headers
        length = answer.get("content-length", "")
        count = answer.get("x-amz-mp-parts-count", "1")
        offset: int | None = None
        m = _CONTENT_RANGE.match(answer.get("content-range", "").strip())
        if m is not None:
            offset = int(m.group(1))
        return PartInfo(
            number=number,
            size=int(length) if length.isdigit() else 0,
            count=int(count) if count.isdigit() else 1,
            offset=offset,
            checksums=header_checksums(answer),
        )

    async def head_bucket(self, bucket: str) -> None:
        """HeadBucket: returns if the bucket exists and is accessible, else raises."""
        await self._request("HeadBucket", "HEAD", bucket, None)

    async def create_bucket(
        self, bucket: str, *, region: str | None = None, acl: str | None = None
    ) -> None:
        """CreateBucket, with a LocationConstraint of ``region`` unless it is
        ``us-east-1`` (or None); ``acl`` a canned ACL."""
        headers: dict[str, str] = {}
        if acl:
            headers["x-amz-acl"] = acl
        try:
            body = create_bucket_body(region)
        except ValueError as exc:
            raise BackendError(f"CreateBucket: {exc}", url=self.url(bucket)) from None
        await self._request("CreateBucket", "PUT", bucket, None, headers=headers, body=body)

    async def delete_bucket(self, bucket: str) -> None:
        """DeleteBucket (``BucketNotEmpty`` while it holds objects)."""
        await self._request("DeleteBucket", "DELETE", bucket, None)

    async def list_buckets(self, continuation_token: str | None = None) -> BucketList:
        """One ListBuckets page (``GET /`` on the endpoint): the buckets the
        credentials own. Servers that do not page it answer with all of them."""
        query = (("continuation-token", continuation_token),) if continuation_token else ()
        response = await self._request("ListBuckets", "GET", "", None, query=query, service=True)
        try:
            return parse_list_buckets(response.body)
        except XmlError as exc:
            raise self._bad_xml("ListBuckets", exc, "") from None

    def _get_headers(
        self, offset: int, length: int | None, if_match: str | None, checksum_mode: bool
    ) -> dict[str, str]:
        headers: dict[str, str] = {}
        if offset > 0 or length is not None:
            last = "" if length is None else str(offset + length - 1)
            headers["range"] = f"bytes={offset}-{last}"
        if if_match:
            headers["if-match"] = quote_etag(if_match)
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
        version_id: str | None = None,
    ) -> tuple[int, ObjectInfo]:
        """GetObject into ``buffer``: ``(bytes received, object info)``.

        Reads ``[offset, offset+length)`` (to the end without ``length``;
        the whole object with neither), straight from the socket into
        ``buffer`` -- which must hold the range (or, for a whole-object read,
        the object: a larger object raises BackendError). ``info.size`` is
        the whole object's size. ``if_match`` (an ETag) makes a changed
        object raise PreconditionFailed; ``version_id`` reads that version.
        """
        if offset < 0 or (length is not None and length < 0):
            raise ValueError(f"invalid range: offset={offset}, length={length}")
        view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
        if length == 0:
            return 0, await self.head_object(
                bucket, key, if_match=if_match, checksum_mode=checksum_mode, version_id=version_id
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
            query=_version(version_id),
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
            return len(chunk), object_info(key, response.headers, len(data))
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
        version_id: str | None = None,
    ) -> tuple[bytes | bytearray, ObjectInfo]:
        """GetObject into a new buffer of the body's size: ``(data, info)``."""
        if offset < 0 or (length is not None and length < 0):
            raise ValueError(f"invalid range: offset={offset}, length={length}")
        if length == 0:
            info = await self.head_object(
                bucket, key, if_match=if_match, checksum_mode=checksum_mode, version_id=version_id
            )
            return b"", info
        headers = self._get_headers(offset, length, if_match, checksum_mode)
        ranged = "range" in headers
        response = await self._request(
            "GetObject", "GET", bucket, key, query=_version(version_id), headers=headers
        )
        if ranged and response.status == 200:
            data = response.body
            end = len(data) if length is None else offset + length
            return data[offset:end], object_info(key, response.headers, len(data))
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
        return object_info(key, headers, size)

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
        options: WriteOptions | None = None,
    ) -> ObjectInfo:
        """PutObject from ``body`` (sent from the caller's buffer, not copied).

        ``content_md5`` (base64) and ``checksums`` (``{"crc32c": base64}``,
        sent as ``x-amz-checksum-*``) are verified by the server.
        ``options``: the object's other options (storage class, encryption,
        ACL, stored headers); its metadata and content type are ``metadata``
        and ``content_type``.
        """
        headers = self._write_headers(bucket, key, metadata, content_type, options)
        add_checksums(headers, content_md5, checksums)
        headers.update(conditional_write(options is not None and options.if_none_match))
        response = await self._request("PutObject", "PUT", bucket, key, headers=headers, body=body)
        return ObjectInfo(
            key=key,
            size=memoryview(body).nbytes,
            etag=unquote_etag(response.headers.get("etag")),
            metadata=dict(metadata or {}),
            content_type=content_type,
            checksums=header_checksums(response.headers),
            encryption=encryption(response.headers),
        )

    def _write_headers(
        self,
        bucket: str,
        key: str,
        metadata: Mapping[str, str] | None,
        content_type: str | None,
        options: WriteOptions | None = None,
        *,
        stored: bool = True,
    ) -> dict[str, str]:
        """The headers of a new object: metadata, content type and ``options``'
        others (the stored headers -- Cache-Control... -- only with ``stored``)."""
        headers: dict[str, str] = {}
        if metadata:
            for name, value in metadata.items():
                check_header(f"metadata {name!r}", name + value, self.url(bucket, key))
                headers[_META + name.lower()] = value
        if content_type:
            check_header("content type", content_type, self.url(bucket, key))
            headers["content-type"] = content_type
        if options is not None:
            pairs = _OPTION_HEADERS + _STORED_HEADERS if stored else _OPTION_HEADERS
            for field, header in pairs:
                value = getattr(options, field)
                if value:
                    check_header(field.replace("_", " "), value, self.url(bucket, key))
                    headers[header] = value
            if options.tags:
                from ._tagging import tagging_header  # here: most puts carry no tags

                headers["x-amz-tagging"] = tagging_header(options.tags)
        return headers

    async def delete_object(self, bucket: str, key: str, *, version_id: str | None = None) -> None:
        """DeleteObject (of version ``version_id`` only, if given). A missing key
        is not an error (S3 answers 204; some stores 404)."""
        try:
            await self._request("DeleteObject", "DELETE", bucket, key, query=_version(version_id))
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
        md5 = await asyncio.to_thread(b64md5, body)
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
        options: WriteOptions | None = None,
    ) -> CopyResult:
        """CopyObject (up to 5 GiB). Metadata is copied unless ``replace_metadata``.

        ``options``' storage class, encryption and ACL apply either way; its
        stored headers (Cache-Control...) only with ``replace_metadata`` (S3
        keeps the source's otherwise).
        """
        headers = self._write_headers(
            bucket,
            key,
            metadata if replace_metadata else None,
            None,
            options,
            stored=replace_metadata,
        )
        if replace_metadata and content_type:
            headers["content-type"] = content_type
        headers["x-amz-copy-source"] = copy_source(src_bucket, src_key)
        headers["x-amz-metadata-directive"] = "REPLACE" if replace_metadata else "COPY"
        if options is not None and options.tags:  # else S3 keeps the source's (COPY)
            headers["x-amz-tagging-directive"] = "REPLACE"
        if options is not None and options.checksum_algorithm not in (None, "MD5"):
            # S3 computes the copy's checksum with it (a chosen checksum, _chosen)
            headers["x-amz-checksum-algorithm"] = str(options.checksum_algorithm)
        if if_match:
            headers["x-amz-copy-source-if-match"] = quote_etag(if_match)
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
        options: WriteOptions | None = None,
    ) -> str:
        """CreateMultipartUpload: the new upload's id.

        ``checksum_algorithm`` (``crc32c``...) announces per-part checksums;
        ``checksum_type`` is ``COMPOSITE`` or ``FULL_OBJECT``. ``options`` as
        for :meth:`put_object`.
        """
        headers = self._write_headers(bucket, key, metadata, content_type, options)
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
        answer = await self.upload_part_answer(
            bucket, key, upload_id, number, body, content_md5=content_md5, checksums=checksums
        )
        return answer.etag

    async def upload_part_answer(
        self,
        bucket: str,
        key: str,
        upload_id: str,
        number: int,
        body: Body,
        *,
        content_md5: str | None = None,
        checksums: Mapping[str, str] | None = None,
    ) -> PartAnswer:
        """UploadPart: the part's ETag, the checksums echoed, its encryption."""
        headers: dict[str, str] = {}
        add_checksums(headers, content_md5, checksums)
        response = await self._request(
            "UploadPart",
            "PUT",
            bucket,
            key,
            query=(("partNumber", str(number)), ("uploadId", upload_id)),
            headers=headers,
            body=body,
        )
        etag = unquote_etag(response.headers.get("etag"))
        if not etag:
            raise BackendError(
                f"UploadPart {number}: the answer has no ETag", url=self.url(bucket, key)
            )
        return PartAnswer(etag, header_checksums(response.headers), encryption(response.headers))

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
        headers = {"x-amz-copy-source": copy_source(src_bucket, src_key)}
        if first is not None and last is not None:
            headers["x-amz-copy-source-range"] = f"bytes={first}-{last}"
        if if_match:
            headers["x-amz-copy-source-if-match"] = quote_etag(if_match)
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
        self,
        bucket: str,
        key: str,
        upload_id: str,
        parts: Iterable[PartSpec],
        *,
        if_none_match: bool = False,
        checksum_headers: Mapping[str, str] | None = None,
    ) -> CompleteResult:
        """CompleteMultipartUpload with ``parts`` in the order given (sort them first).
        ``if_none_match``: only if the key has no object (412 otherwise).
        ``checksum_headers``: ``x-amz-checksum-type`` and a FULL_OBJECT
        upload's whole-object ``x-amz-checksum-<algorithm>``, which S3 checks.

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
            headers={**conditional_write(if_none_match), **(checksum_headers or {})},
            body=body,
        )
        self._ok_body_error("CompleteMultipartUpload", response.body, bucket, key)
        try:
            result = parse_complete(response.body)
        except XmlError as exc:
            raise self._bad_xml("CompleteMultipartUpload", exc, bucket, key) from None
        if result.etag is None:
            etag = unquote_etag(response.headers.get("etag"))
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
