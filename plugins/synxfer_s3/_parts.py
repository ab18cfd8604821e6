"""Bookkeeping of multipart uploads: part CRC32Cs for Complete, S3's multipart ETag.

An upload created with ``x-amz-checksum-algorithm: CRC32C`` can only be
completed with every part's CRC32C in the CompleteMultipartUpload body.
The engine's :class:`~synxfer.CompletedPart` carries a number, an ETag and
a size, not a checksum, so the backend remembers the CRC32C it sent with
each part (and those the server reports in ListParts) here, per upload.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Sequence

from synxfer import CompletedPart
from synxfer.backend import crc32c

__all__ = ["PartSums", "crc32c_b64", "multipart_etag"]

_MD5_HEX = re.compile(r"^[0-9a-fA-F]{32}$")

#: A part for CompleteMultipartUpload: ``(number, etag)`` or with checksums.
PartSpec = tuple[int, str] | tuple[int, str, dict[str, str]]


class PartSums:
    """CRC32C (base64) of each part, by upload id and part number."""

    __slots__ = ("_by_upload",)

    def __init__(self) -> None:
        self._by_upload: dict[str, dict[int, str]] = {}

    def __repr__(self) -> str:
        return f"<PartSums uploads={len(self._by_upload)}>"

    def add(self, upload_id: str, number: int, crc32c: str) -> None:
        self._by_upload.setdefault(upload_id, {})[number] = crc32c

    def has(self, upload_id: str, number: int) -> bool:
        return number in self._by_upload.get(upload_id, ())

    def get(self, upload_id: str, number: int) -> str | None:
        return self._by_upload.get(upload_id, {}).get(number)

    def forget(self, upload_id: str) -> None:
        self._by_upload.pop(upload_id, None)

    def specs(self, upload_id: str, parts: Sequence[tuple[int, str]]) -> list[PartSpec]:
        """``parts`` for CompleteMultipartUpload: with their CRC32C when every
        one is known, else bare (the server then decides)."""
        sums = self._by_upload.get(upload_id)
        if sums and all(number in sums for number, _ in parts):
            return [(number, etag, {"crc32c": sums[number]}) for number, etag in parts]
        return list(parts)


def multipart_etag(parts: Sequence[CompletedPart]) -> str | None:
    """S3's ETag of an object assembled from ``parts``, if their ETags are MD5s."""
    if not parts or not all(_MD5_HEX.match(p.etag) for p in parts):
        return None
    digests = b"".join(bytes.fromhex(p.etag) for p in parts)
    return f"{hashlib.md5(digests, usedforsecurity=False).hexdigest()}-{len(parts)}"


def crc32c_b64(data: bytes | bytearray | memoryview) -> str:
    """CRC32C of ``data``, base64 as S3 wants it. Blocking: call from a worker
    thread (:func:`synxfer.backend.crc32c`)."""
    return _b64(crc32c(data))


def _b64(crc: int) -> str:
    return base64.b64encode(crc.to_bytes(4, "big")).decode("ascii")
