"""The sync comparison rules (synxfer.engine.compare), one table row per case.

``decide`` compares a local file with an object (upload and download),
``decide_copy`` an object with its remote copy, and ``resolve`` settles the
checks that need a HEAD (and, for ``--checksum``, a hash of the local file)
against a real file:// backend.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import synxfer
from synxfer import ObjectInfo, WriteOptions
from synxfer.engine.compare import (
    COPY,
    SKIP,
    Check,
    Compare,
    Decision,
    decide,
    decide_copy,
    md5_file_etag,
    resolve,
)
from synxfer.engine.core import Engine
from synxfer.engine.localtree import LocalEntry
from synxfer.engine.meta import format_mtime
from synxfer.engine.parts import multipart_etag
from synxfer_file import FileBackend

T = 1_700_000_000  # a whole second
NS = 1_000_000_000
D, S, E, C, A = (
    Compare.DEFAULT,
    Compare.SIZE_ONLY,
    Compare.EXACT_TIMESTAMPS,
    Compare.CHECKSUM,
    Compare.ALWAYS,
)
MD5 = "0" * 31 + "1"  # an S3-style single-part ETag
OTHER_MD5 = "0" * 31 + "2"


def local(size: int = 10, mtime_ns: int = T * NS, tag: str | None = None) -> LocalEntry:
    return LocalEntry("f", Path("/nonexistent/f"), size, mtime_ns, tag)


def remote(
    size: int = 10,
    mtime: float | None = T,
    stored_ns: int | None = None,
    etag: str | None = MD5,
    checksums: dict[str, str] | None = None,
) -> ObjectInfo:
    metadata = {} if stored_ns is None else {"mtime": format_mtime(stored_ns)}
    return ObjectInfo("f", size, mtime, etag, metadata, checksums=checksums or {})


@dataclass(frozen=True)
class Row:
    why: str
    mode: Compare
    local: LocalEntry | None
    remote: ObjectInfo | None
    upload: bool
    expect: Decision


# fmt: off
DECIDE = [
    # -- always copied
    Row("cp copies without comparing", A, local(), remote(), True, COPY),
    Row("missing object", D, local(), None, True, COPY),
    Row("missing local file", D, None, remote(), False, COPY),
    Row("sizes differ (default)", D, local(size=9), remote(), True, COPY),
    Row("sizes differ (size-only)", S, local(size=9), remote(), False, COPY),
    Row("sizes differ (checksum)", C, local(size=9), remote(), True, COPY),
    # -- --size-only
    Row("size-only ignores newer source", S, local(mtime_ns=(T + 99) * NS), remote(), True, SKIP),
    Row("size-only ignores newer object", S, local(), remote(mtime=T + 99), False, SKIP),
    # -- the ETag tag a download left on the file (downloads only)
    Row("untouched download is skipped", D,
        local(tag=MD5), remote(mtime=T + 99, stored_ns=(T + 99) * NS), False, SKIP),
    Row("tag skips before checksum", C, local(tag=MD5), remote(), False, SKIP),
    Row("tag skips before exact times", E,
        local(tag=MD5), remote(stored_ns=(T + 5) * NS), False, SKIP),
    Row("another object's tag is no match", D,
        local(tag=OTHER_MD5), remote(stored_ns=(T + 5) * NS), False, COPY),
    Row("tags never skip uploads", D,
        local(mtime_ns=(T + 5) * NS, tag=MD5), remote(stored_ns=T * NS), True, COPY),
    # -- --checksum needs the content
    Row("checksum asks for a hash (upload)", C, local(), remote(), True, Check.CONTENT),
    Row("checksum asks for a hash (download)", C, local(), remote(), False, Check.CONTENT),
    # -- --exact-timestamps
    Row("exact: same stored mtime", E, local(), remote(stored_ns=T * NS), True, SKIP),
    Row("exact: 999 ns apart is the same", E,
        local(mtime_ns=T * NS + 999), remote(stored_ns=T * NS), False, SKIP),
    Row("exact: 1 us apart differs", E,
        local(mtime_ns=T * NS + 1000), remote(stored_ns=T * NS), False, COPY),
    Row("exact: older source still copied", E,
        local(mtime_ns=(T - 5) * NS), remote(stored_ns=T * NS), True, COPY),
    Row("exact: no stored mtime needs a HEAD", E, local(), remote(), True, Check.EXACT),
    # -- default rule, mtime stored in metadata
    Row("upload: newer file", D, local(mtime_ns=(T + 1) * NS), remote(stored_ns=T * NS), True,
        COPY),
    Row("upload: older file", D, local(mtime_ns=(T - 1) * NS), remote(stored_ns=T * NS), True,
        SKIP),
    Row("upload: same mtime", D, local(), remote(stored_ns=T * NS), True, SKIP),
    Row("upload: newer by less than 1 us", D,
        local(mtime_ns=T * NS + 500), remote(stored_ns=T * NS), True, SKIP),
    Row("upload: stored mtime wins over LastModified", D,
        local(mtime_ns=(T + 1) * NS), remote(mtime=T + 50, stored_ns=T * NS), True, COPY),
    Row("download: newer object", D, local(), remote(stored_ns=(T + 1) * NS), False, COPY),
    Row("download: older object", D, local(), remote(stored_ns=(T - 1) * NS), False, SKIP),
    Row("download: stored mtime wins over LastModified", D,
        local(), remote(mtime=T + 50, stored_ns=(T - 1) * NS), False, SKIP),
    # -- default rule, LastModified only (a listing without metadata)
    Row("no time at all needs a HEAD", D, local(), remote(mtime=None), True, Check.NEWER),
    Row("upload: newer second", D, local(mtime_ns=(T + 1) * NS), remote(mtime=T), True, COPY),
    Row("upload: same second is not newer", D,
        local(mtime_ns=T * NS + NS - 1), remote(mtime=T + 0.2), True, SKIP),
    Row("upload: older", D, local(mtime_ns=(T - 1) * NS), remote(mtime=T), True, SKIP),
    Row("download: object not newer is skipped", D, local(), remote(mtime=T + 0.9), False, SKIP),
    Row("download: newer LastModified needs a HEAD", D,
        local(), remote(mtime=T + 1), False, Check.NEWER),
]
# fmt: on


@pytest.mark.parametrize("row", DECIDE, ids=[r.why for r in DECIDE])
def test_decide(row: Row) -> None:
    assert decide(row.mode, row.local, row.remote, upload=row.upload) == row.expect


@dataclass(frozen=True)
class CopyRow:
    why: str
    mode: Compare
    src: ObjectInfo
    dst: ObjectInfo | None
    expect: Decision  # from a listing
    final: Decision  # from HEADs (no further check possible)


# fmt: off
DECIDE_COPY = [
    CopyRow("cp copies without comparing", A, remote(), remote(), COPY, COPY),
    CopyRow("missing copy", D, remote(), None, COPY, COPY),
    CopyRow("sizes differ", S, remote(), remote(size=9), COPY, COPY),
    CopyRow("size-only", S, remote(mtime=T + 9), remote(), SKIP, SKIP),
    # -- --checksum
    CopyRow("checksum: same MD5 ETag", C, remote(), remote(mtime=T - 9), SKIP, SKIP),
    CopyRow("checksum: same multipart ETag", C,
            remote(etag=f"{MD5}-3"), remote(etag=f"{MD5}-3"), SKIP, SKIP),
    CopyRow("checksum: same opaque ETag proves nothing", C,
            remote(etag="opaque"), remote(etag="opaque"), Check.CONTENT, COPY),
    CopyRow("checksum: common checksum agrees", C,
            remote(etag=MD5, checksums={"crc32c": "AAAAAA=="}),
            remote(etag="gcs-generation", checksums={"crc32c": "AAAAAA==", "md5": "x"}),
            SKIP, SKIP),
    CopyRow("checksum: common checksum differs", C,
            remote(etag="a", checksums={"crc32c": "AAAAAA=="}),
            remote(etag="b", checksums={"crc32c": "AAAAAB=="}), COPY, COPY),
    CopyRow("checksum: nothing in common", C,
            remote(etag=MD5, checksums={"md5": "x"}),
            remote(etag=OTHER_MD5, checksums={"crc32c": "y"}), Check.CONTENT, COPY),
    # -- stored mtimes on both sides
    CopyRow("exact: same stored mtime", E,
            remote(stored_ns=T * NS), remote(mtime=T + 9, stored_ns=T * NS), SKIP, SKIP),
    CopyRow("exact: stored mtimes differ", E,
            remote(stored_ns=T * NS), remote(stored_ns=(T + 1) * NS), COPY, COPY),
    CopyRow("default: newer source", D,
            remote(stored_ns=(T + 1) * NS), remote(stored_ns=T * NS), COPY, COPY),
    CopyRow("default: older source", D,
            remote(stored_ns=(T - 1) * NS), remote(mtime=T - 9, stored_ns=T * NS), SKIP, SKIP),
    CopyRow("default: newer by less than 1 us", D,
            remote(stored_ns=T * NS + 500), remote(stored_ns=T * NS), SKIP, SKIP),
    # -- LastModified (a stored mtime missing on either side)
    CopyRow("exact: without stored mtimes, ask a HEAD", E,
            remote(), remote(stored_ns=T * NS), Check.EXACT, SKIP),
    CopyRow("exact (HEAD): different seconds", E,
            remote(mtime=T + 1.5), remote(mtime=T), Check.EXACT, COPY),
    CopyRow("default: newer second", D, remote(mtime=T + 1), remote(mtime=T + 0.5), COPY, COPY),
    CopyRow("default: same second (a copy is written after its source)", D,
            remote(mtime=T + 0.1), remote(mtime=T + 0.9), SKIP, SKIP),
    CopyRow("default: older source", D, remote(mtime=T - 1), remote(mtime=T), SKIP, SKIP),
    CopyRow("default: a time missing needs a HEAD", D,
            remote(mtime=None), remote(), Check.NEWER, COPY),
]
# fmt: on


@pytest.mark.parametrize("row", DECIDE_COPY, ids=[r.why for r in DECIDE_COPY])
def test_decide_copy(row: CopyRow) -> None:
    assert decide_copy(row.mode, row.src, row.dst) == row.expect
    assert decide_copy(row.mode, row.src, row.dst, final=True) == row.final


# -- resolve: the HEAD (and the local hash) behind a Check --------------------------


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    e = Engine(synxfer.TransferConfig(max_threads=2, part_size=4, resume=False))
    try:
        yield e
    finally:
        e.close()


@dataclass(frozen=True)
class ResolveRow:
    why: str
    check: Check
    upload: bool
    local: bytes  # the local file's content
    remote: bytes  # the object's content
    local_ns: int
    stored_ns: int | None  # the object's stored mtime
    parts: int  # 0: put in one request; N: N-part multipart upload
    expect: bool  # True = copy


# fmt: off
RESOLVE = [
    ResolveRow("HEAD shows another size", Check.NEWER, True,
               b"abc", b"abcd", T * NS, None, 0, True),
    ResolveRow("content: same bytes, plain MD5", Check.CONTENT, True,
               b"0123456789", b"0123456789", T * NS, None, 0, False),
    ResolveRow("content: other bytes, same size", Check.CONTENT, False,
               b"0123456789", b"0123456780", T * NS, None, 0, True),
    ResolveRow("content: same bytes, 3-part ETag", Check.CONTENT, True,
               b"0123456789", b"0123456789", T * NS, None, 3, False),
    ResolveRow("content: other bytes, 3-part ETag", Check.CONTENT, True,
               b"0123456789", b"x123456789", T * NS, None, 3, True),
    ResolveRow("exact: same stored mtime", Check.EXACT, True, b"a", b"b", T * NS, T * NS, 0, False),
    ResolveRow("exact: stored mtime differs", Check.EXACT, False,
               b"a", b"a", T * NS, (T - 5) * NS, 0, True),
    ResolveRow("newer (upload): local newer", Check.NEWER, True,
               b"a", b"a", (T + 1) * NS, T * NS, 0, True),
    ResolveRow("newer (upload): local older", Check.NEWER, True,
               b"a", b"a", (T - 1) * NS, T * NS, 0, False),
    ResolveRow("newer (download): object newer", Check.NEWER, False,
               b"a", b"a", T * NS, (T + 1) * NS, 0, True),
    ResolveRow("newer (download): object older", Check.NEWER, False,
               b"a", b"a", T * NS, (T - 1) * NS, 0, False),
    ResolveRow("newer (download): within 1 us", Check.NEWER, False,
               b"a", b"a", T * NS, T * NS + 900, 0, False),
]
# fmt: on


@pytest.mark.parametrize("row", RESOLVE, ids=[r.why for r in RESOLVE])
async def test_resolve(row: ResolveRow, engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "local"
    path.write_bytes(row.local)
    os.utime(path, ns=(row.local_ns, row.local_ns))
    (tmp_path / "bucket").mkdir()
    metadata = {} if row.stored_ns is None else {"mtime": format_mtime(row.stored_ns)}
    async with FileBackend(str(tmp_path / "bucket")) as backend:
        if row.parts:
            upload = await backend.create_multipart("k", WriteOptions(metadata))
            step = -(-len(row.remote) // row.parts)
            done = [
                await backend.upload_part(upload, n + 1, row.remote[n * step : (n + 1) * step])
                for n in range(row.parts)
            ]
            await backend.complete_multipart(upload, done)
        else:
            await backend.put("k", row.remote, WriteOptions(metadata))
        entry = LocalEntry("local", path, len(row.local), row.local_ns)
        assert await resolve(engine, row.check, backend, "k", entry, row.upload) is row.expect


def test_md5_file_etag_matches_s3(tmp_path: Path) -> None:
    data = bytes(range(256)) * 5  # 1280 bytes
    path = tmp_path / "f"
    path.write_bytes(data)
    assert md5_file_etag(path, 0, 0) == hashlib.md5(data).hexdigest()
    parts = [data[i : i + 500] for i in range(0, len(data), 500)]
    expected = multipart_etag([hashlib.md5(p).digest() for p in parts])
    assert md5_file_etag(path, 500, 3) == expected
    assert expected.endswith("-3")
