"""Object metadata synxfer writes and reads.

``mtime``
    The source file's modification time as decimal seconds with nanoseconds,
    e.g. ``1700000000.123456789``: the key and format rclone uses, so objects
    written by either tool carry times the other understands.
``synxfer-part-size``
    The part size of a multipart upload (``0`` for a single request), so a
    download can split ranges on the same boundaries and check each part's
    MD5 against the S3-style ETag without reading anything twice.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = [
    "MTIME_KEY",
    "PART_SIZE_KEY",
    "format_mtime",
    "parse_mtime",
    "same_mtime",
    "stored_mtime",
    "stored_part_size",
]

MTIME_KEY = "mtime"
PART_SIZE_KEY = "synxfer-part-size"

_MTIME = re.compile(r"^(-?\d+)(?:\.(\d{1,9})\d*)?$")

#: Times within this many nanoseconds are the same (some filesystems keep µs).
_TOLERANCE_NS = 1_000


def format_mtime(mtime_ns: int) -> str:
    sec, frac = divmod(mtime_ns, 1_000_000_000)
    return f"{sec}.{frac:09d}"


def parse_mtime(value: str | None) -> int | None:
    """Nanoseconds from a stored ``mtime``; None when absent or malformed."""
    if not value:
        return None
    m = _MTIME.match(value.strip())
    if m is None:
        return None
    sec = int(m.group(1))
    frac = int((m.group(2) or "0").ljust(9, "0"))
    return sec * 1_000_000_000 + (frac if sec >= 0 else -frac)


def stored_mtime(metadata: Mapping[str, str]) -> int | None:
    return parse_mtime(metadata.get(MTIME_KEY))


def stored_part_size(metadata: Mapping[str, str]) -> int | None:
    value = metadata.get(PART_SIZE_KEY, "")
    return int(value) if value.isdigit() else None


def same_mtime(a_ns: int, b_ns: int) -> bool:
    return abs(a_ns - b_ns) < _TOLERANCE_NS
