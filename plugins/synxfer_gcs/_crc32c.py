"""CRC32C as GCS writes it, and combining CRCs of concatenated data.

GCS reports an object's CRC32C as the base64 of its four big-endian bytes
(``crc32c`` in the object resource, ``x-goog-hash: crc32c=...``). Hashing
data is the SDK's :func:`synxfer.backend.crc32c` (fastcrc, else
google-crc32c), called from a worker thread, never the event loop; this
module adds :func:`combine`, which computes the
CRC of ``a + b`` from ``crc(a)``, ``crc(b)`` and ``len(b)`` without reading
any data (zlib's ``crc32_combine`` method, over CRC32C's polynomial). A
composite upload uses it to know, before composing, the CRC32C the
composed object must have, so the server's answer is checked against the
CRCs it verified part by part.
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Iterable

__all__ = ["combine", "combine_all", "decode", "encode"]

#: CRC32C's polynomial, bit-reversed (Castagnoli).
_POLY = 0x82F63B78


def encode(crc: int) -> str:
    """GCS's form of a CRC32C: base64 of the 4 big-endian bytes."""
    return base64.b64encode(crc.to_bytes(4, "big")).decode("ascii")


def decode(value: str) -> int:
    """The integer CRC32C of GCS's base64 form; ValueError if malformed."""
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not a base64 CRC32C: {value!r}") from exc
    if len(raw) != 4:
        raise ValueError(f"not a base64 CRC32C: {value!r}")
    return int.from_bytes(raw, "big")


def _multmodp(a: int, b: int) -> int:
    """``a(x) * b(x)`` modulo the polynomial (bit-reversed representation)."""
    m = 1 << 31
    p = 0
    while True:
        if a & m:
            p ^= b
            if (a & (m - 1)) == 0:
                return p
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1


def _x2n_table() -> list[int]:
    """``x^(2^n)`` modulo the polynomial, for n in 0..31."""
    table = [1 << 30]  # x^1
    for _ in range(31):
        table.append(_multmodp(table[-1], table[-1]))
    return table


_X2N = _x2n_table()


@functools.lru_cache(maxsize=256)
def _x8nmodp(n: int) -> int:
    """``x^(8n)`` modulo the polynomial: the operator that shifts a CRC past n bytes."""
    p = 1 << 31  # x^0
    k = 3
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return p


def combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC32C of ``a + b`` given ``crc1 = crc(a)``, ``crc2 = crc(b)`` and ``len2 = len(b)``."""
    if len2 < 0:
        raise ValueError("len2 must be >= 0")
    return _multmodp(_x8nmodp(len2), crc1) ^ crc2


def combine_all(parts: Iterable[tuple[int, int]]) -> int:
    """CRC32C of the concatenation of parts given as ``(crc, length)``, in order.

    Cheap (no data is read): one polynomial multiplication per part, with the
    shift operator cached per part length.
    """
    crc = 0
    for part_crc, length in parts:
        crc = combine(crc, part_crc, length)
    return crc
