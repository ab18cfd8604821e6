"""What ``synxfer-blockd`` and the ``blocks://`` client agree on: names, limits, manifests.

Everything here is pure (no I/O), so the server and the client validate
requests and responses with the same code.

HTTP API (every request carries ``Authorization: Bearer <token>``)::

    GET    /v1/ping                          RTT probe; the site's load (JSON)
    PUT    /v1/blocks/{id}                   store a block; verified against its id
    GET    /v1/blocks/{id}                   a block, or a range of it (Range: bytes=a-b)
    HEAD   /v1/blocks/{id}                   size of a block
    DELETE /v1/blocks/{id}                   remove a block (idempotent)
    GET    /v1/blocks?after=&limit=          block ids in order, paginated
    PUT    /v1/manifest?bucket=&key=         store a manifest (last writer wins)
    GET    /v1/manifest?bucket=&key=         a live manifest (404 if none or deleted)
    GET    /v1/list?bucket=&prefix=&after=&limit=   live manifests in key order
    GET    /v1/sync?after=&limit=            the change feed peers pull (anti-entropy)
    POST   /v1/gc?grace=                     delete blocks no live manifest references

A block id is the lowercase hex SHA-256 of the block's bytes. Manifests are
JSON documents (:class:`Manifest`) ordered by ``(stamp, writer)``: a site
keeps the greatest it has seen, so replicas converge whatever the order in
which writes and peer syncs arrive. A delete is a manifest with
``deleted: true`` (a tombstone), so a sync never resurrects an object.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "API",
    "BLOCK_ID",
    "BUCKET_NAME",
    "HEADER_ACTIVE",
    "HEADER_RATE",
    "HEADER_SITE",
    "MAX_BLOCKS",
    "MAX_BLOCK_SIZE",
    "MAX_KEY_BYTES",
    "MAX_METADATA_BYTES",
    "MIN_BLOCK_SIZE",
    "SITE_NAME",
    "BlockRef",
    "KiB",
    "Manifest",
    "MiB",
    "block_id",
    "check_bucket",
    "check_key",
    "compute_etag",
    "parse_range",
    "parse_size",
]

KiB = 1024
MiB = 1024 * KiB

#: Path prefix of every endpoint.
API = "/v1"
#: A block id: lowercase hex SHA-256.
BLOCK_ID = re.compile(r"^[0-9a-f]{64}$")
#: Bucket (namespace) names, as in synxfer URLs.
BUCKET_NAME = re.compile(r"^[A-Za-z0-9._-]{1,255}$")
#: Site names: short and safe in headers, file names and URLs.
SITE_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

#: Block sizes a client may choose.
MIN_BLOCK_SIZE = 64 * KiB
MAX_BLOCK_SIZE = 8 * MiB
#: Longest key, in UTF-8 bytes (S3's limit).
MAX_KEY_BYTES = 1024
#: User metadata per object, keys and values in UTF-8 bytes.
MAX_METADATA_BYTES = 16 * KiB
#: Blocks per object: 16 GiB of 64 KiB blocks, 2 TiB of 8 MiB blocks. Keeps
#: a manifest under ~40 MiB of JSON.
MAX_BLOCKS = 262_144

#: Response headers with the serving site's load, read by load-aware clients.
HEADER_SITE = "X-Blockd-Site"
HEADER_ACTIVE = "X-Blockd-Active"
HEADER_RATE = "X-Blockd-Rate"

_EMPTY: Mapping[str, str] = MappingProxyType({})
_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]i?B?|B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": KiB, "m": MiB, "g": 1024 * MiB}


def block_id(data: bytes | bytearray | memoryview) -> str:
    """The id of a block: hex SHA-256 of its bytes. Blocking: call it in a worker thread."""
    return hashlib.sha256(data).hexdigest()


def parse_size(text: str | int) -> int:
    """``"64KiB"``, ``"1MiB"``, ``"8M"`` or ``65536`` -> bytes (binary units)."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"invalid size {text!r}: expected e.g. 65536, 64KiB or 1MiB")
    unit = (m.group(2) or "").lower()[:1]
    return int(m.group(1)) * _UNITS[unit]


def check_bucket(bucket: str) -> str:
    """``bucket`` if it is a valid namespace name; ValueError otherwise."""
    if not isinstance(bucket, str) or not BUCKET_NAME.match(bucket):
        raise ValueError(f"invalid bucket name {bucket!r}: use letters, digits, '.', '_', '-'")
    return bucket


def check_key(key: str) -> str:
    """``key`` if it is a valid object key; ValueError otherwise."""
    if not isinstance(key, str) or not key:
        raise ValueError("empty key")
    if "\x00" in key:
        raise ValueError(f"key {key!r} contains a NUL character")
    try:
        encoded = key.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"key {key!r} is not valid UTF-8") from None
    if len(encoded) > MAX_KEY_BYTES:
        raise ValueError(f"key of {len(encoded)} bytes is longer than {MAX_KEY_BYTES}")
    return key


def parse_range(header: str, size: int) -> tuple[int, int] | None:
    """``(start, end)`` (end exclusive) of one ``bytes=`` range of an object of ``size``.

    ``None`` means the whole object. ValueError for a malformed header; a
    range starting at or beyond ``size`` is unsatisfiable (IndexError).
    """
    m = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", header)
    if m is None or (not m.group(1) and not m.group(2)):
        raise ValueError(f"unsupported Range header {header!r}")
    first, last = m.group(1), m.group(2)
    if not first:  # suffix: the last N bytes
        n = int(last)
        if n == 0:
            raise IndexError("empty suffix range")
        return max(0, size - n), size
    start = int(first)
    end = size if not last else int(last) + 1
    if last and end <= start:
        raise ValueError(f"Range {header!r} ends before it starts")
    if start >= size:
        raise IndexError(f"range starts at {start}, the block has {size} bytes")
    return start, min(end, size)


@dataclass(frozen=True, slots=True)
class BlockRef:
    """One block of an object: its id, its length and the sites holding a replica."""

    id: str
    size: int
    sites: tuple[str, ...]


def compute_etag(size: int, blocks: Sequence[BlockRef]) -> str:
    """An object's ETag: hex SHA-256 of its size and ordered block ids.

    It is 64 hex digits, so it is never mistaken for an S3 MD5 ETag (32
    digits): the engine does not try to verify it as one. Equal content cut
    into equal blocks has an equal ETag, as S3's content MD5s do.
    """
    h = hashlib.sha256(f"blocks-v1 {size}\n".encode())
    for b in blocks:
        h.update(f"{b.id} {b.size}\n".encode())
    return h.hexdigest()


def _str_map(value: object, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"{what} must be an object of strings")
    return dict(value)


def _int(doc: Mapping[str, Any], name: str, low: int = 0, high: int | None = None) -> int:
    value = doc.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"manifest field {name!r} must be an integer")
    if value < low or (high is not None and value > high):
        raise ValueError(f"manifest field {name!r} = {value} is out of range")
    return value


@dataclass(frozen=True, slots=True)
class Manifest:
    """What a site knows about one object: its blocks, where they are, and its info.

    ``stamp`` (nanoseconds since the epoch when written) and ``writer`` (a
    random id of the writing client) order versions: the greatest
    ``(stamp, writer)`` wins everywhere. A tombstone has ``deleted`` set and
    no blocks.
    """

    bucket: str
    key: str
    size: int
    blocks: tuple[BlockRef, ...]
    stamp: int
    writer: str
    etag: str = ""
    mtime: float = 0.0
    metadata: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    content_type: str | None = None
    deleted: bool = False
    block_size: int = 0
    policy: str = ""

    @property
    def version(self) -> tuple[int, str]:
        """The order of versions: last writer wins."""
        return (self.stamp, self.writer)

    def offsets(self) -> list[int]:
        """Start offset of each block (for locating a range)."""
        out, pos = [], 0
        for b in self.blocks:
            out.append(pos)
            pos += b.size
        return out

    def to_json(self) -> dict[str, Any]:
        """The JSON document stored by sites."""
        return {
            "v": 1,
            "bucket": self.bucket,
            "key": self.key,
            "size": self.size,
            "etag": self.etag,
            "mtime": self.mtime,
            "stamp": self.stamp,
            "writer": self.writer,
            "deleted": self.deleted,
            "metadata": dict(self.metadata),
            "content_type": self.content_type,
            "block_size": self.block_size,
            "policy": self.policy,
            "blocks": [[b.id, b.size, list(b.sites)] for b in self.blocks],
        }

    @classmethod
    def from_json(cls, doc: object) -> Manifest:
        """Parse and validate a manifest document; ValueError says what is wrong."""
        if not isinstance(doc, dict) or doc.get("v") != 1:
            raise ValueError("not a version-1 manifest document")
        bucket = check_bucket(doc.get("bucket"))  # type: ignore[arg-type]
        key = check_key(doc.get("key"))  # type: ignore[arg-type]
        size = _int(doc, "size")
        stamp = _int(doc, "stamp", 1)
        writer = doc.get("writer")
        if not isinstance(writer, str) or not SITE_NAME.match(writer):
            raise ValueError("manifest field 'writer' must be a short name")
        deleted = doc.get("deleted", False)
        if not isinstance(deleted, bool):
            raise ValueError("manifest field 'deleted' must be a boolean")
        raw_blocks = doc.get("blocks")
        if not isinstance(raw_blocks, list) or len(raw_blocks) > MAX_BLOCKS:
            raise ValueError(f"manifest field 'blocks' must be a list of at most {MAX_BLOCKS}")
        blocks: list[BlockRef] = []
        total = 0
        for item in raw_blocks:
            if not (isinstance(item, list) and len(item) == 3):
                raise ValueError("each block must be [id, size, [sites]]")
            bid, bsize, sites = item
            if not isinstance(bid, str) or not BLOCK_ID.match(bid):
                raise ValueError(f"invalid block id {bid!r}")
            if isinstance(bsize, bool) or not isinstance(bsize, int):
                raise ValueError("block sizes must be integers")
            if not 1 <= bsize <= MAX_BLOCK_SIZE:
                raise ValueError(f"block size {bsize} is outside 1..{MAX_BLOCK_SIZE}")
            if (
                not isinstance(sites, list)
                or not sites
                or not all(isinstance(s, str) and SITE_NAME.match(s) for s in sites)
            ):
                raise ValueError("each block needs a non-empty list of site names")
            blocks.append(BlockRef(bid, bsize, tuple(sites)))
            total += bsize
        if deleted and blocks:
            raise ValueError("a tombstone has no blocks")
        if not deleted and total != size:
            raise ValueError(f"blocks add up to {total} bytes, the manifest says {size}")
        metadata = _str_map(doc.get("metadata"), "metadata")
        if sum(len(k.encode()) + len(v.encode()) for k, v in metadata.items()) > (
            MAX_METADATA_BYTES
        ):
            raise ValueError(f"metadata is larger than {MAX_METADATA_BYTES} bytes")
        content_type = doc.get("content_type")
        if content_type is not None and not isinstance(content_type, str):
            raise ValueError("content_type must be a string")
        mtime = doc.get("mtime", 0.0)
        if (
            isinstance(mtime, bool)
            or not isinstance(mtime, int | float)
            or not math.isfinite(mtime)
        ):
            raise ValueError("mtime must be a number")
        etag = doc.get("etag", "")
        if not isinstance(etag, str) or len(etag) > 128:
            raise ValueError("etag must be a short string")
        policy = doc.get("policy", "")
        if not isinstance(policy, str) or len(policy) > 64:
            raise ValueError("policy must be a short string")
        block_size = _int(doc, "block_size", 0, MAX_BLOCK_SIZE) if "block_size" in doc else 0
        return cls(
            bucket=bucket,
            key=key,
            size=size,
            blocks=tuple(blocks),
            stamp=stamp,
            writer=writer,
            etag=etag,
            mtime=float(mtime),
            metadata=metadata,
            content_type=content_type,
            deleted=deleted,
            block_size=block_size,
            policy=policy,
        )
