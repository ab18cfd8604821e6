"""The S3 and SCP backends' primitives against moto's real HTTP server.

The server (``tests/_s3server.py``) is moto behind a front that verifies
Content-MD5 and x-amz-checksum-crc32c as S3 does, records requests and
injects faults. Every test gets a fresh bucket, and the suite runs once per
backend class (``s3``: CRC32C part checksums; ``scp``: Content-MD5 only).
Configuration, error mapping and the runs against SeaweedFS are in
``tests/test_s3_backend_setup.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Iterator

import pytest

from synxfer import (
    BucketNotFound,
    CompletedPart,
    MiB,
    NotFound,
    PreconditionFailed,
    TransientError,
    WriteOptions,
)
from synxfer.backend import BackendOptions
from synxfer_s3 import S3Backend
from synxfer_scp import ScpBackend

from ._fanout import CountingLimiter
from ._s3server import (
    BACKEND_IDS,
    BACKENDS,
    Server,
    b64md5,
    body,
    crc32c,
    md5,
    native,
    new_bucket,
    opened,
    serving,
)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with serving() as srv:
        yield srv


@pytest.fixture(params=BACKENDS, ids=BACKEND_IDS)
async def backend(request: pytest.FixtureRequest, server: Server) -> AsyncIterator[S3Backend]:
    async with opened(request.param, server) as b:
        yield b


# -- primitives -------------------------------------------------------------------


async def test_put_stat_read(backend: S3Backend) -> None:
    data = b"hello, world"
    opts = WriteOptions(metadata={"mtime": "1700000000.5"}, content_type="text/plain")
    put = await backend.put("dir/a.txt", data, opts, md5(data))
    assert put.size == len(data)
    assert put.etag == hashlib.md5(data).hexdigest()

    info = await backend.stat("dir/a.txt")
    assert info.key == "dir/a.txt"
    assert info.size == len(data)
    assert info.etag == put.etag  # quotes stripped
    assert info.metadata == {"mtime": "1700000000.5"}
    assert info.content_type == "text/plain"
    assert isinstance(info.mtime, float)
    assert info.mtime > 1.6e9

    got = await backend.read("dir/a.txt")
    assert got.data == data
    assert got.info.size == len(data)
    assert got.info.etag == put.etag
    assert got.info.metadata == {"mtime": "1700000000.5"}


async def test_ranged_reads(backend: S3Backend) -> None:
    data = body(1000)
    await backend.put("r", data, WriteOptions(), md5(data))
    for offset, length in [(0, 1), (0, 1000), (1, 10), (999, 1), (500, None), (990, 100)]:
        got = await backend.read("r", offset, length)
        end = None if length is None else offset + length
        assert got.data == data[offset:end], (offset, length)
        assert got.info.size == 1000  # the whole object, not the range
    # At or past the end: no bytes, but the object's info.
    for offset, length in [(1000, None), (1000, 5), (2000, 5)]:
        got = await backend.read("r", offset, length)
        assert got.data == b""
        assert got.info.size == 1000
    zero = await backend.read("r", 10, 0)
    assert zero.data == b""
    assert zero.info.size == 1000


async def test_server_ignoring_range(backend: S3Backend) -> None:
    data = body(300)
    await backend.put("__norange__", data, WriteOptions(), md5(data))
    got = await backend.read("__norange__", 100, 50)
    assert got.data == data[100:150]
    assert got.info.size == 300
    assert (await backend.read("__norange__", 250)).data == data[250:]


async def test_read_empty_object_sends_no_range(backend: S3Backend, server: Server) -> None:
    await backend.put("empty", b"", WriteOptions(), md5(b""))
    got = await backend.read("empty")
    assert got.data == b""
    assert got.info.size == 0
    gets = [s for s in server.front.for_bucket(backend.bucket) if s.method == "GET"]
    assert gets
    assert "range" not in gets[-1].headers
    # A ranged read of an empty object (S3 answers 416) is still just empty.
    got = await backend.read("empty", 0, 8 * MiB)
    assert got.data == b""
    assert got.info.size == 0


async def test_read_into_receives_into_the_buffer(backend: S3Backend, server: Server) -> None:
    data = body(100_000, seed=11)
    put = await backend.put("ri", data, WriteOptions(metadata={"mtime": "3"}), md5(data))
    buf = bytearray(b"\xee" * 120_000)
    view = memoryview(buf)
    info = await backend.read_into("ri", 0, view[:100_000])
    assert buf[:100_000] == data
    assert buf[100_000:] == b"\xee" * 20_000  # nothing written past the range
    assert (info.size, info.etag, info.metadata) == (100_000, put.etag, {"mtime": "3"})
    info = await backend.read_into("ri", 40_000, view[5:1005], if_match=put.etag)
    assert buf[5:1005] == data[40_000:41_000]
    assert info.size == 100_000
    gets = [s for s in server.front.for_bucket(backend.bucket) if s.method == "GET"]
    assert gets[-1].headers["range"] == "bytes=40000-40999"
    # The object is shorter than the range, or changed: PreconditionFailed.
    with pytest.raises(PreconditionFailed, match="got 1000"):
        await backend.read_into("ri", 99_000, view[:2000])
    with pytest.raises(PreconditionFailed, match="shorter"):
        await backend.read_into("ri", 200_000, view[:10])
    with pytest.raises(PreconditionFailed):
        await backend.read_into("ri", 0, view[:10], if_match="0" * 32)
    with pytest.raises(NotFound):
        await backend.read_into("missing", 0, view[:10])
    # An empty buffer reads an empty object, without a range.
    await backend.put("ri-empty", b"", WriteOptions(), md5(b""))
    info = await backend.read_into("ri-empty", 0, view[:0])
    assert info.size == 0
    assert "range" not in server.front.for_bucket(backend.bucket)[-1].headers
    with pytest.raises(PreconditionFailed, match="larger"):  # not empty after all
        await backend.read_into("ri", 0, view[:0])


async def test_read_into_survives_odd_servers(backend: S3Backend) -> None:
    data = body(300)
    await backend.put("__norange__", data, WriteOptions(), md5(data))
    buf = bytearray(50)
    info = await backend.read_into("__norange__", 100, memoryview(buf))
    assert buf == data[100:150]
    assert info.size == 300
    with pytest.raises(TransientError, match="short read"):  # a body cut short
        await backend.read_into("__short__", 0, memoryview(bytearray(10)))


async def test_if_match(backend: S3Backend) -> None:
    info = await backend.put("k", b"v1", WriteOptions(), md5(b"v1"))
    assert info.etag is not None
    assert (await backend.read("k", if_match=info.etag)).data == b"v1"
    assert (await backend.read("k", 0, 1, if_match=f'"{info.etag}"')).data == b"v"
    await backend.put("k", b"v2", WriteOptions(), md5(b"v2"))
    with pytest.raises(PreconditionFailed) as exc:
        await backend.read("k", 0, 1, if_match=info.etag)
    assert exc.value.status == 412
    assert exc.value.url == backend.url("k")


async def test_missing_key(backend: S3Backend) -> None:
    with pytest.raises(NotFound) as exc:
        await backend.stat("nope")
    assert not isinstance(exc.value, BucketNotFound)
    assert exc.value.status == 404
    assert exc.value.url == backend.url("nope")
    with pytest.raises(NotFound) as exc:
        await backend.read("nope")
    assert not isinstance(exc.value, BucketNotFound)
    assert backend.url("nope") in str(exc.value)


async def test_missing_bucket(server: Server) -> None:
    for cls in (S3Backend, ScpBackend):
        async with cls("no-such-bucket-x", BackendOptions(endpoint_url=server.url)) as b:
            calls = [
                lambda: b.stat("k"),  # HEAD: no error body, resolved with HeadBucket
                lambda: b.read("k"),
                lambda: b.list_page(""),
                lambda: b.put("k", b"x", WriteOptions(), md5(b"x")),
                lambda: b.delete("k"),
                lambda: b.delete_many(["k"]),
            ]
            for call in calls:
                with pytest.raises(BucketNotFound) as exc:
                    await call()
                msg = str(exc.value)
                assert "bucket 'no-such-bucket-x' does not exist" in msg
                assert f"{cls.scheme}://no-such-bucket-x/" in msg
                assert exc.value.status == 404


async def test_list_pagination(backend: S3Backend, server: Server) -> None:
    keys = sorted([f"p/{i:03d}" for i in range(23)] + ["p/sp ace+ü%.txt", "q/other"])
    for k in keys:
        await backend.put(k, k.encode(), WriteOptions(), md5(k.encode()))
    backend.list_page_size = 10
    pages = []
    cursor: str | None = None
    while True:
        page = await backend.list_page("p/", cursor)
        pages.append([i.key for i in page.items])
        if page.cursor is None:
            break
        cursor = page.cursor
    assert [len(p) for p in pages] == [10, 10, 4]
    assert [k for p in pages for k in p] == [k for k in keys if k.startswith("p/")]
    listed = [i async for i in backend.list("")]
    assert [i.key for i in listed] == keys
    first = listed[0]
    assert first.size == len(first.key.encode())
    assert first.etag == hashlib.md5(first.key.encode()).hexdigest()
    assert first.mtime is not None
    # Default page size is S3's maximum.
    backend.list_page_size = 1000
    await backend.list_page("")
    lists = [s for s in server.front.for_bucket(backend.bucket) if "list-type=2" in s.query]
    assert "max-keys=1000" in lists[-1].query


async def test_delete(backend: S3Backend) -> None:
    await backend.put("d", b"x", WriteOptions(), md5(b"x"))
    await backend.delete("d")
    with pytest.raises(NotFound):
        await backend.stat("d")
    await backend.delete("d")  # missing: not an error
    await backend.delete("never-existed")


async def test_delete_many(backend: S3Backend, server: Server) -> None:
    keys = [f"m/{i}" for i in range(7)]
    for k in keys:
        await backend.put(k, b"x", WriteOptions(), md5(b"x"))
    backend.delete_batch_size = 3
    failed = await backend.delete_many([*keys, "m/missing"])
    assert failed == {}
    assert [i async for i in backend.list("m/")] == []
    assert await backend.delete_many([]) == {}
    posts = [s for s in server.front.for_bucket(backend.bucket) if s.query == "delete"]
    assert len(posts) == 3  # 8 keys in batches of 3
    for post in posts:
        # Content-MD5 (verified by the front), valid on every S3-compatible
        # server, and no flexible checksum.
        assert "content-md5" in post.headers
        assert [h for h in post.headers if h.startswith("x-amz-checksum-")] == []


async def test_copy(backend: S3Backend) -> None:
    data = body(3000)
    opts = WriteOptions(metadata={"mtime": "42"}, content_type="application/x-test")
    src = await backend.put("src", data, opts, md5(data))
    info = await backend.copy("src", "dst", WriteOptions())
    assert info.key == "dst"
    assert info.size == 3000
    assert info.etag == src.etag
    assert info.metadata == {"mtime": "42"}
    got = await backend.read("dst")
    assert got.data == data
    assert got.info.metadata == {"mtime": "42"}
    assert got.info.content_type == "application/x-test"
    # Options given: metadata replaced.
    await backend.copy("src", "dst2", WriteOptions(metadata={"mtime": "7"}))
    assert (await backend.stat("dst2")).metadata == {"mtime": "7"}
    with pytest.raises(NotFound):
        await backend.copy("missing", "dst3", WriteOptions())


async def test_copy_large_uses_multipart(backend: S3Backend) -> None:
    data = body(11 * MiB, seed=3)
    await backend.put("big", data, WriteOptions(metadata={"mtime": "9"}), md5(data))
    backend.max_copy_size = 6 * MiB  # stand-in for CopyObject's 5 GiB limit
    backend.copy_part_size = 5 * MiB
    info = await backend.copy("big", "big-copy", WriteOptions())
    assert info.size == len(data)
    assert info.etag is not None
    assert info.etag.endswith("-3")
    got = await backend.read("big-copy")
    assert got.data == data
    assert got.info.metadata == {"mtime": "9"}


@pytest.mark.parametrize("limit", [1, 2])
async def test_copy_in_parts_takes_one_request_slot_per_request(server: Server, limit: int) -> None:
    """``copy`` fans out (one UploadPartCopy per part, several at once), so the
    scheduler holds no slot around it: the backend takes one of
    ``options.requests`` per request, and never more than the limit are in flight."""
    limiter = CountingLimiter(limit)
    bucket = new_bucket(server, "fanout")
    data = body(21 * MiB, seed=5)
    options = BackendOptions(endpoint_url=server.url, requests=limiter)
    async with S3Backend(bucket, options) as b:
        assert b.capabilities.fan_out == frozenset({"copy"})
        await b.put("big", data, WriteOptions(metadata={"mtime": "4"}), md5(data))
        assert limiter.taken == 0, "a put is one request: the scheduler's slot covers it"
        b.max_copy_size = 6 * MiB  # stand-in for CopyObject's 5 GiB limit
        b.copy_part_size = 5 * MiB  # 5 parts, copied up to 8 at once without the limiter
        seen = len(server.front.seen)
        server.front.peak_active = 0
        info = await asyncio.wait_for(b.copy("big", "big-copy", WriteOptions()), 60)
        sent = [s for s in server.front.seen[seen:] if s.path.startswith(f"/{bucket}/")]
        assert info.etag is not None
        assert info.etag.endswith("-5")
        assert (await b.read("big-copy")).data == data
    part_copies = [s for s in sent if s.method == "PUT" and "x-amz-copy-source" in s.headers]
    assert len(part_copies) == 5
    # HEAD the source, GetObjectTagging (UploadPartCopy copies no tags: the
    # source's are set on create, as aws-cli does), create, 5 x UploadPartCopy,
    # complete: a slot for each.
    assert [s.query for s in sent[:2]] == ["", "tagging"]
    assert len(sent) == 9
    assert limiter.taken == len(sent)
    assert limiter.peak == limit, "the part copies did run side by side, up to the limit"
    assert server.front.peak_active <= limit, "never more requests in flight than slots"


async def test_multipart_round_trip(backend: S3Backend, server: Server) -> None:
    p1, p2 = body(5 * MiB, seed=1), body(1234, seed=2)
    up = await backend.create_multipart("mp/obj", WriteOptions(metadata={"mtime": "5"}))
    # Parts may finish in any order; complete sorts them.
    part2 = await backend.upload_part(up, 2, p2, native(backend, p2))
    part1 = await backend.upload_part(up, 1, p1, native(backend, p1))
    assert (part1.number, part1.size) == (1, len(p1))
    assert part1.etag == hashlib.md5(p1).hexdigest()
    info = await backend.complete_multipart(up, [part2, part1])
    assert info.size == len(p1) + len(p2)
    expected_etag = hashlib.md5(bytes.fromhex(part1.etag) + bytes.fromhex(part2.etag)).hexdigest()
    assert info.etag == f"{expected_etag}-2"
    got = await backend.read("mp/obj")
    assert got.data == p1 + p2
    assert got.info.metadata == {"mtime": "5"}
    # Not a checksum of the bytes, so never reported as one.
    assert "crc32c" not in got.info.checksums
    ranged = await backend.read("mp/obj", 5 * MiB - 2, 4)
    assert ranged.data == (p1 + p2)[5 * MiB - 2 : 5 * MiB + 2]
    # A retried complete whose first response was lost: the upload is gone,
    # but the object has the ETag these parts make, so it succeeded.
    server.front.gone_uploads.add(up.upload_id)
    again = await backend.complete_multipart(up, [part1, part2])
    assert (again.key, again.etag, again.size) == ("mp/obj", info.etag, info.size)
    # Bodies went out with the backend's checksum (verified by the front) and
    # unsigned payloads (no SHA-256 of every body). On S3 the upload declared
    # CRC32C and the complete listed each part's; SCP knows only Content-MD5.
    seen = server.front.for_bucket(backend.bucket)
    parts = [s for s in seen if "partNumber=" in s.query]
    create = next(s for s in seen if s.query == "uploads")
    complete = next(s for s in seen if s.method == "POST" and "uploadId=" in s.query)
    assert len(parts) == 2
    for part in parts:
        flexible = [h for h in part.headers if h.startswith("x-amz-checksum-")]
        if backend.md5_only:
            assert "content-md5" in part.headers
            assert flexible == []
        else:
            assert flexible == ["x-amz-checksum-crc32c"]
    if not backend.md5_only:
        # The front echoes the CRC32C it verified, as S3 does: from the first
        # answer on, bodies to this endpoint carry no Content-MD5.
        assert "content-md5" not in parts[-1].headers
        assert part.headers.get("x-amz-content-sha256") == "UNSIGNED-PAYLOAD"
    if backend.md5_only:
        assert "x-amz-checksum-algorithm" not in create.headers
        assert b"Checksum" not in complete.body
    else:
        assert create.headers["x-amz-checksum-algorithm"] == "CRC32C"
        for part_data in (p1, p2):
            tag = f"<ChecksumCRC32C>{crc32c(part_data).value}</ChecksumCRC32C>"
            assert tag.encode() in complete.body


async def test_resumed_upload_completes_with_listed_part_checksums(
    backend: S3Backend, server: Server
) -> None:
    """Another backend (a later run) completes an upload from ListParts alone:
    S3 reports each part's CRC32C there (the test server does as S3 does)."""
    p1, p2 = body(5 * MiB, seed=7), body(99, seed=8)
    up = await backend.create_multipart("mp/resumed", WriteOptions())
    await backend.upload_part(up, 1, p1, native(backend, p1))
    await backend.upload_part(up, 2, p2, native(backend, p2))
    cls = type(backend)
    async with cls(backend.bucket, BackendOptions(endpoint_url=server.url)) as later:
        parts = await later.list_parts(up)
        assert [(p.number, p.size) for p in parts] == [(1, len(p1)), (2, len(p2))]
        info = await later.complete_multipart(up, parts)
    assert info.size == len(p1) + len(p2)
    assert (await backend.read("mp/resumed")).data == p1 + p2


async def test_parts_without_a_listed_checksum_complete_with_the_kept_one(
    backend: S3Backend, server: Server
) -> None:
    """A server whose ListParts reports no part checksums (SeaweedFS, stock
    moto): a later process lists every part, those an earlier one sent
    without a checksum, and completes the upload with the CRC32C the caller
    kept for them (the resume journal's)."""
    p1, p2 = body(5 * MiB, seed=3), body(10, seed=4)
    up = await backend.create_multipart("mp/plain", WriteOptions())
    await backend.upload_part(up, 1, p1, native(backend, p1))
    server.front.plain_list_parts = True
    try:
        async with type(backend)(backend.bucket, BackendOptions(endpoint_url=server.url)) as later:
            listed = await later.list_parts(up)
            assert [(p.number, p.checksum) for p in listed] == [(1, None)]
            kept = None if backend.md5_only else crc32c(p1).value
            part1 = CompletedPart(1, listed[0].etag, listed[0].size, kept)
            part2 = await later.upload_part(up, 2, p2, native(backend, p2))
            again = [(p.number, p.checksum) for p in await later.list_parts(up)]
            assert again == [(1, None), (2, part2.checksum)]
            await later.complete_multipart(up, [part1, part2])
    finally:
        server.front.plain_list_parts = False
    assert (await backend.read("mp/plain")).data == p1 + p2


async def test_multipart_complete_of_unknown_upload(backend: S3Backend, server: Server) -> None:
    up = await backend.create_multipart("mp/gone", WriteOptions())
    part = await backend.upload_part(up, 1, b"abc", md5(b"abc"))
    server.front.gone_uploads.add(up.upload_id)
    with pytest.raises(NotFound, match="NoSuchUpload"):  # and no object at the key
        await backend.complete_multipart(up, [part])
    # An object is there, but not the one these parts make.
    await backend.put("mp/gone", b"other", WriteOptions(), md5(b"other"))
    with pytest.raises(NotFound, match="NoSuchUpload"):
        await backend.complete_multipart(up, [part])


async def test_multipart_abort_leaves_nothing(backend: S3Backend, server: Server) -> None:
    up = await backend.create_multipart("mp/aborted", WriteOptions())
    await backend.upload_part(up, 1, body(5 * MiB), md5(body(5 * MiB)))
    await backend.abort_multipart(up)
    with pytest.raises(NotFound):
        await backend.stat("mp/aborted")
    uploads = server.admin.list_multipart_uploads(Bucket=backend.bucket)
    assert uploads.get("Uploads", []) == []
    await backend.abort_multipart(up)  # NoSuchUpload: already gone, fine


async def test_wrong_crc32c_is_rejected(backend: S3Backend) -> None:
    data = b"the real bytes"
    wrong = crc32c(b"other bytes")
    with pytest.raises(TransientError, match="BadDigest") as exc:  # corrupted in transit
        await backend.put("bad-crc", data, WriteOptions(), wrong)
    assert exc.value.status == 400
    with pytest.raises(NotFound):
        await backend.stat("bad-crc")
    up = await backend.create_multipart("bad-crc-mp", WriteOptions())
    with pytest.raises(TransientError, match="BadDigest"):
        await backend.upload_part(up, 1, data, wrong)
    await backend.abort_multipart(up)


async def test_wrong_content_md5_is_rejected(backend: S3Backend) -> None:
    data = b"the real bytes"
    wrong = md5(b"other bytes")
    with pytest.raises(TransientError) as exc:  # BadDigest: corrupted in transit
        await backend.put("bad", data, WriteOptions(), wrong)
    assert exc.value.status == 400
    assert "BadDigest" in str(exc.value)
    assert exc.value.url == backend.url("bad")
    with pytest.raises(NotFound):
        await backend.stat("bad")
    await backend.put("bad", b"old", WriteOptions(), md5(b"old"))
    with pytest.raises(TransientError):
        await backend.put("bad", data, WriteOptions(), wrong)
    assert (await backend.read("bad")).data == b"old"
    up = await backend.create_multipart("bad-mp", WriteOptions())
    with pytest.raises(TransientError):
        await backend.upload_part(up, 1, data, wrong)
    await backend.abort_multipart(up)


async def test_put_checksum_header(backend: S3Backend, server: Server) -> None:
    await backend.put("h", b"abc", WriteOptions(), md5(b"abc"))
    # No checksum given: Content-MD5 all the same (every S3 server verifies it).
    await backend.put("h2", b"abc", WriteOptions())
    await backend.put("h3", b"abc", WriteOptions(), crc32c(b"abc"))
    # The front echoed the CRC32C it verified: from now on, CRC32C alone.
    await backend.put("h3", b"abc", WriteOptions(), crc32c(b"abc"))
    puts = [s for s in server.front.for_bucket(backend.bucket) if s.method == "PUT"]
    del puts[-2]
    assert puts[-3].headers["content-md5"] == b64md5(b"abc")
    assert puts[-2].headers["content-md5"] == b64md5(b"abc")
    for seen in puts[-3:-1]:
        assert not [h for h in seen.headers if h.startswith("x-amz-checksum-")]
    assert puts[-1].headers["x-amz-checksum-crc32c"] == crc32c(b"abc").value
    assert "content-md5" not in puts[-1].headers
    for seen in puts[-3:]:
        assert seen.headers.get("x-amz-content-sha256") == "UNSIGNED-PAYLOAD"
    # Reads and HEADs ask for the object's checksums.
    await backend.stat("h")
    await backend.read("h")
    for seen in server.front.for_bucket(backend.bucket)[-2:]:
        assert seen.headers["x-amz-checksum-mode"] == "ENABLED"


async def test_transient_server_errors(backend: S3Backend) -> None:
    with pytest.raises(TransientError) as exc:
        await backend.read("__slowdown__")
    assert exc.value.status == 503
    assert "SlowDown" in str(exc.value)
    with pytest.raises(TransientError, match="short read: got 5 of 10 bytes"):
        await backend.read("__short__", 0, 10)


async def test_part_checksum_is_verified_for_parts(backend: S3Backend) -> None:
    up = await backend.create_multipart("v", WriteOptions())
    data = body(5 * MiB, seed=9)
    part = await backend.upload_part(up, 1, data, md5(data))
    info = await backend.complete_multipart(up, [part])
    assert info.size == len(data)
    assert (await backend.read("v", 5 * MiB - 3)).data == data[-3:]


async def test_unopened_backend_says_so(server: Server) -> None:
    b = S3Backend("b", BackendOptions(endpoint_url=server.url))
    with pytest.raises(RuntimeError, match="not open"):
        await b.stat("k")
