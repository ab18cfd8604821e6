"""The S3 backend: synxfer's primitives on :class:`~._core.S3Wire`.

Design choices, briefly:

* **Our own data plane.** Every request is signed here (SigV4,
  ``UNSIGNED-PAYLOAD``) and sent on our own HTTP/1.1 pool
  (:class:`synxfer.backend.HttpClient`), whose GETs receive straight into the caller's buffer
  (:meth:`S3Backend.read_into`). See ``docs/decisions/0007-own-s3-data-plane.md``.
  botocore is imported only when the environment does not hold the
  credentials (profiles, SSO, instance metadata...) or the region, and then
  only for that (:mod:`._credentials`).
* **No retries here.** synxfer's RetryLayer owns retries, so a backoff never
  holds a concurrency slot and every retry is visible to the caller. The
  backend's job is to classify errors well (:mod:`._classify`). The HTTP
  client re-sends a request only when a pooled connection turns out to
  have died while idle and nothing of an answer arrived.
* **Checksums are ours, and the stored bytes are proven.** The engine
  computes each body's checksum off the event loop
  (``capabilities.part_checksum``): CRC32C by default
  (``x-amz-checksum-crc32c``), MD5 (``Content-MD5``) for stores that predate
  S3's flexible checksums (:attr:`S3Backend.md5_only`, the ``md5_only``
  backend option). Not every server verifies CRC32C (Ceph RGW ignores it,
  stock moto verifies nothing), so the backend learns per endpoint
  (:mod:`._trust`) whether answers echo the CRC32C they verified, as S3
  does; where they do not, or not yet, each body also carries
  ``Content-MD5`` (hashed in a worker thread) and its answer's ETag must
  be the MD5 of the bytes sent (:meth:`S3Backend._check_stored`; decision
  0026). A multipart upload declares CRC32C when it is created and lists
  every part's CRC32C when it is completed, so the object carries a
  checksum later readers can verify. Reads ask for checksums
  (``x-amz-checksum-mode``) and report them in ``ObjectInfo.checksums``:
  full-object ones under their algorithm (``crc32c``), composite ones of
  multipart objects as ``crc32c-composite`` (see :mod:`._wire`).
* **S3-compatible stores** subclass :class:`S3Backend` and override small
  hooks only: :meth:`~S3Backend._resolve_endpoint`,
  :meth:`~S3Backend._resolve_region` and the class attributes
  ``default_region``, ``addressing_style`` and ``md5_only`` (see
  :mod:`synxfer_scp`).
* **Object options.** Every :class:`~synxfer.WriteOptions` field is sent as
  S3 takes it (``x-amz-storage-class``, ``x-amz-server-side-encryption``
  [``-aws-kms-key-id``], ``x-amz-acl``, ``Cache-Control``,
  ``Content-Encoding``, ``Content-Disposition``, ``x-amz-meta-*``,
  ``Content-Type``) on PutObject, CreateMultipartUpload and CopyObject.
* **Buckets.** :meth:`S3Backend.create_bucket` (CreateBucket, with a
  LocationConstraint unless the region is ``us-east-1``),
  :meth:`S3Backend.delete_bucket` and, on the account-level backend
  (bucket ``""``), :meth:`S3Backend.list_buckets` (ListBuckets).

Credentials come from the environment or botocore's standard chain
(profile, container/instance metadata...) and are never held by this
object: only by the credential source the wire asks before each request.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from typing import ClassVar, Literal, cast
from urllib.parse import urlsplit

from synxfer import (
    BackendError,
    BucketInfo,
    BucketNotFound,
    CompletedPart,
    GiB,
    ListPage,
    MiB,
    MultipartUpload,
    NotFound,
    ObjectInfo,
    PartInfo,
    PendingUpload,
    PreconditionFailed,
    ReadResult,
    TransientError,
    WriteOptions,
)
from synxfer.backend import (
    WRITE_OPTION_NAMES,
    Backend,
    BackendOptions,
    BodyTooLarge,
    Capabilities,
    Checksum,
    CursorGuard,
    Payload,
    crc32c_available,
)

from . import _chosen as chosen
from ._chosen import ChosenUpload
from ._classify import bucket_not_found, classify
from ._core import S3Wire, s3_code
from ._credentials import LazyCredentials, profile_region, profile_s3_setting, resolve_region
from ._options import (
    AddressingStyle,
    S3Options,
    addressing_style,
    check_endpoint_url,
    endpoint_from_env,
)
from ._parts import PartSums, crc32c_b64, multipart_etag
from ._sse_c import CustomerKeys, unconfirmed
from ._trust import EndpointTrust, StoredOtherBytes, endpoint_trust
from ._wire import b64md5, etag_md5, result_checksums

__all__ = ["AddressingStyle", "S3Backend", "check_endpoint_url"]

_log = logging.getLogger("synxfer.s3")

#: S3's storage classes (``WriteOptions.storage_class``; aws-cli's ``--storage-class``).
S3_STORAGE_CLASSES = frozenset(
    {
        "STANDARD",
        "REDUCED_REDUNDANCY",
        "STANDARD_IA",
        "ONEZONE_IA",
        "INTELLIGENT_TIERING",
        "GLACIER",
        "DEEP_ARCHIVE",
        "OUTPOSTS",
        "GLACIER_IR",
        "SNOW",
        "EXPRESS_ONEZONE",
    }
)

#: CRC32C needs fastcrc or google-crc32c (the ``s3`` extra has both, decision
#: 0020); without either, parts carry MD5.
_HAVE_CRC32C = crc32c_available()


class S3Backend(Backend):
    """Amazon S3 (and S3-compatible stores via ``endpoint_url``): ``s3://bucket/key``.

    Backend options (``options.extra``): ``addressing_style`` (``auto``,
    ``virtual`` or ``path``) overrides the class default and the AWS
    profile's ``s3.addressing_style``, for S3-compatible servers that need
    path-style URLs; ``md5_only`` (true/false) makes every body carry
    ``Content-MD5`` and no ``x-amz-checksum-*`` header, for servers that
    predate S3's flexible checksums; ``anonymous`` (true/false) sends
    requests unsigned, asking for no credentials, to read public buckets
    (aws-cli's ``--no-sign-request``); ``request_payer`` (``requester``)
    sends ``x-amz-request-payer`` with every request, to use requester-pays
    buckets (aws-cli's ``--request-payer``); ``recv_threads`` (true/false,
    default :attr:`recv_threads`) receives large GET bodies over plain
    ``http`` in worker threads instead of on the event loop (never over TLS;
    ``docs/decisions/0013-receive-off-the-loop.md``); ``check_etag``
    (true/false, default true) compares the ETag of every body the server did
    not confirm by echoing its CRC32C with the MD5 of the bytes sent (turn it
    off only for a store whose ETags are not MD5s; decision 0026).
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
        part_checksum="crc32c" if _HAVE_CRC32C else "md5",
        list_parts=True,
        # A copy of an object over max_copy_size sends one UploadPartCopy per
        # part, several at once: each request takes a slot of options.requests.
        fan_out=frozenset({"copy"}),
        write_options=frozenset(WRITE_OPTION_NAMES),  # every one of them
        storage_classes=S3_STORAGE_CLASSES,
        customer_keys=True,  # SSE-C (see ._sse_c)
    )

    #: Signing region when neither ``options.region`` nor the AWS chain names one.
    default_region: ClassVar[str] = "us-east-1"
    #: Addressing style; ``auto`` picks virtual-host style for DNS-safe buckets on
    #: DNS names, path style on IP addresses and ``localhost``. With ``auto``
    #: (and no ``addressing_style`` backend option), the AWS profile's
    #: ``s3.addressing_style`` applies when it names one, as in aws-cli; a
    #: subclass that forces a style (SCP: ``path``) keeps it.
    addressing_style: ClassVar[AddressingStyle] = "auto"
    #: Bodies carry ``Content-MD5`` and never an ``x-amz-checksum-*`` header:
    #: for servers that predate S3's flexible checksums (SCP). DeleteObjects
    #: always carries Content-MD5, whatever this says.
    md5_only: ClassVar[bool] = False
    #: Default of the ``recv_threads`` backend option.
    recv_threads: ClassVar[bool] = False
    #: The object version every read and delete addresses: set on a view
    #: (:meth:`at_version`, :mod:`._versions`) only; None: the current one.
    _version_id: str | None = None

    def __init__(self, bucket: str, options: BackendOptions) -> None:
        # Bucket "" is the account-level backend of list_buckets; the wire
        # refuses any other request without a bucket.
        self.bucket = bucket
        self.options = options
        self.endpoint_url = self._resolve_endpoint()
        #: The backend options, read once (see :mod:`._options`).
        self.settings = settings = S3Options.read(
            options, scheme=self.scheme, md5_only=self.md5_only, recv_threads=self.recv_threads
        )
        self._addressing = settings.addressing_style or self.addressing_style
        #: Compare ETags with the MD5 of the bytes sent (see :meth:`_check_stored`).
        self.check_etag = settings.check_etag
        #: Unsigned requests, no credentials (``--no-sign-request``).
        self.anonymous = settings.anonymous
        #: Large ``http`` bodies received in worker threads.
        self.recv_off_loop = settings.recv_threads
        #: ``x-amz-request-payer`` of every request (requester-pays buckets).
        self.request_payer = settings.request_payer
        if settings.md5_only or not _HAVE_CRC32C:
            self.capabilities = dataclasses.replace(type(self).capabilities, part_checksum="md5")
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
        self._wire: S3Wire | None = None
        self._bucket_exists = False
        self._sums = PartSums()
        self._no_clobber: set[str] = set()  # upload ids started with if_none_match
        self._tags: dict[str, dict[str, str]] = {}  # upload id -> tags of its create
        self._chosen: dict[str, ChosenUpload] = {}  # uploads with a chosen checksum (_chosen)
        #: What the endpoint showed it verifies (shared per endpoint; set by :meth:`open`).
        self._trust: EndpointTrust | None = None

    # -- hooks for S3-compatible profiles ------------------------------------

    def _resolve_endpoint(self) -> str | None:
        """The endpoint URL, or None for AWS's own regional endpoint."""
        return endpoint_from_env(self.options)

    async def _resolve_region(self) -> str:
        """``options.region``, else the AWS chain's, else :attr:`default_region`.

        A named profile is always looked up, so an unknown one is a
        ConfigError when the backend opens.
        """
        profile = self.options.profile
        if profile:
            chain = await profile_region(profile)
            return self.options.region or chain or self.default_region
        return await resolve_region(None, explicit=self.options.region, default=self.default_region)

    def _profile_addressing(self) -> bool:
        """Whether the AWS profile's ``s3.addressing_style`` may apply: neither
        a backend option nor the class (a subclass forcing one) chose a style."""
        return self.settings.addressing_style is None and self.addressing_style == "auto"

    # -- lifecycle -----------------------------------------------------------

    async def open(self) -> None:
        if self._wire is not None:
            return
        region = await self._resolve_region()
        if self._profile_addressing():
            value, where = await asyncio.to_thread(
                profile_s3_setting, self.options.profile, "addressing_style"
            )
            if value is not None:
                self._addressing = addressing_style(value, where)
        self._wire = S3Wire(
            region=region,
            credentials=LazyCredentials(self.options.profile),
            endpoint_url=self.endpoint_url,
            addressing=self._addressing,
            max_connections=self.options.max_connections,
            connect_timeout=self.options.connect_timeout,
            read_timeout=self.options.read_timeout,
            label=self.scheme,
            anonymous=self.anonymous,
            request_payer=self.request_payer,
            recv_threads=self.recv_off_loop,
            customer_keys=self._customer_keys(),
        )
        self.region = region
        self._trust = endpoint_trust(self.endpoint_url or f"https://s3.{region}.amazonaws.com")

    def _customer_keys(self) -> CustomerKeys | None:
        """The SSE-C keys of :class:`~synxfer.backend.BackendOptions`, if any.
        Over plain ``http`` to another host the key would cross the network
        in clear (AWS and Ceph RGW refuse it there; SeaweedFS takes it): said
        once, as a warning, naming the endpoint and never the key."""
        read, write = self.options.sse_c_read_key, self.options.sse_c_write_key
        if read is None and write is None:
            return None
        parts = urlsplit(self.endpoint_url or "https://")
        if parts.scheme == "http" and parts.hostname not in ("127.0.0.1", "::1", "localhost"):
            _log.warning(
                "%s: a customer-provided key (SSE-C) is sent in clear over http; use https",
                self.endpoint_url,
            )
        self._sse_c = CustomerKeys(read, write)
        return self._sse_c

    #: The SSE-C keys sent (set by :meth:`open`), and whether a write went unconfirmed.
    _sse_c: CustomerKeys | None = None
    _sse_c_warned = False

    def _note_sse_c(self, key: str, encryption: str | None) -> None:
        """Warn (once) when a write sent with the SSE-C key was not confirmed
        SSE-C-encrypted: the store ignored the key (stock moto does) and may
        hold the bytes in clear. The bytes are stored; the user must know."""
        if self._sse_c_warned or not unconfirmed(self._sse_c, encryption):
            return
        self._sse_c_warned = True
        _log.warning(
            "%s: the store did not confirm SSE-C encryption (its answer names no "
            "customer-key algorithm): it ignored the customer-provided key and may "
            "keep objects unencrypted",
            self.url(key),
        )

    async def _head_written(self, key: str) -> ObjectInfo:
        """HEAD of an object this backend has just written: with the SSE-C
        write key (a client that only writes may hold no read key)."""
        from ._wire import object_info

        response = await self.wire._request("HeadObject", "HEAD", self.bucket, key, written=True)
        return object_info(key, response.headers, None)

    async def aclose(self) -> None:
        if self._version_id is not None:
            return  # a version view: the connections are its backend's
        wire, self._wire = self._wire, None
        if wire is not None:
            await wire.aclose()

    @property
    def wire(self) -> S3Wire:
        """The open :class:`~._core.S3Wire` (RuntimeError before :meth:`open`)."""
        if self._wire is None:
            raise RuntimeError(f"{self!r} is not open: use 'async with' or await open() first")
        return self._wire

    @property
    def _crc(self) -> bool:
        return self.capabilities.part_checksum == "crc32c"

    # -- objects ---------------------------------------------------------------

    async def stat(self, key: str) -> ObjectInfo:
        return await self._head(key)

    async def _head(self, key: str, if_match: str | None = None) -> ObjectInfo:
        try:
            return await self.wire.head_object(
                self.bucket, key, if_match=if_match, checksum_mode=True, version_id=self._version_id
            )
        except NotFound as exc:
            if not isinstance(exc, BucketNotFound):
                await self._raise_if_no_bucket(key)
            raise

    async def stat_part(self, key: str, number: int, *, if_match: str | None = None) -> PartInfo:
        """HEAD ``?partNumber=``: how a multipart object was uploaded (the engine
        lines its ranged reads up with the parts to check a multipart ETag or
        a composite checksum)."""
        try:
            return await self.wire.head_object_part(
                self.bucket, key, number, if_match=if_match, version_id=self._version_id
            )
        except NotFound as exc:
            if not isinstance(exc, BucketNotFound):
                await self._raise_if_no_bucket(key)
            raise

    async def _raise_if_no_bucket(self, key: str) -> None:
        """After a body-less 404 (a HEAD), tell a missing bucket from a missing key."""
        if self._bucket_exists:
            return
        try:
            await self.wire.head_bucket(self.bucket)
        except NotFound as exc:
            raise bucket_not_found(self.bucket, self.url(key), 404) from exc
        except BackendError:
            return  # can't tell (403, say): report the key as missing
        self._bucket_exists = True

    async def list_page(self, prefix: str, cursor: str | None = None) -> ListPage:
        page = await self.wire.list_objects_v2(
            self.bucket, prefix=prefix, continuation_token=cursor, max_keys=self.list_page_size
        )
        items = [
            ObjectInfo(key=o.key, size=o.size, mtime=o.mtime, etag=o.etag) for o in page.objects
        ]
        return ListPage(items, page.next_token if page.truncated else None)

    async def read(
        self,
        key: str,
        offset: int = 0,
        length: int | None = None,
        *,
        if_match: str | None = None,
    ) -> ReadResult:
        """Bytes ``[offset, offset+length)``; ``data`` is the receive buffer
        itself (a ``bytearray`` of the body's size: no further copy)."""
        if offset < 0 or (length is not None and length < 0):
            raise ValueError(f"invalid range: offset={offset}, length={length}")
        if length == 0:
            return ReadResult(b"", await self._head(key, if_match))
        # No Range header for a whole-object read: S3 answers 416 to any range
        # on a 0-byte object.
        try:
            data, info = await self.wire.get_object(
                self.bucket,
                key,
                offset=offset,
                length=length,
                if_match=if_match,
                checksum_mode=True,
                version_id=self._version_id,
            )
        except BackendError as exc:
            if exc.status != 416 and s3_code(exc) != "InvalidRange":
                raise
            # Nothing at `offset`: fine at (or past) the end of the object.
            # The HEAD gives its info and re-checks if_match.
            info = await self._head(key, if_match)
            if offset < info.size:
                raise
            return ReadResult(b"", info)
        available = max(0, info.size - offset)
        expected = available if length is None else min(length, available)
        if len(data) != expected:
            short = len(data) < expected
            raise (TransientError if short else BackendError)(
                f"short read: got {len(data)} of {expected} bytes at offset {offset}"
                if short
                else f"server sent {len(data)} bytes for a {expected}-byte range",
                url=self.url(key),
            )
        return ReadResult(cast(bytes, data), info)

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

        The body goes from the socket into ``buf`` (no allocation, no copy in
        Python). An empty ``buf`` reads an empty object without a range; so
        does ``whole`` (the caller expects ``buf`` to hold the object): S3
        sends the object's checksums only with an unranged GET.
        """
        if offset < 0:
            raise ValueError(f"invalid offset {offset}")
        if buf.format != "B" or buf.ndim != 1:
            buf = buf.cast("B")
        n = buf.nbytes
        if n == 0 and offset > 0:
            info = await self._head(key, if_match)
            if info.size > offset:
                raise PreconditionFailed(
                    f"expected 0 bytes at offset {offset}, but the object has {info.size}",
                    url=self.url(key),
                )
            return info
        try:
            got, info = await self.wire.get_object_into(
                self.bucket,
                key,
                buf,
                offset=offset,
                length=None if whole and offset == 0 else n or None,
                if_match=if_match,
                checksum_mode=True,
                version_id=self._version_id,
            )
        except BodyTooLarge as exc:
            raise PreconditionFailed(
                f"expected {n} bytes at offset {offset}, but the object is larger ({exc})",
                url=self.url(key),
            ) from None
        except BackendError as exc:
            if exc.status != 416 and s3_code(exc) != "InvalidRange":
                raise
            raise PreconditionFailed(
                f"expected {n} bytes at offset {offset}: the object is shorter",
                url=self.url(key),
                status=exc.status,
            ) from None
        if got != n:
            raise PreconditionFailed(
                f"expected {n} bytes at offset {offset}, got {got}", url=self.url(key)
            )
        return info

    def _checksum_args(self, checksum: Checksum | None) -> tuple[str | None, dict[str, str] | None]:
        """``(content_md5, checksums)`` for the wire: where ``checksum`` travels."""
        if checksum is None:
            return None, None
        if checksum.algorithm == "md5":
            return checksum.value, None
        return None, {checksum.algorithm: checksum.value}

    async def _with_md5(
        self, key: str, data: Payload, md5: str | None, sums: dict[str, str] | None
    ) -> str | None:
        """``md5``, or the body's Content-MD5 (computed in a worker thread)
        unless a CRC32C travels to an endpoint known to verify it.

        A server that may not verify the CRC32C given cannot be trusted to
        refuse a wrong one, so the same thread checks it against the bytes
        (CRC32C costs a twentieth of the MD5): a mismatch means the buffer
        is not what the checksum was computed from, and nothing is sent.
        """
        if md5 is not None:
            return md5
        crc = sums.get("crc32c") if sums else None
        trust = self._trust
        if crc is not None and trust is not None and trust.verifies:
            return None
        md5, actual = await asyncio.to_thread(_md5_and_crc32c, data, crc is not None)
        if crc is not None and actual != crc:
            raise BackendError(
                f"the CRC32C given for the body ({crc}) is not that of its bytes ({actual}); "
                "nothing was sent",
                url=self.url(key),
            )
        return md5

    async def _check_stored(
        self,
        what: str,
        key: str,
        data: Payload,
        md5: str | None,
        sums: dict[str, str] | None,
        answer: tuple[str | None, Mapping[str, str], str | None],
    ) -> None:
        """Raise StoredOtherBytes unless the answer vouches for the bytes sent.

        ``answer`` is the ETag, the checksums echoed and the encryption. An
        echo of the CRC32C sent is the server's word that it verified the
        body; without one, the ETag must be the MD5 of the buffer sent
        (a server that verified nothing -- stock moto -- is caught here).
        Under SSE-KMS/SSE-C an ETag is no MD5: Content-MD5, which such
        servers verify, is all there is.
        """
        etag, echoed, sse = answer
        # One x-amz-checksum-* travels: CRC32C, or the one a user chose (_chosen).
        sent = next(iter(sums.items()), None) if sums else None
        if sent is not None and self._trust is not None:
            confirmed = echoed.get(sent[0]) == sent[1]
            trust = self._trust
            if sent[0] != trust.algorithm:  # a chosen one: its own verdict
                trust = endpoint_trust(trust.endpoint, sent[0])
            trust.learn(confirmed)
            if confirmed:
                return
        stated = etag_md5(etag, sse) if self.check_etag else None
        if stated is None:
            return
        if md5 is None:  # an endpoint that verified until now, not this time
            md5 = await asyncio.to_thread(b64md5, data)
        actual = base64.b64decode(md5).hex()
        if stated != actual:
            raise StoredOtherBytes(
                f"{what}: the server stored other bytes than those sent (its ETag {etag} "
                f"is not their MD5 {actual}): corrupted on the way (if this store's ETags "
                f"are no MD5s, set the backend option {self.scheme}.check_etag=false)",
                url=self.url(key),
            )

    async def put(
        self,
        key: str,
        data: Payload,
        options: WriteOptions,
        checksum: Checksum | None = None,
    ) -> ObjectInfo:
        """PutObject, with ``checksum`` and, where the endpoint is not known to
        verify it, Content-MD5; the answer must vouch for the bytes
        (:meth:`_check_stored`). Stored bytes that differ are deleted
        before the error is raised, so a retry that never succeeds leaves
        the object missing, not wrong. A chosen checksum
        (``options.checksum_algorithm``) travels instead of ``checksum``
        (:mod:`._chosen`)."""
        kind = chosen.kind_of(options)
        if kind is None:
            md5, sums = self._checksum_args(checksum)
            md5 = await self._with_md5(key, data, md5, sums)
        else:
            chosen.check_available(kind, self)
            md5, sums = await chosen.body(self, key, data, checksum, kind)
        info = await self.wire.put_object(
            self.bucket,
            key,
            data,
            content_md5=md5,
            checksums=sums,
            metadata=options.metadata,
            content_type=options.content_type,
            options=options,
        )
        self._note_sse_c(key, info.encryption)
        try:
            await self._check_stored(
                "PutObject", key, data, md5, sums, (info.etag, info.checksums, info.encryption)
            )
        except StoredOtherBytes:
            with contextlib.suppress(BackendError):
                await self.wire.delete_object(self.bucket, key)
            raise
        if kind is not None:
            chosen.note_put(self, key, kind, sums, info)
        return info

    async def delete(self, key: str) -> None:
        # S3 answers 204 for a missing key; some compatible stores 404 (ignored).
        await self.wire.delete_object(self.bucket, key, version_id=self._version_id)

    async def delete_many(self, keys: Sequence[str]) -> Mapping[str, Exception]:
        """DeleteObjects in batches of :attr:`delete_batch_size` keys.

        Per-key failures are returned; a failure of a whole request (missing
        bucket, throttling, ...) is raised, which is safe to retry because
        deleting is idempotent. Each request carries Content-MD5 (valid on
        every S3-compatible server).
        """
        if self._version_id is not None:  # one version: DeleteObject's versionId
            return await super().delete_many(keys)
        failed: dict[str, Exception] = {}
        for start in range(0, len(keys), self.delete_batch_size):
            batch = keys[start : start + self.delete_batch_size]
            for err in await self.wire.delete_objects(self.bucket, batch):
                cls = classify(err.code, None)
                if cls is NotFound:
                    continue
                if cls is BucketNotFound:
                    failed[err.key] = bucket_not_found(self.bucket, self.url(err.key), None)
                else:
                    msg = f"{err.code} on DeleteObjects: {err.message}".rstrip(": ")
                    failed[err.key] = cls(msg, url=self.url(err.key))
        return failed

    async def copy(self, src_key: str, dst_key: str, options: WriteOptions) -> ObjectInfo:
        """Server-side copy; metadata is copied unless ``options`` sets any.

        With empty ``options`` the copy keeps the source's metadata and content
        type; otherwise they are replaced by ``options``. The source is pinned
        by its ETag, so a source that changes mid-copy raises
        PreconditionFailed. Objects larger than :attr:`max_copy_size`
        (CopyObject's 5 GiB limit) are copied with UploadPartCopy, several
        parts at a time. ``copy`` is in ``capabilities.fan_out``: each request
        it sends takes a slot of ``options.requests`` (see :mod:`._copy`).
        """
        from ._copy import copy_object  # here: a plain transfer never copies

        return await copy_object(self, self.bucket, src_key, dst_key, options)

    def copy_scope(self) -> object | None:
        """The endpoint, signing region, credential source (profile; unsigned
        or not) and request-payer setting of this backend, once open: two S3
        buckets served alike copy server-side (:meth:`copy_from`). No secret
        is held here (credentials are resolved by the wire, per request).
        A version view has none: its copies stream, pinned to the version."""
        if self._wire is None or self._version_id is not None:
            return None
        return (
            type(self),
            self.endpoint_url,
            self.region,
            self.options.profile,
            self.anonymous,
            self.request_payer,
        )

    async def copy_from(
        self, src_bucket: str, src_key: str, dst_key: str, options: WriteOptions
    ) -> ObjectInfo:
        """Server-side copy from another bucket of the same :meth:`copy_scope`
        (CopyObject, or UploadPartCopy in parts), as :meth:`copy`."""
        from ._copy import copy_object

        return await copy_object(self, src_bucket, src_key, dst_key, options)

    # -- versions ----------------------------------------------------------------

    def at_version(self, version_id: str) -> Backend:
        """A view whose HEADs, GETs and DELETEs carry ``versionId`` (:mod:`._versions`)."""
        from ._versions import version_view  # here: a plain transfer names no version

        return version_view(self, version_id)

    async def list_versions_page(self, prefix: str, cursor: str | None = None) -> ListPage:
        """One ListObjectVersions page (versions and delete markers)."""
        from ._versions import list_versions_page

        return await list_versions_page(self, prefix, cursor)

    async def delete_versions(
        self, items: Sequence[tuple[str, str]]
    ) -> Mapping[tuple[str, str], Exception]:
        """DeleteObjects batches naming each version (:mod:`._versions`)."""
        from ._versions import delete_versions

        return await delete_versions(self, items)

    # -- multipart ---------------------------------------------------------------

    async def create_multipart(self, key: str, options: WriteOptions) -> MultipartUpload:
        """Start an upload; with CRC32C parts, it declares CRC32C (see the module
        docstring); with a chosen checksum, that one and its type (:mod:`._chosen`)."""
        kind = chosen.kind_of(options)
        if kind is not None:
            upload, mine = await chosen.create(self, key, options, kind)
            self._chosen[upload.upload_id] = mine
            return upload
        return await self._create(key, options, checksums=self._crc)

    async def _create(
        self,
        key: str,
        options: WriteOptions,
        *,
        checksums: bool,
        algorithm: str = "crc32c",
        checksum_type: str | None = None,
    ) -> MultipartUpload:
        upload_id = await self.wire.create_multipart_upload(
            self.bucket,
            key,
            metadata=options.metadata,
            content_type=options.content_type,
            checksum_algorithm=algorithm if checksums else None,
            checksum_type=checksum_type,
            options=options,
        )
        if options.if_none_match:  # sent again on CompleteMultipartUpload
            self._no_clobber.add(upload_id)
        if options.tags:  # checked once complete (see complete_multipart)
            self._tags[upload_id] = dict(options.tags)
        return MultipartUpload(key=key, upload_id=upload_id)

    async def _refuse_existing(self, key: str) -> None:
        """PreconditionFailed if ``key`` exists: a HEAD just before completing
        an ``if_none_match`` upload, as Ceph RGW 16 ignores ``If-None-Match``
        on CompleteMultipartUpload (measured; AWS, moto and SeaweedFS honour it)."""
        try:  # a HEAD of the object being written: with the SSE-C write key
            await self.wire._request("HeadObject", "HEAD", self.bucket, key, written=True)
        except BucketNotFound:
            raise
        except NotFound:
            return
        raise PreconditionFailed(
            f"{self.url(key)} exists (if_none_match)", url=self.url(key), status=412
        )

    async def upload_part(
        self,
        upload: MultipartUpload,
        number: int,
        data: Payload,
        checksum: Checksum | None = None,
    ) -> CompletedPart:
        """Upload one part, with ``checksum`` (the engine's, of the very buffer).

        Given none, or not a CRC32C, a backend whose uploads declare CRC32C
        computes the part's CRC32C too (in a worker thread): completing the
        upload needs it.
        """
        mine = chosen.of(self, upload)
        if mine is not None:
            md5, sums = await chosen.body(self, upload.key, data, checksum, mine.kind)
        else:
            md5, sums = self._checksum_args(checksum)
            if self._crc and (sums is None or "crc32c" not in sums):
                sums = {**(sums or {}), "crc32c": await asyncio.to_thread(crc32c_b64, data)}
            md5 = await self._with_md5(upload.key, data, md5, sums)
        answer = await self.wire.upload_part_answer(
            self.bucket,
            upload.key,
            upload.upload_id,
            number,
            data,
            content_md5=md5,
            checksums=sums,
        )
        await self._check_stored(f"UploadPart {number}", upload.key, data, md5, sums, answer)
        self._note_sse_c(upload.key, answer.encryption)
        if mine is not None:  # the chosen value, journaled (_chosen.complete_args)
            value = sums[mine.kind] if sums is not None else None
            if value is not None:
                mine.parts[number] = (value, len(data))
            return CompletedPart(number=number, etag=answer.etag, size=len(data), checksum=value)
        crc = sums.get("crc32c") if sums is not None else None
        if crc is not None:
            self._sums.add(upload.upload_id, number, crc)
        return CompletedPart(number=number, etag=answer.etag, size=len(data), checksum=crc)

    async def complete_multipart(
        self, upload: MultipartUpload, parts: Sequence[CompletedPart]
    ) -> ObjectInfo:
        """Assemble the parts in number order, with each part's CRC32C when
        every one is known (an upload that declared CRC32C needs them all).

        If the upload is already gone (a retry after a lost response) and the
        object's ETag is the one these parts produce, the earlier attempt
        succeeded and its result is returned.
        """
        ordered = sorted(parts, key=lambda p: p.number)
        mine = chosen.of(self, upload)
        if self._crc and mine is None:
            for p in ordered:  # resumed parts: their CRC32C as the journal kept it
                if p.checksum and not self._sums.has(upload.upload_id, p.number):
                    self._sums.add(upload.upload_id, p.number, p.checksum)
        specs = self._sums.specs(upload.upload_id, [(p.number, p.etag) for p in ordered])
        extra: dict[str, str] = {}
        expected = None
        if mine is not None:
            specs, extra, expected = await chosen.complete_args(mine, ordered)
        if upload.upload_id in self._no_clobber:
            await self._refuse_existing(upload.key)
        try:
            result = await self.wire.complete_multipart_upload(
                self.bucket,
                upload.key,
                upload.upload_id,
                specs,
                if_none_match=upload.upload_id in self._no_clobber,
                checksum_headers=extra,
            )
        except NotFound as exc:
            if s3_code(exc) != "NoSuchUpload":
                raise
            done = await self._already_completed(upload, ordered)
            if done is None:
                raise
            return done
        self._sums.forget(upload.upload_id)
        etag = result.etag
        if not etag:  # Ceph RGW 16 answers <ETag></ETag>: the object knows it
            etag = (await self._head_written(upload.key)).etag
        tags = self._tags.pop(upload.upload_id, None)
        if tags:  # Ceph RGW 16 drops the tags of CreateMultipartUpload (measured)
            from ._tagging import ensure_tags

            await ensure_tags(self.wire, self.bucket, upload.key, tags)
        info = ObjectInfo(
            key=upload.key,
            size=sum(p.size for p in ordered),
            etag=etag,
            checksums=result_checksums(result.checksums, multipart=True),
        )
        if mine is not None:
            del self._chosen[upload.upload_id]
            info = await chosen.stored_claim(self, upload.key, mine, expected, info)
        return info

    async def _already_completed(
        self, upload: MultipartUpload, parts: Sequence[CompletedPart]
    ) -> ObjectInfo | None:
        expected = multipart_etag(parts)
        if expected is None:
            return None
        try:
            info = await self._head_written(upload.key)
        except NotFound:
            return None
        if info.etag != expected:
            return None
        self._sums.forget(upload.upload_id)
        return info

    async def list_parts(self, upload: MultipartUpload) -> list[CompletedPart]:
        """The parts the server holds, by number, each with its CRC32C when
        it is known: reported by the server (S3 does; stock moto, SeaweedFS
        and Ceph RGW do not) or sent by this backend. An upload made with a
        chosen checksum lists each part's value of that one, only as the
        server reports it (None where it does not): the engine checks it
        against the file's bytes before keeping the part. The engine completes
        an upload from such parts only with the CRC32C the journal kept or
        that it computed again from the file (completing an upload declared
        with CRC32C needs every part's on SeaweedFS and S3).
        """
        parts: list[CompletedPart] = []
        marker = 0
        mine = chosen.of(self, upload)
        while True:
            page = await self.wire.list_parts(
                self.bucket, upload.key, upload.upload_id, marker=marker
            )
            for p in page.parts:
                if mine is not None:  # a chosen checksum: only what the server lists
                    parts.append(
                        CompletedPart(p.number, p.etag, p.size, p.checksums.get(mine.kind))
                    )
                    continue
                crc = p.checksums.get("crc32c")
                if crc:
                    self._sums.add(upload.upload_id, p.number, crc)
                else:
                    crc = self._sums.get(upload.upload_id, p.number)
                parts.append(CompletedPart(p.number, p.etag, p.size, crc))
            if not page.truncated or page.next_marker is None or page.next_marker <= marker:
                return parts
            marker = page.next_marker

    async def list_uploads(self, key: str) -> list[PendingUpload]:
        found: list[PendingUpload] = []
        key_marker = upload_marker = ""
        guard = CursorGuard(self.url(key), "multipart upload listing")
        while True:
            page = await self.wire.list_multipart_uploads(
                self.bucket, prefix=key, key_marker=key_marker, upload_id_marker=upload_marker
            )
            for u in page.uploads:
                if u.key == key and u.upload_id:
                    found.append(PendingUpload(MultipartUpload(key, u.upload_id), u.initiated))
            if not page.truncated:
                return found
            key_marker = page.next_key_marker or ""
            upload_marker = page.next_upload_id_marker or ""
            if not key_marker and not upload_marker:
                return found
            guard.check(f"{key_marker} {upload_marker}")

    async def abort_multipart(self, upload: MultipartUpload) -> None:
        self._sums.forget(upload.upload_id)
        self._tags.pop(upload.upload_id, None)
        self._chosen.pop(upload.upload_id, None)
        try:
            await self.wire.abort_multipart_upload(self.bucket, upload.key, upload.upload_id)
        except NotFound as exc:
            # Already aborted (or completed): nothing left to discard.
            if isinstance(exc, BucketNotFound):
                raise

    # -- buckets -------------------------------------------------------------------

    async def create_bucket(self, *, region: str | None = None) -> None:
        """CreateBucket in ``region`` (default: the signing region), with a
        LocationConstraint unless that is ``us-east-1``."""
        await self.wire.create_bucket(self.bucket, region=region or self.region)
        self._bucket_exists = True

    async def delete_bucket(self) -> None:
        """DeleteBucket: the bucket must hold no object (``BucketNotEmpty``)."""
        await self.wire.delete_bucket(self.bucket)
        self._bucket_exists = False

    async def list_buckets(self) -> list[BucketInfo]:
        """ListBuckets, page after page: the buckets the credentials own."""
        out: list[BucketInfo] = []
        token: str | None = None
        guard = CursorGuard(self.url(), "bucket listing")
        while True:
            page = await self.wire.list_buckets(token)
            out.extend(BucketInfo(b.name, b.created) for b in page.buckets)
            if page.next_token is None:
                return out
            token = page.next_token
            guard.check(token)

    async def presign(self, key: str, method: Literal["GET", "PUT"], expires_in: int) -> str:
        """A SigV4 query-signed URL for ``key`` (see :mod:`._presign`)."""
        from ._presign import presign_url

        return await presign_url(self.wire, self.bucket, key, method, expires_in)

    # -- for _copy -------------------------------------------------------------------

    def copy_part_size_for(self, size: int) -> int:
        """The part size of a multipart copy of a ``size``-byte object."""
        caps = self.capabilities
        part_size = max(self.copy_part_size, math.ceil(size / caps.max_parts))
        return min(part_size, caps.max_part_size)


def _md5_and_crc32c(data: Payload, crc: bool) -> tuple[str, str | None]:
    """Content-MD5 of ``data`` and, with ``crc``, its CRC32C (base64 both).
    Blocking: a worker thread's."""
    return b64md5(data), crc32c_b64(data) if crc else None
