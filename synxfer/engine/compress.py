"""Codecs: the compression stage of the part pipeline (``TransferConfig(compress="zstd")``).

An upload with ``compress`` set stores the file's bytes as one zstd frame
(with zstd's content checksum, XXH64 of the original bytes) and says so in
the object's metadata:

``synxfer-encoding``
    ``zstd``.
``synxfer-size``
    The original file's size in bytes (the object's size is the compressed one).

This module is the codec and nothing else: it knows the metadata, turns a
file into its stored stream one part at a time (:class:`Encoder`) and the
stored stream back into the file (:class:`Decoder`).
It never talks to a backend, a journal or the scheduler: the ordinary
upload and download paths (:mod:`.upload`, :mod:`.download`) carry the
codec as a stage (read -> encode -> checksum -> send; fetch -> verify ->
decode), so their journal, resume, abort and verification exist once and
compressed transfers resume like any other (docs/decisions/0011).

The stored stream is cut into parts by size as it is produced -- every part
but the last is exactly the part size, as S3 requires -- not compressed per
raw part, so encoding is sequential within a file. Decoding is sequential
too: a download fetches and verifies the stored bytes like any object's
(ranged, journaled, resumable), then decodes them in order, in the worker
threads.

``zstandard`` is the ``zstd`` extra (``pip install 'synxfer[zstd]'``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from .._exceptions import ConfigError, IntegrityError
from .._models import ObjectInfo
from ..backend import Checksum, ChecksumAlgorithm
from ._os import pread, pwrite_from
from .parts import checksum_of

__all__ = [
    "COMPRESSIONS",
    "DEFAULT_LEVEL",
    "ENCODING_KEY",
    "ORIGINAL_SIZE_KEY",
    "ZSTD",
    "Codec",
    "Decoder",
    "Encoder",
    "Undecodable",
    "ZstdCodec",
    "codec_for",
    "decoding_of",
    "is_compressed",
    "original_size",
    "require_zstd",
    "stored_encoding",
]

ENCODING_KEY = "synxfer-encoding"
ORIGINAL_SIZE_KEY = "synxfer-size"
ZSTD = "zstd"
#: The values ``TransferConfig.compress`` takes (besides None).
COMPRESSIONS = (ZSTD,)
DEFAULT_LEVEL = 3

#: Raw bytes read from the file per read call while compressing.
_READ_SIZE = 1 << 20
#: Decompressed bytes written per write call.
_WRITE_SIZE = 1 << 20

_INSTALL_HINT = "pip install 'synxfer[zstd]'"


def require_zstd(what: str = "zstd compression (TransferConfig(compress=...))") -> ModuleType:
    """The ``zstandard`` module, or :class:`ConfigError` naming ``what`` needs it."""
    try:
        import zstandard
    except ImportError:
        raise ConfigError(f"{what} needs the zstandard package: {_INSTALL_HINT}") from None
    return zstandard


def stored_encoding(metadata: Mapping[str, str]) -> str | None:
    """The ``synxfer-encoding`` an object's metadata names, lowercased; None without one."""
    value = metadata.get(ENCODING_KEY)
    return value.strip().lower() if value else None


def is_compressed(info: ObjectInfo) -> bool:
    """Whether ``info``'s metadata says synxfer stored it compressed (listings
    without metadata say nothing: False)."""
    return stored_encoding(info.metadata) is not None


def original_size(info: ObjectInfo) -> int:
    """The size of the file ``info`` stands for: ``synxfer-size`` for an object
    synxfer stored compressed (when its metadata is known), else its size."""
    if not is_compressed(info):
        return info.size
    value = info.metadata.get(ORIGINAL_SIZE_KEY, "").strip()
    return int(value) if value.isdigit() else info.size


# -- the interface the part pipeline sees ----------------------------------------------

#: What :meth:`Encoder.fill` gives: the part's bytes, its checksum, its MD5 (hex) if asked.
Filled = tuple[bytes | bytearray, Checksum | None, str | None]


class Encoder(Protocol):
    """One file's stored stream, produced a part at a time. Its methods
    block: call them from worker threads, one at a time, in part order."""

    @property
    def eof(self) -> bool:
        """True once the stream has ended."""
        ...

    def fill(self, buf: memoryview, algorithm: ChecksumAlgorithm | None, md5: bool) -> Filled:
        """The next stored bytes, up to ``len(buf)``, with their checksum."""
        ...

    def read_since(self) -> int:
        """The file's bytes consumed since the last call (progress counts them)."""
        ...

    def consumed(self) -> int:
        """The file's bytes consumed so far."""
        ...


class Decoder(Protocol):
    """One object's stored stream back into its file. Blocking, in order."""

    def feed(self, data: memoryview) -> None: ...

    def finish(self) -> None:
        """Raise :class:`Undecodable` unless the stream decoded whole to the
        recorded size."""
        ...


class Codec(Protocol):
    """A way of storing a file's bytes: ``name`` goes in the upload journal
    (an upload resumes only with the codec it began with), ``metadata`` on
    the object (a download finds its decoder there)."""

    @property
    def name(self) -> str: ...

    def metadata(self, size: int) -> dict[str, str]:
        """What the object's metadata says of a file of ``size`` bytes stored so."""
        ...

    def bound(self, size: int) -> int:
        """The most bytes a file of ``size`` bytes can be stored as (parts are planned on it)."""
        ...

    def encoder(self, fd: int, size: int) -> Encoder:
        """The stored stream of the open file ``fd`` (``size`` bytes, from offset 0)."""
        ...

    def decoder(self, out: int, limit: int, url: str) -> Decoder:
        """A decoder writing to ``out`` from offset 0, refusing more than ``limit`` bytes."""
        ...


class Undecodable(Exception):
    """Stored bytes that match their checksum yet do not decode to the file
    their metadata describes: fetching them again cannot help (not retried)."""

    def __init__(self, error: IntegrityError) -> None:
        super().__init__(str(error))
        self.error = error


# -- zstd ---------------------------------------------------------------------------


class _Reader:
    """The file's bytes from offset 0, by positional reads, counted."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.offset = 0

    def read(self, n: int = -1) -> bytes:
        data = pread(self.fd, _READ_SIZE if n < 0 else n, self.offset)
        self.offset += len(data)
        return data


class _ZstdEncoder:
    def __init__(self, zstd: ModuleType, fd: int, size: int, level: int) -> None:
        self.source = _Reader(fd)
        compressor = zstd.ZstdCompressor(level=level, write_checksum=True)
        self.stream = compressor.stream_reader(self.source, size=size, read_size=_READ_SIZE)
        self.eof = False
        self.counted = 0

    def read_since(self) -> int:
        n = self.source.offset - self.counted
        self.counted = self.source.offset
        return n

    def consumed(self) -> int:
        return self.source.offset

    def fill(self, buf: memoryview, algorithm: ChecksumAlgorithm | None, md5: bool) -> Filled:
        """A full part is ``buf``'s own bytearray (no copy); the stream's short
        last piece is copied out (``bytes``, at most one part) since backends
        take whole buffers."""
        view = memoryview(buf)
        n = 0
        while n < len(view):
            got = self.stream.readinto(view[n:])
            if not got:
                self.eof = True
                break
            n += got
        checksum = checksum_of(algorithm, view[:n])
        digest = hashlib.md5(view[:n], usedforsecurity=False).hexdigest() if md5 else None
        obj = view.obj
        if n == len(view) and isinstance(obj, bytearray) and len(obj) == n:
            return obj, checksum, digest
        return bytes(view[:n]), checksum, digest


class _Sink:
    """Decoded bytes into ``fd`` from offset 0, refusing more than ``limit``."""

    def __init__(self, fd: int, limit: int, url: str) -> None:
        self.fd = fd
        self.limit = limit
        self.url = url
        self.written = 0

    def write(self, data: Any) -> int:
        n = len(data)
        if self.written + n > self.limit:
            raise IntegrityError(
                f"{self.url} decompresses to more than its {ORIGINAL_SIZE_KEY} ({self.limit} bytes)"
            )
        _pwrite_all(self.fd, data, self.written)
        self.written += n
        return n


def _pwrite_all(fd: int, data: Any, offset: int) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = pwrite_from(fd, view, offset)
        view = view[n:]
        offset += n


class _ZstdDecoder:
    """The first error (a corrupt stream, output beyond ``synxfer-size``)
    stops decoding and is kept; :meth:`finish` raises it."""

    def __init__(self, zstd: ModuleType, fd: int, limit: int, url: str) -> None:
        self.zstd = zstd
        self.url = url
        self.sink = _Sink(fd, limit, url)
        self.writer = zstd.ZstdDecompressor().stream_writer(
            self.sink, write_size=_WRITE_SIZE, closefd=False
        )
        self.error: IntegrityError | None = None

    def feed(self, data: memoryview) -> None:
        if self.error is not None:
            return
        try:
            self.writer.write(data)
        except IntegrityError as exc:
            self.error = exc
        except self.zstd.ZstdError as exc:
            self.error = IntegrityError(f"{self.url}: the stored zstd stream is corrupt ({exc})")

    def finish(self) -> None:
        if self.error is None:
            self.writer.flush()
            if self.sink.written != self.sink.limit:
                self.error = IntegrityError(
                    f"{self.url} decompressed to {self.sink.written} bytes, not its "
                    f"{ORIGINAL_SIZE_KEY} of {self.sink.limit} (a truncated stream)"
                )
        if self.error is not None:
            raise Undecodable(self.error)


@dataclass(frozen=True, slots=True)
class ZstdCodec:
    """One zstd frame per object, with zstd's checksum of the original."""

    level: int = DEFAULT_LEVEL
    what: str = "zstd compression (TransferConfig(compress=...))"

    @property
    def name(self) -> str:
        return f"{ZSTD}-{self.level}"

    def metadata(self, size: int) -> dict[str, str]:
        return {ENCODING_KEY: ZSTD, ORIGINAL_SIZE_KEY: str(size)}

    def bound(self, size: int) -> int:
        # zstd's worst case for incompressible data is a little above the input.
        return size + (size >> 7) + (1 << 17)

    def encoder(self, fd: int, size: int) -> Encoder:
        return _ZstdEncoder(require_zstd(self.what), fd, size, self.level)

    def decoder(self, out: int, limit: int, url: str) -> Decoder:
        return _ZstdDecoder(require_zstd(self.what), out, limit, url)


def codec_for(compress: str | None, level: int) -> Codec | None:
    """The codec an upload stores with (``TransferConfig.compress``); None: as is.
    ConfigError when ``zstandard`` is missing, before anything is read."""
    if compress is None:
        return None
    if compress != ZSTD:
        raise ConfigError(f"unknown compression {compress!r} (TransferConfig(compress=...))")
    require_zstd()
    return ZstdCodec(level)


def decoding_of(info: ObjectInfo, url: str) -> tuple[Codec, int] | None:
    """The codec ``info``'s metadata names and the size it decodes to; None
    for an object stored as is. IntegrityError for an encoding this synxfer
    cannot decode or a missing size; ConfigError without ``zstandard``."""
    encoding = stored_encoding(info.metadata)
    if encoding is None:
        return None
    if encoding != ZSTD:
        raise IntegrityError(
            f"{url} is stored with {ENCODING_KEY}: {encoding}, which this synxfer cannot "
            "decode; nothing was written"
        )
    value = info.metadata.get(ORIGINAL_SIZE_KEY, "").strip()
    if not value.isdigit():
        raise IntegrityError(
            f"{url} is stored zstd-compressed but its {ORIGINAL_SIZE_KEY} metadata is "
            f"missing or not a number ({value!r}); nothing was written"
        )
    what = f"{url} is stored zstd-compressed: downloading it"
    require_zstd(what)
    return ZstdCodec(what=what), int(value)
