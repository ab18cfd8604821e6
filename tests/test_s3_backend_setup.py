"""The S3 and SCP backends' set-up and edges: configuration, credentials, imports,
the SCP profile, checksum naming, error mapping, the DEBUG log -- on moto
(``tests/_s3server.py``) -- and runs against SeaweedFS with auth on, which
verifies signatures and CRC32C and reports checksums.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    IncompleteReadError,
    NoCredentialsError,
    ReadTimeoutError,
    ResponseStreamingError,
)

from synxfer import (
    BackendError,
    BucketNotFound,
    ConfigError,
    MiB,
    NoCredentials,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    TransientError,
    WriteOptions,
)
from synxfer.backend import BackendOptions
from synxfer_s3 import S3Backend, map_error
from synxfer_s3._classify import classify
from synxfer_s3._wire import header_checksums
from synxfer_scp import DEFAULT_REGION, ScpBackend

from ._s3server import (
    BACKEND_IDS,
    BACKENDS,
    Server,
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
    assert "Client(profile=...)" in msg  # the API's name; the CLI prints --profile
    assert isinstance(exc.value, NoCredentials)  # a set-up error: exit 2


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


@pytest.mark.parametrize(
    ("blocked", "expected"),
    [
        ((), "crc32c fastcrc"),
        (("google_crc32c",), "crc32c fastcrc"),  # fastcrc alone is enough (decision 0020)
        (("fastcrc",), "crc32c google_crc32c"),
        (("fastcrc", "google_crc32c"), "md5 -"),
    ],
    ids=["both", "fastcrc", "google", "neither"],
)
def test_parts_declare_crc32c_with_either_library(blocked: tuple[str, ...], expected: str) -> None:
    """Uploads declare CRC32C when fastcrc or google-crc32c is installed, and
    the backend's own CRC32C (for a part the engine sent none for) comes from
    the first of them; with neither, parts carry MD5. A fresh process each,
    with the libraries blocked."""
    code = f"""
import sys
for m in {blocked!r}:
    sys.modules[m] = None
from synxfer.backend import BackendOptions
from synxfer_s3 import S3Backend
from synxfer_s3._parts import crc32c_b64
b = S3Backend("b", BackendOptions(endpoint_url="http://127.0.0.1:9"))
lib = "-"
if b.capabilities.part_checksum == "crc32c":
    assert crc32c_b64(bytearray(b"123456789")) == "4waSgw==", crc32c_b64(b"123456789")
    assert crc32c_b64(b"") == "AAAAAA=="
    lib = next(m for m in ("fastcrc", "google_crc32c") if sys.modules.get(m) is not None)
print(b.capabilities.part_checksum, lib)
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == expected


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
    assert "Client(endpoint_url=...)" in str(exc.value)
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
        ("Whatever", 509, TransientError),
        ("NotImplemented", 501, BackendError),
        ("Whatever", 505, BackendError),
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
    assert isinstance(err, NoCredentials)  # a PermissionDenied and a ConfigError (exit 2)
    assert "AWS_ACCESS_KEY_ID" in str(err)
    same = PermissionDenied("x")
    assert map_error(same, url="s3://b/", bucket="b") is same


# -- against SeaweedFS, which verifies signatures and CRC32C and reports checksums --------


async def test_seaweed_verifies_and_reports_crc32c(weed_env: Any) -> None:
    prefix = f"cs-{uuid.uuid4().hex[:8]}/"
    options = BackendOptions(endpoint_url=weed_env.endpoint_url)
    async with S3Backend(weed_env.bucket, options) as b:
        data = body(1000, seed=21)
        put = await b.put(prefix + "one", data, WriteOptions(), native(b, data))
        whole = {"crc32c": crc32c(data).value}
        assert put.checksums == whole
        # Reads also report the MD5 the ETag vouches for (a single-part ETag).
        whole["md5"] = base64.b64encode(hashlib.md5(data).digest()).decode()
        assert (await b.stat(prefix + "one")).checksums == whole
        got = await b.read(prefix + "one")
        assert (bytes(got.data), dict(got.info.checksums)) == (data, whole)
        # Like S3, SeaweedFS sends no CRC with a ranged GET, even of the whole
        # object: read_into(whole=True) reads without a range to get it.
        buf = bytearray(len(data))
        ranged = await b.read_into(prefix + "one", 0, memoryview(buf))
        assert "crc32c" not in ranged.checksums
        assert (
            dict((await b.read_into(prefix + "one", 0, memoryview(buf), whole=True)).checksums)
            == whole
        )
        assert buf == data
        with pytest.raises(PreconditionFailed):
            await b.read_into(prefix + "one", 0, memoryview(buf)[:999], whole=True)
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
        assert sorted(info.checksums) == ["crc32c-composite", "md5-composite"]
        assert info.checksums["crc32c-composite"].endswith("-2")
        assert done.checksums == {"crc32c-composite": info.checksums["crc32c-composite"]}
        # SeaweedFS's multipart ETag is S3's: the MD5 of the parts' MD5s.
        md5s = hashlib.md5(hashlib.md5(p1).digest() + hashlib.md5(p2).digest()).digest()
        assert info.checksums["md5-composite"] == base64.b64encode(md5s).decode() + "-2"
        buf = bytearray(len(p1) + len(p2))
        got_info = await b.read_into(prefix + "multi", 0, memoryview(buf))
        assert buf == p1 + p2
        assert got_info.metadata == {"mtime": "8"}
        assert "crc32c" not in got_info.checksums
        await b.delete_many([prefix + "one", prefix + "multi"])


async def test_seaweed_lists_buckets_signed(weed_env: Any) -> None:
    """ListBuckets names no bucket: it is signed for the endpoint itself,
    which SeaweedFS checks (a wrong secret: the test below)."""
    import synxfer

    async with synxfer.Client(endpoint_url=weed_env.endpoint_url) as client:
        assert weed_env.bucket in {b.name for b in await client.list_buckets()}


async def test_seaweed_refuses_a_wrong_secret(
    weed_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    async with S3Backend(weed_env.bucket, BackendOptions(endpoint_url=weed_env.endpoint_url)) as b:
        with pytest.raises(PermissionDenied, match="check the credentials") as exc:
            await b.list_page("")
    assert "not-the-secret" not in str(exc.value)
    async with S3Backend("", BackendOptions(endpoint_url=weed_env.endpoint_url)) as account:
        with pytest.raises(PermissionDenied, match="check the credentials") as exc:
            await account.list_buckets()
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
