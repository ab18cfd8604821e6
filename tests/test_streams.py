"""Streams (issue 38 item 2): ``put_bytes`` / ``put_stream`` / ``get_bytes`` /
``open`` / ``get_stream``, and the CLI's ``cp - URL``, ``cp URL -`` and
``cat``, on real servers on 127.0.0.1 (strict moto, stock moto, the GCS
emulator, file://).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import pathlib
import random
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest

import synxfer
from synxfer import MiB
from synxfer.backend import Backend, Capabilities
from synxfer.engine.stream import first_part_size, stream_part_size
from synxfer.layers import Layer

from .conftest import PART


def _data(n: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(n)


def _s3(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint)


def _uploads(endpoint: str, bucket: str) -> list[Any]:
    return list(_s3(endpoint).list_multipart_uploads(Bucket=bucket).get("Uploads", []))


def _keys(endpoint: str, bucket: str) -> list[str]:
    page = _s3(endpoint).list_objects_v2(Bucket=bucket)
    return [o["Key"] for o in page.get("Contents", [])]


def _get(endpoint: str, bucket: str, key: str) -> bytes:
    body: bytes = _s3(endpoint).get_object(Bucket=bucket, Key=key)["Body"].read()
    return body


class _Chunky(io.RawIOBase):
    """A blocking source that gives at most ``step`` bytes per read (a pipe)."""

    def __init__(self, data: bytes, step: int = 100_000) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.step = step
        self.reads = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.reads += 1
        n = min(len(buffer), self.step, len(self.data) - self.pos)
        buffer[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n


# -- the part-size schedule ----------------------------------------------------------


def test_part_size_schedule_grows_before_the_part_limit() -> None:
    caps = Capabilities()  # S3's: 5 MiB .. 5 GiB, 10,000 parts
    first = first_part_size(None, 8 * MiB, caps)
    assert first == 8 * MiB
    sizes = [stream_part_size(n, first, caps) for n in range(1, caps.max_parts + 1)]
    assert sizes[:5000] == [8 * MiB] * 5000
    assert sizes[5000] == 16 * MiB
    assert max(sizes) == caps.max_part_size
    assert sizes == sorted(sizes)
    # 10,000 parts hold more than S3's largest object (5 TiB).
    assert sum(sizes) > 5 * 1024**4
    # --expected-size: the stream fits in parts of the first size.
    big = first_part_size(200 * 1024**3, 8 * MiB, caps)
    assert big > 8 * MiB
    assert big * 5000 >= 200 * 1024**3
    # A block store's multiple is kept.
    blocks = Capabilities(min_part_size=4 * MiB, part_size_multiple=4 * MiB)
    f = first_part_size(None, 5 * MiB, blocks)
    assert f % (4 * MiB) == 0
    assert all(stream_part_size(n, f, blocks) % (4 * MiB) == 0 for n in (1, 5001, 9999))


# -- Python API on strict moto ---------------------------------------------------------


@pytest.fixture
async def small_client(s3_endpoint: str) -> AsyncIterator[synxfer.Client]:
    cfg = synxfer.TransferConfig(
        max_threads=4, part_size=PART, multipart_threshold=PART, memory_budget=4 * PART
    )
    async with synxfer.Client(cfg, endpoint_url=s3_endpoint) as c:
        yield c


@pytest.mark.parametrize("size", [0, 1, PART - 1, PART, PART + 1, 3 * PART + 12345])
async def test_put_and_get_bytes_round_trip(
    small_client: synxfer.Client, bucket: str, s3_endpoint: str, size: int
) -> None:
    data = _data(size, size)
    url = f"s3://{bucket}/k.bin"
    assert await small_client.put_bytes(url, data) == size
    assert _get(s3_endpoint, bucket, "k.bin") == data
    assert await small_client.get_bytes(url) == data
    chunks = [c async for c in small_client.open(url)]
    assert b"".join(chunks) == data
    assert all(len(c) <= PART for c in chunks)
    assert _uploads(s3_endpoint, bucket) == []


async def test_put_stream_of_unknown_size_goes_multipart_as_it_comes(
    small_client: synxfer.Client, bucket: str, s3_endpoint: str
) -> None:
    data = _data(3 * PART + 7)
    src = _Chunky(data)
    url = f"s3://{bucket}/piped"
    assert await small_client.put_stream(url, src) == len(data)
    assert _get(s3_endpoint, bucket, "piped") == data
    head = _s3(s3_endpoint).head_object(Bucket=bucket, Key="piped")
    assert head["ETag"].strip('"').endswith("-4")  # 4 parts, sent as they came
    assert head["Metadata"]["synxfer-part-size"] == str(PART)  # the layout, uniform here
    reader = small_client.open(url)
    async with reader:
        got = b"".join([c async for c in reader])
    assert got == data
    assert reader.verified is True


async def test_open_cancels_ranges_when_left_early(
    small_client: synxfer.Client, bucket: str, s3_endpoint: str
) -> None:
    data = _data(6 * PART)
    url = f"s3://{bucket}/big"
    await small_client.put_bytes(url, data)
    async with small_client.open(url) as reader:
        async for chunk in reader:
            assert chunk == data[: len(chunk)]
            break
    # Nothing is left holding the budget: the whole object streams again.
    sched = small_client._engine.scheduler
    assert sched.budget.in_use == 0
    assert await small_client.get_bytes(url) == data


async def test_prefix_and_missing_object_are_clear_errors(
    small_client: synxfer.Client, bucket: str
) -> None:
    with pytest.raises(synxfer.ConfigError, match="names a prefix"):
        await small_client.put_bytes(f"s3://{bucket}/dir/", b"x")
    with pytest.raises(synxfer.NotFound, match="no such object"):
        await small_client.get_bytes(f"s3://{bucket}/nope")
    with pytest.raises(synxfer.ConfigError, match="expected-size"):
        await small_client.put_stream(f"s3://{bucket}/k", io.BytesIO(b""), expected_size=-1)


# -- failures: nothing half-written, corruption caught -----------------------------


class _FailPart(Layer):
    """Refuses part ``number`` of every multipart upload (a 403: not retried)."""

    def __init__(self, inner: Backend, number: int = 3) -> None:
        super().__init__(inner)
        self.number = number

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        if op == "upload_part" and args[1] == self.number:
            raise synxfer.BackendError("injected: part refused", status=403)
        return await fn(*args)


class _Flip(Layer):
    """Flips one byte of the first ``times`` ranged reads that start at ``offset``."""

    def __init__(self, inner: Backend, offset: int, times: int) -> None:
        super().__init__(inner)
        self.offset = offset
        self.left = times

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        result = await fn(*args)
        if op == "read_into" and args[1] == self.offset and self.left > 0 and len(args[2]):
            self.left -= 1
            args[2][len(args[2]) // 2] ^= 0xFF
        return result


class _Broken(_Chunky):
    """A source whose read fails after ``after`` bytes (a dying producer)."""

    def __init__(self, data: bytes, after: int) -> None:
        super().__init__(data)
        self.after = after

    def readinto(self, buffer: Any) -> int:
        if self.pos >= self.after:
            raise OSError(5, "injected: the producer died")
        return super().readinto(buffer)


@pytest.fixture
def moto_bucket(stock_moto: Any) -> str:
    name = f"t-{uuid.uuid4().hex[:16]}"
    _s3(stock_moto.endpoint_url).create_bucket(Bucket=name)
    return name


async def test_failed_stream_aborts_its_upload_on_stock_moto(
    stock_moto: Any, moto_bucket: str
) -> None:
    """A part refused, or a source that dies mid-stream: the multipart upload
    is aborted, no object appears (fails without the abort: one upload left)."""
    endpoint = stock_moto.endpoint_url
    data = _data(5 * PART)
    cfg = synxfer.TransferConfig(max_threads=4, part_size=PART, memory_budget=3 * PART)
    async with synxfer.Client(cfg, endpoint_url=endpoint, layers=[_FailPart]) as c:
        with pytest.raises(synxfer.BackendError, match="part refused"):
            await c.put_stream(f"s3://{moto_bucket}/refused", _Chunky(data))
    async with synxfer.Client(cfg, endpoint_url=endpoint) as c:
        with pytest.raises(OSError, match="producer died"):
            await c.put_stream(f"s3://{moto_bucket}/died", _Broken(data, 2 * PART + 10))
    assert _uploads(endpoint, moto_bucket) == []
    assert _keys(endpoint, moto_bucket) == []


async def test_streamed_read_is_verified_on_stock_moto(stock_moto: Any, moto_bucket: str) -> None:
    """A byte flipped in transit: open() raises IntegrityError after the last
    chunk (fails without the check: the bad bytes pass); get_bytes fetches
    again and returns the object's bytes."""
    endpoint = stock_moto.endpoint_url
    data = _data(3 * PART + 99)
    _s3(endpoint).put_object(Bucket=moto_bucket, Key="k", Body=data)  # ETag: the MD5
    url = f"s3://{moto_bucket}/k"
    cfg = synxfer.TransferConfig(max_threads=4, part_size=PART, memory_budget=4 * PART)

    def flip_once(b: Backend) -> Backend:
        return _Flip(b, PART, 1)

    async with synxfer.Client(cfg, endpoint_url=endpoint, layers=[flip_once]) as c:
        got = bytearray()

        async def read_all() -> None:
            async for chunk in c.open(url):
                got.extend(chunk)

        with pytest.raises(synxfer.IntegrityError, match="streamed are not the object's"):
            await read_all()
        assert len(got) == len(data)
        assert got != data
    async with synxfer.Client(cfg, endpoint_url=endpoint, layers=[flip_once]) as c:
        assert await c.get_bytes(url) == data
        out = io.BytesIO()
        assert await c.get_stream(url, out) == len(data)  # the flip was spent above
        assert out.getvalue() == data


# -- the command line: standard input and output ------------------------------------


#: The test session's fake secret key (conftest): never in any output.
_SECRET = os.environ["AWS_SECRET_ACCESS_KEY"].encode()


def _env(endpoint: str) -> dict[str, str]:
    env = dict(os.environ)
    env["AWS_ENDPOINT_URL"] = endpoint
    return env


def _cli(env: dict[str, str], *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run(
        [sys.executable, "-m", "synxfer.cli.main", *args],
        env=env,
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert _SECRET not in proc.stdout + proc.stderr
    return proc


def test_cli_stdin_to_object_and_back_to_stdout(stock_moto: Any, moto_bucket: str) -> None:
    endpoint = stock_moto.endpoint_url
    env = _env(endpoint)
    data = _data(PART + 333, 7)
    url = f"s3://{moto_bucket}/from-stdin.bin"
    up = _cli(env, "cp", "-", url, "--part-size", "5MiB", stdin=data)
    assert up.returncode == 0, up.stderr
    assert up.stdout == b""
    assert _get(endpoint, moto_bucket, "from-stdin.bin") == data
    head = _s3(endpoint).head_object(Bucket=moto_bucket, Key="from-stdin.bin")
    assert head["ETag"].strip('"').endswith("-2")  # multipart, as it came
    down = _cli(env, "cp", url, "-", "--part-size", "5MiB")
    assert down.returncode == 0, down.stderr
    assert down.stdout == data
    cat = _cli(env, "cat", url)
    assert cat.returncode == 0, cat.stderr
    assert cat.stdout == data
    # Stock moto's CRC32C of a multipart object is wrong; its ETag vouches for
    # the bytes, and the wrong claim is named (without the second claim: exit 1).
    assert b"CRC32C of the part CRC32Cs does not match its bytes" in cat.stderr
    assert b"Traceback" not in cat.stderr
    # --expected-size is taken; an empty stdin is an empty object.
    empty = _cli(env, "cp", "-", f"s3://{moto_bucket}/empty", "--expected-size", "1GiB")
    assert empty.returncode == 0, empty.stderr
    assert _s3(endpoint).head_object(Bucket=moto_bucket, Key="empty")["ContentLength"] == 0
    assert _cli(env, "cat", f"s3://{moto_bucket}/empty").stdout == b""
    assert _uploads(endpoint, moto_bucket) == []


def test_cli_cat_into_a_closed_pipe_exits_quietly(stock_moto: Any, moto_bucket: str) -> None:
    """``synxfer cat URL | head -c 10``: no traceback, the SIGPIPE exit code,
    and the ranges still in flight are cancelled (the process ends)."""
    endpoint = stock_moto.endpoint_url
    data = _data(6 * PART, 3)
    _s3(endpoint).put_object(Bucket=moto_bucket, Key="big", Body=data)
    proc = subprocess.Popen(
        [sys.executable, "-m", "synxfer.cli.main", "cat", f"s3://{moto_bucket}/big"],
        env=_env(endpoint),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stdout.read(10) == data[:10]
    proc.stdout.close()  # what head -c 10 does
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err
    assert err == b""


def test_cli_stream_usage_errors(
    stock_moto: Any, moto_bucket: str, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """In process (main() as the console script runs it): exit 2 and a
    message naming the flag or URL for what a stream cannot take."""
    from synxfer.cli.main import main

    monkeypatch.setenv("AWS_ENDPOINT_URL", stock_moto.endpoint_url)
    url = f"s3://{moto_bucket}/k"
    for args, code, words in (
        (("cp", "-", url, "--recursive"), 2, "--recursive does not apply"),
        (("cp", "-", "-"), 2, "one must be a URL"),
        (("cp", "-", "local.txt"), 2, "one must be a URL"),
        (("cp", url, "-", "--expected-size", "1G"), 2, "--expected-size is for a stream"),
        (("cat", f"s3://{moto_bucket}/dir/"), 2, "names a prefix"),
        (("cat", "./local"), 2, "cat needs an object URL"),
        (("cat", f"s3://{moto_bucket}/nope"), 1, "no such object"),
    ):
        assert main(list(args)) == code, args
        err = capsys.readouterr().err
        assert words in err, (args, err)
        assert "Traceback" not in err
    with pytest.raises(SystemExit) as exc:
        main(["cp", "-", url, "--expected-size", "lots"])
    assert exc.value.code == 2
    assert "lots" in capsys.readouterr().err


# -- memory: a 200 MiB stream with a small budget ----------------------------------

_MEMORY_SCRIPT = r"""
import asyncio, os, resource, sys, zlib
import synxfer
from synxfer import MiB

TOTAL = 200 * MiB
BLOCK = os.urandom(MiB)


class Source:
    # 200 MiB generated as they are read: the source holds 1 MiB.
    def __init__(self):
        self.pos = 0

    def readinto(self, buf):
        n = min(len(buf), TOTAL - self.pos, MiB - self.pos % MiB)
        start = self.pos % MiB
        buf[:n] = BLOCK[start : start + n]
        self.pos += n
        return n


class Sink:
    def __init__(self):
        self.n = 0
        self.crc = 0

    def write(self, data):
        if self.n < MiB:
            self.crc = zlib.crc32(data[: MiB - self.n], self.crc)
        self.n += len(data)
        return len(data)

    def flush(self):
        pass


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def main(root):
    cfg = synxfer.TransferConfig(max_threads=4, part_size=5 * MiB, memory_budget=20 * MiB)
    url = f"file://{root}/big.bin"
    async with synxfer.Client(cfg) as c:
        await c.put_bytes(f"file://{root}/warm", b"x" * (6 * MiB))  # imports, threads, pool
        assert len(await c.get_bytes(f"file://{root}/warm")) == 6 * MiB
        base = peak_mib()
        src = Source()
        assert await c.put_stream(url, src) == TOTAL
        up = peak_mib()
        sink = Sink()
        assert await c.get_stream(url, sink) == TOTAL
        assert sink.crc == zlib.crc32(BLOCK)  # and the whole was checked against the ETag
        print(f"{base:.0f} {up:.0f} {peak_mib():.0f}")


asyncio.run(main(sys.argv[1]))
"""


def test_a_200_mib_stream_stays_within_the_budget(tmp_path: pathlib.Path) -> None:
    """Up and down through file:// (no server in the process) with a 20 MiB
    budget: the peak RSS grows by far less than the stream (a stream read
    whole, or ranges fetched without back-pressure, would add 200 MiB)."""
    proc = subprocess.run(
        [sys.executable, "-c", _MEMORY_SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    base, up, down = (float(v) for v in proc.stdout.split())
    assert up - base < 80, (base, up, down)
    assert down - base < 80, (base, up, down)


# -- growing parts, on file:// with a small part limit -------------------------------

_KIB64 = 64 * 1024


class _FewParts(Layer):
    """The backend as if it took at most 20 parts of at most ``largest`` bytes."""

    largest = 1 << 30

    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self.capabilities = dataclasses.replace(
            inner.capabilities, max_parts=20, max_part_size=self.largest
        )


class _FewSmallParts(_FewParts):
    largest = 2 * _KIB64


async def test_a_stream_past_half_the_part_limit_grows_its_parts(tmp_path: pathlib.Path) -> None:
    """20 parts at most: 10 of the first size, then doubling. The recorded
    synxfer-part-size is then not the layout, and the parts count says so:
    the object reads back whole, never refused as corrupt (unverified: no
    uniform layout fits its ETag)."""
    cfg = synxfer.TransferConfig(max_threads=4, part_size=_KIB64, memory_budget=8 * _KIB64)
    data = _data(14 * _KIB64 + 5, 9)  # 10 x 64 KiB, then 128 KiB parts
    url = f"file://{tmp_path}/grown"
    async with synxfer.Client(cfg, layers=[_FewParts]) as c:
        assert await c.put_stream(url, _Chunky(data, 10_000)) == len(data)
        reader = c.open(url)
        async with reader:
            assert b"".join([chunk async for chunk in reader]) == data
        assert reader.verified is False
        assert await c.get_bytes(url) == data
        info = reader.info
        assert info is not None
        assert info.metadata["synxfer-part-size"] == str(_KIB64)
        assert info.etag is not None
        assert info.etag.endswith("-12")  # 10 + 2 grown parts, not 15 uniform ones
    async with synxfer.Client(cfg, layers=[_FewSmallParts]) as c:
        # 10 x 64 KiB + 10 x 128 KiB is all 20 parts hold: one byte more is refused.
        with pytest.raises(synxfer.ConfigError, match=r"larger than .* takes in 20 parts"):
            await c.put_stream(f"file://{tmp_path}/toolong", _Chunky(_data(30 * _KIB64 + 1)))
    assert sorted(p.name for p in tmp_path.iterdir()) == [".grown.synxfer-meta", "grown"]


# -- gs:// on the GCS emulator ---------------------------------------------------


@pytest.fixture(scope="module")
def gcs_emulator() -> Iterator[str]:
    from synxfer_servers.gcs import GcsEmulator

    with GcsEmulator() as emulator:
        yield emulator.endpoint_url


async def test_gcs_stream_round_trip(gcs_emulator: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream in composed parts, read back in order and checked against
    the object's CRC32C; an empty stream is an empty object."""
    from synxfer_servers.gcs import create_bucket

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator)
    bucket = f"g-{uuid.uuid4().hex[:12]}"
    create_bucket(gcs_emulator, bucket)
    kib256 = 256 * 1024
    cfg = synxfer.TransferConfig(max_threads=4, part_size=kib256, memory_budget=4 * kib256)
    data = _data(3 * kib256 - 17, 5)
    async with synxfer.Client(cfg) as c:
        assert await c.put_stream(f"gs://{bucket}/s.bin", _Chunky(data, 50_000)) == len(data)
        reader = c.open(f"gs://{bucket}/s.bin")
        async with reader:
            assert b"".join([chunk async for chunk in reader]) == data
        assert reader.verified is True
        assert await c.put_stream(f"gs://{bucket}/empty", io.BytesIO(b"")) == 0
        assert await c.get_bytes(f"gs://{bucket}/empty") == b""


# -- syn://: the MD5 first, so the stream is spooled -------------------------------

_SYN_TOKEN = "syn-pat-SECRET-streams-41c9"
_SYN_BUCKET = "synapse-store"


@pytest.fixture(scope="module")
def synapse(stock_moto: Any) -> Iterator[Any]:
    from synxfer_servers.synapse import SynapseService

    s3 = _s3(stock_moto.endpoint_url)
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=_SYN_BUCKET)
    with SynapseService(
        stock_moto.endpoint_url, _SYN_BUCKET, access_key="testing", secret_key="testing"
    ) as svc:
        yield svc


async def test_syn_stream_is_spooled_then_uploaded_with_its_md5(
    synapse: Any, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """syn:// wants the content's MD5 before the upload starts: the stream
    goes to a temporary file (removed after), then up as a file; it reads
    back verified against the file handle's MD5."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".synapseConfig").write_text(
        "[endpoints]\n"
        f"repoEndpoint = {synapse.repo_endpoint}\n"
        f"authEndpoint = {synapse.auth_endpoint}\n"
        f"fileHandleEndpoint = {synapse.file_endpoint}\n"
    )
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SYNAPSE_AUTH_TOKEN", _SYN_TOKEN)
    monkeypatch.delenv("SYNAPSE_PROFILE", raising=False)
    monkeypatch.setenv("TMPDIR", str(spool))
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR is read again
    project = synapse.create_project("streams")
    url = f"syn://{project}/piped.bin"
    data = _data(2 * PART + 10, 11)
    cfg = synxfer.TransferConfig(max_threads=4, part_size=PART, memory_budget=4 * PART)
    async with synxfer.Client(cfg) as c:
        assert await c.put_stream(url, _Chunky(data)) == len(data)
        assert list(spool.iterdir()) == []
        reader = c.open(url)
        async with reader:
            assert b"".join([chunk async for chunk in reader]) == data
        assert reader.verified is True


# -- blocks:// (in-process block-store sites) ------------------------------------


async def test_blockstore_stream_round_trip(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parts a multiple of the block size, read back through another site."""
    from synxfer_blockstore.cluster import CLUSTER_ENV
    from synxfer_blockstore.server import ServerConfig, serve
    from synxfer_servers.blockd import write_cluster_file

    token = "stream-test-token-never-printed"
    (tmp_path / "token").write_text(token)
    kib64 = 64 * 1024
    data = _data(5 * kib64 + 3, 13)
    async with contextlib.AsyncExitStack() as stack:
        urls = {}
        for name in ("A", "B"):
            cfg = ServerConfig(data_dir=tmp_path / name, site=name, token=token)
            urls[name] = await stack.enter_async_context(serve(cfg))
        cdir = tmp_path / "clusters"
        cdir.mkdir()
        for local in urls:
            write_cluster_file(
                cdir / f"at{local}.json",
                urls,
                local,
                token_file=tmp_path / "token",
                namespace="shared",
                block_size="64KiB",
            )
        monkeypatch.setenv(CLUSTER_ENV, str(cdir))
        config = synxfer.TransferConfig(max_threads=1, part_size=2 * kib64)
        async with synxfer.Client(config) as c:
            assert await c.put_stream("blocks://atA/s.bin", _Chunky(data, 30_000)) == len(data)
            assert await c.get_bytes("blocks://atB/s.bin") == data
            out = io.BytesIO()
            assert await c.get_stream("blocks://atB/s.bin", out) == len(data)
            assert out.getvalue() == data


# -- SeaweedFS (auth on) -----------------------------------------------------------


async def test_seaweedfs_stream_round_trip(
    seaweed_session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A multipart stream up and read back verified on SeaweedFS as it ships."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed_session.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed_session.secret_key)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    cfg = synxfer.TransferConfig(max_threads=4, part_size=PART, memory_budget=4 * PART)
    bucket = f"t-{uuid.uuid4().hex[:16]}"
    data = _data(2 * PART + 4321, 17)
    async with synxfer.Client(cfg, endpoint_url=seaweed_session.endpoint_url) as c:
        await c.make_bucket(f"s3://{bucket}")
        url = f"s3://{bucket}/s.bin"
        assert await c.put_stream(url, _Chunky(data)) == len(data)
        reader = c.open(url)
        async with reader:
            assert b"".join([chunk async for chunk in reader]) == data
        assert reader.verified is True
        assert await c.put_bytes(f"s3://{bucket}/empty", b"") == 0
        assert await c.get_bytes(f"s3://{bucket}/empty") == b""
