"""The GCS backend: synxfer's primitives on the Cloud Storage JSON API, over httpx.

Design choices, briefly:

* **One ``httpx.AsyncClient`` per backend**, created in :meth:`GcsBackend.open`
  with a pool of ``options.max_connections`` connections and the options'
  timeouts. The engine's LimitLayer decides how many requests are in flight;
  the few calls that fan out internally (composing and cleaning up a
  composite upload, ``delete_many``) are bounded by
  :attr:`GcsBackend.fanout`.
* **Endpoint and credentials.** ``options.endpoint_url``, else
  ``$STORAGE_EMULATOR_HOST`` (then anonymous, as Google's client libraries
  do), else ``https://storage.googleapis.com`` with Application Default
  Credentials (``GOOGLE_APPLICATION_CREDENTIALS``, gcloud's ADC file, or the
  metadata server). An ``endpoint_url`` on a loopback address is taken for
  an emulator and used anonymously too. ``options.extra``: ``anonymous``
  (``"true"``/``"false"``) overrides that guess; ``credentials_file`` names a
  service-account key or authorized-user JSON file to use instead of ADC.
  Tokens are refreshed in a worker thread and cached until they are stale;
  a token the server refuses (401) is refreshed once (see
  :mod:`synxfer_gcs._auth`).
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
  even where the server ignores ``ifGenerationMatch``.
* **Large objects: parallel composite upload.** ``multipart`` is
  implemented with compose: ``create_multipart`` allocates an upload id and
  stores a small manifest ``<composite_prefix><upload id>/manifest`` (the
  key, metadata and content type); each ``upload_part`` stores a component
  object ``<composite_prefix><upload id>/<NNNNN>`` with its CRC32C (its
  ``CompletedPart.etag`` is ``<generation>:<crc32c>``);
  ``complete_multipart`` composes the components in number order, 32 at a
  time (GCS's limit per compose request), in as many levels as needed (two
  levels reach GCS's limit of 1024 components per composite object, hence
  ``max_parts=1024``), giving the final object the metadata and content
  type passed to ``create_multipart``. Each source is pinned by generation,
  and every composed object's CRC32C must equal the combination of its
  sources' CRCs (computed without reading data, :mod:`synxfer_gcs._crc32c`).
  Afterwards all components and intermediate composites are deleted, also
  when completing fails -- except after a TransientError, when they are
  kept so that the RetryLayer's next attempt can complete the upload (the
  engine aborts the upload, deleting them, if every attempt fails).
  ``abort_multipart`` deletes whatever is under the upload's prefix.
  Everything about an upload is on the server, so ``list_parts`` works and
  a later run (another backend instance) can resume, complete or abort it.
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
* **Resumable uploads.** :meth:`GcsBackend.resumable_put` sends a stream
  of unknown length through a resumable session in chunks that are
  multiples of 256 KiB and, when a chunk fails, asks the session how much
  was committed (``Content-Range: bytes */N`` -> ``308`` + ``Range``) and
  continues from there. It is an explicit API for single-stream sources
  (pipes, generators); ``put`` stays one request, because the engine only
  gives it objects below ``multipart_threshold`` and retrying those whole
  is cheap. Resuming is the one place this backend repeats a request
  itself: the stream is consumed as it is sent, so a retry from outside
  could not resume it.
* **Errors are mapped at the boundary** (:mod:`synxfer_gcs._errors`): no
  httpx or google-auth exception escapes. A bodyless 404 (emulators) is
  told apart from a missing bucket by one bucket GET, whose answer is
  cached.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import re
import secrets
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import parsedate_to_datetime
from ipaddress import ip_address
from typing import Any, ClassVar, NoReturn, TypeVar, cast
from urllib.parse import quote, urlsplit

import httpx

from synxfer import (
    BackendError,
    BucketNotFound,
    CompletedPart,
    ConfigError,
    GiB,
    IntegrityError,
    KiB,
    ListPage,
    MiB,
    MultipartUpload,
    NotFound,
    ObjectInfo,
    PreconditionFailed,
    ReadResult,
    SynxferError,
    TransientError,
    WriteOptions,
)
from synxfer.backend import Backend, BackendOptions, Capabilities, Checksum, Payload

from . import _crc32c as crc32c
from ._auth import GoogleAuth
from ._errors import FOREIGN_ERRORS, error_details, error_for_status, map_error

__all__ = [
    "COMPOSITE_PREFIX",
    "DEFAULT_ENDPOINT",
    "GcsBackend",
    "ResumableSession",
    "ResumableStatus",
    "resolve_endpoint",
]

log = logging.getLogger("synxfer.gcs")

T = TypeVar("T")

DEFAULT_ENDPOINT = "https://storage.googleapis.com"
#: Where composite-upload components live; hidden from listings.
COMPOSITE_PREFIX = ".synxfer-composite/"
#: Resumable chunks (all but the last) must be multiples of this.
RESUMABLE_ALIGNMENT = 256 * KiB
#: Sources per compose request, and components per composite object (GCS limits).
MAX_COMPOSE_SOURCES = 32
MAX_COMPONENTS = 1024
#: Longest object name GCS accepts, in UTF-8 bytes.
MAX_NAME_BYTES = 1024

_OCTET = "application/octet-stream"
_CONTENT_RANGE = re.compile(r"^bytes\s+(\S+)/(\d+|\*)$")
_SESSION_RANGE = re.compile(r"^bytes=(\d+)-(\d+)$")
_GOOG_HASH = re.compile(r"^\s*(crc32c|md5)=([A-Za-z0-9+/=]+)\s*$")
_PART_ETAG = re.compile(r"^(\d+):([A-Za-z0-9+/]{6}==)$")
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")
_PARTS_FIELDS = "nextPageToken,items(name,size,generation,crc32c)"
_LIST_FIELDS = (
    "nextPageToken,items(name,size,updated,generation,metadata,contentType,crc32c,md5Hash)"
)


@dataclass(frozen=True, slots=True)
class ResumableSession:
    """A resumable upload session of ``key``.

    ``url`` is the session URI: anyone holding it can upload to the object,
    so it is never shown in ``repr`` or messages. Persist it (securely) to
    resume from another process with :meth:`GcsBackend.resumable_status`.
    """

    key: str
    url: str = field(repr=False)
    total_size: int | None = None


@dataclass(frozen=True, slots=True)
class ResumableStatus:
    """How much of a resumable upload the server has: ``committed`` bytes,
    and the finished object's ``info`` once it is complete."""

    committed: int
    info: ObjectInfo | None = None


@dataclass(slots=True)
class _Upload:
    """A composite upload in progress (see ``create_multipart``)."""

    key: str
    options: WriteOptions
    aborted: bool = False


@dataclass(frozen=True, slots=True)
class _Source:
    """A compose source: an object pinned by generation, with its CRC32C and size."""

    name: str
    generation: str
    crc: int
    size: int


def resolve_endpoint(options: BackendOptions) -> tuple[str, bool]:
    """``(base URL, anonymous)`` for these options and the environment.

    ``options.endpoint_url`` wins, then ``$STORAGE_EMULATOR_HOST`` (anonymous,
    like Google's client libraries), then :data:`DEFAULT_ENDPOINT` with
    credentials. An explicit endpoint on a loopback address is assumed to be
    an emulator (anonymous); ``options.extra["anonymous"]`` overrides.
    """
    emulator = os.environ.get("STORAGE_EMULATOR_HOST", "").strip()
    if options.endpoint_url:
        raw, source = options.endpoint_url, "--endpoint-url"
    elif emulator:
        raw, source = emulator, "STORAGE_EMULATOR_HOST"
        if "://" not in raw:
            raw = f"http://{raw}"
    else:
        raw, source = DEFAULT_ENDPOINT, "the default"
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"invalid GCS endpoint {raw!r} (from {source}): expected http(s)://host[:port]"
        )
    path = parts.path.rstrip("/")
    if path.endswith("/storage/v1"):
        path = path[: -len("/storage/v1")]
    base = f"{parts.scheme}://{parts.netloc}{path}"
    anonymous = _is_loopback(parts.hostname) if options.endpoint_url else bool(emulator)
    flag = options.extra.get("anonymous")
    if flag is not None:
        value = flag.strip().lower()
        if value not in _TRUE | _FALSE:
            raise ConfigError(f"gs option anonymous={flag!r}: expected true or false")
        anonymous = value in _TRUE
    return base, anonymous


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


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
    )

    def __init__(self, bucket: str, options: BackendOptions) -> None:
        if not bucket or "/" in bucket:
            raise ConfigError(f"gs:// needs a bucket name: gs://bucket/prefix (got {bucket!r})")
        self.bucket = bucket
        self.options = options
        self.endpoint_url, self.anonymous = resolve_endpoint(options)
        self.credentials_file = options.extra.get("credentials_file") or None
        prefix = options.extra.get("composite_prefix", COMPOSITE_PREFIX)
        if not prefix.endswith("/") or prefix.startswith("/") or len(prefix) < 2:
            raise ConfigError(
                f"gs option composite_prefix={prefix!r}: expected a prefix like "
                f"{COMPOSITE_PREFIX!r} (ending in '/')"
            )
        #: Reserved, hidden prefix of composite-upload components.
        self.composite_prefix = prefix
        page = options.extra.get("list_page_size", "1000")
        if not page.isdigit() or not 1 <= int(page) <= 1000:
            raise ConfigError(f"gs option list_page_size={page!r}: expected 1..1000")
        #: Objects per listing request (GCS's maximum is 1000).
        self.list_page_size = int(page)
        #: Requests in flight inside one call that fans out (compose, cleanup).
        self.fanout = max(1, min(8, options.max_connections))
        #: Chunk size of :meth:`resumable_put` (a multiple of 256 KiB).
        self.resumable_chunk_size = 8 * MiB
        #: First pause before asking a broken resumable session for its state.
        self.resume_backoff = 0.5
        self._client: httpx.AsyncClient | None = None
        self._auth: GoogleAuth | None = None
        self._uploads: dict[str, _Upload] = {}
        self._bucket_exists = False
        self._b = quote(bucket, safe="")

    def __repr__(self) -> str:
        parts = urlsplit(self.endpoint_url)  # no userinfo, should a URL carry any
        host = f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname
        return f"<GcsBackend {self.url()} via {parts.scheme}://{host}>"

    # -- lifecycle -----------------------------------------------------------

    async def open(self) -> None:
        if self._client is not None:
            return
        if not self.anonymous:
            try:
                self._auth = await GoogleAuth.load(self.credentials_file, self.options.read_timeout)
            except FOREIGN_ERRORS as exc:
                raise map_error(exc, url=self.url()) from exc
        n = max(1, self.options.max_connections)
        self._client = httpx.AsyncClient(
            base_url=self.endpoint_url,
            limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
            timeout=httpx.Timeout(
                connect=self.options.connect_timeout,
                read=self.options.read_timeout,
                write=self.options.read_timeout,
                # The LimitLayer bounds requests; a wait for a pooled
                # connection is not a failure.
                pool=None,
            ),
            headers={"User-Agent": "synxfer-gcs"},
            follow_redirects=False,
        )

    async def aclose(self) -> None:
        client, self._client = self._client, None
        auth, self._auth = self._auth, None
        if client is not None:
            with contextlib.suppress(*FOREIGN_ERRORS):
                await client.aclose()
        if auth is not None:
            await asyncio.to_thread(auth.close)

    @property
    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            raise RuntimeError(f"{self!r} is not open: use 'async with' or await open() first")
        return self._client

    # -- HTTP plumbing ---------------------------------------------------------

    def _object_path(self, key: str) -> str:
        return f"/storage/v1/b/{self._b}/o/{quote(key, safe='')}"

    @property
    def _objects_path(self) -> str:
        return f"/storage/v1/b/{self._b}/o"

    @property
    def _upload_path(self) -> str:
        return f"/upload/storage/v1/b/{self._b}/o"

    async def _request(
        self,
        method: str,
        url: str,
        *,
        key: str = "",
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        content: bytes | AsyncIterable[bytes] | None = None,
        json_body: Any = None,
        stream: bool = False,
    ) -> httpx.Response:
        """One request; transport and credential errors mapped; any status returned."""
        client = self._http
        hdrs = dict(headers or {})
        token_id: int | None = None
        try:
            if self._auth is not None:
                auth_headers, token_id = await self._auth.headers()
                hdrs.update(auth_headers)
            request = client.build_request(
                method, url, params=params, headers=hdrs, content=content, json=json_body
            )
            response = await client.send(request, stream=stream)
        except FOREIGN_ERRORS as exc:
            raise map_error(exc, url=self.url(key)) from exc
        auth = self._auth
        if auth is None or token_id is None:
            return response
        if response.status_code != 401:
            auth.accepted(token_id)
        elif auth.rejected(token_id):
            # A refused token is refreshed once (and the call retried by the
            # RetryLayer); a fresh token refused means the credentials are bad.
            await response.aclose()
            raise TransientError(
                "the server rejected the access token (HTTP 401); it is refreshed "
                "before the next attempt",
                url=self.url(key),
                status=401,
            )
        return response

    async def _call(
        self,
        method: str,
        url: str,
        *,
        key: str = "",
        what: str,
        ok: tuple[int, ...] = (200,),
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        content: bytes | AsyncIterable[bytes] | None = None,
        json_body: Any = None,
    ) -> httpx.Response:
        """A request whose status must be in ``ok``; anything else raises."""
        response = await self._request(
            method,
            url,
            key=key,
            params=params,
            headers=headers,
            content=content,
            json_body=json_body,
        )
        if response.status_code not in ok:
            await self._fail(response, key=key, what=what)
        return response

    async def _fail(self, response: httpx.Response, *, key: str, what: str) -> NoReturn:
        """Raise the synxfer error for a failed response."""
        try:
            body = await response.aread()
        except FOREIGN_ERRORS:
            body = b""
        finally:
            await response.aclose()
        exc = error_for_status(
            response.status_code, body, url=self.url(key), bucket=self.bucket, what=what
        )
        if type(exc) is NotFound and not error_details(body)[1]:
            # A bodyless 404 (emulators): is it the bucket that is missing?
            await self._raise_if_no_bucket(key)
        raise exc

    async def _raise_if_no_bucket(self, key: str) -> None:
        if self._bucket_exists:
            return
        response = await self._request(
            "GET", f"/storage/v1/b/{self._b}", key=key, params={"fields": "name"}
        )
        if response.status_code == 404:
            raise BucketNotFound(
                f"bucket {self.bucket!r} does not exist", url=self.url(key), status=404
            )
        if response.status_code == 200:
            self._bucket_exists = True

    def _json(self, response: httpx.Response, key: str) -> dict[str, Any]:
        try:
            doc = json.loads(response.content)
        except (ValueError, UnicodeDecodeError) as exc:
            raise BackendError(
                f"unparseable response from the server (HTTP {response.status_code})",
                url=self.url(key),
            ) from exc
        if not isinstance(doc, dict):
            raise BackendError("unexpected response from the server", url=self.url(key))
        return doc

    def _info(self, doc: Mapping[str, Any], key: str | None = None) -> ObjectInfo:
        """ObjectInfo from a GCS object resource."""
        name = str(doc.get("name", key or ""))
        try:
            size = int(doc.get("size", 0))
        except (TypeError, ValueError) as exc:
            raise BackendError(f"bad size {doc.get('size')!r}", url=self.url(name)) from exc
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
        response = await self._call(
            "GET", self._object_path(key), key=key, what="stat", params=params
        )
        info = self._info(self._json(response, key), key)
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
        response = await self._request("GET", self._objects_path, key=prefix, params=params)
        if response.status_code == 404:
            await response.aclose()
            raise BucketNotFound(
                f"bucket {self.bucket!r} does not exist", url=self.url(prefix), status=404
            )
        if response.status_code != 200:
            await self._fail(response, key=prefix, what="list")
        doc = self._json(response, prefix)
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
        if offset < 0 or (length is not None and length < 0):
            raise ValueError(f"invalid range: offset={offset}, length={length}")
        if if_match is not None and not if_match.isdigit():
            raise PreconditionFailed(
                f"{if_match!r} is not a GCS generation, so it cannot match", url=self.url(key)
            )
        if length == 0:
            return ReadResult(b"", await self._stat(key, if_match))
        params = {"alt": "media"}
        if if_match is not None:
            params["ifGenerationMatch"] = if_match
        # The stored bytes as they are: with gzip accepted, GCS does not
        # decompress objects stored with Content-Encoding: gzip (and honours
        # Range for them); the raw stream is read without decoding.
        headers = {"Accept-Encoding": "gzip"}
        ranged = offset > 0 or length is not None
        if ranged:
            last = "" if length is None else str(offset + length - 1)
            headers["Range"] = f"bytes={offset}-{last}"
        response = await self._request(
            "GET", self._object_path(key), key=key, params=params, headers=headers, stream=True
        )
        if response.status_code == 416:
            await response.aclose()
            # Nothing at `offset`: fine at (or past) the end of the object.
            info = await self._stat(key, if_match)
            if offset >= info.size:
                return ReadResult(b"", info)
            raise TransientError(
                f"range {offset}- refused but the object has {info.size} bytes "
                "(it changed during the read)",
                url=self.url(key),
                status=416,
            )
        if response.status_code not in (200, 206):
            await self._fail(response, key=key, what="read")
        try:
            data = b"".join([chunk async for chunk in response.aiter_raw()])
        except FOREIGN_ERRORS as exc:
            raise map_error(exc, url=self.url(key)) from exc
        finally:
            await response.aclose()

        size = self._whole_size(response, key, data, ranged)
        if response.status_code == 200 and ranged:
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
        from_headers = _info_from_headers(key, response.headers, size)
        if from_headers is not None:
            info = from_headers
        else:
            # No x-goog-generation / x-goog-hash (an emulator): ask for the
            # resource *after* the bytes. Generations only grow, so if the
            # object still has generation `if_match` now, it had it then.
            info = await self._stat(key, if_match)
            if info.size != size:
                raise TransientError(
                    f"the object changed during the read (size {size} -> {info.size})",
                    url=self.url(key),
                )
        return ReadResult(data, info)

    def _whole_size(self, response: httpx.Response, key: str, data: bytes, ranged: bool) -> int:
        content_range = response.headers.get("content-range")
        if response.status_code == 206 and content_range:
            m = _CONTENT_RANGE.match(content_range.strip())
            if m is None or m.group(2) == "*":
                raise BackendError(
                    f"unparseable Content-Range {content_range!r}", url=self.url(key)
                )
            return int(m.group(2))
        if response.status_code == 206:
            raise BackendError("partial content without a Content-Range", url=self.url(key))
        stored = response.headers.get("x-goog-stored-content-length")
        if not ranged and stored and stored.isdigit() and int(stored) != len(data):
            raise TransientError(
                f"got {len(data)} bytes of a {stored}-byte object", url=self.url(key)
            )
        return len(data)

    async def put(
        self,
        key: str,
        data: Payload,
        options: WriteOptions,
        checksum: Checksum | None = None,
    ) -> ObjectInfo:
        """One multipart/related upload: metadata, content type, CRC32C and bytes."""
        self._check_writable(key)
        doc = await self._upload(key, data, _resource(key, options), checksum, key=key)
        return self._info(doc, key)

    async def _upload(
        self,
        name: str,
        data: Payload,
        resource: dict[str, Any],
        checksum: Checksum | None,
        *,
        key: str,
    ) -> dict[str, Any]:
        """Store ``data`` as object ``name``; the server verifies the checksum."""
        if checksum is None:
            checksum = Checksum("crc32c", await crc32c.crc32c_of(data))
        field_name = "crc32c" if checksum.algorithm == "crc32c" else "md5Hash"
        resource = {**resource, field_name: checksum.value}
        head, tail, content_type = _multipart_related(resource)
        length = len(head) + len(data) + len(tail)
        response = await self._call(
            "POST",
            self._upload_path,
            key=key,
            what="upload",
            params={"uploadType": "multipart"},
            # An explicit length: httpx then sends the stream as is, not chunked.
            headers={"Content-Type": content_type, "Content-Length": str(length)},
            content=_stream_body(head, data, tail),
        )
        doc = self._json(response, key)
        stored = doc.get(field_name)
        if stored and stored != checksum.value:
            raise TransientError(
                f"the server stored bytes whose {checksum.algorithm} is {stored}, "
                f"not {checksum.value}: damaged in transit",
                url=self.url(key),
            )
        return doc

    async def delete(self, key: str) -> None:
        response = await self._request("DELETE", self._object_path(key), key=key)
        if response.status_code in (200, 204):
            await response.aclose()
            return
        if response.status_code == 404:
            body = await response.aread()
            await response.aclose()
            exc = error_for_status(404, body, url=self.url(key), bucket=self.bucket)
            if isinstance(exc, BucketNotFound):
                raise exc
            if not error_details(body)[1]:
                await self._raise_if_no_bucket(key)
            return
        await self._fail(response, key=key, what="delete")

    async def delete_many(self, keys: Sequence[str]) -> Mapping[str, Exception]:
        """Delete ``keys``, :attr:`fanout` at a time; returns the keys that failed."""
        failed: dict[str, Exception] = {}

        async def one(key: str) -> None:
            try:
                await self.delete(key)
            except SynxferError as exc:
                failed[key] = exc

        await _bounded([functools.partial(one, k) for k in keys], self.fanout)
        return failed

    async def copy(self, src_key: str, dst_key: str, options: WriteOptions) -> ObjectInfo:
        """Server-side copy (objects.rewrite, looping on ``rewriteToken`` until done).

        With empty ``options`` the copy keeps the source's metadata and
        content type; otherwise both are replaced by ``options`` (S3's
        ``MetadataDirective=REPLACE``).
        """
        self._check_writable(dst_key)
        replace = bool(options.metadata or options.content_type)
        body: dict[str, Any] = {}
        if replace:
            body = {
                "metadata": dict(options.metadata),
                "contentType": _content_type(options.content_type),
            }
        path = (
            f"/storage/v1/b/{self._b}/o/{quote(src_key, safe='')}"
            f"/rewriteTo/b/{self._b}/o/{quote(dst_key, safe='')}"
        )
        token: str | None = None
        for _ in range(100_000):
            params = {"projection": "noAcl"}
            if token:
                params["rewriteToken"] = token
            response = await self._request("POST", path, key=src_key, params=params, json_body=body)
            if response.status_code == 404:
                await self._fail(response, key=src_key, what="copy (source)")
            if response.status_code != 200:
                await self._fail(response, key=dst_key, what="copy")
            doc = self._json(response, dst_key)
            if doc.get("done"):
                resource = doc.get("resource")
                if not isinstance(resource, dict):
                    raise BackendError("rewrite finished without a resource", url=self.url(dst_key))
                return self._info(resource, dst_key)
            token = doc.get("rewriteToken")
            if not token:
                raise BackendError("rewrite unfinished without a token", url=self.url(dst_key))
        raise BackendError("rewrite did not finish", url=self.url(dst_key))

    # -- parallel composite upload ---------------------------------------------

    def _component(self, upload_id: str, number: int) -> str:
        return f"{self.composite_prefix}{upload_id}/{number:05d}"

    def _manifest(self, upload_id: str) -> str:
        return f"{self.composite_prefix}{upload_id}/manifest"

    async def create_multipart(self, key: str, options: WriteOptions) -> MultipartUpload:
        """Allocate an upload id and store its manifest (key, metadata, content type).

        The manifest, beside the components, lets another backend instance
        (a later run resuming the upload) list, complete or abort it.
        """
        self._check_writable(key)
        upload_id = secrets.token_hex(16)
        manifest = {
            "key": key,
            "metadata": dict(options.metadata),
            "contentType": _content_type(options.content_type),
        }
        name = self._manifest(upload_id)
        body = json.dumps(manifest, separators=(",", ":")).encode()
        await self._upload(
            name, body, {"name": name, "contentType": "application/json"}, None, key=key
        )
        self._uploads[upload_id] = _Upload(key, options)
        return MultipartUpload(key=key, upload_id=upload_id)

    async def _upload_state(self, upload: MultipartUpload) -> _Upload:
        """The upload's state: from memory, else from its manifest on the server."""
        state = self._uploads.get(upload.upload_id)
        if state is not None and state.key == upload.key:
            return state
        gone = NotFound(
            f"no composite upload {upload.upload_id} in progress (completed or aborted)",
            url=self.url(upload.key),
        )
        if not _UPLOAD_ID.match(upload.upload_id):
            raise gone
        try:
            data = (await self.read(self._manifest(upload.upload_id))).data
        except NotFound as exc:
            if isinstance(exc, BucketNotFound):
                raise
            raise gone from exc
        try:
            manifest = json.loads(data)
            key = manifest["key"]
            options = WriteOptions(
                metadata={str(k): str(v) for k, v in manifest["metadata"].items()},
                content_type=str(manifest["contentType"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BackendError(
                f"the manifest of composite upload {upload.upload_id} is damaged",
                url=self.url(upload.key),
            ) from exc
        if key != upload.key:
            raise gone
        state = self._uploads[upload.upload_id] = _Upload(key, options)
        return state

    async def list_parts(self, upload: MultipartUpload) -> list[CompletedPart]:
        """The components stored so far, as ``upload_part`` reported them.

        Raises NotFound when the upload was completed or aborted (its manifest
        is gone).
        """
        if not _UPLOAD_ID.match(upload.upload_id):
            raise NotFound(f"no composite upload {upload.upload_id}", url=self.url(upload.key))
        prefix = f"{self.composite_prefix}{upload.upload_id}/"
        parts: list[CompletedPart] = []
        manifest = False
        token: str | None = None
        while True:
            items, token = await self._list_raw(prefix, token, _PARTS_FIELDS)
            for item in items:
                rest = str(item.get("name", ""))[len(prefix) :]
                if rest == "manifest":
                    manifest = True
                elif rest.isdigit() and item.get("generation") and item.get("crc32c"):
                    etag = f"{item['generation']}:{item['crc32c']}"
                    parts.append(CompletedPart(int(rest), etag, int(item.get("size", 0))))
            if token is None:
                break
        if not manifest:
            raise NotFound(
                f"no composite upload {upload.upload_id} in progress (completed or aborted)",
                url=self.url(upload.key),
            )
        return sorted(parts, key=lambda p: p.number)

    async def upload_part(
        self,
        upload: MultipartUpload,
        number: int,
        data: Payload,
        checksum: Checksum | None = None,
    ) -> CompletedPart:
        """Store part ``number`` as a component object; its etag is ``<generation>:<crc32c>``."""
        state = await self._upload_state(upload)
        if not 1 <= number <= MAX_COMPONENTS:
            raise BackendError(
                f"part number {number} is outside 1..{MAX_COMPONENTS}", url=self.url(upload.key)
            )
        name = self._component(upload.upload_id, number)
        resource = {"name": name, "contentType": _OCTET}
        doc = await self._upload(name, data, resource, checksum, key=upload.key)
        if state.aborted:
            with contextlib.suppress(SynxferError):
                await self.delete(name)
            raise BackendError(
                f"composite upload {upload.upload_id} was aborted", url=self.url(upload.key)
            )
        generation, crc = doc.get("generation"), doc.get("crc32c")
        if not generation or not crc:
            raise BackendError(
                "the server did not report the component's generation and CRC32C",
                url=self.url(upload.key),
            )
        return CompletedPart(number=number, etag=f"{generation}:{crc}", size=len(data))

    async def complete_multipart(
        self, upload: MultipartUpload, parts: Sequence[CompletedPart]
    ) -> ObjectInfo:
        """Compose the parts in number order (see the module docstring)."""
        state = await self._upload_state(upload)
        keep = False
        try:
            sources = self._sources(upload, parts)
            level = 0
            while len(sources) > MAX_COMPOSE_SOURCES:
                level += 1
                groups = [
                    sources[i : i + MAX_COMPOSE_SOURCES]
                    for i in range(0, len(sources), MAX_COMPOSE_SOURCES)
                ]
                names = [
                    f"{self.composite_prefix}{upload.upload_id}/L{level}-{i:04d}"
                    for i in range(len(groups))
                ]
                composed = await _bounded(
                    [
                        functools.partial(
                            self._compose, n, g, {"contentType": _OCTET}, key=upload.key
                        )
                        for n, g in zip(names, groups, strict=True)
                    ],
                    self.fanout,
                )
                sources = [source for source, _ in composed]
            destination = _resource(upload.key, state.options)
            del destination["name"]
            final = await self._compose(upload.key, sources, destination, key=upload.key)
            doc = final[1]
        except TransientError:
            # Keep the components: the RetryLayer's next attempt can complete.
            keep = True
            raise
        finally:
            if not keep:
                self._uploads.pop(upload.upload_id, None)
                await _shielded(self._remove_components(upload.upload_id, upload.key))
            else:
                await _shielded(self._remove_intermediates(upload.upload_id, upload.key))
        return self._info(doc, upload.key)

    def _sources(self, upload: MultipartUpload, parts: Sequence[CompletedPart]) -> list[_Source]:
        if not parts:
            raise BackendError(
                "a composite upload needs at least one part", url=self.url(upload.key)
            )
        if len(parts) > MAX_COMPONENTS:
            raise BackendError(
                f"{len(parts)} parts: a composite object has at most {MAX_COMPONENTS}",
                url=self.url(upload.key),
            )
        ordered = sorted(parts, key=lambda p: p.number)
        sources = []
        for i, part in enumerate(ordered):
            m = _PART_ETAG.match(part.etag)
            if m is None or (i and ordered[i - 1].number == part.number):
                raise BackendError(
                    f"part {part.number} ({part.etag!r}) is not a part of this upload",
                    url=self.url(upload.key),
                )
            name = self._component(upload.upload_id, part.number)
            sources.append(_Source(name, m.group(1), crc32c.decode(m.group(2)), part.size))
        return sources

    async def _compose(
        self, name: str, sources: Sequence[_Source], destination: dict[str, Any], *, key: str
    ) -> tuple[_Source, dict[str, Any]]:
        """Compose ``sources`` into ``name``; check the result's CRC32C.

        Returns the composed object as a source, and its resource. A result
        whose CRC32C is not the combination of the sources' is deleted.
        """
        body = {
            "destination": destination,
            "sourceObjects": [{"name": s.name, "generation": s.generation} for s in sources],
        }
        path = f"/storage/v1/b/{self._b}/o/{quote(name, safe='')}/compose"
        response = await self._call(
            "POST", path, key=key, what="compose", json_body=body, params={"projection": "noAcl"}
        )
        doc = self._json(response, key)
        expected = crc32c.combine_all((s.crc, s.size) for s in sources)
        size = sum(s.size for s in sources)
        got, generation = doc.get("crc32c"), str(doc.get("generation") or "")
        try:
            actual = crc32c.decode(str(got)) if got else None
        except ValueError:
            actual = None
        if actual != expected or int(doc.get("size", -1)) != size or not generation:
            with contextlib.suppress(SynxferError):
                await self._delete_generation(name, generation, key)
            raise IntegrityError(
                f"{self.url(key)}: the composed object does not match its parts "
                f"(crc32c {got} != {crc32c.encode(expected)} or size {doc.get('size')} != "
                f"{size}); it was deleted"
            )
        return _Source(name, generation, expected, size), doc

    async def _delete_generation(self, name: str, generation: str, key: str) -> None:
        params = {"ifGenerationMatch": generation} if generation else None
        response = await self._request("DELETE", self._object_path(name), key=key, params=params)
        await response.aclose()

    async def abort_multipart(self, upload: MultipartUpload) -> None:
        """Forget the upload and delete its components (listing them, so strays go too)."""
        state = self._uploads.pop(upload.upload_id, None)
        if state is not None:
            state.aborted = True
        await self._remove_components(upload.upload_id, upload.key, strict=True)

    async def _remove_components(self, upload_id: str, key: str, strict: bool = False) -> None:
        """Delete every object under the upload's prefix. Best effort unless ``strict``."""
        try:
            names = await self._names(f"{self.composite_prefix}{upload_id}/", key)
            failed = await self._delete_names(names, key)
        except SynxferError as exc:
            if strict:
                raise
            log.warning("could not clean up composite upload %s of %s: %s", upload_id, key, exc)
            return
        if failed:
            first = next(iter(failed.values()))
            if strict:
                raise first
            log.warning(
                "could not delete %d component(s) of composite upload %s of %s: %s",
                len(failed),
                upload_id,
                self.url(key),
                first,
            )

    async def _remove_intermediates(self, upload_id: str, key: str) -> None:
        try:
            names = await self._names(f"{self.composite_prefix}{upload_id}/L", key)
            await self._delete_names(names, key)
        except SynxferError as exc:
            log.warning("could not clean up composite upload %s of %s: %s", upload_id, key, exc)

    async def _names(self, prefix: str, key: str) -> list[str]:
        names: list[str] = []
        token: str | None = None
        while True:
            items, token = await self._list_raw(prefix, token, "nextPageToken,items(name)")
            names.extend(str(i["name"]) for i in items if "name" in i)
            if token is None:
                return names

    async def _delete_names(self, names: Sequence[str], key: str) -> dict[str, Exception]:
        failed: dict[str, Exception] = {}

        async def one(name: str) -> None:
            try:
                response = await self._request("DELETE", self._object_path(name), key=key)
                if response.status_code not in (200, 204, 404):
                    await self._fail(response, key=key, what="delete component")
                await response.aclose()
            except SynxferError as exc:
                failed[name] = exc

        await _bounded([functools.partial(one, n) for n in names], self.fanout)
        return failed

    # -- resumable uploads -------------------------------------------------------

    async def start_resumable(
        self, key: str, options: WriteOptions, total_size: int | None = None
    ) -> ResumableSession:
        """Open a resumable upload session for ``key`` (nothing is stored yet)."""
        self._check_writable(key)
        resource = _resource(key, options)
        headers = {"X-Upload-Content-Type": resource["contentType"]}
        if total_size is not None:
            headers["X-Upload-Content-Length"] = str(total_size)
        response = await self._call(
            "POST",
            self._upload_path,
            key=key,
            what="start a resumable upload",
            params={"uploadType": "resumable"},
            headers=headers,
            json_body=resource,
        )
        await response.aclose()
        location = response.headers.get("location")
        if not location:
            raise BackendError("the server gave no resumable session URI", url=self.url(key))
        session = urlsplit(location)
        base = urlsplit(self.endpoint_url)
        if (session.scheme, session.netloc) != (base.scheme, base.netloc):
            # Credentials go with every request: only to the endpoint's own host.
            raise BackendError(
                f"the resumable session is on another host ({session.netloc})", url=self.url(key)
            )
        return ResumableSession(key, location, total_size)

    async def resumable_status(self, session: ResumableSession) -> ResumableStatus:
        """Ask the session how many bytes it has committed (or for the finished object)."""
        total = "*" if session.total_size is None else str(session.total_size)
        response = await self._request(
            "PUT",
            session.url,
            key=session.key,
            headers={"Content-Range": f"bytes */{total}"},
            content=b"",
        )
        return await self._session_answer(session, response, "query a resumable upload")

    async def cancel_resumable(self, session: ResumableSession) -> None:
        """Cancel a session; best effort (a finished or expired one is left alone)."""
        with contextlib.suppress(SynxferError):
            response = await self._request("DELETE", session.url, key=session.key)
            await response.aclose()

    async def _session_answer(
        self, session: ResumableSession, response: httpx.Response, what: str
    ) -> ResumableStatus:
        status = response.status_code
        if status in (200, 201):
            info = self._info(self._json(response, session.key), session.key)
            return ResumableStatus(info.size, info)
        if status == 308:
            await response.aclose()
            m = _SESSION_RANGE.match(response.headers.get("range", "").strip())
            return ResumableStatus(int(m.group(2)) + 1 if m else 0)
        if status in (404, 410):
            await response.aclose()
            raise BackendError(
                f"the resumable upload session is gone (HTTP {status}: expired, cancelled or "
                "failed); start a new upload",
                url=self.url(session.key),
                status=status,
            )
        return await self._fail(response, key=session.key, what=what)

    async def resumable_put(
        self,
        key: str,
        chunks: AsyncIterable[bytes | bytearray],
        options: WriteOptions,
        total_size: int | None = None,
        *,
        chunk_size: int | None = None,
        max_interruptions: int = 8,
    ) -> ObjectInfo:
        """Upload a stream through a resumable session; survives interruptions.

        ``chunks`` may yield pieces of any size (a ``bytearray`` may be reused
        once the next piece is requested); they are sent in requests of
        ``chunk_size`` bytes (default :attr:`resumable_chunk_size`, a multiple
        of 256 KiB), the last one carrying the object's CRC32C (computed in a
        worker thread as the stream goes). When a request fails with a
        transient error, the session is asked how much it committed and the
        upload continues from there, up to ``max_interruptions`` times (with
        a growing pause from :attr:`resume_backoff`). Data not yet committed
        is held in memory: at most about two chunks.

        The finished object's CRC32C and size are checked against what was
        sent; a mismatch deletes it and raises IntegrityError. On any
        failure the session is cancelled and nothing is stored.
        """
        size = self.resumable_chunk_size if chunk_size is None else chunk_size
        if size <= 0 or size % RESUMABLE_ALIGNMENT:
            raise ValueError(f"chunk_size must be a positive multiple of 256 KiB (got {size})")
        session = await self.start_resumable(key, options, total_size)
        try:
            info = await _ResumableWriter(self, session, size, max_interruptions).run(chunks)
        except BaseException:
            await _shielded(self.cancel_resumable(session))
            raise
        return info

    # -- conveniences --------------------------------------------------------------

    async def bucket_exists(self) -> bool:
        """Whether the bucket exists (a 403 raises PermissionDenied)."""
        response = await self._request("GET", f"/storage/v1/b/{self._b}", params={"fields": "name"})
        if response.status_code == 404:
            await response.aclose()
            return False
        if response.status_code != 200:
            await self._fail(response, key="", what="get bucket")
        self._bucket_exists = True
        return True


class _ResumableWriter:
    """Drives one resumable session: buffering, chunking, resuming, verifying."""

    def __init__(
        self, backend: GcsBackend, session: ResumableSession, chunk_size: int, budget: int
    ) -> None:
        self.backend = backend
        self.session = session
        self.chunk_size = chunk_size
        self.budget = budget
        self.interruptions = 0
        self.buf = bytearray()  # bytes from offset `base` the server does not have yet
        self.base = 0
        self.crc = 0

    async def run(self, chunks: AsyncIterable[bytes | bytearray]) -> ObjectInfo:
        async for piece in chunks:
            if not piece:
                continue
            self.crc = await asyncio.to_thread(crc32c.extend, self.crc, piece)
            self.buf += piece
            while len(self.buf) > self.chunk_size:  # more follows: not the last chunk
                await self._send(final=False)
        total = self.base + len(self.buf)
        declared = self.session.total_size
        if declared is not None and declared != total:
            raise BackendError(
                f"the stream had {total} bytes, not the {declared} announced",
                url=self.backend.url(self.session.key),
            )
        info = await self._send(final=True)
        assert info is not None
        expected = crc32c.encode(self.crc)
        got = info.checksums.get("crc32c")
        if info.size != total or (got is not None and got != expected):
            with contextlib.suppress(SynxferError):
                await self.backend._delete_generation(
                    self.session.key, info.etag or "", self.session.key
                )
            raise IntegrityError(
                f"{self.backend.url(self.session.key)}: the uploaded object does not match the "
                f"stream (size {info.size} vs {total}, crc32c {got} vs {expected}); it was deleted"
            )
        return info

    async def _send(self, final: bool) -> ObjectInfo | None:
        """Send the next chunk (the rest of the buffer if ``final``) until it is committed."""
        target = self.base + (len(self.buf) if final else self.chunk_size)
        while self.base < target or final:
            n = len(self.buf) if final else min(self.chunk_size, target - self.base)
            total = str(self.base + len(self.buf)) if final else "*"
            first, last = self.base, self.base + n - 1
            headers = {
                "Content-Range": f"bytes {first}-{last}/{total}" if n else f"bytes */{total}"
            }
            if final:
                headers["X-Goog-Hash"] = f"crc32c={crc32c.encode(self.crc)}"
            try:
                response = await self.backend._request(
                    "PUT",
                    self.session.url,
                    key=self.session.key,
                    headers=headers,
                    content=bytes(self.buf[:n]),
                )
                status = await self.backend._session_answer(
                    self.session, response, "upload a chunk"
                )
            except TransientError as exc:
                status = await self._recover(exc)
            else:
                if n and status.info is None and status.committed <= first:
                    # Accepted without progress: do not loop forever.
                    self.interruptions += 1
                    if self.interruptions > self.budget:
                        raise BackendError(
                            "the resumable session makes no progress",
                            url=self.backend.url(self.session.key),
                        )
            if status.info is not None:
                return status.info
            self._advance(status.committed)
        return None

    async def _recover(self, exc: TransientError) -> ResumableStatus:
        """After a failed chunk: pause, then ask the session what it has."""
        while True:
            self.interruptions += 1
            if self.interruptions > self.budget:
                raise exc
            delay = min(self.backend.resume_backoff * 2 ** (self.interruptions - 1), 10.0)
            log.info(
                "resumable upload of %s interrupted (%s); resuming in %.2fs",
                self.backend.url(self.session.key),
                exc,
                delay,
            )
            await asyncio.sleep(delay)
            try:
                return await self.backend.resumable_status(self.session)
            except TransientError as again:
                exc = again

    def _advance(self, committed: int) -> None:
        if not self.base <= committed <= self.base + len(self.buf):
            raise BackendError(
                f"the resumable session reports {committed} bytes committed, but "
                f"{self.base}..{self.base + len(self.buf)} were expected",
                url=self.backend.url(self.session.key),
            )
        del self.buf[: committed - self.base]
        self.base = committed


# -- helpers ------------------------------------------------------------------


def _content_type(value: str | None) -> str:
    if not value:
        return _OCTET
    if "\r" in value or "\n" in value:
        raise ConfigError(f"invalid content type {value!r}")
    return value


def _resource(key: str, options: WriteOptions) -> dict[str, Any]:
    resource: dict[str, Any] = {"name": key, "contentType": _content_type(options.content_type)}
    if options.metadata:
        resource["metadata"] = dict(options.metadata)
    return resource


def _multipart_related(resource: Mapping[str, Any]) -> tuple[bytes, bytes, str]:
    """What goes before and after the media in a ``uploadType=multipart``
    request body, and the request's Content-Type."""
    boundary = f"synxfer-{secrets.token_hex(16)}"
    media_type = str(resource.get("contentType") or _OCTET)
    head = (
        f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n"
        f"{json.dumps(resource, separators=(',', ':'))}\r\n"
        f"--{boundary}\r\nContent-Type: {media_type}\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    return head, tail, f"multipart/related; boundary={boundary}"


#: Slice of the payload handed to the connection at a time.
_SEND_SLICE = 1 << 20


async def _stream_body(head: bytes, data: Payload, tail: bytes) -> AsyncIterator[bytes]:
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


def _info_from_headers(key: str, headers: httpx.Headers, size: int) -> ObjectInfo | None:
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


async def _bounded(factories: Sequence[Callable[[], Awaitable[T]]], limit: int) -> list[T]:
    """Run the coroutines from ``factories``, ``limit`` at a time; results in order.

    The first failure cancels the rest and is raised (not an ExceptionGroup).
    """
    if not factories:
        return []
    semaphore = asyncio.Semaphore(limit)
    results: list[T | None] = [None] * len(factories)

    async def run(index: int, factory: Callable[[], Awaitable[T]]) -> None:
        async with semaphore:
            results[index] = await factory()

    try:
        async with asyncio.TaskGroup() as tg:
            for index, factory in enumerate(factories):
                tg.create_task(run(index, factory))
    except BaseExceptionGroup as group:
        raise _first_leaf(group) from None
    return cast(list[T], results)


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


async def _shielded(coro: Awaitable[None]) -> None:
    """Run cleanup to the end even if the caller is being cancelled."""
    task = asyncio.ensure_future(coro)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(asyncio.CancelledError, SynxferError):
            await asyncio.wait_for(asyncio.shield(task), timeout=60)
        raise
