"""The S3 backend: synxfer's primitives on one aiobotocore client.

Design choices, briefly:

* **One client per backend**, created in :meth:`S3Backend.open` and closed in
  :meth:`S3Backend.aclose`. Its connection pool holds
  ``options.max_connections`` connections; the engine's LimitLayer decides how
  many requests are actually in flight.
* **No retries in botocore** (``total_max_attempts=1``). synxfer's RetryLayer
  owns retries, so a backoff never holds a concurrency slot and every retry
  is visible to the caller. The backend's job is to classify errors well
  (see :mod:`synxfer_s3._errors`).
* **Checksums are ours.** The engine hashes each body off the event loop and
  we send it as ``Content-MD5``, which the server verifies. botocore adds its
  own checksums only where an operation requires one, and validates
  responses only when required. Payload signing is off: otherwise, over
  ``http://``, botocore SHA-256-hashes every body on the event loop.
* **Errors are mapped at the boundary**: every request runs under
  :meth:`S3Backend._guard`, so no botocore or aiohttp exception escapes.
* **S3-compatible stores** subclass :class:`S3Backend` and override small
  hooks only: :meth:`~S3Backend._resolve_endpoint`,
  :meth:`~S3Backend._resolve_region`, :meth:`~S3Backend._client_config` and
  the class attributes ``default_region``, ``addressing_style`` and
  ``md5_only`` (see :mod:`synxfer_scp`).

Credentials come from botocore's standard chain (environment, profile,
container/instance metadata) and are never held by this object.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AsyncExitStack
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast
from urllib.parse import urlsplit

from aiobotocore.config import AioConfig
from aiobotocore.session import AioSession, get_session
from botocore.exceptions import BotoCoreError, ClientError, ProfileNotFound
from botocore.loaders import Loader, create_loader

from synxfer import (
    BackendError,
    BucketNotFound,
    CompletedPart,
    ConfigError,
    GiB,
    ListPage,
    MiB,
    MultipartUpload,
    NotFound,
    ObjectInfo,
    PendingUpload,
    ReadResult,
    TransientError,
    WriteOptions,
)
from synxfer.backend import (
    Backend,
    BackendOptions,
    Capabilities,
    Checksum,
    Payload,
    bounded_map,
)

from ._errors import FOREIGN_ERRORS, bucket_not_found, classify, client_error_details, map_error

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client
    from types_aiobotocore_s3.type_defs import (
        CopyObjectRequestTypeDef,
        CreateMultipartUploadRequestTypeDef,
        GetObjectRequestTypeDef,
        HeadObjectRequestTypeDef,
        ListObjectsV2RequestTypeDef,
        PutObjectRequestTypeDef,
        UploadPartRequestTypeDef,
    )

__all__ = ["AddressingStyle", "S3Backend", "check_endpoint_url"]

AddressingStyle = Literal["auto", "virtual", "path"]
_ADDRESSING_STYLES: tuple[AddressingStyle, ...] = ("auto", "virtual", "path")

_CONTENT_RANGE = re.compile(r"^bytes\s+(?:\d+-\d+|\*)/(\d+)$")
_MD5_HEX = re.compile(r"^[0-9a-fA-F]{32}$")


class S3Backend(Backend):
    """Amazon S3 (and S3-compatible stores via ``endpoint_url``): ``s3://bucket/key``.

    ``options.extra["addressing_style"]`` (``auto``, ``virtual`` or ``path``)
    overrides the class default, for S3-compatible servers that need
    path-style URLs.
    """

    scheme: ClassVar[str] = "s3"
    capabilities = Capabilities(
        multipart=True,
        min_part_size=5 * MiB,
        max_part_size=5 * GiB,
        max_parts=10_000,
        max_single_put=5 * GiB,
        ranged_reads=True,
        server_side_copy=True,
        metadata=True,
        batch_delete=True,
        part_checksum="md5",
        list_parts=True,
        # A copy of an object over max_copy_size sends one UploadPartCopy per
        # part, several at once: each request takes a slot of options.requests.
        fan_out=frozenset({"copy"}),
    )

    #: Signing region when neither ``options.region`` nor the AWS chain names one.
    default_region: ClassVar[str] = "us-east-1"
    #: botocore's S3 addressing style; ``auto`` picks virtual-host style on AWS.
    addressing_style: ClassVar[AddressingStyle] = "auto"
    #: Send ``Content-MD5`` *instead of* botocore's CRC32 on operations that
    #: require a checksum (DeleteObjects), for servers that predate S3's
    #: flexible checksums. ``Content-MD5`` is always added; this drops the CRC.
    md5_only: ClassVar[bool] = False

    def __init__(self, bucket: str, options: BackendOptions) -> None:
        if not bucket:
            raise ConfigError(f"{self.scheme}:// needs a bucket: {self.scheme}://bucket/prefix")
        self.bucket = bucket
        self.options = options
        self.endpoint_url = self._resolve_endpoint()
        self._addressing = self._resolve_addressing_style()
        #: Keys per ListObjectsV2 page (S3's maximum).
        self.list_page_size = 1000
        #: Keys per DeleteObjects request (S3's maximum).
        self.delete_batch_size = 1000
        #: Largest object CopyObject accepts; bigger ones are copied in parts.
        self.max_copy_size = 5 * GiB
        #: Part size of a multipart (UploadPartCopy) copy; grows to fit max_parts.
        self.copy_part_size = 512 * MiB
        #: The signing region, resolved by :meth:`open`.
        self.region: str | None = None
        self._client: S3Client | None = None
        self._stack: AsyncExitStack | None = None
        self._bucket_exists = False

    # -- hooks for S3-compatible profiles ------------------------------------

    def _resolve_endpoint(self) -> str | None:
        """The endpoint URL, or None for AWS's own (and botocore's config file)."""
        url = (
            self.options.endpoint_url
            or os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL")
        )
        return check_endpoint_url(url, "--endpoint-url / AWS_ENDPOINT_URL") if url else None

    def _resolve_region(self, session: AioSession) -> str:
        """``options.region``, else the AWS chain's, else :attr:`default_region`."""
        if self.options.region:
            return self.options.region
        chain = session.get_config_variable("region")
        return str(chain) if chain else self.default_region

    def _client_config(self) -> AioConfig:
        """The aiobotocore client configuration (see the module docstring)."""
        return AioConfig(
            max_pool_connections=self.options.max_connections,
            connect_timeout=self.options.connect_timeout,
            read_timeout=self.options.read_timeout,
            retries={"total_max_attempts": 1, "mode": "standard"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            s3={"addressing_style": self._addressing, "payload_signing_enabled": False},
            # Parse botocore's JSON models in a thread, not on the event loop.
            warm_up_loader_caches=True,
        )

    def _resolve_addressing_style(self) -> AddressingStyle:
        value = self.options.extra.get("addressing_style", self.addressing_style)
        for style in _ADDRESSING_STYLES:
            if value == style:
                return style
        raise ConfigError(
            f"addressing_style must be one of {', '.join(_ADDRESSING_STYLES)} (got {value!r})"
        )

    # -- lifecycle -----------------------------------------------------------

    async def open(self) -> None:
        if self._client is not None:
            return
        stack = AsyncExitStack()
        try:
            session = (
                AioSession(profile=self.options.profile) if self.options.profile else get_session()
            )
            _share_loader(session)
            region = self._resolve_region(session)
            client = await stack.enter_async_context(
                session.create_client(
                    "s3",
                    region_name=region,
                    endpoint_url=self.endpoint_url,
                    config=self._client_config(),
                )
            )
        except ProfileNotFound as exc:
            await stack.aclose()
            raise ConfigError(
                f"AWS profile {self.options.profile!r} not found; "
                "check --profile / AWS_PROFILE and ~/.aws/config"
            ) from exc
        except (BotoCoreError, ValueError) as exc:
            await stack.aclose()
            raise ConfigError(f"cannot set up the {self.scheme} client: {exc}") from exc
        client.meta.events.register("before-call.s3.DeleteObjects", self._delete_objects_md5)
        self._client, self._stack, self.region = client, stack, region

    async def aclose(self) -> None:
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            with self._guard():
                await stack.aclose()

    @property
    def _s3(self) -> S3Client:
        if self._client is None:
            raise RuntimeError(f"{self!r} is not open: use 'async with' or await open() first")
        return self._client

    @contextlib.contextmanager
    def _guard(self, key: str = "") -> Iterator[None]:
        """Map any botocore/aiohttp/OS error raised inside to synxfer's tree."""
        try:
            yield
        except FOREIGN_ERRORS as exc:
            raise map_error(exc, url=self.url(key), bucket=self.bucket) from exc

    def _delete_objects_md5(self, params: dict[str, Any], **kwargs: Any) -> None:
        """botocore hook: give DeleteObjects a Content-MD5 (see :attr:`md5_only`).

        Since botocore 1.36 an operation that requires a checksum gets a CRC32
        instead of Content-MD5, which many S3-compatible servers reject.
        Content-MD5 is valid everywhere; the body is small XML.
        """
        body = params.get("body")
        if not isinstance(body, bytes | bytearray):
            return
        params["headers"]["Content-MD5"] = _b64md5(bytes(body))
        if self.md5_only:
            checksum = params.get("context", {}).get("checksum", {})
            checksum.pop("request_algorithm", None)
            checksum.pop("request_algorithm_header", None)

    # -- primitives ----------------------------------------------------------

    async def stat(self, key: str) -> ObjectInfo:
        return await self._head(key)

    async def _head(self, key: str, if_match: str | None = None) -> ObjectInfo:
        kwargs: HeadObjectRequestTypeDef = {"Bucket": self.bucket, "Key": key}
        if if_match:
            kwargs["IfMatch"] = _quote(if_match)
        with self._guard(key):
            try:
                resp = await self._s3.head_object(**kwargs)
            except ClientError as exc:
                if classify(*client_error_details(exc)[:2]) is NotFound:
                    await self._raise_if_no_bucket(key)
                raise
        return ObjectInfo(
            key=key,
            size=resp["ContentLength"],
            mtime=_timestamp(resp.get("LastModified")),
            etag=_unquote(resp.get("ETag")),
            metadata=dict(resp.get("Metadata") or {}),
            content_type=resp.get("ContentType"),
        )

    async def _raise_if_no_bucket(self, key: str) -> None:
        """After a body-less 404 (a HEAD), tell a missing bucket from a missing key."""
        if self._bucket_exists:
            return
        try:
            await self._s3.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            code, status, _ = client_error_details(exc)
            if status == 404 or code in {"NoSuchBucket", "NotFound", "404"}:
                raise bucket_not_found(self.bucket, self.url(key), 404) from exc
            return  # can't tell (403, say): report the key as missing
        except FOREIGN_ERRORS:
            return
        self._bucket_exists = True

    async def list_page(self, prefix: str, cursor: str | None = None) -> ListPage:
        kwargs: ListObjectsV2RequestTypeDef = {
            "Bucket": self.bucket,
            "Prefix": prefix,
            "MaxKeys": self.list_page_size,
        }
        if cursor:
            kwargs["ContinuationToken"] = cursor
        with self._guard(prefix):
            resp = await self._s3.list_objects_v2(**kwargs)
        items = [
            ObjectInfo(
                key=obj["Key"],
                size=obj.get("Size", 0),
                mtime=_timestamp(obj.get("LastModified")),
                etag=_unquote(obj.get("ETag")),
            )
            for obj in resp.get("Contents", [])
        ]
        next_cursor = resp.get("NextContinuationToken") if resp.get("IsTruncated") else None
        if resp.get("IsTruncated") and not next_cursor:
            raise BackendError(
                "listing is truncated but the server sent no continuation token",
                url=self.url(prefix),
            )
        return ListPage(items, next_cursor)

    async def read(
        self,
        key: str,
        offset: int = 0,
        length: int | None = None,
        *,
        if_match: str | None = None,
    ) -> ReadResult:
        if offset < 0 or (length is not None and length < 0):
            raise ValueError(f"invalid range: offset={offset}, length={length}")
        if length == 0:
            return ReadResult(b"", await self._head(key, if_match))
        kwargs: GetObjectRequestTypeDef = {"Bucket": self.bucket, "Key": key}
        # No Range header for a whole-object read: S3 answers 416 to any range
        # on a 0-byte object.
        ranged = offset > 0 or length is not None
        if ranged:
            last = "" if length is None else str(offset + length - 1)
            kwargs["Range"] = f"bytes={offset}-{last}"
        if if_match:
            kwargs["IfMatch"] = _quote(if_match)
        with self._guard(key):
            try:
                resp = await self._s3.get_object(**kwargs)
            except ClientError as exc:
                code, status, _ = client_error_details(exc)
                if status != 416 and code != "InvalidRange":
                    raise
                # Nothing at `offset`: fine at (or past) the end of the object.
                # The HEAD gives its info and re-checks if_match.
                info = await self._head(key, if_match)
                if offset >= info.size:
                    return ReadResult(b"", info)
                raise TransientError(
                    f"range {offset}- rejected but the object has {info.size} bytes "
                    "(it changed during the read)",
                    url=self.url(key),
                    status=status,
                ) from exc
            async with resp["Body"] as body:
                data = await body.read()

        content_range = resp.get("ContentRange")
        if content_range:
            m = _CONTENT_RANGE.match(content_range.strip())
            if m is None:
                raise BackendError(
                    f"unparseable Content-Range {content_range!r}", url=self.url(key)
                )
            size = int(m.group(1))
        elif ranged:
            # The server ignored Range (HTTP allows it) and sent the whole object.
            size = len(data)
            data = data[offset : None if length is None else offset + length]
        else:
            size = len(data)
        available = max(0, size - offset)
        expected = available if length is None else min(length, available)
        if len(data) != expected:
            cls = TransientError if len(data) < expected else BackendError
            raise cls(
                f"short read: got {len(data)} of {expected} bytes at offset {offset}"
                if len(data) < expected
                else f"server sent {len(data)} bytes for a {expected}-byte range",
                url=self.url(key),
            )
        info = ObjectInfo(
            key=key,
            size=size,
            mtime=_timestamp(resp.get("LastModified")),
            etag=_unquote(resp.get("ETag")),
            metadata=dict(resp.get("Metadata") or {}),
            content_type=resp.get("ContentType"),
        )
        return ReadResult(data, info)

    async def put(
        self,
        key: str,
        data: Payload,
        options: WriteOptions,
        checksum: Checksum | None = None,
    ) -> ObjectInfo:
        kwargs: PutObjectRequestTypeDef = {"Bucket": self.bucket, "Key": key, "Body": _body(data)}
        if options.metadata:
            kwargs["Metadata"] = dict(options.metadata)
        if options.content_type:
            kwargs["ContentType"] = options.content_type
        _add_checksum(kwargs, checksum)
        with self._guard(key):
            resp = await self._s3.put_object(**kwargs)
        return ObjectInfo(
            key=key,
            size=len(data),
            etag=_unquote(resp.get("ETag")),
            metadata=dict(options.metadata),
            content_type=options.content_type,
        )

    async def delete(self, key: str) -> None:
        with self._guard(key):
            try:
                await self._s3.delete_object(Bucket=self.bucket, Key=key)
            except ClientError as exc:
                # S3 answers 204 for a missing key; some compatible stores 404.
                if classify(*client_error_details(exc)[:2]) is not NotFound:
                    raise

    async def delete_many(self, keys: Sequence[str]) -> Mapping[str, Exception]:
        """DeleteObjects in batches of :attr:`delete_batch_size` keys.

        Per-key failures are returned; a failure of a whole request (missing
        bucket, throttling, ...) is raised, which is safe to retry because
        deleting is idempotent.
        """
        failed: dict[str, Exception] = {}
        for start in range(0, len(keys), self.delete_batch_size):
            batch = keys[start : start + self.delete_batch_size]
            with self._guard():
                resp = await self._s3.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
                )
            for err in resp.get("Errors", []):
                key = err.get("Key", "")
                code = err.get("Code", "Unknown")
                cls = classify(code, None)
                if cls is NotFound:
                    continue
                if cls is BucketNotFound:
                    failed[key] = bucket_not_found(self.bucket, self.url(key), None)
                else:
                    msg = f"{code} on DeleteObjects: {err.get('Message', '')}".rstrip(": ")
                    failed[key] = cls(msg, url=self.url(key))
        return failed

    async def copy(self, src_key: str, dst_key: str, options: WriteOptions) -> ObjectInfo:
        """Server-side copy; metadata is copied unless ``options`` sets any.

        With empty ``options`` the copy keeps the source's metadata and content
        type (``MetadataDirective=COPY``); otherwise they are replaced by
        ``options``. The source is pinned by its ETag, so a source that
        changes mid-copy raises PreconditionFailed. Objects larger than
        :attr:`max_copy_size` (CopyObject's 5 GiB limit) are copied with
        UploadPartCopy, several parts at a time. ``copy`` is in
        ``capabilities.fan_out``: each request it sends takes a slot of
        ``options.requests``.
        """
        requests = self.options.requests
        async with requests.slot():
            src = await self._head(src_key)
        replace = bool(options.metadata or options.content_type)
        metadata = dict(options.metadata) if replace else dict(src.metadata)
        content_type = options.content_type if replace else src.content_type
        if src.size > self.max_copy_size:
            return await self._copy_multipart(src, dst_key, WriteOptions(metadata, content_type))
        kwargs: CopyObjectRequestTypeDef = {
            "Bucket": self.bucket,
            "Key": dst_key,
            "CopySource": {"Bucket": self.bucket, "Key": src_key},
            "MetadataDirective": "REPLACE" if replace else "COPY",
        }
        if src.etag:
            kwargs["CopySourceIfMatch"] = _quote(src.etag)
        if replace:
            kwargs["Metadata"] = metadata
            if content_type:
                kwargs["ContentType"] = content_type
        async with requests.slot():
            with self._guard(dst_key):
                resp = await self._s3.copy_object(**kwargs)
        result = resp.get("CopyObjectResult", {})
        return ObjectInfo(
            key=dst_key,
            size=src.size,
            mtime=_timestamp(result.get("LastModified")),
            etag=_unquote(result.get("ETag")),
            metadata=metadata,
            content_type=content_type,
        )

    async def _copy_multipart(
        self, src: ObjectInfo, dst_key: str, options: WriteOptions
    ) -> ObjectInfo:
        caps = self.capabilities
        part_size = max(self.copy_part_size, math.ceil(src.size / caps.max_parts))
        part_size = min(part_size, caps.max_part_size)
        requests = self.options.requests  # one slot per request (see copy)
        async with requests.slot():
            upload = await self.create_multipart(dst_key, options)

        async def copy_part(part: tuple[int, int]) -> CompletedPart:
            number, first = part
            last = min(first + part_size, src.size) - 1
            async with requests.slot():
                with self._guard(dst_key):
                    resp = await self._s3.upload_part_copy(
                        Bucket=self.bucket,
                        Key=dst_key,
                        UploadId=upload.upload_id,
                        PartNumber=number,
                        CopySource={"Bucket": self.bucket, "Key": src.key},
                        CopySourceRange=f"bytes={first}-{last}",
                        CopySourceIfMatch=_quote(src.etag or "*"),
                    )
            etag = _unquote(resp.get("CopyPartResult", {}).get("ETag")) or ""
            return CompletedPart(number, etag, last - first + 1)

        try:
            parts = await bounded_map(
                copy_part,
                enumerate(range(0, src.size, part_size), start=1),
                max(1, min(8, self.options.max_connections)),
            )
            async with requests.slot():
                info = await self.complete_multipart(upload, parts)
        except BaseException:
            with contextlib.suppress(Exception):
                async with requests.slot():
                    await self.abort_multipart(upload)
            raise
        return ObjectInfo(
            key=dst_key,
            size=src.size,
            mtime=info.mtime,
            etag=info.etag,
            metadata=options.metadata,
            content_type=options.content_type,
        )

    async def create_multipart(self, key: str, options: WriteOptions) -> MultipartUpload:
        kwargs: CreateMultipartUploadRequestTypeDef = {"Bucket": self.bucket, "Key": key}
        if options.metadata:
            kwargs["Metadata"] = dict(options.metadata)
        if options.content_type:
            kwargs["ContentType"] = options.content_type
        with self._guard(key):
            resp = await self._s3.create_multipart_upload(**kwargs)
        return MultipartUpload(key=key, upload_id=resp["UploadId"])

    async def upload_part(
        self,
        upload: MultipartUpload,
        number: int,
        data: Payload,
        checksum: Checksum | None = None,
    ) -> CompletedPart:
        kwargs: UploadPartRequestTypeDef = {
            "Bucket": self.bucket,
            "Key": upload.key,
            "UploadId": upload.upload_id,
            "PartNumber": number,
            "Body": _body(data),
        }
        _add_checksum(kwargs, checksum)
        with self._guard(upload.key):
            resp = await self._s3.upload_part(**kwargs)
        return CompletedPart(number=number, etag=_unquote(resp.get("ETag")) or "", size=len(data))

    async def complete_multipart(
        self, upload: MultipartUpload, parts: Sequence[CompletedPart]
    ) -> ObjectInfo:
        """Assemble the parts in number order.

        If the upload is already gone (a retry after a lost response) and the
        object's ETag is the one these parts produce, the earlier attempt
        succeeded and its result is returned.
        """
        ordered = sorted(parts, key=lambda p: p.number)
        with self._guard(upload.key):
            try:
                resp = await self._s3.complete_multipart_upload(
                    Bucket=self.bucket,
                    Key=upload.key,
                    UploadId=upload.upload_id,
                    MultipartUpload={
                        "Parts": [{"PartNumber": p.number, "ETag": _quote(p.etag)} for p in ordered]
                    },
                )
            except ClientError as exc:
                if client_error_details(exc)[0] != "NoSuchUpload":
                    raise
                done = await self._already_completed(upload, ordered)
                if done is None:
                    raise
                return done
        return ObjectInfo(
            key=upload.key,
            size=sum(p.size for p in ordered),
            etag=_unquote(resp.get("ETag")),
        )

    async def _already_completed(
        self, upload: MultipartUpload, parts: Sequence[CompletedPart]
    ) -> ObjectInfo | None:
        expected = _multipart_etag(parts)
        if expected is None:
            return None
        try:
            info = await self._head(upload.key)
        except NotFound:
            return None
        return info if info.etag == expected else None

    async def list_parts(self, upload: MultipartUpload) -> list[CompletedPart]:
        parts: list[CompletedPart] = []
        marker = 0
        with self._guard(upload.key):
            while True:
                resp = await self._s3.list_parts(
                    Bucket=self.bucket,
                    Key=upload.key,
                    UploadId=upload.upload_id,
                    PartNumberMarker=marker,
                )
                for p in resp.get("Parts", []):
                    parts.append(CompletedPart(p["PartNumber"], p["ETag"].strip('"'), p["Size"]))
                if not resp.get("IsTruncated"):
                    return parts
                marker = int(resp["NextPartNumberMarker"])

    async def list_uploads(self, key: str) -> list[PendingUpload]:
        found: list[PendingUpload] = []
        key_marker = upload_marker = ""
        with self._guard(key):
            while True:
                resp = await self._s3.list_multipart_uploads(
                    Bucket=self.bucket,
                    Prefix=key,
                    KeyMarker=key_marker,
                    UploadIdMarker=upload_marker,
                )
                for u in resp.get("Uploads", []):
                    if u.get("Key") == key and u.get("UploadId"):
                        started = u.get("Initiated")
                        when = started.timestamp() if started is not None else None
                        found.append(PendingUpload(MultipartUpload(key, u["UploadId"]), when))
                if not resp.get("IsTruncated"):
                    return found
                key_marker = resp.get("NextKeyMarker", "")
                upload_marker = resp.get("NextUploadIdMarker", "")

    async def abort_multipart(self, upload: MultipartUpload) -> None:
        with self._guard(upload.key):
            try:
                await self._s3.abort_multipart_upload(
                    Bucket=self.bucket, Key=upload.key, UploadId=upload.upload_id
                )
            except ClientError as exc:
                # Already aborted (or completed): nothing left to discard.
                if classify(*client_error_details(exc)[:2]) is not NotFound:
                    raise


# -- helpers ------------------------------------------------------------------

#: botocore's model loaders, shared by every session in the process (per data
#: path). A new session otherwise re-parses ~100 ms of JSON models per client.
_LOADERS: dict[str | None, Loader] = {}


def _share_loader(session: AioSession) -> None:
    data_path = session.get_config_variable("data_path")
    key = str(data_path) if data_path else None
    loader = _LOADERS.get(key)
    if loader is None:
        loader = _LOADERS[key] = create_loader(key)
    session.register_component("data_loader", loader)


def check_endpoint_url(url: str, source: str) -> str:
    """``url`` if it is an http(s) URL with a host; else ConfigError naming ``source``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"invalid endpoint URL {url!r} (from {source}): expected http(s)://host[:port]"
        )
    return url


def _add_checksum(
    kwargs: PutObjectRequestTypeDef | UploadPartRequestTypeDef, checksum: Checksum | None
) -> None:
    if checksum is None:
        return
    if checksum.algorithm == "md5":
        kwargs["ContentMD5"] = checksum.value
    else:
        kwargs["ChecksumCRC32C"] = checksum.value


def _body(data: Payload) -> bytes:
    """The request body for ``data``: a no-copy file view of it.

    Given a ``bytearray`` (the engine's reusable part buffers), aiohttp would
    copy it whole (it slices the body to its length, and slicing a bytearray
    copies), and asyncio's transport (before Python 3.12) would copy again
    whatever the socket could not take at once: three part-sized buffers per
    request. As a ``BytesIO``, aiohttp writes it in 256 KiB chunks and waits
    for each to drain, so only the engine's buffer is ever part-sized.
    (The stubs say ``bytes``; botocore accepts file-like bodies.)
    """
    return cast(bytes, _BufferView(data))


class _BufferView(io.BytesIO):
    """A read-only, seekable ``BytesIO`` over someone else's buffer, without
    copying it (``BytesIO(buffer)`` would). Only what botocore (length,
    rewind) and aiohttp (size, chunked reads) use is provided."""

    def __init__(self, data: Payload) -> None:
        super().__init__()
        self._data = data
        self._pos = 0

    def getbuffer(self) -> memoryview:
        return memoryview(self._data)

    def read(self, size: int | None = -1) -> bytes:
        end = len(self._data) if size is None or size < 0 else self._pos + size
        chunk = bytes(memoryview(self._data)[self._pos : end])
        self._pos += len(chunk)
        return chunk

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._data)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def __len__(self) -> int:
        return len(self._data)


def _b64md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode("ascii")


def _multipart_etag(parts: Sequence[CompletedPart]) -> str | None:
    """S3's ETag of an object assembled from ``parts``, if their ETags are MD5s."""
    if not parts or not all(_MD5_HEX.match(p.etag) for p in parts):
        return None
    digests = b"".join(bytes.fromhex(p.etag) for p in parts)
    return f"{hashlib.md5(digests, usedforsecurity=False).hexdigest()}-{len(parts)}"


def _quote(etag: str) -> str:
    return etag if etag.startswith('"') or etag == "*" else f'"{etag}"'


def _unquote(etag: str | None) -> str | None:
    return etag.strip('"') if etag else None


def _timestamp(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None
