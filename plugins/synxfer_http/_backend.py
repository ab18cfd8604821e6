"""The read-only ``http``/``https`` backend (see the package docstring)."""

from __future__ import annotations

import email.utils
from collections.abc import Sequence
from typing import ClassVar

from synxfer import (
    BackendError,
    CompletedPart,
    ConfigError,
    InvalidURL,
    ListPage,
    MultipartUpload,
    NotFound,
    ObjectInfo,
    PreconditionFailed,
    ReadResult,
    WriteOptions,
)
from synxfer.backend import (
    Backend,
    BackendOptions,
    BodyTooLarge,
    Capabilities,
    Checksum,
    HttpClient,
    Payload,
    SignedUrl,
    checksums_from_headers,
    read_url_into,
    redact_url,
)

from ._options import HttpOptions

__all__ = ["HttpBackend", "HttpsBackend"]

#: Statuses with which a server refuses a HEAD it would answer as a GET (a
#: pre-signed GET URL is signed for GET alone: S3 answers 403).
_NO_HEAD = frozenset({400, 403, 405, 501})


class HttpBackend(Backend):
    """Objects of one HTTP server (``bucket`` is ``host[:port]``), read only."""

    scheme: ClassVar[str] = "http"
    capabilities = Capabilities(
        multipart=False,
        part_checksum=None,
        metadata=False,
        write_options=frozenset(),
    )

    def __init__(self, bucket: str, options: BackendOptions) -> None:
        host, _, port = bucket.partition(":")
        if not host or (port and not port.isdigit()):
            raise InvalidURL(
                f"{self.scheme}://{bucket}/: expected {self.scheme}://host[:port]/path"
            )
        self.bucket = bucket
        self.host = host
        self.port = int(port) if port else (443 if self.scheme == "https" else 80)
        self.options = options
        self._settings = HttpOptions.read(options)
        self._http: HttpClient | None = None
        #: What stat learned per key: (strong ETag or None, Last-Modified or None).
        self._pins: dict[str, str] = {}
        self._dates: dict[str, str] = {}
        #: Keys whose server answered a ranged GET with the whole object.
        self._no_ranges: set[str] = set()
        self._missing: str | None = None  # the last key a HEAD found missing

    def url(self, key: str = "") -> str:
        """The URL of ``key``, its query (a signature, often) hidden."""
        return redact_url(self._full(key))

    def _full(self, key: str) -> str:
        return f"{self.scheme}://{self.bucket}/{key}"

    @property
    def http(self) -> HttpClient:
        if self._http is None:
            self._http = HttpClient(
                max_connections=self.options.max_connections,
                connect_timeout=self.options.connect_timeout,
                read_timeout=self.options.read_timeout,
                # Without one, the default context reads SSL_CERT_FILE/SSL_CERT_DIR.
                ca_bundle=self._settings.ca_bundle,
            )
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()

    # -- reads ---------------------------------------------------------------------

    async def stat(self, key: str) -> ObjectInfo:
        """HEAD the URL (``x-amz-checksum-mode`` asked, for S3-like servers);
        where HEAD is refused, a one-byte ranged GET."""
        signed = SignedUrl(self._full(key))
        scheme, host, port, target = signed.address()
        headers = {"host": signed.host_header(), "x-amz-checksum-mode": "ENABLED"}
        shown = self.url(key)
        response = await self.http.request("HEAD", scheme, host, port, target, headers, label=shown)
        if response.status in _NO_HEAD:
            probe = bytearray(1)
            try:
                info = await read_url_into(
                    self.http, signed, 0, memoryview(probe), key=key, shown=shown
                )
            except PreconditionFailed as exc:
                if exc.status == 416:  # an empty object: no byte to range
                    return ObjectInfo(key=key, size=0)
                raise
            return self._learn(key, info, None)
        if response.status == 404:
            self._missing = key
            raise NotFound(f"{shown}: 404 {response.reason}", url=shown, status=404)
        if not 200 <= response.status < 300:
            raise BackendError(
                f"HEAD {shown}: {response.status} {response.reason}",
                url=shown,
                status=response.status,
            )
        h = response.headers
        length = h.get("content-length", "")
        if not length.isdigit():
            raise BackendError(f"{shown}: the server gives no Content-Length", url=shown)
        etag = h.get("etag", "").strip()
        strong = etag.strip('"') if etag and not etag.startswith("W/") else None
        mtime = None
        modified = h.get("last-modified")
        if modified:
            try:
                mtime = email.utils.parsedate_to_datetime(modified).timestamp()
            except (TypeError, ValueError):
                modified = None
        info = ObjectInfo(
            key=key,
            size=int(length),
            mtime=mtime,
            etag=strong,
            content_type=h.get("content-type"),
            checksums=checksums_from_headers(h),
        )
        # No promise of ranges: ask for one byte and see (http.server, for
        # one, answers every GET with the whole file).
        promised = "bytes" in h.get("accept-ranges", "").lower()
        if not promised and info.size > 1 and not await self._answers_ranges(signed, shown):
            self._no_ranges.add(key)
        return self._learn(key, info, modified)

    async def _answers_ranges(self, signed: SignedUrl, shown: str) -> bool:
        """Whether a ``Range: bytes=0-0`` GET comes back as a 206 (the whole
        body of any other answer is never received: it overflows one byte)."""
        scheme, host, port, target = signed.address()
        headers = {"host": signed.host_header(), "range": "bytes=0-0"}
        try:
            response = await self.http.request(
                "GET", scheme, host, port, target, headers, sink=memoryview(bytearray(1)),
                label=shown,
            )  # fmt: skip
        except BodyTooLarge:
            return False
        return response.status == 206

    def _learn(self, key: str, info: ObjectInfo, modified: str | None) -> ObjectInfo:
        if info.etag:
            self._pins[key] = info.etag
        if modified:
            self._dates[key] = modified
        return info

    async def read_into(
        self,
        key: str,
        offset: int,
        buf: memoryview,
        *,
        if_match: str | None = None,
        whole: bool = False,
    ) -> ObjectInfo:
        """A ranged GET into ``buf``, pinned to the ETag (``If-Match``) or,
        without one, to the Last-Modified date stat saw (``If-Range``)."""
        if key in self._no_ranges and not (whole and offset == 0):
            raise BackendError(
                f"{self.url(key)}: the server ignores Range requests (it answers a ranged "
                "GET with the whole object), so it cannot be fetched in parts; raise "
                "--part-size above half the object's size to fetch it in one GET",
                url=self.url(key),
            )
        pin = if_match or self._pins.get(key)
        return await read_url_into(
            self.http,
            SignedUrl(self._full(key), etag=pin),
            offset,
            buf,
            whole=whole,
            key=key,
            pins=self._pins,
            shown=self.url(key),
            if_range=None if pin else self._dates.get(key),
        )

    async def read(
        self,
        key: str,
        offset: int = 0,
        length: int | None = None,
        *,
        if_match: str | None = None,
    ) -> ReadResult:
        if length is None:
            info = await self.stat(key)
            length = max(info.size - offset, 0)
        data = bytearray(length)
        info = await self.read_into(key, offset, memoryview(data), if_match=if_match)
        return ReadResult(bytes(data), info)

    # -- writes: refused -------------------------------------------------------------

    def _read_only(self, what: str) -> ConfigError:
        return ConfigError(
            f"{self.scheme}:// is read-only: synxfer cannot {what} {self.url()} "
            f"(use {self.scheme}:// URLs as a source of cp only)"
        )

    async def list_page(self, prefix: str, cursor: str | None = None) -> ListPage:
        if cursor is None and prefix == f"{self._missing}/":
            # The client asks whether a missing object is a "directory" before
            # it says "no such object": nothing is known under it.
            return ListPage([])
        raise self._read_only("list")

    async def put(
        self,
        key: str,
        data: Payload,
        options: WriteOptions,
        checksum: Checksum | None = None,
    ) -> ObjectInfo:
        raise self._read_only("write to")

    async def delete(self, key: str) -> None:
        raise self._read_only("delete from")

    async def create_multipart(self, key: str, options: WriteOptions) -> MultipartUpload:
        raise self._read_only("write to")

    async def complete_multipart(
        self, upload: MultipartUpload, parts: Sequence[CompletedPart]
    ) -> ObjectInfo:
        raise self._read_only("write to")


class HttpsBackend(HttpBackend):
    """:class:`HttpBackend` over TLS (verified; see the package docstring)."""

    scheme: ClassVar[str] = "https"
