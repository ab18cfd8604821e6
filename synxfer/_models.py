"""Value objects that cross the public API and the backend SDK."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "CANNED_ACLS",
    "CHECKSUM_ALGORITHMS",
    "SSE_ALGORITHMS",
    "WRITE_OPTION_NAMES",
    "Action",
    "BucketInfo",
    "CompletedPart",
    "ContentDigests",
    "Event",
    "EventKind",
    "FileFailure",
    "ListPage",
    "MultipartUpload",
    "ObjectInfo",
    "PartInfo",
    "PendingUpload",
    "ReadResult",
    "TransferResult",
    "WriteOptions",
]

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """What a backend knows about one object.

    ``key`` is relative to the backend's bucket. ``mtime`` is seconds since
    the epoch of the object's last modification *on the backend* (S3's
    LastModified); the source file's mtime, when synxfer stored it, is in
    ``metadata["mtime"]`` (the key rclone uses, so both tools agree).
    ``etag`` is the backend's opaque version tag, quotes stripped.
    ``metadata`` is user metadata; listings may leave it empty.
    ``checksums`` are whole-object checksums the *server* vouches for, by
    algorithm, base64-encoded as on the wire: ``{"crc32c": "…", "md5": "…"}``.
    A checksum of a multipart object that is the checksum of its parts'
    checksums (S3's composite checksums, and its multipart ETag as
    ``md5-composite``) is named ``<algorithm>-composite`` and written
    ``value-N`` (N parts; ``value`` alone when the service leaves N out).
    A backend fills in only what its service vouches for; the engine
    verifies downloads against them (docs/reliability.md).
    ``encryption`` is the server-side encryption the service reports
    (S3: ``AES256``, ``aws:kms``, ``aws:kms:dsse``; ``SSE-C`` for
    customer-provided keys), None when it reports none.
    ``version_id`` is the object version the service reports (S3's
    ``versionId``; ``"null"`` for one written while versioning was off),
    None when it has none. A version listing (``Client.ls(versions=True)``)
    also says whether this is the current version (``is_latest``) and
    whether it is a delete marker (``delete_marker``, size 0); other
    listings list current versions only.
    """

    key: str
    size: int
    mtime: float | None = None
    etag: str | None = None
    metadata: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    content_type: str | None = None
    checksums: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    encryption: str | None = None
    version_id: str | None = None
    is_latest: bool = True
    delete_marker: bool = False


@dataclass(frozen=True, slots=True)
class BucketInfo:
    """A bucket an account can see (``Client.list_buckets``, ``synxfer ls``).

    ``created`` is seconds since the epoch of the bucket's creation, as the
    service reports it (S3's CreationDate), None when it reports none.
    """

    name: str
    created: float | None = None


@dataclass(frozen=True, slots=True)
class PartInfo:
    """One part of a multipart object, as the service reports it.

    ``number`` is 1-based, of ``count`` parts; ``size`` is the part's size
    in bytes, ``offset`` where it starts in the object (None if the service
    does not say); ``checksums`` are the part's own, named as in
    :class:`ObjectInfo` (S3 reports a composite object's part checksums).
    """

    number: int
    size: int
    count: int
    offset: int | None = None
    checksums: Mapping[str, str] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class ReadResult:
    """The bytes of one (ranged) read, and the object's info from that response.

    ``info.size`` is the size of the whole object, not of ``data``.
    """

    data: bytes
    info: ObjectInfo


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of a listing; ``cursor`` is ``None`` on the last page."""

    items: Sequence[ObjectInfo]
    cursor: str | None = None


#: ``WriteOptions.sse`` values: S3's server-side encryption algorithms.
SSE_ALGORITHMS = ("AES256", "aws:kms", "aws:kms:dsse")
#: ``WriteOptions.acl`` values: S3's canned ACLs (aws-cli's ``--acl`` choices).
CANNED_ACLS = (
    "private",
    "public-read",
    "public-read-write",
    "authenticated-read",
    "aws-exec-read",
    "bucket-owner-read",
    "bucket-owner-full-control",
    "log-delivery-write",
)
#: The options of :class:`WriteOptions` a backend may declare it honours
#: (``Capabilities.write_options``), in field order.
WRITE_OPTION_NAMES = (
    "metadata",
    "content_type",
    "storage_class",
    "sse",
    "sse_kms_key_id",
    "acl",
    "cache_control",
    "content_encoding",
    "content_disposition",
    "if_none_match",
    "tags",
    "checksum_algorithm",
)
#: ``WriteOptions.checksum_algorithm`` values, spelt as aws-cli's ``--checksum-algorithm``.
CHECKSUM_ALGORITHMS = ("CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256", "MD5")


@dataclass(frozen=True, slots=True)
class ContentDigests:
    """A file's MD5s, computed by the engine before its upload starts, for a
    backend with ``Capabilities.needs_content_md5`` (``WriteOptions.digests``).

    ``size`` bytes cut in parts of ``part_size`` (the last one shorter);
    ``md5`` is the whole content's MD5 in hex, ``parts`` each part's, in
    part order.
    """

    size: int
    part_size: int
    md5: str
    parts: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return (
            f"ContentDigests(size={self.size}, part_size={self.part_size}, "
            f"md5={self.md5!r}, parts=<{len(self.parts)}>)"
        )


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """Options for a new object (single put, multipart initiate, copy).

    ``metadata``: user metadata (S3 ``x-amz-meta-*``, GCS ``metadata``).
    ``content_type``: the object's media type; None lets the backend store its
    default (S3 ``binary/octet-stream``, GCS ``application/octet-stream``).
    ``storage_class``: the service's name for one (S3 ``STANDARD_IA``,
    ``GLACIER_IR``...; GCS ``NEARLINE``...). ``sse``: server-side encryption,
    ``AES256``, ``aws:kms`` or ``aws:kms:dsse``, with ``sse_kms_key_id`` (a KMS
    key for ``aws:kms``; none: the account's default key). ``acl``: a canned
    ACL (:data:`CANNED_ACLS`). ``cache_control``, ``content_encoding``,
    ``content_disposition``: the HTTP headers the object is served with.
    ``if_none_match``: write only if no object has the key (S3's conditional
    ``If-None-Match: *`` on PutObject and CompleteMultipartUpload); the
    store refuses the write with PreconditionFailed otherwise, which a
    transfer reports as a skip (``--no-clobber``), never as a failure.
    ``tags``: the object's tags (S3's ``x-amz-tagging``; at most 10, keys
    up to 128 characters, values up to 256, checked here). A server-side
    copy keeps the source's tags unless ``tags`` are given.
    ``checksum_algorithm``: the checksum the stored object carries as its
    claim, for any tool to verify later (:data:`CHECKSUM_ALGORITHMS`,
    aws-cli's names, any case): S3's ``x-amz-checksum-*`` of the object, and
    of each part of a multipart one -- FULL_OBJECT for the CRCs where the
    store takes it, COMPOSITE for SHA1/SHA256; ``MD5`` keeps the MD5 ETag
    as the claim (docs/checksums.md). None: synxfer picks what the store
    verifies best.

    A backend declares the options it honours in
    ``Capabilities.write_options``; a client refuses, before any transfer, an
    option the destination cannot honour (:func:`synxfer.backend.check_write_options`),
    so none is ever dropped silently. Values are checked here (a
    :class:`~synxfer.ConfigError` names the option); storage classes by the
    backend that takes them.
    """

    metadata: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    content_type: str | None = None
    storage_class: str | None = None
    sse: str | None = None
    sse_kms_key_id: str | None = None
    acl: str | None = None
    cache_control: str | None = None
    content_encoding: str | None = None
    content_disposition: str | None = None
    if_none_match: bool = False
    tags: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    checksum_algorithm: str | None = None
    #: Not an option a user sets: the engine's pre-pass MD5s of the file for a
    #: backend with ``Capabilities.needs_content_md5`` (multipart create only).
    digests: ContentDigests | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        from ._exceptions import ConfigError

        if not isinstance(self.if_none_match, bool):
            raise ConfigError("WriteOptions(if_none_match=...) must be True or False")
        if not isinstance(self.metadata, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.metadata.items()
        ):
            raise ConfigError(
                f"WriteOptions(metadata=...) must be a mapping of strings to strings, "
                f"like {{'project': 'x'}} (got {self.metadata!r})"
            )
        for name in WRITE_OPTION_NAMES[1:]:
            value = getattr(self, name)
            if value is None or name in ("if_none_match", "tags"):
                continue
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"WriteOptions({name}=...) must be a non-empty string")
            if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
                raise ConfigError(
                    f"WriteOptions({name}=...) {value!r} holds a control character "
                    "(a header cannot carry it)"
                )
        if self.sse is not None and self.sse not in SSE_ALGORITHMS:
            raise ConfigError(
                f"WriteOptions(sse=...) must be one of {', '.join(SSE_ALGORITHMS)} "
                f"(got {self.sse!r})"
            )
        if self.sse_kms_key_id is not None and not (self.sse or "").startswith("aws:kms"):
            raise ConfigError(
                "WriteOptions(sse_kms_key_id=...) needs WriteOptions(sse=...) aws:kms "
                "(or aws:kms:dsse)"
            )
        if self.checksum_algorithm is not None:
            chosen = self.checksum_algorithm.strip().upper()
            if chosen not in CHECKSUM_ALGORITHMS:
                raise ConfigError(
                    f"WriteOptions(checksum_algorithm=...) must be one of "
                    f"{', '.join(CHECKSUM_ALGORITHMS)} (got {self.checksum_algorithm!r})"
                )
            object.__setattr__(self, "checksum_algorithm", chosen)
        if self.tags:
            from ._tags import check_tags

            check_tags(self.tags)
        if self.acl is not None and self.acl not in CANNED_ACLS:
            raise ConfigError(
                f"WriteOptions(acl=...) must be a canned ACL: {', '.join(CANNED_ACLS)} "
                f"(got {self.acl!r})"
            )

    def given(self) -> frozenset[str]:
        """The names of the options set (non-empty metadata, ``if_none_match``
        True, other fields not None)."""
        return frozenset(
            name
            for name in WRITE_OPTION_NAMES
            if (
                self.metadata
                if name == "metadata"
                else self.tags
                if name == "tags"
                else self.if_none_match
                if name == "if_none_match"
                else getattr(self, name) is not None
            )
        )

    def __reduce__(self) -> tuple[type[WriteOptions], tuple[object, ...]]:
        # The default metadata is a read-only proxy, which pickle refuses;
        # configurations travel to other processes (TransferConfig.processes).
        values = tuple(getattr(self, name) for name in WRITE_OPTION_NAMES)
        return type(self), tuple(dict(v) if isinstance(v, Mapping) else v for v in values)


@dataclass(frozen=True, slots=True)
class MultipartUpload:
    """A handle for an initiated multipart upload.

    ``checksum``: the checksum the upload was created to carry when a user
    chose one (``WriteOptions.checksum_algorithm``): that name, then the
    backend's words after a ``/`` if any (S3: ``"SHA256/COMPOSITE"``,
    ``"MD5"``); None for the backend's own. The resume
    journal records it, and a resumed upload's handle carries it again, so
    the backend completes the upload as it began and the engine resumes it
    only with the same choice.
    """

    key: str
    upload_id: str
    checksum: str | None = None


@dataclass(frozen=True, slots=True)
class PendingUpload:
    """A multipart upload in progress on the server, and when it began
    (seconds since the epoch, by the server's clock; None if unknown)."""

    upload: MultipartUpload
    initiated: float | None = None


@dataclass(frozen=True, slots=True)
class CompletedPart:
    """A part the backend accepted: 1-based ``number``, its ETag and size.

    ``checksum``: the part's checksum (base64) that completing the upload
    needs, if the backend needs one (S3 uploads declared with CRC32C). The
    resume journal keeps it, so an upload resumed in another process can be
    completed on a server whose part listing does not report it.
    """

    number: int
    etag: str
    size: int
    checksum: str | None = None


class Action(enum.Enum):
    """What a run did (or, in a dry run, would do) with one file."""

    UPLOAD = "upload"
    DOWNLOAD = "download"
    COPY = "copy"
    DELETE = "delete"
    SKIP = "skip"


class EventKind(enum.Enum):
    """Kinds of :class:`Event` passed to a client's ``on_event`` callback."""

    PLANNED = "planned"  # a plan was made: ``files`` files of ``size`` bytes to ``action``
    STARTED = "started"  # a file began transferring
    PROGRESS = "progress"  # ``nbytes`` more bytes of a file moved
    DONE = "done"  # a file finished (or was deleted, or would be in a dry run)
    SKIPPED = "skipped"  # a file was already up to date
    FAILED = "failed"  # a file failed; ``error`` says why
    RETRY = "retry"  # a backend call is being retried; ``error`` says why


@dataclass(frozen=True, slots=True)
class Event:
    """A progress notification. ``src``/``dst`` are URLs or local paths.

    A ``PLANNED`` event comes before any file of a run starts, one per
    action the plan holds: ``files`` files (objects to delete count one
    each) of ``size`` bytes in all will be ``action``-ed, files already up
    to date not included; its ``src``/``dst`` are empty. Totals add up: a
    run planned in parts (shards, deletions after transfers) sends one
    event per part. A file of the plan later found up to date sends
    ``SKIPPED``. See :mod:`synxfer.progress` for a tqdm bar built on them.
    """

    kind: EventKind
    action: Action
    src: str
    dst: str
    size: int = 0
    nbytes: int = 0
    error: str | None = None
    dryrun: bool = False
    #: On a download's DONE event: True when the data was checked against a
    #: checksum the source vouches for, False when the source offered none.
    verified: bool | None = None
    #: On a PLANNED event: how many files the plan holds for ``action``.
    files: int = 0
    #: On a DONE event: what the user should know about the file that landed
    #: (a store's checksum that was wrong for the bytes, or why they could not
    #: be verified); the same text is in ``TransferResult.warnings``.
    warning: str | None = None


@dataclass(frozen=True, slots=True)
class FileFailure:
    """One file that could not be transferred (or deleted), and why."""

    path: str
    action: Action
    error: str


@dataclass(frozen=True, slots=True)
class FileWarning:
    """A file that was transferred, and what the user should know about it:
    a store's checksum that is wrong for the bytes (verified by another one
    instead), or why the bytes could not be verified (docs/reliability.md)."""

    path: str
    action: Action
    message: str
    #: ``wrong-checksum``: a checksum the store gives was wrong for the bytes,
    #: which another one verified; ``not-verified``: nothing could verify them.
    kind: str = "wrong-checksum"


@dataclass(slots=True)
class TransferResult:
    """The outcome of a run: what moved, what was skipped, what failed.

    ``bytes_transferred`` counts payload bytes of completed files.
    ``bytes_uploaded`` / ``bytes_downloaded`` count the payload bytes that
    actually crossed the network in each direction (a streamed remote copy
    counts both; a server-side copy neither; parts of failed files count).
    ``throughput`` is bytes per second over ``elapsed``.
    ``not_verified`` counts downloaded files and streamed copies whose source
    vouched for no checksum the data could be checked against (a server-side
    copy never reaches the client and is not counted; docs/reliability.md).
    ``warnings`` names, per file, a store's checksum found wrong for bytes
    another checksum verified, and each file that could not be verified, why.
    """

    files_transferred: int = 0
    bytes_transferred: int = 0
    bytes_uploaded: int = 0
    bytes_downloaded: int = 0
    files_skipped: int = 0
    bytes_skipped: int = 0
    files_deleted: int = 0
    failures: list[FileFailure] = field(default_factory=list)
    retries: int = 0
    elapsed: float = 0.0
    dryrun: bool = False
    not_verified: int = 0
    warnings: list[FileWarning] = field(default_factory=list)

    @property
    def files_failed(self) -> int:
        return len(self.failures)

    @property
    def ok(self) -> bool:
        """True when no file failed."""
        return not self.failures

    @property
    def throughput(self) -> float:
        return self.bytes_transferred / self.elapsed if self.elapsed > 0 else 0.0

    def raise_for_failures(self) -> TransferResult:
        """Raise :class:`~synxfer.TransferFailed` if any file failed; else return self."""
        if self.failures:
            from ._exceptions import TransferFailed

            raise TransferFailed(self)
        return self

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready summary."""
        return {
            "files_transferred": self.files_transferred,
            "bytes_transferred": self.bytes_transferred,
            "bytes_uploaded": self.bytes_uploaded,
            "bytes_downloaded": self.bytes_downloaded,
            "files_skipped": self.files_skipped,
            "bytes_skipped": self.bytes_skipped,
            "files_deleted": self.files_deleted,
            "files_failed": self.files_failed,
            "failures": [
                {"path": f.path, "action": f.action.value, "error": f.error} for f in self.failures
            ],
            "retries": self.retries,
            "not_verified": self.not_verified,
            "warnings": [
                {"path": w.path, "action": w.action.value, "kind": w.kind, "message": w.message}
                for w in self.warnings
            ],
            "elapsed": round(self.elapsed, 6),
            "throughput": round(self.throughput, 1),
            "dryrun": self.dryrun,
        }
