"""Object metadata synxfer writes and reads.

``mtime``
    The source file's modification time as decimal seconds with nanoseconds,
    e.g. ``1700000000.123456789``: the key and format rclone uses, so objects
    written by either tool carry times the other understands.
``synxfer-part-size``
    The part size of a multipart upload (``0`` for a single request), so a
    download can split ranges on the same boundaries and check each part's
    MD5 against the S3-style ETag without reading anything twice.

Beside them, an object gets the user's object options
(:class:`~synxfer.WriteOptions`): :func:`upload_options` for a local file
(with a content type guessed from its name, as aws-cli does) and
:func:`copy_options` for a copy of a remote object (keeping its content type
and metadata unless the options say otherwise).
"""

from __future__ import annotations

import dataclasses
import mimetypes
import re
from collections.abc import Mapping

from .._models import ObjectInfo, WriteOptions

__all__ = [
    "MTIME_KEY",
    "PART_SIZE_KEY",
    "copy_options",
    "format_mtime",
    "guess_content_type",
    "parse_mtime",
    "same_mtime",
    "stored_mtime",
    "stored_part_size",
    "upload_options",
]

MTIME_KEY = "mtime"
PART_SIZE_KEY = "synxfer-part-size"

_MTIME = re.compile(r"^(-?\d+)(?:\.(\d{1,9})\d*)?$")

#: Times within this many nanoseconds are the same (some filesystems keep µs).
_TOLERANCE_NS = 1_000


def format_mtime(mtime_ns: int) -> str:
    """Decimal seconds with nanoseconds; a time before 1970 keeps its sign in
    front (``-1.500000000``), as :func:`parse_mtime` reads it."""
    sign = "-" if mtime_ns < 0 else ""
    sec, frac = divmod(abs(mtime_ns), 1_000_000_000)
    return f"{sign}{sec}.{frac:09d}"


def parse_mtime(value: str | None) -> int | None:
    """Nanoseconds from a stored ``mtime``; None when absent or malformed."""
    if not value:
        return None
    m = _MTIME.match(value.strip())
    if m is None:
        return None
    whole = m.group(1)
    ns = abs(int(whole)) * 1_000_000_000 + int((m.group(2) or "0").ljust(9, "0"))
    return -ns if whole.startswith("-") else ns


def stored_mtime(metadata: Mapping[str, str]) -> int | None:
    return parse_mtime(metadata.get(MTIME_KEY))


def stored_part_size(metadata: Mapping[str, str]) -> int | None:
    value = metadata.get(PART_SIZE_KEY, "")
    return int(value) if value.isdigit() else None


def same_mtime(a_ns: int, b_ns: int) -> bool:
    return abs(a_ns - b_ns) < _TOLERANCE_NS


def guess_content_type(name: str) -> str | None:
    """The media type of a file named ``name``, as aws-cli guesses it
    (:func:`mimetypes.guess_type`; the encoding it may name is not used).

    The first call reads the system's type tables (``/etc/mime.types``...):
    the engine makes it in a worker thread.
    """
    try:
        return mimetypes.guess_type(name)[0]
    except (UnicodeDecodeError, ValueError):
        return None


def upload_options(
    options: WriteOptions, metadata: Mapping[str, str], content_type: str | None
) -> WriteOptions:
    """The options of an uploaded object: the user's, with synxfer's ``metadata``
    (the source's time, the part size) added and ``content_type`` unless the
    user gave one."""
    return dataclasses.replace(
        options,
        metadata={**options.metadata, **metadata},
        content_type=options.content_type or content_type,
    )


def copy_options(
    options: WriteOptions, source: ObjectInfo, metadata: Mapping[str, str]
) -> WriteOptions:
    """The options of a remote copy: the source's metadata and content type,
    what the user's ``options`` set over them, and synxfer's ``metadata``."""
    return dataclasses.replace(
        options,
        metadata={**source.metadata, **options.metadata, **metadata},
        content_type=options.content_type or source.content_type,
    )
