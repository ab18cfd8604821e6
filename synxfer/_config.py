"""Frozen configuration values with module-level defaults."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ._exceptions import ConfigError
from ._models import WriteOptions

if TYPE_CHECKING:
    from .backend import Capabilities

__all__ = [
    "GiB",
    "KiB",
    "MiB",
    "RetryPolicy",
    "TransferConfig",
    "check_capabilities",
    "check_write_options",
    "default_io_threads",
    "default_max_threads",
]

log = logging.getLogger("synxfer")

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

DEFAULT_PART_SIZE = 8 * MiB
DEFAULT_MULTIPART_THRESHOLD = 8 * MiB


def default_io_threads(max_threads: int) -> int:
    """``os.cpu_count()``, at least 2 and at most ``max_threads``: the default
    number of worker threads for file I/O and hashing."""
    return min(max_threads, max(2, os.cpu_count() or 1))


def default_max_threads() -> int:
    """``os.cpu_count() + 4``, the default number of parts in flight."""
    return (os.cpu_count() or 1) + 4


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How transient errors are retried: exponential backoff with full jitter.

    A call is tried at most ``attempts`` times; the n-th wait is drawn from
    ``[0, min(max_delay, initial_delay * 2**n)]``.
    """

    attempts: int = 6
    initial_delay: float = 0.1
    max_delay: float = 10.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ConfigError(f"RetryPolicy.attempts must be >= 1 (got {self.attempts})")
        if self.initial_delay < 0 or self.max_delay < 0:
            raise ConfigError("RetryPolicy delays must be >= 0")


@dataclass(frozen=True, slots=True)
class TransferConfig:
    """Every limit of a run, in one immutable value.

    ``max_threads``
        Part transfers (and other backend requests) in flight at once, across
        all files. Default ``os.cpu_count() + 4``.
    ``io_threads``
        Worker threads that read, write and hash file data. Default
        ``os.cpu_count()`` (at least 2, at most ``max_threads``): that work
        is CPU-bound copies and checksums of page-cached data, and each
        extra thread only competes for the GIL with the event loop
        (docs/decisions/0016-io-threads.md). Raise it for a slow disk.
    ``max_files``
        Files in flight at once. Default ``2 * max_threads``. Each holds one
        open file descriptor.
    ``part_size``
        Bytes per part for multipart uploads and ranged downloads (8 MiB). It
        grows for a file that would otherwise need more parts than the
        backend allows. Below the backend's smallest part it is raised to it
        (with a warning); above its largest part, opening the backend raises
        :class:`~synxfer.ConfigError` (see :func:`check_capabilities`).
    ``multipart_threshold``
        Files of at least this size are sent in parts; smaller files go in
        one request (8 MiB).
    ``memory_budget``
        Bytes of file data held in memory at once, across all files. Default
        ``max_threads * part_size``.
    ``connect_timeout`` / ``read_timeout``
        Seconds, passed to backends for their network calls. ``read_timeout``
        is also the stall timeout: a connection silent that long is dropped
        and the request retried.
    ``min_throughput``
        Bytes per second below which a data request counts as stalled even
        though bytes still trickle in: it gets ``read_timeout + bytes /
        min_throughput`` seconds, then is cancelled and retried. 0 (default)
        turns this off; on a shared slow link, remember it is per request.
    ``resume`` / ``state_dir``
        Keep a journal of multipart uploads and ranged downloads in progress
        (SQLite, under ``state_dir``, default ``~/.cache/synxfer``), so an
        interrupted run resumes where it stopped instead of starting over.
    ``processes``
        Engines a tree operation (sync, recursive copy) runs in, each in its
        own process with its own event loop (1, the default: this process
        only). The plan is made once and split into shards; each engine gets
        ``max_threads / processes`` requests and ``memory_budget / processes``
        bytes, so the machine-wide bounds hold. See docs/scaling.md.
    ``bwlimit``
        Bytes per second the client moves at most, both directions together
        (0, the default: no limit). One token bucket in the scheduler is
        charged each part's (or small file's) bytes before they move; see
        :class:`~synxfer.engine.scheduler.TokenBucket`. Text like ``"16M/s"``
        reads with :func:`synxfer.parse_rate`.
    ``write_options``
        Object options of every object an upload or remote copy writes
        (:class:`~synxfer.WriteOptions`: content type, storage class,
        server-side encryption, canned ACL, user metadata, cache control,
        content encoding and disposition); a call's ``write_options=`` takes
        their place. A client refuses, before any transfer, an option the
        destination does not honour (:func:`check_write_options`). A remote
        copy keeps its source's content type and metadata unless these say
        otherwise.
    ``guess_mime_type``
        Uploads without a ``write_options.content_type`` get the type
        :func:`mimetypes.guess_type` gives their file name, as aws-cli does
        (default on); off, they get none and the store's default applies.
    ``compress`` / ``compress_level``
        ``"zstd"``: uploads store each object zstd-compressed at
        ``compress_level`` (1-22, default 3), with metadata saying so
        (``synxfer-encoding``, ``synxfer-size``); downloads of such objects
        are decompressed whatever this says, and sync compares by the
        original size. None (default): objects are stored as they are. Needs
        the ``zstandard`` package (``pip install 'synxfer[zstd]'``). See
        docs/compression.md.
    """

    max_threads: int = field(default_factory=default_max_threads)
    max_files: int = 0
    io_threads: int = 0
    part_size: int = DEFAULT_PART_SIZE
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD
    memory_budget: int = 0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    min_throughput: int = 0
    resume: bool = True
    state_dir: str | None = None
    processes: int = 1
    bwlimit: int = 0
    write_options: WriteOptions = field(default_factory=WriteOptions)
    guess_mime_type: bool = True
    compress: str | None = None
    compress_level: int = 3

    def __post_init__(self) -> None:
        _check_types(self)
        if self.max_threads < 1:
            raise ConfigError(f"max_threads must be >= 1 (got {self.max_threads})")
        if self.max_files < 0:
            raise ConfigError(f"max_files must be >= 1 (got {self.max_files})")
        if self.io_threads < 0:
            raise ConfigError(f"io_threads must be >= 1 (got {self.io_threads})")
        if self.part_size < 1:
            raise ConfigError(f"part_size must be >= 1 byte (got {self.part_size})")
        if self.multipart_threshold < 1:
            raise ConfigError(
                f"multipart_threshold must be >= 1 byte (got {self.multipart_threshold})"
            )
        if self.processes < 1:
            raise ConfigError(f"processes must be >= 1 (got {self.processes})")
        if self.bwlimit < 0:
            raise ConfigError(f"bwlimit must be >= 0 bytes/s, 0 for none (got {self.bwlimit})")
        if not isinstance(self.write_options, WriteOptions):
            raise ConfigError(
                f"write_options must be a synxfer.WriteOptions (got {self.write_options!r})"
            )
        _check_compress(self.compress, self.compress_level)
        if self.min_throughput < 0:
            raise ConfigError(f"min_throughput must be >= 0 (got {self.min_throughput})")
        if self.memory_budget < 0:
            raise ConfigError(f"memory_budget must be >= 0 (got {self.memory_budget})")
        if self.connect_timeout <= 0 or self.read_timeout <= 0:
            raise ConfigError("connect_timeout and read_timeout must be > 0 seconds")
        # 0 means "derive from max_threads / part_size".
        if self.max_files == 0:
            object.__setattr__(self, "max_files", 2 * self.max_threads)
        if self.memory_budget == 0:
            object.__setattr__(self, "memory_budget", self.max_threads * self.part_size)
        if self.io_threads == 0:
            object.__setattr__(self, "io_threads", default_io_threads(self.max_threads))

    def evolve(self, **changes: object) -> TransferConfig:
        """A copy with some fields changed; derived defaults are recomputed."""
        derived = {}
        if "max_threads" in changes or "part_size" in changes:
            # Re-derive defaults that were derived, unless given explicitly.
            if "max_files" not in changes and self.max_files == 2 * self.max_threads:
                derived["max_files"] = 0
            if (
                "memory_budget" not in changes
                and self.memory_budget == self.max_threads * self.part_size
            ):
                derived["memory_budget"] = 0
            if "io_threads" not in changes and self.io_threads == default_io_threads(
                self.max_threads
            ):
                derived["io_threads"] = 0
        return replace(self, **{**derived, **changes})  # type: ignore[arg-type]


#: What ``TransferConfig.compress`` takes, besides None.
COMPRESSIONS = ("zstd",)

#: TransferConfig fields that are counts: whole numbers only.
_COUNTS = ("max_threads", "max_files", "io_threads", "processes", "min_throughput")
#: Fields that are byte sizes: a whole number, or text :func:`synxfer.parse_size` reads.
_SIZES = ("part_size", "multipart_threshold", "memory_budget")
#: Fields that are seconds.
_SECONDS = ("connect_timeout", "read_timeout")
#: Fields that are switches.
_SWITCHES = ("resume", "guess_mime_type")


def _check_types(config: TransferConfig) -> None:
    """ConfigError naming the field for a value of the wrong type, so that a
    mistake such as ``max_threads="8"`` is reported as such instead of as a
    TypeError from a comparison deep inside; sizes and ``bwlimit`` given as
    text (``"8MiB"``, ``"16M/s"``) are read into bytes here."""
    from ._units import parse_rate, parse_size

    def whole(value: object) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    for name in (*_SIZES, "bwlimit"):
        value = getattr(config, name)
        if isinstance(value, str):
            parse = parse_rate if name == "bwlimit" else parse_size
            try:
                object.__setattr__(config, name, parse(value))
            except ValueError as exc:
                raise ConfigError(f"TransferConfig({name}=...): {exc}") from None
        elif not whole(value):
            kind = "bytes per second" if name == "bwlimit" else "bytes"
            raise ConfigError(
                f"{name} must be a whole number of {kind} or text like "
                f"{'16M/s' if name == 'bwlimit' else '8MiB'} (got {value!r})"
            )
    for name in _COUNTS:
        value = getattr(config, name)
        if not whole(value):
            raise ConfigError(f"{name} must be a whole number (got {value!r})")
    for name in _SECONDS:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{name} must be a number of seconds (got {value!r})")
    for name in _SWITCHES:
        value = getattr(config, name)
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be True or False (got {value!r})")
    if not isinstance(config.retry, RetryPolicy):
        raise ConfigError(f"retry must be a synxfer.RetryPolicy (got {config.retry!r})")
    if config.state_dir is not None and not isinstance(config.state_dir, str):
        if not isinstance(config.state_dir, os.PathLike):
            raise ConfigError(f"state_dir must be a path (got {config.state_dir!r})")
        object.__setattr__(config, "state_dir", os.fspath(config.state_dir))


def _check_compress(compress: str | None, level: int) -> None:
    """ConfigError for an unknown compression, a level zstd has not, or a
    missing zstandard package (``pip install 'synxfer[zstd]'``)."""
    if compress is None:
        return
    if compress not in COMPRESSIONS:
        raise ConfigError(
            f"unknown compression {compress!r} (TransferConfig(compress=...)): "
            f"use {', '.join(COMPRESSIONS)} or None"
        )
    if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 22:
        raise ConfigError(
            f"compress_level must be an integer 1..22 (TransferConfig(compress_level=...)); "
            f"got {level!r}"
        )
    try:
        import zstandard  # noqa: F401
    except ImportError:
        raise ConfigError(
            "zstd compression (TransferConfig(compress=...)) needs the zstandard package: "
            "pip install 'synxfer[zstd]'"
        ) from None


def _size(n: int) -> str:
    """``n`` bytes for a message: ``5 GiB`` when exact, else ``12345 bytes``."""
    for unit, name in ((1024**4, "TiB"), (GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {name}"
    return f"{n} bytes"


def check_capabilities(config: TransferConfig, caps: Capabilities, where: str) -> None:
    """Refuse, before any transfer, a configuration the backend at ``where`` cannot serve.

    Called when a client opens a backend, the first moment its limits are
    known. A part size above the backend's largest part (once rounded up to
    its ``part_size_multiple``) could only fail every multipart transfer:
    :class:`ConfigError`, naming the option and the limit (the CLI exits
    with status 2). A part size below the backend's smallest part is raised
    to that minimum (rounded up to the part unit), with a warning saying so:
    the value works, just not as given. Files too big for ``max_parts``
    parts of the chosen size get larger parts, as always
    (:func:`~synxfer.engine.parts.plan_part_size`).
    """
    requested = config.part_size
    unit = max(caps.part_size_multiple, 1)
    effective = -(-max(requested, caps.min_part_size, 1) // unit) * unit
    if effective > caps.max_part_size:
        raise ConfigError(
            f"part size {_size(requested)} (TransferConfig(part_size=...)) is above "
            f"the largest part {where} accepts, {_size(caps.max_part_size)}: use at most "
            f"{_size(caps.max_part_size)}"
        )
    if requested < caps.min_part_size:
        log.warning(
            "part size %s (TransferConfig(part_size=...)) is below the smallest "
            "part %s accepts, %s: parts of %s are used",
            _size(requested),
            where,
            _size(caps.min_part_size),
            _size(effective),
        )


#: Metadata keys synxfer writes itself (synxfer.engine.meta): not the user's to set.
_RESERVED_METADATA = frozenset({"mtime", "synxfer-part-size", "synxfer-encoding", "synxfer-size"})
#: Characters of an HTTP header name (RFC 9110 token): S3 sends metadata as headers.
_TOKEN = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")


def check_write_options(options: WriteOptions, caps: Capabilities, where: str) -> None:
    """Refuse, before any transfer, object options the backend at ``where`` cannot honour.

    Every option set in ``options`` must be in ``caps.write_options`` (user
    ``metadata`` also needs ``caps.metadata``), a storage class in
    ``caps.storage_classes`` when the backend lists them, and metadata keys
    must be header names synxfer does not use itself. Otherwise
    :class:`ConfigError`, naming the option (the CLI exits with status 2):
    an option is never dropped silently.
    """
    given = options.given()
    offered = caps.write_options if caps.metadata else caps.write_options - {"metadata"}
    refused = [name for name in given if name not in offered]
    if refused:
        names = ", ".join(f"WriteOptions({name}=...)" for name in sorted(refused))
        honoured = ", ".join(sorted(offered)) or "none"
        raise ConfigError(
            f"{where} cannot honour {names}: leave {'it' if len(refused) == 1 else 'them'} "
            f"out for this destination (it honours: {honoured})"
        )
    storage_class = options.storage_class
    if storage_class and caps.storage_classes and storage_class not in caps.storage_classes:
        raise ConfigError(
            f"{where} has no storage class {storage_class!r} "
            f"(WriteOptions(storage_class=...)): one of "
            f"{', '.join(sorted(caps.storage_classes))}"
        )
    for name, value in options.metadata.items():
        if not _TOKEN.match(name):
            raise ConfigError(
                f"metadata key {name!r} (WriteOptions(metadata=...)) is not a valid "
                "header name: use letters, digits and -_."
            )
        if name.lower() in _RESERVED_METADATA:
            raise ConfigError(
                f"metadata key {name!r} (WriteOptions(metadata=...)) is synxfer's own "
                "(the source's time, part size, encoding and size): choose another name"
            )
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
            raise ConfigError(
                f"metadata {name!r} (WriteOptions(metadata=...)) holds a control character"
            )
