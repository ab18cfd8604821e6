"""The checksums S3 names (``x-amz-checksum-*``), computed the plain way, for
tests that compare what a server stored with what it should have."""

from __future__ import annotations

import base64
import hashlib
import zlib

from awscrt import checksums as crt

__all__ = ["checksum_value", "composite_value"]


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def checksum_value(alg: str, data: bytes) -> str:
    """The checksum S3 names ``alg`` (CRC32, CRC32C, CRC64NVME, SHA1, SHA256,
    MD5) of ``data``, base64 as in the headers."""
    if alg == "CRC32":
        return _b64(zlib.crc32(data).to_bytes(4, "big"))
    if alg == "CRC32C":
        return _b64(crt.crc32c(data).to_bytes(4, "big"))
    if alg == "CRC64NVME":
        return _b64(crt.crc64nvme(data).to_bytes(8, "big"))
    return _b64(hashlib.new(alg.lower(), data).digest())


def composite_value(alg: str, data: bytes, part: int) -> str:
    """The COMPOSITE checksum of ``data`` uploaded in parts of ``part`` bytes:
    ``alg`` of the parts' raw checksums, without the ``-N`` suffix."""
    raw = b"".join(
        base64.b64decode(checksum_value(alg, data[i : i + part])) for i in range(0, len(data), part)
    )
    return checksum_value(alg, raw)
