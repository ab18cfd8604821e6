"""The GCS backend: synxfer's primitives on the Cloud Storage JSON API.

The pieces: :mod:`synxfer_gcs._core` (endpoint, credentials, requests on
the SDK's HttpClient, errors mapped at the boundary), :mod:`synxfer_gcs._wire` (object
resources and upload bodies), :mod:`synxfer_gcs._compose` (multipart
uploads as parallel composite uploads), :mod:`synxfer_gcs._errors` and
:mod:`synxfer_gcs._crc32c`. Design choices, briefly:

* **Requests in flight.** The scheduler decides how many requests are in
  flight. The calls that send several at once (``complete_multipart``'s
  composes and clean-up, ``abort_multipart``, ``delete_many``) are listed in
  ``capabilities.fan_out``: each request they send takes a slot of
  ``options.requests``, and at most :attr:`GcsBackend.fanout` run at once
  within one call.
* **Options** (``options.extra``, read by :mod:`._options`): ``anonymous``
  overrides the guess that a loopback endpoint is an emulator;
  ``credentials_file`` names a service-account key or authorized-user JSON
  file to use instead of Application Default Credentials;
  ``composite_prefix`` and ``list_page_size`` (1..1000); ``project``, the
  Google Cloud project :meth:`GcsBackend.create_bucket` makes buckets in
  (else ``GOOGLE_CLOUD_PROJECT`` or the credentials').
* **Object options.** Metadata, content type, storage class (``STANDARD``,
  ``NEARLINE``, ``COLDLINE``, ``ARCHIVE``), ``Cache-Control`` and
  ``Content-Disposition`` (``capabilities.write_options``); S3's encryption
  and canned ACLs have no GCS equivalent here, and ``Content-Encoding`` is
  left out because GCS transcodes gzip-encoded objects on download: they
  are refused before a transfer starts.
* **ETags are generations.** :attr:`ObjectInfo.etag` is the object's
  generation (a decimal string), so ``read(if_match=...)`` maps onto
  ``ifGenerationMatch``: exact, cheap, and what GCS pins versions by.
  (GCS's own ``etag`` field changes on metadata-only updates and cannot be
  used as a read precondition on the JSON API.) A generation never looks
  like an MD5 hex digest, so the engine does not mistake it for an S3 ETag.
* **Checksums.** ``part_checksum`` is ``"crc32c"``: the engine hashes each
  put and part off the event loop; the value travels in the ``crc32c`` field
  of a multipart/related upload (metadata + media in one request), so the
  server verifies it and refuses damaged bytes (``400``, mapped to
  TransientError: see :mod:`synxfer_gcs._errors`). The CRC32C the server
  reports back is checked too. :attr:`ObjectInfo.checksums` carries
  ``crc32c`` always and ``md5`` when GCS has one (composite objects have no
  MD5). Nothing is hashed on the event loop.
* **Reads** are one ``GET ?alt=media`` (with ``Range`` only when needed: a
  0-byte object must not be ranged). The object's info comes from the
  response headers (``x-goog-generation``, ``x-goog-hash``,
  ``x-goog-stored-content-length``, ``Content-Range``, ``x-goog-meta-*``),
  as real GCS sends them; user metadata read from headers has lowercase
  keys (HTTP header names are case-insensitive), while ``stat`` and listings
  keep the exact keys. Servers that omit those headers (emulators) get a
  second request for the object resource, made *after* the media GET: if
  that resource's generation equals ``if_match``, the bytes were of that
  generation too (generations only grow), so the precondition holds exactly
  even where the server ignores ``ifGenerationMatch``. ``read_into`` (the
  engine's downloads) receives the body straight into the engine's buffer,
  with no chunk objects, join or copy in Python.
* **Large objects: parallel composite upload** (:mod:`synxfer_gcs._compose`),
  hence ``max_parts=1024``.
* **The hidden prefix** (default ``.synxfer-composite/``, option
  ``composite_prefix``) is reserved: listings never show it and writes to it
  are refused. Components orphaned by a crash stay there; a bucket
  lifecycle rule deleting objects under that prefix after a day cleans them
  up. (With soft delete on, deleted components are retained and billed for
  the retention period, as for any deleted object.)
* **Why compose and not the XML API's multipart upload.** Compose works on
  the JSON API with the same credentials and error format as everything
  else, on every GCS-compatible emulator (``gcp-storage-emulator`` has no
  XML multipart upload), and its components are verified by CRC32C one by
  one. XML multipart upload is not implemented. Its advantages on real GCS
  (no component objects to delete, so no soft-delete retention or
  early-deletion charges for them in buckets that have those) do not
  outweigh a second protocol and signing scheme for now.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal
from urllib.parse import quote, urlsplit

from synxfer import (
    BackendError,
    BucketInfo,
    BucketNotFound,
    CompletedPart,
    ConfigError,
    GiB,
    KiB,
    ListPage,
    MultipartUpload,
    NotFound,
    ObjectInfo,
    PreconditionFailed,
    ReadResult,
    SynxferError,
    TransientError,
    WriteOptions,
)
from synxfer.backend import (
    Backend,
    BackendOptions,
    BodyTooLarge,
    Capabilities,
    Checksum,
    HttpResponse,
    Payload,
    bounded_map,
    to_thread_holding,
)
from synxfer.backend import crc32c as crc32c_of

from . import _crc32c as crc32c
from ._compose import MAX_COMPONENTS, Composer
from ._core import GcsHttp
from ._errors import error_details, error_for_status
from ._options import GcsOptions
from ._wire import (
    OPTION_FIELDS,
    content_type,
    info_from_headers,
    multipart_related,
    object_info,
    option_fields,
    parse_json_body,
    resource,
    rfc3339_seconds,
    stored_metadata,
)

__all__ = ["GcsBackend"]

#: GCS's storage classes (``WriteOptions.storage_class``), current and legacy.
GCS_STORAGE_CLASSES = frozenset(
    {
        "STANDARD",
        "NEARLINE",
        "COLDLINE",
        "ARCHIVE",
        "MULTI_REGIONAL",
        "REGIONAL",
        "DURABLE_REDUCED_AVAILABILITY",
    }
)
#: Longest object name GCS accepts, in UTF-8 bytes.
MAX_NAME_BYTES = 1024

_CONTENT_RANGE = re.compile(r"^bytes\s+(\S+)/(\d+|\*)$")
_LIST_FIELDS = (
    "nextPageToken,items(name,size,updated,generation,metadata,contentType,crc32c,md5Hash)"
)


class GcsBackend(Backend):
    """Google Cloud Storage: ``gs://bucket/key``. See the module docstring."""

    scheme: ClassVar[str] = "gs"
    capabilities = Capabilities(
        multipart=True,
        # Components of a composite object have no minimum size; 256 KiB is
        # GCS's upload granularity and keeps a part worth its three requests
        # (upload, compose share, delete). The engine's part size is larger.
        min_part_size=256 * KiB,
        max_part_size=5 * GiB,
        # 1024 components per composite object; 1024 x 5 GiB = GCS's 5 TiB limit.
        max_parts=MAX_COMPONENTS,
        max_single_put=5 * GiB,
        ranged_reads=True,
        server_side_copy=True,
        metadata=True,
        batch_delete=False,
        part_checksum="crc32c",
        # Components and the upload's manifest are ordinary objects, so a later
        # run can list and complete an upload this one started.
        list_parts=True,
        # These send several requests at once; each takes a slot of options.requests.
        fan_out=frozenset({"complete_multipart", "abort_multipart", "delete_many"}),
        write_options=frozenset({"metadata", "content_type", *OPTION_FIELDS}),
        storage_classes=GCS_STORAGE_CLASSES,
    )

    def __init__(self, bucket: str, options: BackendOptions) -> None:
        if "/" in bucket:  # "" is the account-level backend of list_buckets
            raise ConfigError(f"gs:// needs a bucket name: gs://bucket/prefix (got {bucket!r})")
        self.bucket = bucket
        self.options = options
        #: The backend options, read once (see :mod:`._options`).
        self.settings = settings = GcsOptions.read(options)
        #: Requests to the bucket: endpoint, credentials, mapped errors.
        self.http = GcsHttp(bucket, options, settings, self.url)
        self.endpoint_url, self.anonymous = settings.endpoint_url, settings.anonymous
        #: Reserved, hidden prefix of composite-upload components.
        self.composite_prefix = settings.composite_prefix
        #: Objects per listing request (GCS's maximum is 1000).
        self.list_page_size = settings.list_page_size
        #: Requests in flight inside one call that fans out (compose, cleanup).
        self.fanout = max(1, min(8, options.max_connections))
        self._composer = Composer(self)

    def __repr__(self) -> str:
        parts = urlsplit(self.endpoint_url)  # no userinfo, should a URL carry any
        host = f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname
        return f"<GcsBackend {self.url()} via {parts.scheme}://{host}>"

    # -- lifecycle -----------------------------------------------------------

    async def open(self) -> None:
        await self.http.open()

    async def aclose(self) -> None:
        await self.http.aclose()

    # -- helpers -------------------------------------------------------------

    def _info(self, doc: Mapping[str, Any], key: str | None = None) -> ObjectInfo:
        """ObjectInfo from a GCS object resource."""
        return object_info(doc, key, self.url)

    def _check_writable(self, key: str) -> None:
        """Refuse names GCS rejects, and the reserved composite prefix."""
        if not key:
            raise BackendError("an object name cannot be empty", url=self.url(key))
        if key.startswith(self.composite_prefix):
            raise BackendError(
                f"{self.composite_prefix!r} is reserved for synxfer's composite uploads",
                url=self.url(key),
            )
        if "\r" in key or "\n" in key or key in (".", ".."):
            raise BackendError(f"invalid GCS object name {key!r}", url=self.url(key))
        if len(key.encode("utf-8")) > MAX_NAME_BYTES:
            raise BackendError(
                f"object names are at most {MAX_NAME_BYTES} bytes in UTF-8", url=self.url(key)
            )

    # -- primitives ----------------------------------------------------------

    async def stat(self, key: str) -> ObjectInfo:
        return await self._stat(key)

    async def _stat(self, key: str, if_match: str | None = None) -> ObjectInfo:
        params = {"projection": "noAcl"}
        if if_match is not None:
            params["ifGenerationMatch"] = if_match
        response = await self.http.call(
            "GET", self.http.object_path(key), key=key, what="stat", params=params
        )
        info = self._info(self.http.json(response, key), key)
        if if_match is not None and info.etag != if_match:
            raise PreconditionFailed(
                f"the object changed (generation {if_match} -> {info.etag})", url=self.url(key)
            )
        return info

    async def _list_raw(
        self, prefix: str, page_token: str | None, fields: str = _LIST_FIELDS
    ) -> tuple[list[dict[str, Any]], str | None]:
        params = {
            "prefix": prefix,
            "maxResults": str(self.list_page_size),
            "projection": "noAcl",
            "fields": fields,
        }
        if page_token:
            params["pageToken"] = page_token
        response = await self.http.request("GET", self.http.objects_path, key=prefix, params=params)
        if response.status == 404:
            raise BucketNotFound(
                f"bucket {self.bucket!r} does not exist", url=self.url(prefix), status=404
            )
        if response.status != 200:
            await self.http.fail(response, key=prefix, what="list")
        doc = self.http.json(response, prefix)
        items = [i for i in doc.get("items") or [] if isinstance(i, dict)]
        token = doc.get("nextPageToken") or None
        if token is not None and token == page_token:
            raise BackendError(
                "the listing returned the same page token twice", url=self.url(prefix)
            )
        return items, token

    async def list_page(self, prefix: str, cursor: str | None = None) -> ListPage:
        """One page of objects under ``prefix``; composite components never appear.

        A page that held only hidden components is skipped, so a page is empty
        only when the listing is done.
        """
        hidden = self.composite_prefix
        overlaps = hidden.startswith(prefix) or prefix.startswith(hidden)
        while True:
            items, cursor = await self._list_raw(prefix, cursor)
            infos = [
                self._info(i)
                for i in items
                if not (overlaps and str(i.get("name", "")).startswith(hidden))
            ]
            if infos or cursor is None:
                return ListPage(infos, cursor)

    async def read(
        self,
        key: str,
        offset: int = 0,
        length: int | None = None,
        *,
        if_match: str | None = None,
    ) -> ReadResult:
        if length == 0:
            self._check_read(offset, length, if_match, key)
            return ReadResult(b"", await self._stat(key, if_match))
        opened = await self._open_media(key, offset, length, if_match)
        if isinstance(opened, ObjectInfo):
            return ReadResult(b"", opened)
        response, ranged = opened
        data = bytes(response.body)
        size = self._whole_size(response.status, response.headers, key, len(data), ranged)
        if response.status == 200 and ranged:
            # The server ignored Range (HTTP allows it) and sent everything.
            data = data[offset : None if length is None else offset + length]
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
        return ReadResult(data, await self._media_info(response.headers, key, size, if_match))

    async def read_into(
        self,
        key: str,
        offset: int,
        buf: memoryview,
        *,
        if_match: str | None = None,
        whole: bool = False,
    ) -> ObjectInfo:
        """Receive bytes ``[offset, offset+len(buf))`` straight into ``buf``.

        One media GET on the SDK's :class:`~synxfer.backend.HttpClient`
        (:meth:`GcsHttp.send`): the body goes from the socket into
        ``buf``, with no chunk objects, no join and no copy in Python.
        ``whole`` or an empty ``buf`` reads without a length (an unranged
        GET at offset 0), and the object must then fit ``buf`` exactly.
        """
        if buf.format != "B" or buf.ndim != 1:
            buf = buf.cast("B")
        n = buf.nbytes
        length = None if n == 0 or (whole and offset == 0) else n
        params, headers, ranged = self._media_request(key, offset, length, if_match)
        try:
            response = await self.http.send(
                "GET",
                self.http.object_path(key),
                key=key,
                params=params,
                headers=headers,
                sink=buf,
                sink_status=206 if ranged else 200,
            )
        except BodyTooLarge:
            raise PreconditionFailed(
                f"expected {n} bytes at offset {offset}, but the object is larger",
                url=self.url(key),
            ) from None
        status = response.status
        if status == 416:
            info = await self._past_the_end(key, offset, if_match)
            if n:
                raise PreconditionFailed(
                    f"expected {n} bytes at offset {offset}, but the object has {info.size} bytes",
                    url=self.url(key),
                )
            return info
        if status not in (200, 206):
            await self.http.raise_for(status, bytes(response.body), key=key, what="read")
        received = placed = response.length
        if response.body:
            # Not received into buf: a 200 to a ranged GET (the server ignored
            # Range, as HTTP allows, and sent everything), or a body without a
            # Content-Length (chunked, or until the connection closed).
            start = offset if status == 200 and ranged else 0
            if not start and received > n:
                raise PreconditionFailed(
                    f"expected {n} bytes at offset {offset}, but the object is larger",
                    url=self.url(key),
                )
            window = memoryview(response.body)[start : start + n]
            placed = len(window)
            buf[:placed] = window
        size = self._whole_size(status, response.headers, key, received, ranged)
        available = max(0, size - offset)
        if placed < min(n, available):
            raise TransientError(
                f"short read: got {placed} of {min(n, available)} bytes at offset {offset}",
                url=self.url(key),
            )
        if available < n or (length is None and available != n):
            raise PreconditionFailed(
                f"expected {n} bytes at offset {offset}, but the object has {size} bytes",
                url=self.url(key),
            )
        return await self._media_info(response.headers, key, size, if_match)

    def _check_read(self, offset: int, length: int | None, if_match: str | None, key: str) -> None:
        if offset < 0 or (length is not None and length < 0):
            raise ValueError(f"invalid range: offset={offset}, length={length}")
        if if_match is not None and not if_match.isdigit():
            raise PreconditionFailed(
                f"{if_match!r} is not a GCS generation, so it cannot match", url=self.url(key)
            )

    async def _open_media(
        self, key: str, offset: int, length: int | None, if_match: str | None
    ) -> tuple[HttpResponse, bool] | ObjectInfo:
        """``GET ?alt=media`` for ``[offset, offset+length)``: the whole
        response (200 or 206) and whether a Range was sent; or, when nothing is
        at ``offset`` (416 at or past the end), the object's info."""
        params, headers, ranged = self._media_request(key, offset, length, if_match)
        response = await self.http.request(
            "GET", self.http.object_path(key), key=key, params=params, headers=headers
        )
        if response.status == 416:
            return await self._past_the_end(key, offset, if_match)
        if response.status not in (200, 206):
            await self.http.fail(response, key=key, what="read")
        return response, ranged

    def _media_request(
        self, key: str, offset: int, length: int | None, if_match: str | None
    ) -> tuple[dict[str, str], dict[str, str], bool]:
        """Query, headers and whether a Range is sent, for a media GET of
        ``[offset, offset+length)`` (``length`` None: to the end)."""
        self._check_read(offset, length, if_match, key)
        params = {"alt": "media"}
        if if_match is not None:
            params["ifGenerationMatch"] = if_match
        # The stored bytes as they are: with gzip accepted, GCS does not
        # decompress objects stored with Content-Encoding: gzip (and honours
        # Range for them); the raw stream is read without decoding.
        headers = {"accept-encoding": "gzip"}
        ranged = offset > 0 or length is not None
        if ranged:
            last = "" if length is None else str(offset + length - 1)
            headers["range"] = f"bytes={offset}-{last}"
        return params, headers, ranged

    async def _past_the_end(self, key: str, offset: int, if_match: str | None) -> ObjectInfo:
        """What a 416 to a read at ``offset`` means: nothing there, fine at (or
        past) the end of the object (its info); a TransientError if the object
        has bytes there now (it changed during the read)."""
        info = await self._stat(key, if_match)
        if offset < info.size:
            raise TransientError(
                f"range {offset}- refused but the object has {info.size} bytes "
                "(it changed during the read)",
                url=self.url(key),
                status=416,
            )
        return info

    async def _media_info(
        self, headers: Mapping[str, str], key: str, size: int, if_match: str | None
    ) -> ObjectInfo:
        """The object's info for a media response whose bytes were read."""
        from_headers = info_from_headers(key, headers, size)
        if from_headers is not None:
            return from_headers
        # No x-goog-generation / x-goog-hash (an emulator): ask for the
        # resource *after* the bytes. Generations only grow, so if the
        # object still has generation `if_match` now, it had it then.
        info = await self._stat(key, if_match)
        if info.size != size:
            raise TransientError(
                f"the object changed during the read (size {size} -> {info.size})",
                url=self.url(key),
            )
        return info

    def _whole_size(
        self, status: int, headers: Mapping[str, str], key: str, received: int, ranged: bool
    ) -> int:
        content_range = headers.get("content-range")
        if status == 206 and content_range:
            m = _CONTENT_RANGE.match(content_range.strip())
            if m is None or m.group(2) == "*":
                raise BackendError(
                    f"unparseable Content-Range {content_range!r}", url=self.url(key)
                )
            return int(m.group(2))
        if status == 206:
            raise BackendError("partial content without a Content-Range", url=self.url(key))
        stored = headers.get("x-goog-stored-content-length")
        if not ranged and stored and stored.isdigit() and int(stored) != received:
            raise TransientError(
                f"got {received} bytes of a {stored}-byte object", url=self.url(key)
            )
        return received

    async def put(
        self,
        key: str,
        data: Payload,
        options: WriteOptions,
        checksum: Checksum | None = None,
    ) -> ObjectInfo:
        """One multipart/related upload: metadata, content type, CRC32C and bytes."""
        self._check_writable(key)
        doc = await self._upload(key, data, resource(key, options), checksum, key=key)
        return self._info(doc, key)

    async def _upload(
        self,
        name: str,
        data: Payload,
        fields: dict[str, Any],
        checksum: Checksum | None,
        *,
        key: str,
    ) -> dict[str, Any]:
        """Store ``data`` as object ``name`` (resource ``fields``); the server
        verifies the checksum (a CRC32C is computed in a worker thread if none
        is given)."""
        if checksum is None:
            crc = await to_thread_holding(crc32c_of, data)
            checksum = Checksum("crc32c", crc32c.encode(crc))
        field_name = "crc32c" if checksum.algorithm == "crc32c" else "md5Hash"
        head, tail, body_type = multipart_related({**fields, field_name: checksum.value})
        response = await self.http.send(
            "POST",
            self.http.upload_path,
            key=key,
            params={"uploadType": "multipart"},
            headers={"content-type": body_type},
            body=(head, data, tail),
        )
        if response.status != 200:
            await self.http.raise_for(response.status, bytes(response.body), key=key, what="upload")
        doc = parse_json_body(response.status, response.body, self.url(key))
        stored = doc.get(field_name)
        if stored and stored != checksum.value:
            raise TransientError(
                f"the server stored bytes whose {checksum.algorithm} is {stored}, "
                f"not {checksum.value}: damaged in transit",
                url=self.url(key),
            )
        return doc

    async def delete(self, key: str) -> None:
        response = await self.http.request("DELETE", self.http.object_path(key), key=key)
        if response.status in (200, 204):
            return
        if response.status == 404:
            body = bytes(response.body)
            exc = error_for_status(404, body, url=self.url(key), bucket=self.bucket)
            if isinstance(exc, BucketNotFound):
                raise exc
            if not error_details(body)[1]:
                await self.http.raise_if_no_bucket(key)
            return
        await self.http.fail(response, key=key, what="delete")

    async def delete_many(self, keys: Sequence[str]) -> Mapping[str, Exception]:
        """Delete ``keys``, :attr:`fanout` at a time, a request slot each (``fan_out``);
        returns the keys that failed."""
        failed: dict[str, Exception] = {}

        async def one(key: str) -> None:
            try:
                async with self.options.requests.slot():
                    await self.delete(key)
            except SynxferError as exc:
                failed[key] = exc

        await bounded_map(one, keys, self.fanout)
        return failed

    async def copy(self, src_key: str, dst_key: str, options: WriteOptions) -> ObjectInfo:
        """Server-side copy (objects.rewrite, looping on ``rewriteToken`` until done).

        With empty ``options`` the copy keeps the source's metadata and
        content type; otherwise both are replaced by ``options`` (S3's
        ``MetadataDirective=REPLACE``). A storage class, Cache-Control or
        Content-Disposition in ``options`` applies either way.
        """
        return await self._rewrite(self.bucket, src_key, dst_key, options)

    def copy_scope(self) -> object | None:
        """The endpoint and credential source (anonymous or not, the
        credentials file) of this backend: two GCS buckets served alike copy
        server-side (:meth:`copy_from`). No secret is held here (credentials
        are loaded by the HTTP layer)."""
        return (type(self), self.endpoint_url, self.anonymous, self.http.credentials_file)

    async def copy_from(
        self, src_bucket: str, src_key: str, dst_key: str, options: WriteOptions
    ) -> ObjectInfo:
        """Server-side copy from another bucket of the same :meth:`copy_scope`
        (objects.rewrite naming the source bucket), as :meth:`copy`."""
        return await self._rewrite(src_bucket, src_key, dst_key, options)

    async def _rewrite(
        self, src_bucket: str, src_key: str, dst_key: str, options: WriteOptions
    ) -> ObjectInfo:
        self._check_writable(dst_key)
        replace = bool(options.metadata or options.content_type)
        body: dict[str, Any] = {}
        if replace:
            body = {
                "metadata": stored_metadata(options.metadata),
                "contentType": content_type(options.content_type),
            }
        body.update(option_fields(options))
        source = f"/storage/v1/b/{quote(src_bucket, safe='')}/o/{quote(src_key, safe='')}"
        path = f"{source}/rewriteTo/b/{self.http.quoted_bucket}/o/{quote(dst_key, safe='')}"
        token: str | None = None
        for _ in range(100_000):
            params = {"projection": "noAcl"}
            if token:
                params["rewriteToken"] = token
            response = await self.http.request(
                "POST", path, key=src_key, params=params, json_body=body
            )
            if response.status == 404 and src_bucket != self.bucket:
                # The source is in another bucket: the error names it there.
                raise NotFound(
                    "copy (source): no such object (or bucket)",
                    url=f"{self.scheme}://{src_bucket}/{src_key}",
                    status=404,
                )
            if response.status == 404:
                await self.http.fail(response, key=src_key, what="copy (source)")
            if response.status != 200:
                await self.http.fail(response, key=dst_key, what="copy")
            doc = self.http.json(response, dst_key)
            if doc.get("done"):
                result = doc.get("resource")
                if not isinstance(result, dict):
                    raise BackendError("rewrite finished without a resource", url=self.url(dst_key))
                return self._info(result, dst_key)
            token = doc.get("rewriteToken")
            if not token:
                raise BackendError("rewrite unfinished without a token", url=self.url(dst_key))
        raise BackendError("rewrite did not finish", url=self.url(dst_key))

    # -- multipart: parallel composite uploads (see synxfer_gcs._compose) ------

    async def create_multipart(self, key: str, options: WriteOptions) -> MultipartUpload:
        """Allocate an upload id and store its manifest (key, metadata, content type)."""
        return await self._composer.create(key, options)

    async def list_parts(self, upload: MultipartUpload) -> list[CompletedPart]:
        """The components stored so far; NotFound once completed or aborted."""
        return await self._composer.list_parts(upload)

    async def upload_part(
        self,
        upload: MultipartUpload,
        number: int,
        data: Payload,
        checksum: Checksum | None = None,
    ) -> CompletedPart:
        """Store part ``number`` as a component object; its etag is ``<generation>:<crc32c>``."""
        return await self._composer.upload_part(upload, number, data, checksum)

    async def complete_multipart(
        self, upload: MultipartUpload, parts: Sequence[CompletedPart]
    ) -> ObjectInfo:
        """Compose the parts in number order, then delete the components."""
        return await self._composer.complete(upload, parts)

    async def abort_multipart(self, upload: MultipartUpload) -> None:
        """Forget the upload and delete its components (listing them, so strays go too)."""
        await self._composer.abort(upload)

    # -- buckets ---------------------------------------------------------------------

    async def create_bucket(self, *, region: str | None = None) -> None:
        """buckets.insert, in location ``region`` (``US``, ``EU``, ``us-central1``...;
        default ``options.region``, else GCS's default) and the project
        :meth:`GcsHttp.project` names."""
        body: dict[str, Any] = {"name": self.bucket}
        location = region or self.options.region
        if location:
            body["location"] = location
        await self.http.call(
            "POST",
            "/storage/v1/b",
            what="create bucket",
            params={"project": self.http.project()},
            json_body=body,
        )
        self.http.bucket_known(True)

    async def list_buckets(self) -> list[BucketInfo]:
        """buckets.list, page after page, in the project :meth:`GcsHttp.project`
        names (the one new buckets go in)."""
        params = {
            "project": self.http.project("listing gs:// buckets"),
            "maxResults": "1000",
            "fields": "nextPageToken,items(name,timeCreated)",
        }
        out: list[BucketInfo] = []
        token: str | None = None
        while True:
            if token is not None:
                params["pageToken"] = token
            response = await self.http.call(
                "GET", "/storage/v1/b", what="list buckets", params=params
            )
            doc = self.http.json(response, "")
            for item in doc.get("items") or []:
                if isinstance(item, dict) and item.get("name"):
                    out.append(
                        BucketInfo(str(item["name"]), rfc3339_seconds(item.get("timeCreated")))
                    )
            following = doc.get("nextPageToken") or None
            if following is None:
                return out
            if following == token:
                raise BackendError(
                    "the bucket listing returned the same page token twice", url="gs://"
                )
            token = str(following)

    async def delete_bucket(self) -> None:
        """buckets.delete, after deleting what this backend keeps under its
        hidden prefix (components of unfinished composite uploads): the bucket
        must hold no other object."""
        token: str | None = None
        while True:
            names = "nextPageToken,items(name)"
            items, token = await self._list_raw(self.composite_prefix, token, names)
            for item in items:
                await self.delete(str(item.get("name", "")))
            if token is None:
                break
        await self.http.call("DELETE", self.http.bucket_path, what="delete bucket", ok=(200, 204))
        self.http.bucket_known(False)

    # -- conveniences --------------------------------------------------------------

    async def presign(self, key: str, method: Literal["GET", "PUT"], expires_in: int) -> str:
        """A V4 signed URL (see :mod:`._presign`): needs a service-account key."""
        from ._presign import presign_url

        auth = self.http._auth
        return await presign_url(
            self.endpoint_url,
            self.bucket,
            key,
            method,
            expires_in,
            credentials=None if auth is None else auth._credentials,
            credentials_file=self.http.credentials_file,
        )

    async def bucket_exists(self) -> bool:
        """Whether the bucket exists (a 403 raises PermissionDenied)."""
        return await self.http.bucket_exists()
