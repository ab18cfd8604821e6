"""The URL data plane (issue 34): https:// as a source, and uploads/downloads
through URLs a service vends (synxfer.backend.UrlBackend).

Real servers on 127.0.0.1: aiohttp's static file server (a plain web server
that answers Range), SeaweedFS (real SigV4/SigV2 pre-signed URLs that expire
and a store that verifies Content-MD5). The vendor below pre-signs URLs with
botocore: it stands in for a service (Synapse, DRS) and is not the thing
under test; the byte moving is.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import os
import ssl
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import synxfer
from synxfer import BackendError, ListPage, MiB, NotFound, ObjectInfo, ReadResult
from synxfer.backend import (
    BackendOptions,
    SignedUrl,
    UploadRequest,
    UrlBackend,
    UrlVendor,
    VendedUpload,
    checksums_from_headers,
    md5_header_allowed,
    register,
)
from synxfer.cli.main import main as cli_main

PART = 5 * MiB
CFG = synxfer.TransferConfig(max_threads=4, part_size=PART, multipart_threshold=PART)


def _data(n: int, seed: int = 1) -> bytes:
    return (hashlib.sha256(str(seed).encode()).digest() * (n // 32 + 1))[:n]


# -- a plain web server: aiohttp's static files, in a thread ----------------------------


class StaticServer:
    """aiohttp's stock static-file handler on 127.0.0.1 (Range, ETag, HEAD),
    recording each request's method and Range header. ``before`` runs before
    a request is handled (the test replaces the file there)."""

    def __init__(self, root: Path, ssl_context: ssl.SSLContext | None = None) -> None:
        self.root = root
        self.ssl_context = ssl_context
        self.requests: list[tuple[str, str | None]] = []
        self.before: Any = None
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> StaticServer:
        self._thread.start()
        assert self._ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    async def _serve(self) -> None:
        from aiohttp import web

        self._stop = asyncio.Event()

        @web.middleware
        async def record(request: web.Request, handler: Any) -> web.StreamResponse:
            self.requests.append((request.method, request.headers.get("Range")))
            if self.before is not None:
                self.before(len(self.requests))
            return await handler(request)

        app = web.Application(middlewares=[record])
        app.router.add_static("/", self.root)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=self.ssl_context)
        await site.start()
        self.port = runner.addresses[0][1]
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def ranged_gets(self) -> int:
        return sum(1 for method, rng in self.requests if method == "GET" and rng)


def test_cp_http_ranged_parallel_byte_exact(tmp_path: Path) -> None:
    root = tmp_path / "www"
    root.mkdir()
    data = _data(17 * MiB)
    (root / "big.bin").write_bytes(data)
    with StaticServer(root) as server:
        dest = tmp_path / "out.bin"
        url = f"http://127.0.0.1:{server.port}/big.bin"
        assert cli_main(["cp", "--part-size", "5MiB", url, str(dest)]) == 0
        assert dest.read_bytes() == data
        # Ranged GETs that tile the object (the engine picks their size).
        ranges = sorted(
            tuple(int(x) for x in rng.removeprefix("bytes=").split("-"))
            for method, rng in server.requests
            if method == "GET" and rng
        )
        assert len(ranges) >= 2
        assert ranges[0][0] == 0
        assert ranges[-1][1] == len(data) - 1
        assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(ranges))


def test_cp_http_object_replaced_mid_download_fails_clearly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "www"
    root.mkdir()
    (root / "big.bin").write_bytes(_data(17 * MiB))
    with StaticServer(root) as server:
        replaced = threading.Event()

        def replace(count: int) -> None:
            # After the HEAD and the first GET: another version of the same size.
            if count == 3 and not replaced.is_set():
                new = root / "new.tmp"
                new.write_bytes(_data(17 * MiB, seed=2))
                os.utime(new, (time.time() + 100, time.time() + 100))
                os.replace(new, root / "big.bin")
                replaced.set()

        server.before = replace
        dest = tmp_path / "out.bin"
        code = cli_main(
            ["cp", "--part-size", "5MiB", f"http://127.0.0.1:{server.port}/big.bin", str(dest)]
        )
        assert replaced.is_set()
        assert code != 0
        assert "changed while it was being downloaded" in capsys.readouterr().err
        assert not dest.exists()


@pytest.fixture
def plain_http_server(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """Python's stock http.server: HEAD works, Range is ignored (every GET
    answers 200 with the whole file)."""
    import functools
    import http.server

    root = tmp_path / "plain"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    class QuietServer(http.server.ThreadingHTTPServer):
        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that hangs up mid-body (as the probe does) is no news

    handler = functools.partial(Quiet, directory=str(root))
    server = QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_a_server_that_ignores_range(
    tmp_path: Path, plain_http_server: tuple[Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    root, port = plain_http_server
    data = _data(17 * MiB, seed=12)
    (root / "big.bin").write_bytes(data)
    url = f"http://127.0.0.1:{port}/big.bin"
    dest = tmp_path / "out.bin"
    # In parts it cannot be fetched: said so, before any part is received whole.
    assert cli_main(["cp", "--part-size", "5MiB", url, str(dest)]) != 0
    err = capsys.readouterr().err
    assert "ignores Range" in err
    assert "--part-size" in err
    assert "Traceback" not in err
    assert not dest.exists()
    # In one GET it can.
    assert cli_main(["cp", "--part-size", "16MiB", url, str(dest)]) == 0
    assert dest.read_bytes() == data


def test_https_needs_a_trusted_ca(
    tmp_path: Path,
    tls_files: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cert, key = tls_files
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    root = tmp_path / "www"
    root.mkdir()
    data = _data(3 * MiB)
    (root / "f.bin").write_bytes(data)
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with StaticServer(root, ctx) as server:
        url = f"https://127.0.0.1:{server.port}/f.bin"
        dest = tmp_path / "out.bin"
        assert cli_main(["cp", url, str(dest)]) != 0
        assert "not trusted" in capsys.readouterr().err
        assert not dest.exists()
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        assert cli_main(["cp", url, str(dest)]) == 0
        assert dest.read_bytes() == data


def test_a_missing_url_says_so_without_its_signature(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with StaticServer(tmp_path) as server:
        url = f"http://127.0.0.1:{server.port}/missing.bin?X-Amz-Signature=SECRETSIG"
        assert cli_main(["cp", url, str(tmp_path / "out")]) == 1
    out = capsys.readouterr()
    assert "missing.bin?…: no such object" in out.err
    assert "SECRETSIG" not in out.out + out.err


def test_https_is_read_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "f"
    src.write_bytes(b"x")
    assert cli_main(["cp", str(src), "https://127.0.0.1:9/f"]) != 0
    err = capsys.readouterr().err
    assert "https:// is read-only" in err
    assert "Traceback" not in err
    assert cli_main(["ls", "https://127.0.0.1:9/dir/"]) == 2
    err = capsys.readouterr().err
    assert "https:// is read-only" in err
    assert "Traceback" not in err


def test_checksum_headers_map_to_object_checksums() -> None:
    md5 = base64.b64encode(hashlib.md5(b"x").digest()).decode()
    sha = base64.b64encode(hashlib.sha256(b"x").digest()).decode()
    got = checksums_from_headers(
        {
            "content-md5": md5,
            "x-amz-checksum-crc32c": "AAAAAA==",
            "x-goog-hash": "crc32c=AAAAAA==,md5=" + md5,
            "repr-digest": f"sha-256=:{sha}:",
        }
    )
    assert got == {"md5": md5, "crc32c": "AAAAAA==", "sha256": sha}
    assert checksums_from_headers({"x-amz-checksum-crc32c": "AAAAAA==-3"}) == {
        "crc32c-composite": "AAAAAA==-3"
    }


def test_signed_url_never_shows_its_query() -> None:
    url = SignedUrl(
        "https://h:1/b/k?X-Amz-Signature=SECRET&X-Amz-Credential=AKIA",
        headers={"x-amz-security-token": "TOKEN"},
        expires=1.0,
    )
    for text in (repr(url), str(url)):
        assert "SECRET" not in text
        assert "AKIA" not in text
        assert "TOKEN" not in text
    assert url.expired()
    # SigV2 signs Content-MD5: adding one would break the signature.
    assert not md5_header_allowed(SignedUrl("http://h/b/k?Signature=x&Expires=1"))
    assert md5_header_allowed(SignedUrl("http://h/b/k?X-Amz-Signature=x&X-Amz-SignedHeaders=host"))


# -- pre-signed S3 URLs (SeaweedFS: real signatures, real expiry) ------------------------


def _s3(seaweed: Any, v4: bool = True) -> Any:
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    return boto3.client(
        "s3",
        endpoint_url=seaweed.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id=seaweed.access_key,
        aws_secret_access_key=seaweed.secret_key,
        config=Config(signature_version="s3v4" if v4 else "s3"),
    )


@pytest.fixture(scope="module")
def weed_bucket(seaweed: Any) -> str:
    name = f"u-{uuid.uuid4().hex[:12]}"
    _s3(seaweed).create_bucket(Bucket=name)
    return name


def test_cp_presigned_s3_url(
    tmp_path: Path, seaweed: Any, weed_bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """SeaweedFS checks the signature: a HEAD of a URL signed for GET is
    refused (403), so size and ETag come from a one-byte ranged GET, which
    carries no whole-object checksum: the download says it is not verified."""
    s3 = _s3(seaweed)
    data = _data(12 * MiB, seed=3)
    s3.put_object(Bucket=weed_bucket, Key="obj", Body=data, ChecksumAlgorithm="SHA256")
    url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": weed_bucket, "Key": "obj"}, ExpiresIn=600
    )
    dest = tmp_path / "obj"
    assert cli_main(["cp", "--part-size", "5MiB", url, str(dest)]) == 0
    assert dest.read_bytes() == data
    out = capsys.readouterr()
    assert "X-Amz-Signature" not in out.out + out.err
    assert "not verified" in out.out
    # Into a directory: named after the path, not the signature.
    (tmp_path / "dir").mkdir()
    assert cli_main(["cp", url, str(tmp_path / "dir") + "/"]) == 0
    assert [p.name for p in (tmp_path / "dir").iterdir()] == ["obj"]
    out = capsys.readouterr()
    assert "X-Amz-Signature" not in out.out + out.err


def test_cp_presigned_url_verified_by_its_checksum_header(
    tmp_path: Path, stock_moto: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Stock moto answers the HEAD with x-amz-checksum-sha256: the download is
    checked against it."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=stock_moto.endpoint_url, region_name="us-east-1")
    bucket = f"u-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    data = _data(12 * MiB, seed=7)
    s3.put_object(Bucket=bucket, Key="obj", Body=data, ChecksumAlgorithm="SHA256")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "obj"})
    dest = tmp_path / "obj"
    assert cli_main(["cp", "--part-size", "5MiB", url, str(dest)]) == 0
    assert dest.read_bytes() == data
    out = capsys.readouterr()
    assert "not verified" not in out.out + out.err
    assert "Signature" not in out.out + out.err


# -- a vendor: pre-signs SeaweedFS URLs with botocore ------------------------------------


class Vendor(UrlVendor):
    """A stand-in for a service that vends URLs (what syn:// implements)."""

    def __init__(self, s3: Any, bucket: str, lifetime: int = 600) -> None:
        self.s3 = s3
        self.bucket = bucket
        self.lifetime = lifetime
        self.requests: list[UploadRequest] = []
        self.url_calls: list[list[int]] = []
        self.done: dict[int, str] = {}
        self.hide_expiry = False
        self.after_start: Any = None
        self.first_batch_delay = 0.0
        self.download_calls = 0
        self.resumable = False
        self.pinned = False
        self.fail_part = 0
        self.open_uploads: dict[str, str] = {}

    async def download_url(self, key: str) -> SignedUrl:
        self.download_calls += 1
        url = self.s3.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=self.lifetime
        )
        if self.download_calls == 1 and self.first_batch_delay:
            await asyncio.sleep(self.first_batch_delay)  # it lapses before use
        expires = None if self.hide_expiry else time.time() + self.lifetime
        return SignedUrl(url, expires=expires)

    async def start_upload(self, request: UploadRequest) -> VendedUpload:
        self.requests.append(request)
        if self.resumable and request.content_md5 in self.open_uploads:
            # As Synapse does: the same content resumes its upload.
            upload_id = self.open_uploads[request.content_md5]
            held = {n: ("" if self.pinned else m) for n, m in self.done.items()}
            return VendedUpload(
                request.key, upload_id, request.part_size, held, content_pinned=self.pinned
            )
        up = await asyncio.to_thread(
            self.s3.create_multipart_upload, Bucket=self.bucket, Key=request.key
        )
        if self.after_start is not None:
            await asyncio.to_thread(self.after_start)
        self.open_uploads[request.content_md5 or ""] = up["UploadId"]
        return VendedUpload(request.key, up["UploadId"], request.part_size)

    async def upload_urls(
        self, upload: VendedUpload, numbers: Sequence[int]
    ) -> Mapping[int, SignedUrl]:
        self.url_calls.append(list(numbers))
        urls = {
            n: self.s3.generate_presigned_url(
                "upload_part",
                Params={
                    "Bucket": self.bucket,
                    "Key": upload.key,
                    "UploadId": upload.upload_id,
                    "PartNumber": n,
                },
                ExpiresIn=self.lifetime,
            )
            for n in numbers
        }
        if len(self.url_calls) == 1 and self.first_batch_delay:
            # The service was slow to answer: these URLs lapse before use.
            await asyncio.sleep(self.first_batch_delay)
        expires = None if self.hide_expiry else time.time() + self.lifetime
        return {n: SignedUrl(u, expires=expires) for n, u in urls.items()}

    async def part_done(self, upload: VendedUpload, number: int, md5_hex: str) -> None:
        if number == self.fail_part:
            for _ in range(500):  # bounded: the parts before it land first
                if all(n in self.done for n in range(1, number)):
                    break
                await asyncio.sleep(0.01)
            raise BackendError(f"the service refused part {number} (test)")
        self.done[number] = md5_hex

    async def complete(self, upload: VendedUpload) -> ObjectInfo:
        parts = [{"PartNumber": n, "ETag": f'"{m}"'} for n, m in sorted(self.done.items())]
        await asyncio.to_thread(
            self.s3.complete_multipart_upload,
            Bucket=self.bucket,
            Key=upload.key,
            UploadId=upload.upload_id,
            MultipartUpload={"Parts": parts},
        )
        return await self.stat(upload.key)

    async def abort(self, upload: VendedUpload) -> None:
        if self.resumable:
            return  # as Synapse: uploads lapse, the next start resumes them
        await asyncio.to_thread(
            self.s3.abort_multipart_upload,
            Bucket=self.bucket,
            Key=upload.key,
            UploadId=upload.upload_id,
        )

    async def stat(self, key: str) -> ObjectInfo:
        try:
            head = await asyncio.to_thread(self.s3.head_object, Bucket=self.bucket, Key=key)
        except Exception as exc:
            raise NotFound(f"{key}: not found") from exc
        return ObjectInfo(key, head["ContentLength"], etag=head["ETag"].strip('"'))


VENDORS: dict[str, Vendor] = {}


class VendedBackend(UrlBackend):
    """The byte-moving half is UrlBackend's; only stat/list/delete are ours."""

    scheme = "urltest"

    def __init__(self, bucket: str, options: BackendOptions) -> None:
        super().__init__(bucket, options, VENDORS[bucket])

    async def stat(self, key: str) -> ObjectInfo:
        return await VENDORS[self.bucket].stat(key)

    async def list_page(self, prefix: str, cursor: str | None = None) -> ListPage:
        return ListPage([])

    async def read(
        self, key: str, offset: int = 0, length: int | None = None, *, if_match: str | None = None
    ) -> ReadResult:
        raise NotImplementedError

    async def delete(self, key: str) -> None:
        raise NotImplementedError


register("urltest", VendedBackend)


@pytest.fixture
def vendor(seaweed: Any, weed_bucket: str) -> Iterator[Vendor]:
    v = Vendor(_s3(seaweed), weed_bucket)
    VENDORS[weed_bucket] = v
    yield v
    del VENDORS[weed_bucket]


async def _upload(src: Path, bucket: str, key: str) -> synxfer.TransferResult:
    async with synxfer.Client(CFG) as client:
        return await client.upload_file(src, f"urltest://{bucket}/{key}")


def test_upload_through_vended_urls(tmp_path: Path, vendor: Vendor, weed_bucket: str) -> None:
    data = _data(12 * MiB, seed=4)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    vendor.lifetime = 600
    result = asyncio.run(_upload(src, weed_bucket, "up/a.bin"))
    assert result.ok, result.failures
    got = vendor.s3.get_object(Bucket=weed_bucket, Key="up/a.bin")["Body"].read()
    assert got == data
    # The pre-pass: whole-file MD5 before the upload started, every part's MD5.
    (request,) = vendor.requests
    assert request.content_md5 == hashlib.md5(data).hexdigest()
    assert request.size == len(data)
    assert request.parts == 3
    want = {n + 1: hashlib.md5(data[n * PART : (n + 1) * PART]).hexdigest() for n in range(3)}
    assert vendor.done == want
    # URLs fetched in one batch, lazily.
    assert vendor.url_calls == [[1, 2, 3]]

    # And back, through the vended download URL.
    async def download() -> None:
        async with synxfer.Client(CFG) as client:
            (
                await client.download_file(f"urltest://{weed_bucket}/up/a.bin", tmp_path / "back")
            ).raise_for_failures()

    asyncio.run(download())
    assert (tmp_path / "back").read_bytes() == data

    # A small file: one request's worth, through the same vendor calls.
    small = tmp_path / "small.txt"
    small.write_bytes(b"hello vended world\n")
    vendor.done.clear()
    result = asyncio.run(_upload(small, weed_bucket, "up/small.txt"))
    assert result.ok, result.failures
    assert vendor.requests[-1].content_md5 == hashlib.md5(small.read_bytes()).hexdigest()
    assert vendor.requests[-1].parts == 1
    got = vendor.s3.get_object(Bucket=weed_bucket, Key="up/small.txt")["Body"].read()
    assert got == small.read_bytes()


def test_expired_part_urls_are_fetched_again(
    tmp_path: Path, vendor: Vendor, weed_bucket: str
) -> None:
    data = _data(12 * MiB, seed=5)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    vendor.lifetime = 1
    vendor.hide_expiry = True  # the client cannot see it coming: the store says 403
    vendor.first_batch_delay = 2.5
    result = asyncio.run(_upload(src, weed_bucket, "up/expired.bin"))
    assert result.ok, result.failures
    assert vendor.s3.get_object(Bucket=weed_bucket, Key="up/expired.bin")["Body"].read() == data
    assert len(vendor.url_calls) > 1  # fetched again after the 403s


def test_file_changed_between_prepass_and_send_fails(
    tmp_path: Path, vendor: Vendor, weed_bucket: str
) -> None:
    data = _data(12 * MiB, seed=6)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    st = src.stat()

    def rewrite() -> None:
        # Same size and mtime: only the bytes tell.
        with open(src, "r+b") as f:
            f.seek(PART + 10)
            f.write(b"CHANGED")
        os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))

    vendor.after_start = rewrite
    result = asyncio.run(_upload(src, weed_bucket, "up/changed.bin"))
    assert not result.ok
    (failure,) = result.failures
    assert "changed while it was being uploaded" in failure.error
    assert "part 2 differs" in failure.error
    assert 2 not in vendor.done


def test_expired_download_url_is_fetched_again(
    tmp_path: Path, vendor: Vendor, weed_bucket: str
) -> None:
    data = _data(12 * MiB, seed=8)
    vendor.s3.put_object(Bucket=weed_bucket, Key="down/a.bin", Body=data)
    vendor.lifetime = 1
    vendor.hide_expiry = True
    vendor.first_batch_delay = 2.5

    async def download() -> synxfer.TransferResult:
        async with synxfer.Client(CFG) as client:
            return await client.download_file(f"urltest://{weed_bucket}/down/a.bin", tmp_path / "a")

    result = asyncio.run(download())
    assert result.ok, result.failures
    assert (tmp_path / "a").read_bytes() == data
    assert vendor.download_calls == 2


def test_a_new_version_is_not_held_to_the_old_pin(
    tmp_path: Path, vendor: Vendor, weed_bucket: str
) -> None:
    """The pin is per version (the service's tag), not per key: the same
    client downloads a key, sees it replaced, and downloads the new one."""
    key = "down/versions.bin"
    first, second = _data(12 * MiB, seed=9), _data(12 * MiB, seed=10)

    async def run() -> None:
        async with synxfer.Client(CFG) as client:
            vendor.s3.put_object(Bucket=weed_bucket, Key=key, Body=first)
            url = f"urltest://{weed_bucket}/{key}"
            (await client.download_file(url, tmp_path / "1")).raise_for_failures()
            vendor.s3.put_object(Bucket=weed_bucket, Key=key, Body=second)
            (await client.download_file(url, tmp_path / "2")).raise_for_failures()

    asyncio.run(run())
    assert (tmp_path / "1").read_bytes() == first
    assert (tmp_path / "2").read_bytes() == second


@pytest.mark.parametrize("pinned", [False, True], ids=["part-md5s", "content-pinned"])
def test_server_side_resume_sends_only_missing_parts(
    tmp_path: Path, vendor: Vendor, weed_bucket: str, pinned: bool
) -> None:
    """A service that keeps an upload by its content (Synapse) resumes it:
    parts it holds -- with their MD5, or with none when the upload is pinned
    to the whole-file MD5 -- are not sent again."""
    data = _data(12 * MiB, seed=11 + pinned)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    vendor.resumable = True
    vendor.pinned = pinned
    vendor.fail_part = 3
    key = f"up/resume-{pinned}.bin"
    first = asyncio.run(_upload(src, weed_bucket, key))
    assert not first.ok
    assert set(vendor.done) == {1, 2}
    vendor.fail_part = 0
    vendor.url_calls.clear()
    second = asyncio.run(_upload(src, weed_bucket, key))
    assert second.ok, second.failures
    assert vendor.url_calls == [[3]]
    assert vendor.s3.get_object(Bucket=weed_bucket, Key=key)["Body"].read() == data


def test_a_501_is_refused_at_once_not_retried(plain_http_server: tuple[Path, int]) -> None:
    """A server that does not implement what it was asked (stock http.server
    answers 501 to a PUT) will answer the same again: a permanent error,
    which the retry layer does not repeat; a 503 stays worth a retry."""
    from synxfer import TransientError
    from synxfer.backend import HttpClient, put_url
    from synxfer.backend._urls import status_error

    _root, port = plain_http_server

    async def go() -> Any:
        http = HttpClient()
        try:
            url = SignedUrl(f"http://127.0.0.1:{port}/new.bin")
            return await put_url(http, url, b"data", None, "new.bin")
        finally:
            await http.aclose()

    response = asyncio.run(go())
    assert response.status == 501
    error = status_error(response, "PUT new.bin", "http://127.0.0.1/new.bin")
    assert type(error) is BackendError
    assert "501" in str(error)
    response.status = 503
    assert type(status_error(response, "PUT new.bin", "http://127.0.0.1/new.bin")) is TransientError
