"""The sync comparison rules: copy, skip, or check with a HEAD.

Comparison follows ``aws s3 sync``, with one improvement: synxfer stores the
source file's mtime in the object (``mtime`` metadata) and restores it on
download, so trees synced in either direction compare equal afterwards.

Default rule (copy when missing, when sizes differ, or when the source is
newer than the destination):

* upload: the object's time is its stored ``mtime`` when the listing carries
  metadata, else its LastModified (whole seconds, as S3 lists it);
* download: when the object's LastModified is not newer than the local file,
  skip; otherwise one HEAD fetches the stored ``mtime`` and the object is
  copied only if that is newer than the local file (or absent).

``--size-only`` compares sizes; ``--exact-timestamps`` copies same-size files
whose times differ at all; ``--checksum`` compares content hashes (S3-style
MD5 ETags, reading the local file once to hash it).

An object synxfer stored compressed (``synxfer-encoding``) compares by its
original size (``synxfer-size``). A listing without metadata (S3's) shows
the compressed size: an upload with ``compress`` on settles a size that
differs with a HEAD, and a download skips a file that was downloaded from
that very object (its tag) before looking at sizes. ``--checksum`` cannot
compare a compressed object's hash with a file's: it copies.
"""

from __future__ import annotations

import enum
import hashlib
import math
from pathlib import Path

from .._models import ObjectInfo
from ..backend import Backend
from .compress import is_compressed, original_size
from .core import NO_CLOBBER, Engine
from .localtree import LocalEntry
from .meta import same_mtime, stored_mtime, stored_part_size
from .parts import etag_parts, multipart_etag, plan_part_size

__all__ = [
    "COPY",
    "SKIP",
    "Check",
    "Compare",
    "Decision",
    "Overwrite",
    "decide",
    "decide_copy",
    "kept",
    "md5_file_etag",
    "object_time_ns",
    "resolve",
]

_NS = 1_000_000_000


class Compare(enum.Enum):
    """How a source and an existing destination are compared."""

    DEFAULT = "default"
    SIZE_ONLY = "size-only"
    EXACT_TIMESTAMPS = "exact-timestamps"
    CHECKSUM = "checksum"
    ALWAYS = "always"  # cp: copy without comparing


class Check(enum.Enum):
    """A comparison that needs a HEAD (and maybe a local hash) to decide."""

    NEWER = "newer"  # copy if the stored mtime is newer (or absent)
    EXACT = "exact"  # copy if the times differ
    CONTENT = "content"  # copy if the hashes differ
    SIZE = "size"  # copy if the (original) sizes differ


COPY = "copy"
SKIP = "skip"
Decision = str | Check


def _remote_time_ns(info: ObjectInfo) -> int | None:
    stored = stored_mtime(info.metadata)
    if stored is not None:
        return stored
    return None if info.mtime is None else int(info.mtime * _NS)


_SIZE_CHECK = {
    Compare.SIZE_ONLY: Check.SIZE,
    Compare.EXACT_TIMESTAMPS: Check.EXACT,
    Compare.CHECKSUM: Check.CONTENT,
}


def decide(
    mode: Compare,
    local: LocalEntry | None,
    remote: ObjectInfo | None,
    upload: bool,
    *,
    compressed: bool = False,
) -> Decision:
    """Copy, skip, or a check needing a HEAD, for one pair of files.

    ``compressed``: the upload stores objects compressed, so a listed size
    (the stored one) that differs from the file's is settled by a HEAD,
    whose metadata gives the original size.
    """
    if mode is Compare.ALWAYS or local is None or remote is None:
        return COPY
    if not upload and local.tag is not None and local.tag == remote.etag:
        # This very object was downloaded here and the file is untouched since
        # (a compressed object's listed size is not the file's: before sizes).
        return SKIP
    if local.size != original_size(remote):
        if compressed and upload and not is_compressed(remote):
            return _SIZE_CHECK.get(mode, Check.NEWER)
        return COPY
    if mode is Compare.SIZE_ONLY:
        return SKIP
    if mode is Compare.CHECKSUM:
        return Check.CONTENT
    stored = stored_mtime(remote.metadata)
    if mode is Compare.EXACT_TIMESTAMPS:
        if stored is not None:
            return SKIP if same_mtime(stored, local.mtime_ns) else COPY
        return Check.EXACT
    # Compare.DEFAULT: copy when the source is newer.
    if stored is not None:
        newer = local.mtime_ns - stored if upload else stored - local.mtime_ns
        return COPY if newer > 0 and not same_mtime(stored, local.mtime_ns) else SKIP
    if remote.mtime is None:
        return Check.NEWER
    local_s, remote_s = local.mtime_ns // _NS, math.floor(remote.mtime)
    if upload:
        return COPY if local_s > remote_s else SKIP
    return SKIP if remote_s <= local_s else Check.NEWER


def decide_copy(
    mode: Compare, src: ObjectInfo, dst: ObjectInfo | None, *, final: bool = False
) -> Decision:
    """Copy, skip, or a check needing HEADs, for an object and its remote copy.

    Times compare by the stored source mtime when both sides list it, else by
    LastModified as ``aws s3 sync`` does between buckets (a copy is written
    after its source, so a second sync skips it). Checksums compare by equal
    MD5-style ETags or any checksum both sides vouch for. ``final``: the
    infos come from HEADs, so no further check can be asked for.
    """
    if mode is Compare.ALWAYS or dst is None or src.size != dst.size:
        return COPY
    if mode is Compare.SIZE_ONLY:
        return SKIP
    if mode is Compare.CHECKSUM:
        if src.etag and src.etag == dst.etag and etag_parts(src.etag) is not None:
            return SKIP
        common = set(src.checksums) & set(dst.checksums)
        if common:
            same = all(src.checksums[a] == dst.checksums[a] for a in common)
            return SKIP if same else COPY
        return COPY if final else Check.CONTENT
    s_ns, d_ns = stored_mtime(src.metadata), stored_mtime(dst.metadata)
    if s_ns is not None and d_ns is not None:
        if mode is Compare.EXACT_TIMESTAMPS:
            return SKIP if same_mtime(s_ns, d_ns) else COPY
        return COPY if s_ns - d_ns > 0 and not same_mtime(s_ns, d_ns) else SKIP
    if not final and (mode is Compare.EXACT_TIMESTAMPS or src.mtime is None or dst.mtime is None):
        return Check.EXACT if mode is Compare.EXACT_TIMESTAMPS else Check.NEWER
    if src.mtime is None or dst.mtime is None:
        return COPY
    if mode is Compare.EXACT_TIMESTAMPS:
        return SKIP if math.floor(src.mtime) == math.floor(dst.mtime) else COPY
    return COPY if math.floor(src.mtime) > math.floor(dst.mtime) else SKIP


class Overwrite(enum.Enum):
    """When an existing destination is replaced (s5cmd's ``cp -n -s -u``)."""

    NO_CLOBBER = "no-clobber"
    IF_SIZE_DIFFER = "if-size-differ"
    IF_SOURCE_NEWER = "if-source-newer"


def kept(
    conditions: frozenset[Overwrite],
    src_size: int,
    src_ns: int | None,
    dst_size: int,
    dst_ns: int | None,
) -> str | None:
    """Why an existing destination stays as it is, or None to write it.

    s5cmd's rule, so that its users' commands mean the same here: the
    conditions are taken in the order no-clobber, if-size-differ,
    if-source-newer and the last one given decides (``-n -s`` replaces a
    file whose size differs). A time that is unknown is not newer.
    """
    reason: str | None = None
    if Overwrite.NO_CLOBBER in conditions:
        reason = NO_CLOBBER
    if Overwrite.IF_SIZE_DIFFER in conditions:
        reason = None if src_size != dst_size else "same size, --if-size-differ"
    if Overwrite.IF_SOURCE_NEWER in conditions:
        newer = src_ns is not None and dst_ns is not None and src_ns > dst_ns
        reason = None if newer else "source not newer, --if-source-newer"
    return reason


def object_time_ns(info: ObjectInfo) -> int | None:
    """An object's time for comparisons: the stored source mtime, else LastModified."""
    return _remote_time_ns(info)


async def resolve(
    engine: Engine, check: Check, backend: Backend, key: str, local: LocalEntry, upload: bool
) -> bool:
    """Settle a check with a HEAD (and a local hash for CONTENT): True = copy."""
    info = await backend.stat(key)
    if original_size(info) != local.size:
        return True
    if check is Check.SIZE:
        return False
    if check is Check.CONTENT:
        if is_compressed(info):
            return True  # the stored hash is the compressed bytes': copy to be sure
        return await _content_differs(engine, backend, local, info)
    remote_ns = _remote_time_ns(info)
    if remote_ns is None:
        return True
    if check is Check.EXACT:
        return not same_mtime(remote_ns, local.mtime_ns)
    newer = local.mtime_ns - remote_ns if upload else remote_ns - local.mtime_ns
    return newer > 0 and not same_mtime(remote_ns, local.mtime_ns)


async def _content_differs(
    engine: Engine, backend: Backend, local: LocalEntry, info: ObjectInfo
) -> bool:
    parts = etag_parts(info.etag)
    if parts is None:
        return True  # an opaque ETag cannot be compared: copy to be sure
    part_size = 0
    if parts > 0:
        part_size = stored_part_size(info.metadata) or plan_part_size(
            info.size, engine.config.part_size, backend.capabilities
        )
        if part_size <= 0 or math.ceil(info.size / part_size) != parts:
            return True
    etag = await engine.scheduler.io(md5_file_etag, local.path, part_size, parts)
    return etag != info.etag


def md5_file_etag(path: Path, part_size: int, parts: int) -> str:
    """The S3-style ETag of a local file (blocking; run in a worker thread).

    ``parts == 0`` gives the plain MD5; otherwise the md5-of-part-md5s form.
    Used by ``--checksum`` comparisons.
    """
    with open(path, "rb") as fh:
        if parts == 0:
            h = hashlib.md5(usedforsecurity=False)
            while chunk := fh.read(1 << 20):
                h.update(chunk)
            return h.hexdigest()
        digests = []
        while True:
            h = hashlib.md5(usedforsecurity=False)
            remaining = part_size
            while remaining:
                chunk = fh.read(min(remaining, 1 << 20))
                if not chunk:
                    break
                h.update(chunk)
                remaining -= len(chunk)
            if remaining == part_size:
                break
            digests.append(h.digest())
            if remaining:
                break
        return multipart_etag(digests)
