"""Part sizing and checksums (checksums always run in worker threads)."""

from __future__ import annotations

import base64
import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .._exceptions import ConfigError
from ..backend import Capabilities, Checksum, ChecksumAlgorithm
from . import checksums

__all__ = [
    "Part",
    "checksum_of",
    "multipart_etag",
    "part_ranges",
    "plan_part_size",
    "split",
]

_MULTIPART_ETAG = re.compile(r"^([0-9a-f]{32})-(\d+)$")
_MD5_ETAG = re.compile(r"^[0-9a-f]{32}$")


def plan_part_size(size: int, requested: int, caps: Capabilities) -> int:
    """The part size for an object of ``size`` bytes.

    Starts from ``requested``, never below the backend's minimum, rounded up
    to its ``part_size_multiple``, and doubles (as s3transfer does) until the
    object fits in ``caps.max_parts`` parts -- or, when the doubling would
    pass the backend's largest part, takes that largest part if it fits.
    Deterministic, so a download can find an upload's part boundaries.
    """
    part = max(requested, caps.min_part_size, 1)
    unit = max(caps.part_size_multiple, 1)
    part = -(-part // unit) * unit
    if part > caps.max_part_size:  # a client refuses this when it opens the backend
        raise ConfigError(
            f"part size {part} bytes (TransferConfig(part_size=...)) is above this "
            f"backend's largest part, {caps.max_part_size} bytes"
        )
    grown = part
    while math.ceil(size / grown) > caps.max_parts:
        grown *= 2
    largest = caps.max_part_size // unit * unit
    if grown > largest and math.ceil(size / largest) <= caps.max_parts:
        grown = largest  # doubling overshot the largest part, which still fits
    part = grown
    if part > caps.max_part_size:
        limit = caps.max_parts * caps.max_part_size
        raise ConfigError(
            f"an object of {size} bytes exceeds this backend's limit of {limit} bytes "
            f"({caps.max_parts} parts of at most {caps.max_part_size} bytes)"
        )
    return part


def part_ranges(size: int, part_size: int) -> list[tuple[int, int]]:
    """``(offset, length)`` of each part; one empty part for an empty object."""
    if size == 0:
        return [(0, 0)]
    return [(off, min(part_size, size - off)) for off in range(0, size, part_size)]


@dataclass(frozen=True, slots=True)
class Part:
    """One byte range of an object: its 0-based ``index``, ``offset`` and ``length``."""

    index: int
    offset: int
    length: int

    @property
    def number(self) -> int:
        """The 1-based part number (multipart uploads, journals)."""
        return self.index + 1


def split(size: int, part_size: int) -> list[Part]:
    """The parts of an object of ``size`` bytes (one empty part for an empty object)."""
    return [Part(i, off, n) for i, (off, n) in enumerate(part_ranges(size, part_size))]


def checksum_of(
    algorithm: ChecksumAlgorithm | None, data: bytes | bytearray | memoryview
) -> Checksum | None:
    """The checksum a backend asked for, of ``data``. Call from a worker thread."""
    if algorithm is None:
        return None
    if algorithm == "md5":
        digest = hashlib.md5(data, usedforsecurity=False).digest()
        return Checksum("md5", base64.b64encode(digest).decode("ascii"))
    if algorithm == "crc32c":
        if not checksums.available("crc32c"):  # pragma: no cover - depends on the gcs extra
            raise ConfigError("crc32c checksums need fastcrc: pip install 'synxfer[gcs]'")
        value = checksums.crc_value("crc32c", data)
        return Checksum("crc32c", base64.b64encode(value.to_bytes(4, "big")).decode("ascii"))
    raise ConfigError(f"unknown checksum algorithm {algorithm!r}")


def multipart_etag(part_md5s: Sequence[bytes]) -> str:
    """S3's ETag of a multipart object: md5 of the parts' md5s, then ``-N``."""
    joined = hashlib.md5(b"".join(part_md5s), usedforsecurity=False).hexdigest()
    return f"{joined}-{len(part_md5s)}"


def etag_parts(etag: str | None) -> int | None:
    """Parts count of an S3-style ETag: 0 for a plain MD5, N for ``-N``, None if opaque."""
    if not etag:
        return None
    if _MD5_ETAG.match(etag):
        return 0
    m = _MULTIPART_ETAG.match(etag)
    return int(m.group(2)) if m else None
