"""What the file backend keeps on disk next to each object, and how it writes it.

See :mod:`synxfer_file` for the layout: a JSON sidecar per object, temp
files renamed into place, and staging directories for multipart uploads.
Everything here blocks: it runs in worker threads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from synxfer import ObjectInfo
from synxfer.backend import Payload

__all__ = [
    "CHUNK",
    "MPU_PREFIX",
    "UPLOAD_FILE",
    "Sidecar",
    "info",
    "is_hidden",
    "load_sidecar",
    "md5",
    "md5_hex",
    "replace",
    "sidecar_name",
    "sidecar_path",
    "write_sidecar",
    "write_temp",
]

META_SUFFIX = ".synxfer-meta"
TMP_MARK = ".synxfer-tmp-"
MPU_PREFIX = ".synxfer-mpu-"
UPLOAD_FILE = "upload.json"
#: Bytes read or written at a time when streaming a file.
CHUNK = 1024 * 1024

_HIDDEN = re.compile(
    r"^\..*\.synxfer-meta$|^\..*\.synxfer-tmp-[0-9a-f]{16}$|^\.synxfer-mpu-[0-9a-f]{32}$",
    re.DOTALL,
)


def md5() -> Any:
    """A new MD5 (ETags, Content-MD5), not for security."""
    return hashlib.md5(usedforsecurity=False)


def md5_hex(data: bytes) -> str:
    digest = md5()
    digest.update(data)
    return str(digest.hexdigest())


def is_hidden(name: str) -> bool:
    """Whether ``name`` is one of the backend's own files (sidecar, temp, staging)."""
    return _HIDDEN.match(name) is not None


def sidecar_name(name: str) -> str:
    """``.name.synxfer-meta``; a hash stands in for names too long to extend."""
    if len(name.encode("utf-8", "surrogateescape")) > 200:
        name = "long-" + hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()
    return f".{name}{META_SUFFIX}"


def sidecar_path(path: str) -> str:
    head, name = os.path.split(path)
    return os.path.join(head, sidecar_name(name))


@dataclass(frozen=True, slots=True)
class Sidecar:
    """What a sidecar records about one version of an object's file."""

    etag: str | None
    metadata: Mapping[str, str]
    content_type: str | None


def load_sidecar(path: str, st: os.stat_result) -> Sidecar | None:
    """The sidecar of ``path`` if it describes the file ``st`` describes."""
    try:
        with open(sidecar_path(path), "rb") as f:
            raw = json.loads(f.read())
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict):
        return None
    if (raw.get("size"), raw.get("mtime_ns"), raw.get("ino")) != (
        st.st_size,
        st.st_mtime_ns,
        st.st_ino,
    ):
        return None  # the file was replaced or rewritten behind our back
    metadata = raw.get("metadata") or {}
    etag = raw.get("etag")
    content_type = raw.get("content_type")
    return Sidecar(
        etag=etag if isinstance(etag, str) else None,
        metadata={str(k): str(v) for k, v in metadata.items()}
        if isinstance(metadata, dict)
        else {},
        content_type=content_type if isinstance(content_type, str) else None,
    )


def write_sidecar(
    path: str,
    st: os.stat_result,
    etag: str,
    metadata: Mapping[str, str],
    content_type: str | None,
    *,
    fsync: bool,
) -> None:
    doc = {
        "etag": etag,
        "metadata": dict(metadata),
        "content_type": content_type,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ino": st.st_ino,
    }
    side = sidecar_path(path)
    tmp = write_temp(side, [json.dumps(doc, sort_keys=True).encode()], fsync=fsync)
    replace(tmp, side)


def info(key: str, st: os.stat_result, sidecar: Sidecar | None) -> ObjectInfo:
    """The object's info: the file's size and mtime, the sidecar's ETag and metadata."""
    if sidecar is None:
        return ObjectInfo(key=key, size=st.st_size, mtime=st.st_mtime)
    return ObjectInfo(
        key=key,
        size=st.st_size,
        mtime=st.st_mtime,
        etag=sidecar.etag,
        metadata=sidecar.metadata,
        content_type=sidecar.content_type,
    )


def write_temp(target: str, chunks: Iterable[Payload], *, fsync: bool) -> str:
    """Write ``chunks`` to a new temp file next to ``target``; return its path."""
    head, name = os.path.split(target)
    tmp = os.path.join(head, f".{name[:64]}{TMP_MARK}{secrets.token_hex(8)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def replace(tmp: str, target: str) -> None:
    """Rename ``tmp`` over ``target``; remove ``tmp`` if that fails."""
    try:
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
