"""The checksum algorithms downloads are verified with: values, CRC folding, composites.

Every function that touches file data is blocking: call it from a worker
thread (the engine does, in the call that writes the data).

* CRCs (``crc32``, ``crc32c``, ``crc64nvme``) are computed per range, in any
  order, and folded into the whole object's with :func:`crc_combine` (zlib's
  ``crc32_combine`` method, for any reflected CRC whose initial value and
  final XOR are all ones -- all three are), so no byte is read twice however
  the ranges finish. CRC32 comes from zlib. CRC32C comes from fastcrc
  (``fastcrc.crc32.iscsi``, in Rust) where it is installed: the fastest
  measured, cheap to import, any buffer taken without a copy, the GIL
  released while it runs (decision 0020 has the figures). Without fastcrc,
  google-crc32c's C function ``crc32c_extend``, called through ctypes: no copy of the engine's
  writable pooled buffers (the module's own functions take only read-only
  ``bytes``, so those would be copied under the GIL) and the GIL released
  while it runs. Once a process has hashed :data:`_AWSCRT_AFTER` bytes
  that way, CRC32C moves to awscrt (AWS's common runtime, the ``s3``
  extra), faster per byte but slow to load, with the GIL held -- repaid
  only on large transfers (decision 0014). CRC64NVME comes from
  awscrt only. Any one of the three is enough for CRC32C. Without
  awscrt, CRC64NVME is not available (such objects are verified another
  way, or reported as not verified).
* Hashes (``md5``, ``sha1``, ``sha256``) cannot be folded: the bytes of one
  hashed run must be fed in order (:func:`new_hash`).
* A *composite* checksum (S3's checksum of a multipart object, and the
  multipart ETag) is the checksum of the parts' checksums, concatenated in
  part order (:func:`composite`).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import importlib.util
import sys
import zlib
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple, Protocol

from ..backend import crc32c

__all__ = [
    "CRC_KINDS",
    "HASH_KINDS",
    "KINDS",
    "Hasher",
    "Kind",
    "available",
    "composite",
    "crc_combine",
    "crc_value",
    "decode",
    "label",
    "new_hash",
    "to_bytes",
]

Kind = Literal["crc32", "crc32c", "crc64nvme", "md5", "sha1", "sha256"]
CRC_KINDS: tuple[Kind, ...] = ("crc64nvme", "crc32c", "crc32")
HASH_KINDS: tuple[Kind, ...] = ("sha256", "sha1", "md5")
KINDS: tuple[Kind, ...] = CRC_KINDS + HASH_KINDS

_LABELS: dict[str, str] = {
    "crc32": "CRC32",
    "crc32c": "CRC32C",
    "crc64nvme": "CRC64NVME",
    "md5": "MD5",
    "sha1": "SHA-1",
    "sha256": "SHA-256",
}
_SIZES: dict[str, int] = {
    "crc32": 4,
    "crc32c": 4,
    "crc64nvme": 8,
    "md5": 16,
    "sha1": 20,
    "sha256": 32,
}


class _Crc(NamedTuple):
    width: int
    poly: int  # reflected


_CRCS: dict[str, _Crc] = {
    "crc32": _Crc(32, 0xEDB88320),
    "crc32c": _Crc(32, 0x82F63B78),
    "crc64nvme": _Crc(64, 0x9A6C9329AC4BC9B5),
}


class Hasher(Protocol):
    """What :func:`new_hash` returns (a hashlib object)."""

    def update(self, data: Any, /) -> None: ...

    def digest(self) -> bytes: ...


def label(kind: str) -> str:
    """The algorithm's name as people write it: ``CRC32C``, ``SHA-256``."""
    return _LABELS.get(kind, kind.upper())


@functools.cache
def _module(name: str) -> Any:
    """An optional C module, or None where it is not installed."""
    if importlib.util.find_spec(name.partition(".")[0]) is None:
        return None
    return importlib.import_module(name)


def _awscrt() -> Any:
    return _module("awscrt.checksums")


@functools.cache
def _installed(name: str) -> bool:
    """Whether ``name`` can be imported, without importing it (that is left to the first use)."""
    return importlib.util.find_spec(name) is not None


def available(kind: str) -> bool:
    """Whether ``kind`` can be computed here at C speed."""
    if kind == "crc64nvme":
        return _installed("awscrt")
    if kind == "crc32c":
        return _installed("fastcrc") or _installed("google_crc32c") or _installed("awscrt")
    return kind in _SIZES


#: Bytes copied at a time for google-crc32c's module functions, which take
#: only ``bytes`` (where its C function cannot be reached).
_CHUNK = 1 << 20
#: CRC32C bytes hashed with google-crc32c before awscrt is loaded for the
#: rest (module docstring): about where awscrt's load is repaid by its faster
#: loop (decision 0014, "Later").
_AWSCRT_AFTER = 2 << 30
_google_bytes = 0  # CRC32C bytes hashed with google-crc32c so far (approximate)


@functools.cache
def _google_extend() -> Callable[[int, memoryview], int] | None:
    """google-crc32c's C ``crc32c_extend`` over a writable buffer, or None.

    Called through ctypes, which releases the GIL for the call and takes the
    buffer's address: no copy. None where google-crc32c is missing or pure
    Python, or its C library cannot be reached (the symbol is looked up
    through the extension module, which links the library)."""
    mod = _module("google_crc32c")
    if mod is None or getattr(mod, "implementation", None) != "c":
        return None
    try:
        import ctypes

        from google_crc32c import _crc32c  # type: ignore[import-not-found,unused-ignore]

        c_extend = ctypes.CDLL(_crc32c.__file__).crc32c_extend
    except (ImportError, OSError, AttributeError):
        return None
    c_extend.restype = ctypes.c_uint32
    c_extend.argtypes = (ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t)
    first_byte, address_of = ctypes.c_char.from_buffer, ctypes.addressof

    def extend(previous: int, view: memoryview) -> int:
        if not view:
            return previous
        start = first_byte(view)  # keeps the buffer exported during the call
        return int(c_extend(previous, address_of(start), len(view)))

    return extend


def _crc32c_google(data: bytes | bytearray | memoryview, previous: int) -> int | None:
    """CRC32C by google-crc32c, or None where it is not installed."""
    global _google_bytes
    mod = _module("google_crc32c")
    if mod is None:
        return None
    _google_bytes += len(data)
    if isinstance(data, bytes):
        return int(mod.extend(previous, data))
    view = memoryview(data).cast("B")
    extend = _google_extend()
    if extend is not None and not view.readonly:
        return extend(previous, view)
    # Bounded copies, never a second part-sized buffer.
    crc = previous
    for offset in range(0, len(view), _CHUNK):
        crc = int(mod.extend(crc, bytes(view[offset : offset + _CHUNK])))
    return crc


def crc_value(kind: str, data: bytes | bytearray | memoryview, previous: int = 0) -> int:
    """The CRC of ``data`` (continuing ``previous``). Blocking: call from a worker thread."""
    if kind == "crc32":
        return zlib.crc32(data, previous)
    if kind == "crc32c" and _installed("fastcrc"):
        return crc32c(data, previous)  # the SDK's: fastcrc, no copy, the GIL released
    if (
        kind == "crc32c"
        and (_google_bytes < _AWSCRT_AFTER or not _installed("awscrt"))
        and "awscrt.checksums" not in sys.modules
    ):
        value = _crc32c_google(data, previous)
        if value is not None:
            return value
    crt = _awscrt()
    if crt is not None:
        if kind == "crc32c":
            return int(crt.crc32c(data, previous))
        if kind == "crc64nvme":
            return int(crt.crc64nvme(data, previous))
    raise ValueError(f"no implementation of {label(kind)} here")


def new_hash(kind: str) -> Hasher:
    """A fresh hash object for ``md5``, ``sha1`` or ``sha256``."""
    if kind == "md5":
        return hashlib.md5(usedforsecurity=False)
    if kind in ("sha1", "sha256"):
        return hashlib.new(kind, usedforsecurity=False)
    raise ValueError(f"{kind!r} is not a hash")


def to_bytes(kind: str, value: int | bytes) -> bytes:
    """A checksum value as bytes (CRCs big-endian, as S3 and GCS encode them)."""
    if isinstance(value, bytes):
        return value
    return value.to_bytes(_SIZES[kind], "big")


def decode(kind: str, value: str) -> bytes | None:
    """A base64 checksum as a service sends it, or None if it cannot be one of ``kind``."""
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == _SIZES.get(kind) else None


def composite(kind: str, part_values: Sequence[bytes]) -> bytes:
    """The checksum of the concatenated part checksums (S3's composite form)."""
    joined = b"".join(part_values)
    if kind in _CRCS:
        return to_bytes(kind, crc_value(kind, joined))
    h = new_hash(kind)
    h.update(joined)
    return h.digest()


# -- CRC combination -------------------------------------------------------------


def _gf2_times(matrix: Sequence[int], vector: int) -> int:
    total, i = 0, 0
    while vector:
        if vector & 1:
            total ^= matrix[i]
        vector >>= 1
        i += 1
    return total


def _gf2_square(matrix: Sequence[int]) -> list[int]:
    return [_gf2_times(matrix, row) for row in matrix]


@functools.lru_cache(maxsize=64)
def _zero_bytes_operator(kind: str, n: int) -> tuple[int, ...]:
    """The GF(2) matrix that advances a CRC of ``kind`` over ``n`` zero bytes."""
    crc = _CRCS[kind]
    bit = [crc.poly] + [1 << k for k in range(crc.width - 1)]  # one zero bit
    power = _gf2_square(_gf2_square(_gf2_square(bit)))  # one zero byte
    op: list[int] | None = None
    while n:
        if n & 1:
            op = power if op is None else [_gf2_times(power, row) for row in op]
        n >>= 1
        if n:
            power = _gf2_square(power)
    assert op is not None
    return tuple(op)


def crc_combine(kind: str, crc1: int, crc2: int, len2: int) -> int:
    """The CRC of ``A + B`` from ``crc(A)``, ``crc(B)`` and ``len(B)``.

    The operator for a length is cached, so folding equal-sized ranges costs
    one ``width``-step product each.
    """
    if len2 <= 0:
        return crc1
    return _gf2_times(_zero_bytes_operator(kind, len2), crc1) ^ crc2
