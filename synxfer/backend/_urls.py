"""The URL data plane: move bytes to and from URLs that a service vends.

Some services hold no bytes a client may reach with credentials of its own:
Synapse, GA4GH DRS servers (Terra, Gen3), many lab APIs. They register files
and hand out pre-signed URLs -- one per part for an upload, one per object
for a download -- that expire. A plugin for such a service implements the
small :class:`UrlVendor` interface (its REST calls) and inherits
:class:`UrlBackend`, which implements the Backend primitives that move bytes
(``read_into``, ``put``, the multipart calls) on the SDK's
:class:`~synxfer.backend.HttpClient`. The engine's scheduler, byte budget,
retries, verification, progress and journal then apply unchanged.

The shape::

    SignedUrl(url, headers={}, expires=None, etag=None)
        a URL that carries its own authority; repr/str never show its query
        (signatures) nor header values. ``headers``: headers the signature
        requires (e.g. Content-Type); ``expires``: time.time() after which it
        is refused, if known; ``etag``: the store's ETag of the bytes behind
        a download URL, if the vendor knows it (the GETs are pinned to it).

    UploadRequest(key, size, part_size, parts, content_md5, options)
        what a multipart (or single-part) upload is started with;
        ``content_md5`` is the whole file's MD5 in hex, computed by the engine
        before the upload starts (Capabilities.needs_content_md5).

    VendedUpload(key, upload_id, part_size, done_parts={}, state=None,
                 content_pinned=False)
        the service's handle; ``done_parts`` maps part numbers the service
        already holds to their MD5 (hex, "" if it does not say) -- a restarted
        upload of the same file resumes server-side: a part whose MD5 equals
        the engine's is not sent again (nor one with "" when
        ``content_pinned``: the service keyed the upload by the whole-file
        MD5). ``state``: anything the vendor keeps.

    class UrlVendor(abc.ABC):
        async def download_url(key) -> SignedUrl
        async def start_upload(request: UploadRequest) -> VendedUpload
        async def upload_urls(upload, numbers: Sequence[int]) -> Mapping[int, SignedUrl]
        async def part_done(upload, number, md5_hex) -> None
        async def complete(upload) -> ObjectInfo
        async def abort(upload) -> None                   # optional: no-op
        async def upload_status(upload) -> VendedUpload   # optional: list_parts

How :class:`UrlBackend` uses it:

* ``read_into``: a ranged GET to the download URL (cached per key and
  version -- the service's tag the engine passes as ``if_match`` -- until it
  expires; fetched again when past ``expires`` or on a 403;
  ``forget_url(key)`` drops it), pinned with
  ``If-Match`` to the vendor's ETag, else to the first ETag a GET of it
  returned; a 412, or an answer with another ETag, raises
  PreconditionFailed (the object changed mid-download), never a mixed file.
* ``create_multipart``: ``start_upload`` with the size, part size and the
  whole-file MD5 the engine computed before the upload
  (``WriteOptions.digests``, a :class:`~synxfer.backend.ContentDigests`).
* ``upload_part``: a PUT to a part URL with ``Content-MD5`` (the store
  verifies the part; left off where the signature covers it, as SigV2's
  does: :func:`md5_header_allowed`); URLs are fetched lazily, the part's
  and those of the parts around it still to send, up to ``url_batch`` in
  one ``upload_urls`` call, and fetched again when past ``expires`` or on a
  403 (S3: "Request has expired"), the PUT then retried once; ``part_done``
  reports the part's MD5 after the PUT succeeded. A part the service holds
  (:meth:`VendedUpload.holds`) is not sent again.
* ``complete_multipart`` -> ``complete``; ``abort_multipart`` -> ``abort``;
  ``list_parts`` -> ``upload_status`` (the service's view of done parts).
* ``put`` (a file below the multipart threshold): a one-part upload through
  the same calls, so the vendor implements one protocol.

Errors: a vendor maps its service's errors to synxfer's tree (NotFound,
PermissionDenied, TransientError for 429/5xx...). The helpers here map the
store's answers to the vended URLs the same way, and no message ever holds
a URL's query or a header value.
"""

from __future__ import annotations

import abc
import asyncio
import base64
import binascii
import hashlib
import os
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Final, TypeVar

from .._exceptions import (
    BackendError,
    ConfigError,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    TransientError,
)
from .._models import CompletedPart, MultipartUpload, ObjectInfo, WriteOptions
from ._aio import to_thread_holding
from ._base import Backend, BackendOptions, Capabilities, Checksum, Payload
from ._http import TRANSIENT_STATUS, BodyTooLarge, HttpClient, parse_http_date
from ._protocol import HttpResponse

__all__ = [
    "SignedUrl",
    "UploadRequest",
    "UrlBackend",
    "UrlVendor",
    "VendedUpload",
    "checksums_from_headers",
    "md5_header_allowed",
    "put_url",
    "read_url_into",
    "redact_url",
]

_EMPTY: Mapping[str, str] = MappingProxyType({})
T = TypeVar("T")
_NO_PARTS: Mapping[int, str] = MappingProxyType({})

#: A URL this close to its ``expires`` is fetched again before use: a part
#: PUT of tens of MiB on a slow link must not start on a URL about to lapse.
EXPIRY_MARGIN: Final = 10.0
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def redact_url(url: str) -> str:
    """``url`` without its query and fragment (where signatures and tokens go)
    and without any user:password part."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<malformed URL>"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    shown = f"{parts.scheme}://{netloc}{parts.path}"
    return shown + ("?…" if parts.query else "")


@dataclass(frozen=True, slots=True)
class SignedUrl:
    """A URL that carries its own authority (a pre-signed URL).

    ``headers`` are headers the signature requires; ``expires`` is the
    ``time.time()`` after which the store refuses it, if known; ``etag`` is
    the store's ETag of the object behind a download URL, if known. Neither
    ``repr`` nor ``str`` shows the query (which holds the signature) or a
    header's value.
    """

    url: str = field(repr=False)
    headers: Mapping[str, str] = field(default_factory=lambda: _EMPTY, repr=False)
    expires: float | None = None
    etag: str | None = None

    def __repr__(self) -> str:
        names = ", ".join(sorted(self.headers))
        return (
            f"SignedUrl({redact_url(self.url)!r}, headers=[{names}], "
            f"expires={self.expires!r}, etag={self.etag!r})"
        )

    def __str__(self) -> str:
        return redact_url(self.url)

    def expired(self, margin: float = EXPIRY_MARGIN, now: float | None = None) -> bool:
        """Whether the URL is past (or within ``margin`` seconds of) ``expires``."""
        if self.expires is None:
            return False
        return (time.time() if now is None else now) + margin >= self.expires

    def address(self) -> tuple[str, str, int, str]:
        """``(scheme, host, port, target)`` for :meth:`HttpClient.request`."""
        parts = urllib.parse.urlsplit(self.url)
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS or not parts.hostname:
            raise ConfigError(f"not an http(s) URL: {redact_url(self.url)}")
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        return scheme, parts.hostname, parts.port or _DEFAULT_PORTS[scheme], target

    def host_header(self) -> str:
        parts = urllib.parse.urlsplit(self.url)
        return parts.netloc.rsplit("@", 1)[-1]


@dataclass(frozen=True, slots=True)
class UploadRequest:
    """What an upload is started with.

    ``parts`` parts of ``part_size`` bytes (the last one shorter) make
    ``size`` bytes; ``content_md5`` is the whole content's MD5 in hex (None
    when the engine did not compute it: a backend without
    ``Capabilities.needs_content_md5``); ``options`` the object's options
    (content type, metadata).
    """

    key: str
    size: int
    part_size: int
    parts: int
    content_md5: str | None = None
    options: WriteOptions = field(default_factory=WriteOptions)


@dataclass(frozen=True, slots=True)
class VendedUpload:
    """A service's handle of an upload in progress.

    ``done_parts``: the parts the service holds already, by number, with
    their MD5 in hex ("" if the service does not say). ``state``: anything
    the vendor needs to keep (never shown).
    """

    key: str
    upload_id: str
    part_size: int
    done_parts: Mapping[int, str] = field(default_factory=lambda: _NO_PARTS)
    state: object = field(default=None, repr=False, compare=False)
    #: The service keyed this upload by ``content_md5`` (Synapse does): a part
    #: it holds is this content's even when ``done_parts`` gives no MD5, so it
    #: is not sent again.
    content_pinned: bool = False

    def holds(self, number: int, md5_hex: str) -> bool:
        """Whether the service already holds part ``number`` with these bytes."""
        held = self.done_parts.get(number)
        return held is not None and (held == md5_hex or (held == "" and self.content_pinned))


class UrlVendor(abc.ABC):
    """What a service that vends URLs implements (its REST calls only).

    Map the service's errors to synxfer's tree (NotFound, PermissionDenied,
    TransientError for throttling and 5xx, BackendError otherwise); never
    retry here (the engine's retry layer does). See the module docstring.
    """

    @abc.abstractmethod
    async def download_url(self, key: str) -> SignedUrl:
        """A URL to GET the object ``key`` (ranged GETs must work on it)."""

    @abc.abstractmethod
    async def start_upload(self, request: UploadRequest) -> VendedUpload:
        """Start (or, if the service finds one for the same content, resume)
        an upload; the result's ``part_size`` is the one the service took."""

    @abc.abstractmethod
    async def upload_urls(
        self, upload: VendedUpload, numbers: Sequence[int]
    ) -> Mapping[int, SignedUrl]:
        """PUT URLs for these part numbers (1-based), all in one call if the
        service allows; a URL missing from the answer is asked again."""

    @abc.abstractmethod
    async def part_done(self, upload: VendedUpload, number: int, md5_hex: str) -> None:
        """Tell the service part ``number`` was stored, with its MD5."""

    @abc.abstractmethod
    async def complete(self, upload: VendedUpload) -> ObjectInfo:
        """Finish the upload: the object exists under ``upload.key`` after it."""

    async def abort(self, upload: VendedUpload) -> None:  # noqa: B027 - optional
        """Discard the upload, if the service can (many let them lapse)."""

    async def upload_status(self, upload: VendedUpload) -> VendedUpload:
        """The upload as the service sees it now (its ``done_parts``); raise
        NotFound if it no longer exists."""
        raise NotImplementedError(f"{type(self).__name__} cannot report an upload's parts")


def checksums_from_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Whole-object checksums an HTTP answer vouches for, as
    :attr:`ObjectInfo.checksums` names them (base64 values).

    Read: ``Content-MD5``; ``x-amz-checksum-{crc32c,crc32,sha256,...}`` (a
    ``-N`` value, or ``x-amz-checksum-type: COMPOSITE``, is a composite);
    ``x-goog-hash: crc32c=..,md5=..``; ``Repr-Digest`` / ``Digest``
    (``md5=``, ``sha-256=``; RFC 9530 / RFC 3230). ``headers`` have
    lower-case names, as :class:`HttpResponse` gives them.
    """
    out: dict[str, str] = {}
    md5 = headers.get("content-md5")
    if md5 and _b64_len(md5) == 16:
        out["md5"] = md5.strip()
    for name, value in headers.items():
        if name.startswith("x-amz-checksum-") and name != "x-amz-checksum-type":
            algo = name.removeprefix("x-amz-checksum-")
            value = value.strip()
            composite = headers.get("x-amz-checksum-type", "").upper() == "COMPOSITE"
            if "-" in value or composite:
                out[f"{algo}-composite"] = value
            else:
                out[algo] = value
    goog = headers.get("x-goog-hash")
    if goog:
        for item in goog.split(","):
            algo, _, value = item.strip().partition("=")
            if algo in ("crc32c", "md5") and value:
                out.setdefault(algo, value.strip())
    for header in ("repr-digest", "digest"):
        for algo, value in _digests(headers.get(header, "")):
            out.setdefault(algo, value)
    return out


def _digests(value: str) -> list[tuple[str, str]]:
    """``md5``/``sha256`` values of a ``Digest`` or ``Repr-Digest`` header."""
    found = []
    for item in value.split(","):
        algo, _, val = item.strip().partition("=")
        algo = algo.strip().lower()
        val = val.strip().strip(":")  # RFC 9530 byte sequences are :b64:
        name = {"md5": "md5", "sha-256": "sha256"}.get(algo)
        if name and val and _b64_len(val) in (16, 32):
            found.append((name, val))
    return found


def _b64_len(value: str) -> int:
    try:
        return len(base64.b64decode(value.strip(), validate=True))
    except (binascii.Error, ValueError):
        return -1


def strip_etag(value: str | None) -> str | None:
    if not value:
        return None
    value = value.strip()
    if value.startswith("W/"):
        return None  # a weak ETag says nothing about the bytes
    return value.strip('"') or None


def _expired_answer(response: HttpResponse) -> bool:
    """A 403 (or 400, as some stores say it) that says the URL lapsed."""
    if response.status not in (400, 403):
        return False
    text = bytes(response.body[:4096]).lower()
    return b"expired" in text or response.status == 403


def status_error(response: HttpResponse, what: str, url: str) -> BackendError:
    """The synxfer error for a non-2xx answer of a store to a vended URL."""
    status = response.status
    code = ""
    body = bytes(response.body[:2048])
    if b"<Code>" in body:
        code = body.split(b"<Code>", 1)[1].split(b"</Code>", 1)[0].decode("ascii", "replace")
    detail = f"{status} {response.reason}" + (f" ({code})" if code else "")
    message = f"{what}: {detail}"
    if status == 404:
        return NotFound(message, url=url, status=status)
    if status in (401, 403):
        return PermissionDenied(message, url=url, status=status)
    if status in (412, 416):
        return PreconditionFailed(message, url=url, status=status)
    if status in TRANSIENT_STATUS or code in ("BadDigest", "RequestTimeout"):
        return TransientError(message, url=url, status=status)
    return BackendError(message, url=url, status=status)


@dataclass(slots=True)
class _Upload:
    """What UrlBackend keeps of an upload in progress in this process."""

    vended: VendedUpload
    parts: int
    urls: dict[int, SignedUrl] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    sizes: dict[int, int] = field(default_factory=dict)


class UrlBackend(Backend):
    """Backend primitives on a :class:`UrlVendor`: the byte-moving half of a
    plugin for a service that vends URLs.

    A subclass sets ``self.vendor`` (in ``__init__`` or ``open``) and
    implements what only it knows (``stat``, ``list_page``, ``delete``...).
    The HTTP client is the SDK's :class:`HttpClient`, made on first use from
    ``options`` (``extra["ca_bundle"]``, else ``AWS_CA_BUNDLE``/``SSL_CERT_FILE``
    through the default TLS context). ``url_batch``: part URLs fetched per
    vendor call.
    """

    capabilities = Capabilities(
        part_checksum="md5",
        needs_content_md5=True,
        min_part_size=5 * 1024 * 1024,
    )
    url_batch: int = 16
    expiry_margin: float = EXPIRY_MARGIN

    def __init__(self, bucket: str, options: BackendOptions, vendor: UrlVendor | None = None):
        self.bucket = bucket
        self.options = options
        self._vendor = vendor
        self._http: HttpClient | None = None
        self._downloads: dict[str, SignedUrl] = {}
        self._fetching: dict[str, asyncio.Future[SignedUrl]] = {}
        self._pins: dict[str, str] = {}
        self._uploads: dict[str, _Upload] = {}

    @property
    def vendor(self) -> UrlVendor:
        if self._vendor is None:
            raise RuntimeError(f"{type(self).__name__} has no URL vendor yet")
        return self._vendor

    @vendor.setter
    def vendor(self, vendor: UrlVendor) -> None:
        self._vendor = vendor

    @property
    def http(self) -> HttpClient:
        if self._http is None:
            self._http = HttpClient(
                max_connections=self.options.max_connections,
                connect_timeout=self.options.connect_timeout,
                read_timeout=self.options.read_timeout,
                ca_bundle=self.options.extra.get("ca_bundle")
                or os.environ.get("AWS_CA_BUNDLE")
                or None,
            )
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()

    # -- downloads -------------------------------------------------------------

    async def _download(self, key: str, version: str, stale: SignedUrl | None = None) -> SignedUrl:
        """The download URL of ``key`` for ``version`` (key and the service's
        tag): cached until it is about to expire, or until it was refused
        (``stale``). One vendor call per version at a time; other keys' calls
        are not held up by it."""
        url = self._downloads.get(version)
        if url is not None and url is not stale and not url.expired(self.expiry_margin):
            return url
        pending = self._fetching.get(version)
        if pending is None:
            pending = asyncio.ensure_future(self.vendor.download_url(key))
            self._fetching[version] = pending
            pending.add_done_callback(lambda _: self._fetching.pop(version, None))
        url = await asyncio.shield(pending)
        _bounded_put(self._downloads, version, url)
        return url

    def forget_url(self, key: str) -> None:
        """Drop the cached download URLs and ETag pins of ``key`` (every
        version): e.g. when a ``stat`` finds that the service now serves
        another version under the same tag."""
        prefix = f"{key}\0"
        for cache in (self._downloads, self._pins):
            for name in [name for name in cache if name.startswith(prefix)]:
                del cache[name]

    async def read_into(
        self,
        key: str,
        offset: int,
        buf: memoryview,
        *,
        if_match: str | None = None,
        whole: bool = False,
    ) -> ObjectInfo:
        """A ranged GET of the vended download URL, straight into ``buf``.

        ``if_match`` is the service's tag (its ``stat``), not the store's:
        the GET is pinned to the store's ETag (the vendor's, else the first
        one seen while reading this version), and the URL fetched again once
        on a 403 or when it is about to expire.
        """
        pin_as = f"{key}\0{if_match or ''}"
        url = await self._download(key, pin_as)
        try:
            return await read_url_into(
                self.http, url, offset, buf, whole=whole, key=key,
                pins=self._pins, pin_as=pin_as, shown=self.url(key),
            )  # fmt: skip
        except PermissionDenied:
            url = await self._download(key, pin_as, stale=url)
            return await read_url_into(
                self.http, url, offset, buf, whole=whole, key=key,
                pins=self._pins, pin_as=pin_as, shown=self.url(key),
            )  # fmt: skip

    # -- uploads ---------------------------------------------------------------

    async def put(
        self,
        key: str,
        data: Payload,
        options: WriteOptions,
        checksum: Checksum | None = None,
    ) -> ObjectInfo:
        """A one-part upload through the vendor (start, one PUT, complete)."""
        md5_hex = await self._md5_hex(data, checksum)
        size = len(data)
        request = UploadRequest(key, size, max(size, 1), 1, md5_hex, options)
        vended = await self.vendor.start_upload(request)
        state = _Upload(vended, 1)
        self._uploads[vended.upload_id] = state
        try:
            if not vended.holds(1, md5_hex):
                await self._send_part(state, 1, data, md5_hex)
            return await self.vendor.complete(state.vended)
        finally:
            self._uploads.pop(vended.upload_id, None)

    async def create_multipart(self, key: str, options: WriteOptions) -> MultipartUpload:
        """``start_upload`` with the engine's whole-file MD5 and part layout
        (``options.digests``, see :class:`~synxfer.backend.ContentDigests`)."""
        digests = options.digests
        if digests is None:
            raise ConfigError(
                f"{type(self).__name__} needs the file's MD5 before an upload starts "
                "(WriteOptions.digests; Capabilities.needs_content_md5)"
            )
        parts = len(digests.parts)
        request = UploadRequest(
            key, digests.size, digests.part_size, parts, digests.md5, replace(options, digests=None)
        )
        vended = await self.vendor.start_upload(request)
        self._uploads[vended.upload_id] = _Upload(vended, parts)
        return MultipartUpload(key, vended.upload_id)

    def _state(self, upload: MultipartUpload) -> _Upload:
        state = self._uploads.get(upload.upload_id)
        if state is None:
            raise NotFound(
                f"upload {upload.upload_id} is not known to this client", url=self.url(upload.key)
            )
        return state

    async def upload_part(
        self,
        upload: MultipartUpload,
        number: int,
        data: Payload,
        checksum: Checksum | None = None,
    ) -> CompletedPart:
        """PUT part ``number`` to its vended URL, with Content-MD5; report it."""
        state = self._state(upload)
        md5_hex = await self._md5_hex(data, checksum)
        if state.vended.holds(number, md5_hex):
            return CompletedPart(number, md5_hex, len(data))  # the service holds it
        await self._send_part(state, number, data, md5_hex)
        return CompletedPart(number, md5_hex, len(data))

    async def _md5_hex(self, data: Payload, checksum: Checksum | None) -> str:
        if checksum is not None and checksum.algorithm == "md5":
            return base64.b64decode(checksum.value).hex()
        return await to_thread_holding(_md5_hex, data)

    async def _part_url(self, state: _Upload, number: int, *, fresh: bool) -> SignedUrl:
        async with state.lock:
            url = state.urls.get(number)
            if url is not None and not fresh and not url.expired(self.expiry_margin):
                return url
            vended = state.vended
            # This part, and the parts around it still to send (the engine
            # sends in number order, a window at a time; which one asks first
            # is a race), up to url_batch in one call.
            want = [number]
            n = max(1, number - self.url_batch)
            while len(want) < self.url_batch and n <= state.parts:
                cached = state.urls.get(n)
                if (
                    n != number
                    and n not in vended.done_parts
                    and n not in state.sizes
                    and (cached is None or cached.expired(self.expiry_margin))
                ):
                    want.append(n)
                n += 1
            want.sort()
            got = await self.vendor.upload_urls(vended, want)
            now = time.time()
            for k, v in got.items():
                if not v.expired(self.expiry_margin, now) or k == number:
                    state.urls[k] = v
            url = state.urls.get(number)
            if url is None:
                raise BackendError(
                    f"the service vended no URL for part {number}", url=self.url(vended.key)
                )
            return url

    async def _send_part(self, state: _Upload, number: int, data: Payload, md5_hex: str) -> None:
        md5_b64 = base64.b64encode(bytes.fromhex(md5_hex)).decode("ascii")
        shown = self.url(state.vended.key)
        url = await self._part_url(state, number, fresh=False)
        response = await put_url(self.http, url, data, md5_b64, shown)
        if _expired_answer(response):
            url = await self._part_url(state, number, fresh=True)
            response = await put_url(self.http, url, data, md5_b64, shown)
        if not 200 <= response.status < 300:
            raise status_error(response, f"PUT of part {number} refused", shown)
        state.urls.pop(number, None)
        state.sizes[number] = len(data)
        await self.vendor.part_done(state.vended, number, md5_hex)

    async def complete_multipart(
        self, upload: MultipartUpload, parts: Sequence[CompletedPart]
    ) -> ObjectInfo:
        state = self._state(upload)
        info = await self.vendor.complete(state.vended)
        self._uploads.pop(upload.upload_id, None)
        return info

    async def abort_multipart(self, upload: MultipartUpload) -> None:
        state = self._uploads.pop(upload.upload_id, None)
        if state is not None:
            await self.vendor.abort(state.vended)

    async def list_parts(self, upload: MultipartUpload) -> list[CompletedPart]:
        """The parts the service holds (``upload_status``), by number; the
        ETag of each is its MD5 in hex (sizes from the part size)."""
        state = self._state(upload)
        vended = await self.vendor.upload_status(state.vended)
        state.vended = replace(state.vended, done_parts=vended.done_parts)
        return [
            CompletedPart(n, md5, state.sizes.get(n, vended.part_size))
            for n, md5 in sorted(vended.done_parts.items())
        ]


#: The most download URLs and ETag pins a backend remembers (oldest dropped):
#: a download of a million objects must not keep a million of them.
_REMEMBER: Final = 4096


def _bounded_put(cache: dict[str, T], key: str, value: T) -> None:
    cache.pop(key, None)
    cache[key] = value
    while len(cache) > _REMEMBER:
        del cache[next(iter(cache))]


def _md5_hex(data: Payload) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


async def put_url(
    http: HttpClient, url: SignedUrl, data: Payload, content_md5: str | None, shown: str
) -> HttpResponse:
    """PUT ``data`` to a signed URL (with ``Content-MD5`` when given)."""
    scheme, host, port, target = url.address()
    headers = {"host": url.host_header(), **url.headers}
    if content_md5 is not None and md5_header_allowed(url):
        headers["content-md5"] = content_md5
    return await http.request("PUT", scheme, host, port, target, headers, data, label=shown)


def md5_header_allowed(url: SignedUrl) -> bool:
    """Whether a Content-MD5 header may be added to a PUT to ``url``.

    A SigV4 pre-signed URL signs the headers it lists (``X-Amz-SignedHeaders``)
    and lets others through, so the store verifies an added Content-MD5. A
    SigV2 one (``Signature=``, botocore's default presign for S3) signs
    Content-MD5 as part of its string to sign: added afterwards, it breaks
    the signature (SeaweedFS: SignatureDoesNotMatch). A vendor that signed
    one puts it in ``url.headers`` itself.
    """
    if any(name.lower() == "content-md5" for name in url.headers):
        return False
    query = urllib.parse.urlsplit(url.url).query
    names = {name.lower() for name, _ in urllib.parse.parse_qsl(query, keep_blank_values=True)}
    if "signature" in names and "x-amz-signature" not in names:
        return False
    signed = urllib.parse.parse_qs(query).get("X-Amz-SignedHeaders", [""])[0].lower().split(";")
    return "content-md5" not in signed


async def read_url_into(
    http: HttpClient,
    url: SignedUrl,
    offset: int,
    buf: memoryview,
    *,
    whole: bool = False,
    key: str = "",
    pins: dict[str, str] | None = None,
    pin_as: str | None = None,
    shown: str = "",
    extra_headers: Mapping[str, str] | None = None,
    if_range: str | None = None,
) -> ObjectInfo:
    """A (ranged) GET of ``url`` straight into ``buf``; the object's info.

    Pinned with ``If-Match`` to ``url.etag`` or ``pins[pin_as]`` (the first
    strong ETag seen, recorded there; ``pin_as`` defaults to ``key``); an
    answer with another ETag, a 412, or a body of the wrong size raises
    PreconditionFailed. Without an ETag,
    ``if_range`` (a Last-Modified date) goes as ``If-Range``: the whole
    object coming back then means it changed. A server that ignores
    ``Range`` (200 to a ranged GET) is fine when the range is the whole
    object; otherwise a BackendError says so (the body is never received
    into a buffer larger than ``buf``).
    """
    if buf.format != "B" or buf.ndim != 1:
        buf = buf.cast("B")
    n = buf.nbytes
    shown = shown or str(url)
    scheme, host, port, target = url.address()
    headers = {"host": url.host_header(), **url.headers, **(extra_headers or {})}
    pin_as = key if pin_as is None else pin_as
    pin = url.etag or (pins.get(pin_as) if pins is not None else None)
    if pin:
        headers["if-match"] = f'"{pin}"'
    ranged = not (whole and offset == 0) and (n > 0 or offset > 0)
    if ranged:
        last = offset + max(n, 1) - 1
        headers["range"] = f"bytes={offset}-{last}"
        if if_range and not pin:
            headers["if-range"] = if_range
    try:
        # Any 2xx body goes into ``buf``: a server that ignores Range (or an
        # If-Range that failed) answers the whole object, which must not be
        # received into a buffer of its size.
        response = await http.request(
            "GET", scheme, host, port, target, headers, sink=buf, label=shown
        )
    except BodyTooLarge as exc:
        if not ranged or exc.status == 206:
            raise PreconditionFailed(
                f"expected {n} bytes at offset {offset}, but the object is larger", url=shown
            ) from None
        raise _whole_answer(shown, if_range if not pin else None) from None
    status = response.status
    if status == 412:
        raise PreconditionFailed(
            f"{shown} changed while it was being downloaded (its ETag is no longer {pin})",
            url=shown,
            status=412,
        )
    if status == 416:
        if n == 0:
            return ObjectInfo(key=key, size=0)  # an empty object: no range fits
        raise PreconditionFailed(
            f"expected {n} bytes at offset {offset}: the object is shorter", url=shown, status=416
        )
    if not 200 <= status < 300:
        raise status_error(response, "GET refused", shown)
    info = _info_from(response, key, ranged and status == 206)
    if status == 200 and ranged and not (offset == 0 and info.size == n == response.length):
        # The whole object came back, and it is not the range asked for.
        raise _whole_answer(shown, if_range if not pin else None)
    if response.length != n and not (n == 0 and response.length == 0):
        if whole and offset == 0:
            raise PreconditionFailed(
                f"expected {n} bytes, the object has {response.length}", url=shown
            )
        raise PreconditionFailed(
            f"expected {n} bytes at offset {offset}, got {response.length}", url=shown
        )
    seen = info.etag
    if seen and pins is not None:
        first = url.etag or pins.get(pin_as)
        if first is None:
            first = seen
            _bounded_put(pins, pin_as, seen)
        if first != seen:
            raise PreconditionFailed(
                f"{shown} changed while it was being downloaded (ETag {first} became {seen})",
                url=shown,
            )
    return info


def _whole_answer(shown: str, if_range: str | None) -> BackendError:
    if if_range:
        return PreconditionFailed(
            f"{shown} changed while it was being downloaded (Last-Modified is no longer "
            f"{if_range}: the server sent the whole new object instead of the range)",
            url=shown,
        )
    return BackendError(
        f"{shown}: the server ignores Range requests (it answered a ranged GET with the "
        "whole object), so it cannot be fetched in parts; raise --part-size above half "
        "the object's size to fetch it in one GET",
        url=shown,
    )


def _info_from(response: HttpResponse, key: str, partial: bool) -> ObjectInfo:
    headers = response.headers
    size = response.length
    if partial:
        crange = headers.get("content-range", "")
        total = crange.rpartition("/")[2]
        if total.isdigit():
            size = int(total)
        else:
            raise BackendError(f"a ranged answer without its object's size ({crange!r})")
    else:
        length = headers.get("content-length")
        if length and length.isdigit():
            size = int(length)
    mtime = parse_http_date(headers.get("last-modified"))
    sums = checksums_from_headers(headers)
    if partial and "content-md5" in headers:
        # A range's Content-MD5 is the range's, not the object's.
        goog = checksums_from_headers({"x-goog-hash": headers.get("x-goog-hash", "")})
        sums.pop("md5", None)
        if "md5" in goog:
            sums["md5"] = goog["md5"]
    return ObjectInfo(
        key=key,
        size=size,
        mtime=mtime,
        etag=strip_etag(headers.get("etag")),
        content_type=headers.get("content-type"),
        checksums=MappingProxyType(sums),
    )
