"""The GCS backend beyond the conformance kit: GCS specifics, failures, resume, the engine.

Servers: ``gcp-storage-emulator`` in a subprocess on 127.0.0.1
(:class:`~synxfer_servers.gcs.GcsEmulator`), mostly behind
:class:`~synxfer_servers.gcs.GcsFront`, which makes it act like GCS where it
does not (preconditions, media headers, compose limits, rewrite tokens,
pages, 404 bodies), logs requests and injects faults. Where a test needs
something the bare emulator lacks, it says so.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import google_crc32c
import httpx
import pytest
from google.auth import exceptions as gauth

import synxfer
from synxfer import (
    BackendError,
    BucketNotFound,
    CompletedPart,
    ConfigError,
    IntegrityError,
    KiB,
    MiB,
    MultipartUpload,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    TransientError,
    WriteOptions,
)
from synxfer.backend import BackendOptions, Checksum
from synxfer_gcs import COMPOSITE_PREFIX, GcsBackend, resolve_endpoint
from synxfer_gcs import _crc32c as crc32c
from synxfer_gcs._errors import classify, error_for_status, map_error
from synxfer_servers.gcs import Fault, GcsEmulator, GcsFront, create_bucket, wipe

from ._fanout import CountingLimiter
from .conftest import tree


def _crc(data: bytes) -> str:
    return base64.b64encode(google_crc32c.value(data).to_bytes(4, "big")).decode()


def _ck(data: bytes) -> Checksum:
    return Checksum("crc32c", _crc(data))


# -- servers and helpers --------------------------------------------------------


@pytest.fixture(scope="module")
def emulator() -> Iterator[GcsEmulator]:
    with GcsEmulator() as server:
        yield server


@pytest.fixture(scope="module")
def front(emulator: GcsEmulator) -> Iterator[GcsFront]:
    with GcsFront(emulator.endpoint_url, rewrite_steps=3) as server:
        yield server


@pytest.fixture(autouse=True)
def _lean_emulator(emulator: GcsEmulator) -> Iterator[None]:
    """Objects wiped after each test: the emulator re-serializes all of them on every write."""
    yield
    wipe(emulator.endpoint_url)


@pytest.fixture
def gcs(front: GcsFront) -> Iterator[GcsFront]:
    """The front, with an empty request log and no faults left over."""
    front.clear()
    front.require_token = None
    yield front
    front.clear()
    front.require_token = None


def _bucket(endpoint: str) -> str:
    name = f"t-{uuid.uuid4().hex[:16]}"
    create_bucket(endpoint, name)
    return name


@asynccontextmanager
async def _backend(
    endpoint: str, bucket: str | None = None, **extra: str
) -> AsyncIterator[GcsBackend]:
    options = BackendOptions(endpoint_url=endpoint, max_connections=4, extra=extra)
    async with GcsBackend(bucket or _bucket(endpoint), options) as backend:
        yield backend


async def _raw_names(endpoint: str, bucket: str, prefix: str) -> list[str]:
    """Object names under ``prefix``, hidden ones included (a plain JSON API listing)."""
    async with httpx.AsyncClient() as client:
        r = await client.get(f"{endpoint}/storage/v1/b/{bucket}/o", params={"prefix": prefix})
    r.raise_for_status()
    return [item["name"] for item in r.json().get("items") or []]


def _payload(size: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(size)


# -- units: CRC32C, endpoints, errors --------------------------------------------


@pytest.mark.parametrize("fast", [True, False], ids=["fastcrc", "google-crc32c"])
def test_crc32c_extend_over_any_buffer(monkeypatch: pytest.MonkeyPatch, fast: bool) -> None:
    """fastcrc where installed, google-crc32c otherwise (the SDK's
    ``crc32c``, in 1 MiB copies for buffers that are not bytes): the same
    values, continued in pieces, over bytes, bytearrays and memoryview slices."""
    from synxfer.backend import _crc32c as sdk

    if not fast:
        monkeypatch.setattr(sdk, "_fastcrc32", lambda: None)
    elif sdk._fastcrc32() is None:
        pytest.skip("fastcrc is not installed")
    data = random.Random(7).randbytes(3 * 1024 * 1024 + 5)
    expected = google_crc32c.value(data)
    for buf in (data, bytearray(data), memoryview(bytearray(data))):
        assert sdk.crc32c(buf) == expected
        view = memoryview(buf)
        assert sdk.crc32c(view[1000:], sdk.crc32c(view[:1000])) == expected
    assert sdk.crc32c(b"") == 0


def test_crc32c_combine_matches_hashing_the_concatenation() -> None:
    rng = random.Random(7)
    for _ in range(200):
        parts = [rng.randbytes(rng.randint(0, 3000)) for _ in range(rng.randint(1, 8))]
        expected = google_crc32c.value(b"".join(parts))
        assert crc32c.combine_all((google_crc32c.value(p), len(p)) for p in parts) == expected
    assert crc32c.decode(crc32c.encode(0xDEADBEEF)) == 0xDEADBEEF
    for junk in ("", "abc", "!!!!", base64.b64encode(b"12345").decode()):
        with pytest.raises(ValueError, match="CRC32C"):
            crc32c.decode(junk)


def test_resolve_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    assert resolve_endpoint(BackendOptions()) == ("https://storage.googleapis.com", False)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "localhost:9023")
    assert resolve_endpoint(BackendOptions()) == ("http://localhost:9023", True)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:1/storage/v1/")
    assert resolve_endpoint(BackendOptions()) == ("http://127.0.0.1:1", True)
    # An explicit endpoint wins; anonymous only on loopback, unless told.
    explicit = BackendOptions(endpoint_url="https://gcs.example.com:8443")
    assert resolve_endpoint(explicit) == ("https://gcs.example.com:8443", False)
    assert resolve_endpoint(BackendOptions(endpoint_url="http://[::1]:9"))[1] is True
    told = BackendOptions(endpoint_url="http://127.0.0.1:9", extra={"anonymous": "false"})
    assert resolve_endpoint(told) == ("http://127.0.0.1:9", False)
    for bad in ("ftp://x", "127.0.0.1:9023", "http://"):
        with pytest.raises(ConfigError, match="endpoint"):
            resolve_endpoint(BackendOptions(endpoint_url=bad))
    with pytest.raises(ConfigError, match="anonymous"):
        resolve_endpoint(BackendOptions(extra={"anonymous": "maybe"}))


def test_constructor_validates() -> None:
    local = "http://127.0.0.1:1"
    with pytest.raises(ConfigError, match="bucket"):
        GcsBackend("a/b", BackendOptions(endpoint_url=local))
    # Bucket "" is the account-level backend of list_buckets (test_buckets_and_access).
    assert GcsBackend("", BackendOptions(endpoint_url=local)).url() == "gs://"
    with pytest.raises(ConfigError, match="composite_prefix"):
        GcsBackend("b", BackendOptions(endpoint_url=local, extra={"composite_prefix": "x"}))
    with pytest.raises(ConfigError, match="list_page_size"):
        GcsBackend("b", BackendOptions(endpoint_url=local, extra={"list_page_size": "5000"}))
    assert GcsBackend.capabilities.part_checksum == "crc32c"
    assert GcsBackend.capabilities.max_parts == 1024
    assert synxfer.backend.resolve("gs") is GcsBackend  # the entry point


def test_error_classification() -> None:
    url, bucket = "gs://b/k", "b"

    def err(status: int, message: str = "", reason: str = "") -> Exception:
        body = json.dumps(
            {"error": {"code": status, "message": message, "errors": [{"reason": reason}]}}
        ).encode()
        return error_for_status(status, body, url=url, bucket=bucket, what="read")

    for status in (408, 429, 500, 502, 503, 504):
        assert isinstance(err(status), TransientError)
    crc = 'Provided CRC32C "AAAAAA==" doesn\'t match calculated CRC32C "BBBBBB==".'
    assert isinstance(err(400, crc, "invalid"), TransientError)
    assert type(err(400, "Invalid argument.", "invalid")) is BackendError
    denied = err(403, "x@y.iam.gserviceaccount.com does not have storage.objects.get access")
    assert isinstance(denied, PermissionDenied)
    assert url in str(denied)
    assert "storage.objects.get" in str(denied)
    assert isinstance(err(401, "Invalid Credentials"), PermissionDenied)
    assert "GOOGLE_APPLICATION_CREDENTIALS" in str(err(401))
    assert type(err(404, "No such object: b/k")) is NotFound
    missing = err(404, "The specified bucket does not exist.")
    assert isinstance(missing, BucketNotFound)
    assert "'b'" in str(missing)
    assert isinstance(err(412, "Precondition Failed"), PreconditionFailed)
    assert classify(400, "rateLimitExceeded") is TransientError
    assert isinstance(err(403, "Rate limit exceeded", "userRateLimitExceeded"), TransientError)

    request = httpx.Request("GET", "http://x")
    for exc in (
        httpx.ConnectError("refused", request=request),
        httpx.ReadTimeout("slow", request=request),
        httpx.RemoteProtocolError("closed", request=request),
        ConnectionResetError(104, "reset"),
        gauth.TransportError("metadata server unreachable"),
    ):
        assert isinstance(map_error(exc, url=url), TransientError), exc
    no_creds = map_error(gauth.DefaultCredentialsError("none found"), url=url)
    assert isinstance(no_creds, PermissionDenied)
    assert "gcloud auth application-default login" in str(no_creds)
    refused = gauth.RefreshError("invalid_grant: Token has been revoked")
    assert isinstance(map_error(refused, url=url), PermissionDenied)
    retryable = gauth.RefreshError("503 from the token endpoint", retryable=True)
    assert isinstance(map_error(retryable, url=url), TransientError)


# -- reads -----------------------------------------------------------------------


async def test_read_is_one_request_with_gcs_headers(gcs: GcsFront) -> None:
    async with _backend(gcs.endpoint_url) as b:
        data = _payload(5000)
        meta = {"mtime": "1700000000.5", "synxfer-part-size": "0"}
        put = await b.put("r/obj", data, WriteOptions(meta, "text/x-test"), _ck(data))
        assert put.etag
        assert put.etag.isdigit(), "the etag is the generation"
        assert put.checksums == {
            "crc32c": _crc(data),
            "md5": base64.b64encode(__import__("hashlib").md5(data).digest()).decode(),
        }
        gcs.clear()
        result = await b.read("r/obj", 100, 50)
        assert result.data == data[100:150]
        info = result.info
        assert (info.size, info.etag, info.content_type) == (5000, put.etag, "text/x-test")
        assert dict(info.metadata) == meta
        assert dict(info.checksums) == dict(put.checksums), "x-goog-hash: the whole object's"
        assert len(gcs.requests) == 1, "GCS's media headers make the resource GET unnecessary"
        [req] = gcs.requests
        assert req.headers["range"] == "bytes=100-149"
        assert req.query["alt"] == ["media"]


async def test_read_into_takes_what_the_server_sends(gcs: GcsFront) -> None:
    """read_into receives the body into the caller's buffer: a range, a whole
    object, a server that ignores Range, a body cut short, and objects that
    do not fit the buffer."""
    async with _backend(gcs.endpoint_url) as b:
        data = _payload(300_000, seed=5)  # several chunks of the response body
        put = await b.put("into/obj", data, WriteOptions(), _ck(data))
        buf = bytearray(len(data) + 7)
        view = memoryview(buf)
        info = await b.read_into("into/obj", 1000, view[:200_000], if_match=put.etag)
        assert buf[:200_000] == data[1000:201_000]
        assert buf[200_000:] == bytes(len(buf) - 200_000), "nothing written past the view"
        assert (info.size, info.etag) == (len(data), put.etag)
        info = await b.read_into("into/obj", 0, view[: len(data)], whole=True)
        assert buf[: len(data)] == data
        assert "range" not in gcs.requests[-1].headers, "whole: one unranged GET"
        assert info.checksums["crc32c"] == _crc(data)

        buf[:] = bytes(len(buf))
        gcs.faults.append(Fault("GET", r"/o/into%2Fobj", "ignore-range"))
        await b.read_into("into/obj", 99_999, view[:100_000])
        assert gcs.faults[-1].hits == 1, "the server ignored Range and sent everything"
        assert buf[:100_000] == data[99_999:199_999]
        assert buf[100_000:] == bytes(len(buf) - 100_000)

        gcs.faults.append(Fault("GET", r"/o/into%2Fobj", "cut-body"))
        with pytest.raises(TransientError):
            await b.read_into("into/obj", 0, view[:250_000])
        assert gcs.faults[-1].hits == 1

        with pytest.raises(PreconditionFailed, match="larger"):
            await b.read_into("into/obj", 0, view[: len(data) - 1], whole=True)
        with pytest.raises(PreconditionFailed, match="has 300000 bytes"):
            await b.read_into("into/obj", 0, view[: len(data) + 1], whole=True)
        with pytest.raises(PreconditionFailed, match="has 300000 bytes"):
            await b.read_into("into/obj", 250_000, view[:50_001])


async def test_read_into_holds_no_copy_of_the_object(emulator: GcsEmulator) -> None:
    """The body goes from the socket into the buffer: no chunks, no joined copy
    of the object (the default read_into held both, 2x its size). The bare
    emulator runs in a subprocess, so only the client's memory is traced."""
    async with _backend(emulator.endpoint_url) as b:
        data = _payload(4 * MiB, seed=6)
        await b.put("into/big", data, WriteOptions(), _ck(data))
        buf = bytearray(len(data))
        tracemalloc.start()
        try:
            await b.read_into("into/big", 0, memoryview(buf), whole=True)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert buf == data
        assert peak < 1 * MiB, f"{peak} bytes allocated at most at once"


async def test_read_on_bare_emulator_asks_for_the_resource(emulator: GcsEmulator) -> None:
    """The emulator sends no x-goog-generation and no x-goog-hash on ranged reads:
    the info (generation, CRC32C, exact-case metadata) comes from the resource."""
    async with _backend(emulator.endpoint_url) as b:
        data = _payload(3000, seed=1)
        put = await b.put("e/obj", data, WriteOptions({"Mixed-Case": "v"}), _ck(data))
        result = await b.read("e/obj", 10, 20)
        assert result.data == data[10:30]
        assert result.info.etag == put.etag
        assert result.info.checksums["crc32c"] == _crc(data)
        assert dict(result.info.metadata) == {"Mixed-Case": "v"}
        await b.put("e/obj", b"new", WriteOptions(), _ck(b"new"))
        with pytest.raises(PreconditionFailed):  # the emulator ignores ifGenerationMatch
            await b.read("e/obj", 0, 2, if_match=put.etag)


async def test_empty_object_is_never_ranged(gcs: GcsFront) -> None:
    async with _backend(gcs.endpoint_url) as b:
        await b.put("empty", b"", WriteOptions(), _ck(b""))
        gcs.clear()
        assert (await b.read("empty")).data == b""
        [req] = gcs.requests
        assert "range" not in req.headers
        gcs.clear()
        result = await b.read("empty", 0, 1024)  # GCS answers 416; the backend stats
        assert (result.data, result.info.size) == (b"", 0)
        assert [r.method for r in gcs.requests] == ["GET", "GET"]


async def test_if_match_is_if_generation_match(gcs: GcsFront) -> None:
    async with _backend(gcs.endpoint_url) as b:
        put = await b.put("c", b"one", WriteOptions(), _ck(b"one"))
        assert put.etag is not None
        gcs.clear()
        assert (await b.read("c", if_match=put.etag)).data == b"one"
        assert gcs.requests[0].query["ifGenerationMatch"] == [put.etag]
        await b.put("c", b"two", WriteOptions(), _ck(b"two"))
        with pytest.raises(PreconditionFailed):
            await b.read("c", 0, 2, if_match=put.etag)
        with pytest.raises(PreconditionFailed, match="not a GCS generation"):
            await b.read("c", if_match='"d41d8cd98f00b204e9800998ecf8427e"')


async def test_listing_carries_metadata_and_checksums(gcs: GcsFront) -> None:
    async with _backend(gcs.endpoint_url) as b:
        data = b"listed"
        await b.put("l/a", data, WriteOptions({"mtime": "1.25"}, "text/plain"), _ck(data))
        [item] = (await b.list_page("l/")).items
        assert (item.key, item.size, dict(item.metadata)) == ("l/a", 6, {"mtime": "1.25"})
        assert item.checksums["crc32c"] == _crc(data)
        assert item.content_type == "text/plain"
        assert item.etag == (await b.stat("l/a")).etag


# -- composite uploads -------------------------------------------------------------


async def _upload_parts(
    b: GcsBackend, key: str, sizes: list[int], options: WriteOptions | None = None
) -> tuple[bytes, MultipartUpload, list[CompletedPart]]:
    upload = await b.create_multipart(key, options or WriteOptions())
    chunks = [_payload(size, seed=100 + i) for i, size in enumerate(sizes)]
    parts = list(
        await asyncio.gather(
            *(b.upload_part(upload, n, c, _ck(c)) for n, c in enumerate(chunks, start=1))
        )
    )
    return b"".join(chunks), upload, parts


async def test_composite_upload_in_two_levels(gcs: GcsFront) -> None:
    """34 parts: 2 composes (32 + 2 components), then one of the 2 (GcsFront refuses > 32)."""
    async with _backend(gcs.endpoint_url) as b:
        options = WriteOptions({"mtime": "5.5"}, "application/x-big")
        data, upload, parts = await _upload_parts(b, "big/obj", [1024] * 33 + [77], options)
        assert all(p.etag.count(":") == 1 for p in parts), "<generation>:<crc32c>"
        gcs.clear()
        info = await b.complete_multipart(upload, parts[::-1])
        composes = gcs.matching("POST", r"/compose(\?|$)")
        assert len(composes) == 3
        assert (await b.read("big/obj")).data == data
        stat = await b.stat("big/obj")
        assert (stat.etag, stat.size) == (info.etag, len(data))
        assert (dict(stat.metadata), stat.content_type) == ({"mtime": "5.5"}, "application/x-big")
        assert stat.checksums == {"crc32c": _crc(data)}, "composite objects have no MD5"
        assert await _raw_names(gcs.endpoint_url, b.bucket, COMPOSITE_PREFIX) == []
        with pytest.raises(NotFound):
            await b.list_parts(upload)


@pytest.mark.parametrize("limit", [1, 3])
async def test_fan_out_calls_take_one_request_slot_per_request(gcs: GcsFront, limit: int) -> None:
    """complete_multipart, abort_multipart and delete_many send several requests at
    once, so the scheduler holds no slot around them: every request they send takes
    one of ``options.requests``, never more than the limit at once."""
    limiter = CountingLimiter(limit)
    options = BackendOptions(endpoint_url=gcs.endpoint_url, max_connections=4, requests=limiter)
    async with GcsBackend(_bucket(gcs.endpoint_url), options) as b:
        assert b.capabilities.fan_out == {"complete_multipart", "abort_multipart", "delete_many"}
        data, upload, parts = await _upload_parts(b, "fan/obj", [1024] * 33 + [77])
        assert limiter.taken == 0, "one request per call: the scheduler's slot covers it"

        gcs.clear()
        await asyncio.wait_for(b.complete_multipart(upload, parts), 60)
        # 3 composes, 1 listing of the upload's prefix, 37 deletes (34 components,
        # the manifest, 2 intermediate composites).
        assert len(gcs.matching("POST", r"/compose(\?|$)")) == 3
        assert len(gcs.matching("DELETE", "")) == 37
        assert limiter.taken == len(gcs.requests) == 41
        assert limiter.peak == limit, "the deletes ran side by side, up to the limit"
        assert (await b.read("fan/obj")).data == data

        # Another instance completes from the manifest: reading it takes a slot too.
        _, upload, parts = await _upload_parts(b, "fan/two", [100, 100])
        async with GcsBackend(b.bucket, options) as other:
            gcs.clear()
            limiter.taken = 0
            await other.complete_multipart(upload, parts)
            assert limiter.taken == len(gcs.requests)

        _, upload, _ = await _upload_parts(b, "fan/gone", [100, 100, 100])
        gcs.clear()
        limiter.taken = 0
        await b.abort_multipart(upload)
        assert limiter.taken == len(gcs.requests) == 5  # a listing, 4 deletes

        gcs.clear()
        limiter.taken = 0
        assert await b.delete_many(["fan/obj", "fan/two", "fan/none"]) == {}
        assert limiter.taken == len(gcs.requests) == 3
    assert limiter.held == 0


async def test_composite_permanent_failure_cleans_up(gcs: GcsFront) -> None:
    async with _backend(gcs.endpoint_url) as b:
        _, upload, parts = await _upload_parts(b, "fail/obj", [2048, 2048, 10])
        gcs.faults.append(Fault("POST", r"/compose", 400))
        with pytest.raises(BackendError) as info:
            await b.complete_multipart(upload, parts)
        assert not isinstance(info.value, TransientError)
        assert await _raw_names(gcs.endpoint_url, b.bucket, COMPOSITE_PREFIX) == []
        with pytest.raises(NotFound):
            await b.stat("fail/obj")
        with pytest.raises(BackendError):
            await b.upload_part(upload, 1, b"late", _ck(b"late"))


async def test_composite_transient_failure_keeps_parts_for_the_retry(gcs: GcsFront) -> None:
    async with _backend(gcs.endpoint_url) as b:
        data, upload, parts = await _upload_parts(b, "retry/obj", [1024] * 34)
        gcs.faults.append(Fault("POST", r"/compose", 503, skip=1))  # the second level-1 compose
        with pytest.raises(TransientError):
            await b.complete_multipart(upload, parts)
        hidden = await _raw_names(gcs.endpoint_url, b.bucket, COMPOSITE_PREFIX)
        assert len(hidden) == 35, "34 components and the manifest; no intermediates"
        assert len(await b.list_parts(upload)) == 34
        await b.complete_multipart(upload, parts)  # what the RetryLayer does next
        assert (await b.read("retry/obj")).data == data
        assert await _raw_names(gcs.endpoint_url, b.bucket, COMPOSITE_PREFIX) == []


async def test_composite_checks_parts(gcs: GcsFront) -> None:
    async with _backend(gcs.endpoint_url) as b:
        # A part sent again replaces the first: its old generation is gone.
        _, upload, parts = await _upload_parts(b, "stale/obj", [100, 100])
        await b.upload_part(upload, 1, b"again", _ck(b"again"))
        with pytest.raises(NotFound):
            await b.complete_multipart(upload, parts)
        assert await _raw_names(gcs.endpoint_url, b.bucket, COMPOSITE_PREFIX) == []

        # A part whose size is misreported: the composed CRC32C cannot match.
        _, upload, parts = await _upload_parts(b, "crc/obj", [100, 100])
        bad = [parts[0], CompletedPart(2, parts[1].etag, parts[1].size + 1)]
        with pytest.raises(IntegrityError, match="does not match its parts"):
            await b.complete_multipart(upload, bad)
        with pytest.raises(NotFound):
            await b.stat("crc/obj")

        upload = await b.create_multipart("junk/obj", WriteOptions())
        with pytest.raises(BackendError, match="not a part"):
            await b.complete_multipart(upload, [CompletedPart(1, '"abc"', 3)])


async def test_another_instance_resumes_an_upload(gcs: GcsFront) -> None:
    """What the engine's resume needs: list_parts and complete from a later run."""
    bucket = _bucket(gcs.endpoint_url)
    options = WriteOptions({"synxfer-part-size": "1024"}, "application/x-resumed")
    chunks = [_payload(1024, seed=i) for i in range(3)]
    async with _backend(gcs.endpoint_url, bucket) as first:
        upload = await first.create_multipart("resumed", options)
        one = await first.upload_part(upload, 1, chunks[0], _ck(chunks[0]))
        three = await first.upload_part(upload, 3, chunks[2], _ck(chunks[2]))
    async with _backend(gcs.endpoint_url, bucket) as second:
        assert await second.list_parts(upload) == [one, three]
        two = await second.upload_part(upload, 2, chunks[1], _ck(chunks[1]))
        await second.complete_multipart(upload, [one, two, three])
        assert (await second.read("resumed")).data == b"".join(chunks)
        stat = await second.stat("resumed")
        assert (dict(stat.metadata), stat.content_type) == (
            {"synxfer-part-size": "1024"},
            "application/x-resumed",
        )
        with pytest.raises(NotFound):
            await second.list_parts(upload)


async def test_components_never_listed(gcs: GcsFront) -> None:
    """Pages full of hidden components are skipped ('-' < '.' < 'a' in key order)."""
    async with _backend(gcs.endpoint_url, list_page_size="2") as b:
        for key in ("-first", "zz"):
            await b.put(key, b"x", WriteOptions(), _ck(b"x"))
        _, upload, _ = await _upload_parts(b, "pending", [10] * 5)
        pages = []
        cursor = None
        while True:
            page = await b.list_page("", cursor)
            pages.append([i.key for i in page.items])
            cursor = page.cursor
            if cursor is None:
                break
        assert [k for p in pages for k in p] == ["-first", "zz"]
        assert all(pages[:-1]), "no empty page before the last"
        assert [i.key async for i in b.list(COMPOSITE_PREFIX)] == []
        with pytest.raises(BackendError, match="reserved"):
            await b.put(f"{COMPOSITE_PREFIX}mine", b"x", WriteOptions(), _ck(b"x"))
        await b.abort_multipart(upload)
        assert await _raw_names(gcs.endpoint_url, b.bucket, COMPOSITE_PREFIX) == []


# -- copies, errors ------------------------------------------------------------------


async def test_copy_follows_rewrite_tokens(gcs: GcsFront) -> None:
    async with _backend(gcs.endpoint_url) as b:
        await b.put("src", b"payload", WriteOptions({"a": "1"}, "text/a"), _ck(b"payload"))
        gcs.clear()
        info = await b.copy("src", "dst", WriteOptions({"b": "2"}, "text/b"))
        calls = gcs.matching("POST", r"/rewriteTo/")
        assert len(calls) == 3, "GcsFront makes each rewrite take three calls"
        assert [c.query.get("rewriteToken") for c in calls] == [
            None,
            ["front-rewrite-1"],
            ["front-rewrite-2"],
        ]
        assert (dict(info.metadata), info.content_type) == ({"b": "2"}, "text/b")
        kept = await b.copy("src", "dst2", WriteOptions())
        assert (dict(kept.metadata), kept.content_type) == ({"a": "1"}, "text/a")
        with pytest.raises(NotFound, match="missing-src"):
            await b.copy("missing-src", "dst3", WriteOptions())


async def test_missing_bucket(gcs: GcsFront, emulator: GcsEmulator) -> None:
    # GcsFront answers GCS's 404 bodies; the bare emulator's 404s are empty,
    # so the backend asks for the bucket once.
    for endpoint in (gcs.endpoint_url, emulator.endpoint_url):
        async with _backend(endpoint, "no-such-bucket-here") as b:
            with pytest.raises(BucketNotFound, match="no-such-bucket-here"):
                await b.stat("k")
            with pytest.raises(BucketNotFound):
                await b.list_page("")
            with pytest.raises(BucketNotFound):
                await b.put("k", b"x", WriteOptions(), _ck(b"x"))
            assert not await b.bucket_exists()


async def test_http_failures_map_to_the_tree(gcs: GcsFront) -> None:
    async with _backend(gcs.endpoint_url) as b:
        await b.put("k", b"x", WriteOptions(), _ck(b"x"))
        for status in (429, 500, 503):
            gcs.faults.append(Fault("GET", r"/o/k", status))
            with pytest.raises(TransientError) as info:
                await b.stat("k")
            assert info.value.status == status
        gcs.faults.append(Fault("GET", r"/o/k", 403))
        with pytest.raises(PermissionDenied, match="gs://"):
            await b.read("k")
        # Twice: the SDK's HttpClient re-sends a GET once when a reused
        # connection closes before any byte of an answer (a stale keep-alive).
        gcs.faults.append(Fault("GET", r"/o/k", "drop-request", times=2))
        with pytest.raises(TransientError, match="network error"):
            await b.read("k")
        gcs.faults.append(Fault("POST", r"/upload/", "drop-response"))
        with pytest.raises(TransientError):
            await b.put("k2", b"y", WriteOptions(), _ck(b"y"))
        with pytest.raises(TransientError, match="checksum"):
            await b.put("k3", b"real", WriteOptions(), _ck(b"other"))
        assert [i.key for i in (await b.list_page("k3")).items] == []


async def test_put_without_checksum_computes_one(gcs: GcsFront) -> None:
    async with _backend(gcs.endpoint_url) as b:
        data = bytearray(b"no checksum given")
        info = await b.put("nock", data, WriteOptions())
        data[:] = bytes(len(data))
        assert info.checksums["crc32c"] == _crc(b"no checksum given")
        assert (await b.read("nock")).data == b"no checksum given"


# -- credentials ---------------------------------------------------------------------


async def test_credentials_file_token_is_fetched_once_and_refreshed_on_401(
    gcs: GcsFront, tmp_path: Path
) -> None:
    """A service-account key file whose token endpoint is GcsFront's: google-auth
    signs a JWT (in a worker thread) and trades it for a token there."""
    rsa = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.rsa")
    serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    creds = tmp_path / "sa.json"
    creds.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "synxfer-tests",
                "private_key_id": "k1",
                "private_key": pem,
                "client_email": "tester@synxfer-tests.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": f"{gcs.endpoint_url}/token",
            }
        )
    )
    bucket = _bucket(gcs.endpoint_url)
    gcs.token = gcs.require_token = "ya29.first-token"
    before = gcs.token_requests
    try:
        async with _backend(
            gcs.endpoint_url, bucket, anonymous="false", credentials_file=str(creds)
        ) as b:
            await asyncio.gather(
                *(b.put(f"k{i}", b"x", WriteOptions(), _ck(b"x")) for i in range(8))
            )
            assert gcs.token_requests - before == 1, "one refresh for concurrent requests"
            assert "ya29" not in repr(b)
            assert gcs.requests[-1].headers["authorization"] == "Bearer ya29.first-token"

            # The server stops accepting the token: one 401 forces a refresh.
            gcs.token = gcs.require_token = "ya29.second-token"
            with pytest.raises(TransientError, match="401") as info:
                await b.stat("k0")
            assert "ya29" not in str(info.value)
            assert (await b.stat("k0")).size == 1
            assert gcs.token_requests - before == 2

            # Media reads (read_into, on the SDK's HttpClient) carry the token
            # and take part in refreshes the same way.
            buf = bytearray(1)
            await b.read_into("k0", 0, memoryview(buf), whole=True)
            assert buf == b"x"
            assert gcs.requests[-1].headers["authorization"] == "Bearer ya29.second-token"
            gcs.token = gcs.require_token = "ya29.third-token"
            with pytest.raises(TransientError, match="401") as info:
                await b.read_into("k0", 0, memoryview(buf), whole=True)
            assert "ya29" not in str(info.value)
            await b.read_into("k0", 0, memoryview(buf), whole=True)
            assert gcs.token_requests - before == 3
            assert gcs.requests[-1].headers["authorization"] == "Bearer ya29.third-token"

            # A freshly refreshed token refused: the credentials are the problem.
            gcs.require_token = "ya29.something-else"
            with pytest.raises(TransientError):
                await b.stat("k0")
            with pytest.raises(PermissionDenied, match="GOOGLE_APPLICATION_CREDENTIALS"):
                await b.stat("k0")
    finally:
        gcs.token = "synxfer-test-token"

    missing = BackendOptions(
        endpoint_url=gcs.endpoint_url,
        extra={"anonymous": "false", "credentials_file": str(tmp_path / "nope.json")},
    )
    with pytest.raises(PermissionDenied, match="credentials"):
        await GcsBackend(bucket, missing).open()


# -- the engine, end to end ------------------------------------------------------------

PART = 256 * KiB


@pytest.mark.parametrize("server", ["front", "emulator"])
async def test_sync_round_trip_through_the_engine(
    server: str,
    gcs: GcsFront,
    emulator: GcsEmulator,
    make_tree: Callable[..., Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """sync_to / sync_from with ``gs://`` URLs (STORAGE_EMULATOR_HOST, anonymous):
    a composite upload of 5 parts, byte-for-byte and mtimes kept, then nothing to do."""
    endpoint = gcs.endpoint_url if server == "front" else emulator.endpoint_url
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint)
    bucket = _bucket(endpoint)
    files = {"big.bin": 4 * PART + 5, "small.txt": 100, "empty": 0, "deep/ünï cödé.bin": 3000}
    src = make_tree(files, seed=3)
    config = synxfer.TransferConfig(
        max_threads=4, part_size=PART, multipart_threshold=PART, state_dir=str(tmp_path / "st")
    )
    url = f"gs://{bucket}/data"
    async with synxfer.Client(config) as client:
        up = await client.sync_to(src, url)
        assert up.ok, up.failures
        assert (up.files_transferred, up.bytes_transferred) == (4, sum(files.values()))
        async with _backend(endpoint, bucket) as b:
            big = await b.stat("data/big.bin")
            assert big.metadata["synxfer-part-size"] == str(PART)
            assert big.checksums["crc32c"] == _crc((src / "big.bin").read_bytes())
            if server == "front":
                assert "md5" not in big.checksums, "composed from parts"
                assert len(gcs.matching("POST", r"/o/data%2Fbig\.bin/compose")) == 1
        assert await _raw_names(endpoint, bucket, COMPOSITE_PREFIX) == []

        dst = tmp_path / "copy"
        down = await client.sync_from(url, dst)
        assert down.ok, down.failures
        assert down.files_transferred == 4
        assert tree(dst) == tree(src)  # same bytes and same mtimes, to the nanosecond

        again_up = await client.sync_to(src, url)
        again_down = await client.sync_from(url, dst)
        assert (again_up.files_transferred, again_up.bytes_transferred) == (0, 0)
        assert (again_down.files_transferred, again_down.bytes_transferred) == (0, 0)
        assert again_up.files_skipped == again_down.files_skipped == 4
    assert not list(dst.rglob("*.synxfer-part"))
