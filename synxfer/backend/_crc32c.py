"""CRC32C for backends that compute their own (a part the engine sent none for).

fastcrc where it is installed (any contiguous buffer, no copy, the GIL
released; decision 0020), else google-crc32c, whose module functions take
only ``bytes``: any other buffer goes to it in bounded copies, never a
second part-sized one. The engine's own checksums (:mod:`synxfer.engine.checksums`)
add awscrt and a no-copy path into google-crc32c's C library; a plugin needs
neither, and cannot import the engine.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

__all__ = ["crc32c", "crc32c_available"]

#: Bytes handed to google-crc32c at a time (it takes only ``bytes``).
_CHUNK = 1 << 20


def crc32c_available() -> bool:
    """Whether :func:`crc32c` can run here (fastcrc or google-crc32c is
    installed), without importing either."""
    return any(importlib.util.find_spec(m) is not None for m in ("fastcrc", "google_crc32c"))


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC32C of ``data``, continuing ``crc``. Blocking: call from a worker thread.

    Raises ImportError when neither library is installed (see
    :func:`crc32c_available`).
    """
    fast = _fastcrc32()
    if fast is not None:
        return int(fast.iscsi(data, crc))
    import google_crc32c  # type: ignore[import-not-found,unused-ignore]

    if isinstance(data, bytes):
        return int(google_crc32c.extend(crc, data))
    view = memoryview(data).cast("B")
    for start in range(0, len(view), _CHUNK):
        crc = int(google_crc32c.extend(crc, bytes(view[start : start + _CHUNK])))
    return crc


@functools.cache
def _fastcrc32() -> Any:
    """fastcrc's ``crc32`` module, or None where fastcrc is not installed."""
    if importlib.util.find_spec("fastcrc") is None:
        return None
    from fastcrc import crc32  # type: ignore[import-not-found,unused-ignore]

    return crc32
