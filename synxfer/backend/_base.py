"""The backend base class and the values it works with: what a plugin implements.

See :mod:`synxfer.backend` for the rules; this module holds the definitions
it re-exports.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType, TracebackType
from typing import ClassVar, Literal, Self

from .._config import GiB, MiB
from .._customer_key import CustomerKey
from .._exceptions import BackendError, PreconditionFailed
from .._models import (
    BucketInfo,
    CompletedPart,
    ListPage,
    MultipartUpload,
    ObjectInfo,
    PartInfo,
    PendingUpload,
    ReadResult,
    WriteOptions,
)
from ._requests import UNLIMITED, RequestLimiter

__all__ = [
    "Backend",
    "BackendFactory",
    "BackendOptions",
    "Capabilities",
    "Checksum",
    "ChecksumAlgorithm",
    "CursorGuard",
    "Payload",
]

ChecksumAlgorithm = Literal["md5", "crc32c"]

#: The bytes of a put or a part: a buffer the engine may reuse as soon as the
#: call returns, so a backend must not keep a reference to it.
Payload = bytes | bytearray


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a backend can do; the engine plans around it.

    ``part_checksum`` names the checksum the backend wants with every put and
    part (the engine computes it off the event loop from the very buffer it
    sends); ``None`` means none. It is fixed for the backend's life (layers
    copy it): a backend whose server may not verify it learns that at run
    time and adds its own proof, off the loop too (the S3 backend's
    Content-MD5 and ETag check, decision 0026).
    """

    multipart: bool = True
    min_part_size: int = 5 * MiB
    max_part_size: int = 5 * GiB
    max_parts: int = 10_000
    max_single_put: int = 5 * GiB
    ranged_reads: bool = True
    server_side_copy: bool = False
    metadata: bool = True
    batch_delete: bool = False
    part_checksum: ChecksumAlgorithm | None = "md5"
    #: ``list_parts`` works, so an interrupted multipart upload can be resumed.
    list_parts: bool = False
    #: Part sizes are rounded up to a multiple of this (e.g. a block size).
    part_size_multiple: int = 1
    #: Operations (primitive names, e.g. ``"copy"``) that may send several
    #: requests in one call. The scheduler holds no request slot around them;
    #: the backend takes one per request from ``options.requests`` instead
    #: (see :mod:`synxfer.backend._requests`).
    fan_out: frozenset[str] = frozenset()
    #: ``read_into`` checks what it returns against checksums the store keeps
    #: (the block store's SHA-256 block ids) whenever the range starts and
    #: ends on ``part_size_multiple`` boundaries (or at the object's end), as
    #: the engine's ranges do; a mismatch raises IntegrityError. The engine
    #: counts such downloads as verified.
    verified_reads: bool = False
    #: The object options (fields of :class:`~synxfer.WriteOptions`) this
    #: backend honours on put, multipart create and copy. A client refuses any
    #: other before a transfer starts (:func:`synxfer.backend.check_write_options`),
    #: so an option is never dropped silently. Every backend stores metadata
    #: and a content type; declare more as the service takes them.
    write_options: frozenset[str] = frozenset({"metadata", "content_type"})
    #: Sends ``BackendOptions.sse_c_read_key`` / ``sse_c_write_key`` (S3's
    #: SSE-C) on every request that needs them; a client refuses a key for a
    #: backend without it, so no key is ever ignored silently.
    customer_keys: bool = False
    #: Storage classes ``WriteOptions.storage_class`` may name (when
    #: ``"storage_class"`` is in ``write_options``); empty: not checked here.
    storage_classes: frozenset[str] = frozenset()
    #: The service wants the whole content's MD5 (and the part layout) before
    #: an upload starts (Synapse's ``contentMD5Hex``): the engine computes it,
    #: with every part's MD5, in one read of the file before
    #: ``create_multipart`` and passes it as ``WriteOptions.digests``.
    needs_content_md5: bool = False


@dataclass(frozen=True, slots=True)
class Checksum:
    """A checksum of the bytes being sent: the algorithm and its base64 value."""

    algorithm: ChecksumAlgorithm
    value: str


_NO_EXTRA: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class BackendOptions:
    """Connection options a client passes to every backend it opens.

    Credentials are not options: backends take them from their platform's
    standard chain (environment, profile, instance metadata). ``extra`` holds
    backend-specific settings by name.
    """

    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    max_connections: int = 16
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    extra: Mapping[str, str] = field(default_factory=lambda: _NO_EXTRA)
    #: The scheduler's request limit, for operations listed in
    #: ``Capabilities.fan_out`` (one slot per request they send).
    requests: RequestLimiter = field(default=UNLIMITED, compare=False, repr=False)
    #: Customer-provided encryption keys (S3's SSE-C), for a backend with
    #: ``Capabilities.customer_keys``: sent on requests that read an object
    #: (HEAD, GET, a copy's source) and on those that write one. Never shown.
    sse_c_read_key: CustomerKey | None = field(default=None, compare=False, repr=False)
    sse_c_write_key: CustomerKey | None = field(default=None, compare=False, repr=False)


class Backend(abc.ABC):
    """Base class of every backend and layer. See the module docstring."""

    #: URL scheme this backend serves, e.g. ``"s3"``.
    scheme: ClassVar[str] = ""
    #: What this backend can do.
    capabilities: Capabilities = Capabilities()
    #: The bucket (or root) this instance serves.
    bucket: str = ""

    def url(self, key: str = "") -> str:
        """The URL of ``key`` in this backend, for messages and events
        (``s3://`` for an account-level backend, see :meth:`list_buckets`)."""
        if not self.bucket:
            return f"{self.scheme}://"
        return f"{self.scheme}://{self.bucket}/{key}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url()}>"

    # -- lifecycle -----------------------------------------------------------

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Acquire connections. Called once before first use."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections. Safe to call twice."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- configuration (optional) ----------------------------------------------

    @classmethod
    def transfer_defaults(cls, options: BackendOptions) -> Mapping[str, int]:
        """TransferConfig fields (e.g. ``max_threads``) that this backend's own
        configuration sets -- a service's config file, read as its own client
        reads it. The ``synxfer`` command applies them where no flag does; a
        Python caller passes them to TransferConfig itself. Default: none."""
        return {}

    # -- primitives ----------------------------------------------------------

    @abc.abstractmethod
    async def stat(self, key: str) -> ObjectInfo:
        """Info of one object, with metadata. Raises NotFound."""

    @abc.abstractmethod
    async def list_page(self, prefix: str, cursor: str | None = None) -> ListPage:
        """One page of objects whose keys start with ``prefix``, in key order."""

    @abc.abstractmethod
    async def read(
        self,
        key: str,
        offset: int = 0,
        length: int | None = None,
        *,
        if_match: str | None = None,
    ) -> ReadResult:
        """Bytes ``[offset, offset+length)`` of an object (to the end if no length).

        With ``if_match`` (an ETag), raise PreconditionFailed if the object
        no longer has that ETag.
        """

    async def stat_part(self, key: str, number: int, *, if_match: str | None = None) -> PartInfo:
        """Part ``number`` (1-based) of a multipart object: its size, where it
        starts, the parts count and its checksums (optional).

        The engine uses it to learn how an object was uploaded, so that its
        ranged reads line up with the parts and a checksum of the parts'
        checksums (an S3 multipart ETag or composite checksum) can be
        verified. An object that is not multipart answers ``count`` 1 (or
        raises BackendError); with ``if_match`` (an ETag), an object that
        changed raises PreconditionFailed.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot stat parts")

    async def read_into(
        self,
        key: str,
        offset: int,
        buf: memoryview,
        *,
        if_match: str | None = None,
        whole: bool = False,
    ) -> ObjectInfo:
        """Fill ``buf`` with bytes ``[offset, offset+len(buf))`` of an object.

        Returns the whole object's info. ``buf`` is filled exactly or the call
        raises (an object shorter than the range: :class:`PreconditionFailed`;
        a body cut short: :class:`TransientError`); an empty ``buf`` reads an
        empty object without a range. The engine lends a pooled buffer, so a
        backend that can receive straight into it (no per-object allocation,
        no join) overrides this; the default reads and copies once.

        ``whole`` (with ``offset`` 0): ``buf`` is expected to hold the whole
        object, so read it as a whole, without a range -- some services (S3)
        report whole-object checksums only then; an object of another size
        raises :class:`PreconditionFailed`.
        """
        if whole:
            res = await self.read(key, 0, None, if_match=if_match)
        else:
            res = await self.read(key, offset, len(buf) or None, if_match=if_match)
        if len(res.data) != len(buf):
            raise PreconditionFailed(
                f"expected {len(buf)} bytes at offset {offset}, got {len(res.data)}",
                url=self.url(key),
            )
        buf[:] = res.data
        return res.info

    @abc.abstractmethod
    async def put(
        self,
        key: str,
        data: Payload,
        options: WriteOptions,
        checksum: Checksum | None = None,
    ) -> ObjectInfo:
        """Store a whole object in one request. Returns its info (etag at least)."""

    @abc.abstractmethod
    async def delete(self, key: str) -> None:
        """Delete one object; a missing key is not an error."""

    async def delete_many(self, keys: Sequence[str]) -> Mapping[str, Exception]:
        """Delete several objects; returns the keys that failed, with why.

        Backends with ``batch_delete`` override this with one request per
        batch; the default deletes one by one.
        """
        failed: dict[str, Exception] = {}
        for key in keys:
            try:
                await self.delete(key)
            except Exception as exc:
                failed[key] = exc
        return failed

    async def copy(self, src_key: str, dst_key: str, options: WriteOptions) -> ObjectInfo:
        """Server-side copy within this bucket (if ``server_side_copy``)."""
        raise NotImplementedError(f"{type(self).__name__} has no server-side copy")

    def copy_scope(self) -> object | None:
        """Who serves this bucket, as far as server-side copies go, or None.

        Two backends whose scopes are equal (and not None) reach the same
        service, at the same endpoint, with the same credentials: the
        destination's :meth:`copy_from` then copies from the other's bucket
        without a byte crossing the client. The value is compared, never
        shown, and must hold no secret. None (the default): server-side
        copies within this bucket only (:meth:`copy`).
        """
        return None

    async def copy_from(
        self, src_bucket: str, src_key: str, dst_key: str, options: WriteOptions
    ) -> ObjectInfo:
        """Server-side copy of ``src_key`` in ``src_bucket`` (a bucket of a backend
        with the same :meth:`copy_scope`) to ``dst_key`` here, as :meth:`copy`
        does within a bucket. Its operation name is ``"copy"`` (layers,
        ``Capabilities.fan_out``)."""
        raise NotImplementedError(f"{type(self).__name__} has no server-side copy across buckets")

    async def create_multipart(self, key: str, options: WriteOptions) -> MultipartUpload:
        """Start a multipart upload (if ``multipart``)."""
        raise NotImplementedError(f"{type(self).__name__} has no multipart upload")

    async def upload_part(
        self,
        upload: MultipartUpload,
        number: int,
        data: Payload,
        checksum: Checksum | None = None,
    ) -> CompletedPart:
        """Upload part ``number`` (1-based) of a multipart upload."""
        raise NotImplementedError(f"{type(self).__name__} has no multipart upload")

    async def complete_multipart(
        self, upload: MultipartUpload, parts: Sequence[CompletedPart]
    ) -> ObjectInfo:
        """Assemble the parts, in number order, into the object."""
        raise NotImplementedError(f"{type(self).__name__} has no multipart upload")

    async def abort_multipart(self, upload: MultipartUpload) -> None:
        """Discard a multipart upload and its parts; no partial object remains."""
        raise NotImplementedError(f"{type(self).__name__} has no multipart upload")

    async def list_parts(self, upload: MultipartUpload) -> list[CompletedPart]:
        """The parts the server holds for an upload in progress, by number
        (if ``list_parts``). Raises NotFound if the upload no longer exists."""
        raise NotImplementedError(f"{type(self).__name__} cannot list parts")

    async def list_uploads(self, key: str) -> list[PendingUpload]:
        """Multipart uploads in progress for exactly ``key`` (optional).

        The engine uses it to abort an upload whose creation was applied by
        the server but whose reply was lost (and so was created again).
        """
        raise NotImplementedError(f"{type(self).__name__} cannot list uploads")

    # -- buckets (optional) ----------------------------------------------------

    async def create_bucket(self, *, region: str | None = None) -> None:
        """Create this backend's bucket (``synxfer mb``), in ``region`` if given
        (else where the backend's options say; S3: its signing region).

        A bucket that exists already raises BackendError (S3 and GCS bucket
        names are global: it may be someone else's).
        """
        raise NotImplementedError(f"{type(self).__name__} cannot create buckets")

    async def delete_bucket(self) -> None:
        """Delete this backend's bucket (``synxfer rb``); it must hold no object
        (the caller deletes them first to force it). Objects the backend keeps
        for itself (GCS composite-upload components) go with it. A missing
        bucket raises BucketNotFound.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot delete buckets")

    async def list_buckets(self) -> list[BucketInfo]:
        """The buckets the backend's credentials can see, by name (``synxfer ls``
        with no bucket, ``aws s3 ls``).

        The client calls it on a backend constructed for bucket ``""`` (an
        account-level backend, opened and closed as any other, which serves
        this call alone), and only when the class overrides it: a backend
        that lists buckets accepts the empty bucket in its constructor.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot list buckets")

    # -- presigned URLs (optional) ---------------------------------------------

    async def presign(self, key: str, method: Literal["GET", "PUT"], expires_in: int) -> str:
        """A URL with which anyone may ``method`` (GET: read, PUT: write) the
        object ``key`` without credentials, for ``expires_in`` seconds
        (``synxfer presign``, ``aws s3 presign``).

        Signed locally with the backend's credentials; no request is sent.
        A value of ``expires_in`` the service does not allow, or credentials
        that cannot sign (anonymous; no private key), raise ConfigError
        saying what is needed. The URL is a bearer credential for that object
        until it expires: never log it.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot presign URLs")

    async def sole_key(self) -> str | None:
        """The key of the one object this backend's bare URL names, for a store
        whose "bucket" may be an object itself: ``syn://syn456``, a Synapse
        File, is ``syn://syn456/NAME``. The client asks it of a URL with no
        key before calling it a prefix. Default: None (a bucket URL names a
        prefix)."""
        return None

    # -- object versions (optional) -------------------------------------------

    def at_version(self, version_id: str) -> Backend:
        """A view of this backend whose reads (``stat``, ``stat_part``,
        ``read``, ``read_into``) and ``delete`` address version ``version_id``
        of the key they are given (S3's ``versionId``), for ``--version-id``.

        The view shares this backend's connections: it is never opened or
        closed on its own, and it offers no server-side copy (its
        :meth:`copy_scope` is None), so the engine streams a version it
        copies, pinned on every read. A version that does not exist raises
        NotFound. Default: the backend has no versions (NotImplementedError;
        the client turns it into a ConfigError naming the option).
        """
        raise NotImplementedError(f"{type(self).__name__} has no object versions")

    async def list_versions_page(self, prefix: str, cursor: str | None = None) -> ListPage:
        """One page of every version of the objects under ``prefix`` (``ls
        --all-versions``), in key order, newest version first within a key;
        the items carry ``version_id``, ``is_latest`` and ``delete_marker``
        (a delete marker has size 0). Default: NotImplementedError."""
        raise NotImplementedError(f"{type(self).__name__} cannot list object versions")

    async def delete_versions(
        self, items: Sequence[tuple[str, str]]
    ) -> Mapping[tuple[str, str], Exception]:
        """Delete object versions and delete markers, each ``(key, version_id)``
        as :meth:`list_versions_page` lists them (``rm --all-versions``);
        returns those that failed, with why (a version already gone is no
        failure). Default: one :meth:`at_version` delete each; a backend
        that batches (S3's DeleteObjects) overrides it."""
        failed: dict[tuple[str, str], Exception] = {}
        for key, version_id in items:
            try:
                await self.at_version(version_id).delete(key)
            except Exception as exc:
                failed[(key, version_id)] = exc
        return failed

    # -- conveniences built on the primitives --------------------------------

    async def list(self, prefix: str = "") -> AsyncIterator[ObjectInfo]:
        """Every object under ``prefix``, page by page.

        A cursor handed out twice ends the listing with a BackendError (see
        :class:`CursorGuard`): every listing of the engine, the client and
        the CLI comes through here, so no backend needs its own check.
        """
        async for item in _paged(self.list_page, prefix, CursorGuard(self.url(prefix))):
            yield item

    async def list_versions(self, prefix: str = "") -> AsyncIterator[ObjectInfo]:
        """Every version under ``prefix``, page by page (see :meth:`list`)."""
        guard = CursorGuard(self.url(prefix), "version listing")
        async for item in _paged(self.list_versions_page, prefix, guard):
            yield item


async def _paged(
    page_of: Callable[[str, str | None], Awaitable[ListPage]], prefix: str, guard: CursorGuard
) -> AsyncIterator[ObjectInfo]:
    """The items of ``page_of``'s pages in order, each cursor checked by ``guard``."""
    cursor: str | None = None
    while True:
        page = await page_of(prefix, cursor)
        for item in page.items:
            yield item
        if page.cursor is None:
            return
        cursor = page.cursor
        guard.check(cursor)


class CursorGuard:
    """The cursors a paginated listing has handed out; one seen before is an error.

    A server whose paging is broken (a ``NextContinuationToken`` that
    repeats, two tokens that alternate) would otherwise keep a listing
    loop -- and ``sync`` or ``ls --recursive`` with it -- going until it is
    killed. Every cursor is remembered, not only the last, so a cycle is
    caught as well as a repeat: one string per page, a few megabytes for
    ten million objects. ``what`` names the listing in the message
    (``"listing"``, ``"bucket listing"``, ``"multipart upload listing"``).
    """

    __slots__ = ("_seen", "url", "what")

    def __init__(self, url: str, what: str = "listing") -> None:
        self.url = url
        self.what = what
        self._seen: set[str] = set()

    def check(self, cursor: str) -> None:
        """Remember ``cursor``; raise BackendError if it was handed out before."""
        if cursor in self._seen:
            shown = cursor if len(cursor) <= 40 else f"{cursor[:16]}...{cursor[-8:]}"
            raise BackendError(
                f"the {self.what} of {self.url} returned the continuation token {shown!r} "
                f"again after {len(self._seen)} page(s): the server's paging repeats, so "
                "the listing stops here instead of looping forever",
                url=self.url,
            )
        self._seen.add(cursor)


#: What an entry point in the ``synxfer.backends`` group must name: usually
#: the backend class itself, called as ``Factory(bucket, options)``.
BackendFactory = Callable[[str, BackendOptions], Backend]
