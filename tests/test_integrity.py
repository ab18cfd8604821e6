"""Issue 11: no corrupt byte ever lands, whoever uploaded the object.

The acceptance test downloads a tree through a :class:`FaultProxy` that
inverts one byte of 30 % of the GetObject bodies (length unchanged, so HTTP
framing stays intact): objects uploaded the way aws-cli and boto3 upload them
(``upload_file`` with boto3's default ``TransferConfig``: one PUT below
8 MiB, 8 MiB parts above; and a plain ``put_object``) and objects synxfer
uploaded. Done when: 0 corrupt files, 0 failed files, exit 0 -- and no file
counted as not verified, so the result owes nothing to luck.

The proxy's ``corrupt`` fault itself is tested first, on the wire.

moto runs in a subprocess for this module. Everything is seeded (the tree's
bytes, the proxy's draws, the bucket names), so a run repeats.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import hashlib
import json
import mmap
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from boto3.s3.transfer import TransferConfig as Boto3TransferConfig

import synxfer
import synxfer.backend
from synxfer import MiB, RetryPolicy, TransferConfig
from synxfer_servers.faultproxy import Fault, FaultProxy
from synxfer_servers.s3 import HOST, MotoProcess

#: The share of GetObject responses whose body gets one byte inverted.
RATE = 0.3
SEED = 11

# -- fixtures ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    with MotoProcess() as server:
        yield server.endpoint_url


@pytest.fixture(scope="module")
def s3(moto: str) -> Any:
    """boto3 straight to moto (never through the proxy)."""
    return boto3.client("s3", endpoint_url=moto)


@pytest.fixture
def bucket(s3: Any, request: pytest.FixtureRequest) -> str:
    """A fresh bucket named after the test: the proxy's draws depend on the
    request path, so a fixed name makes them repeat from run to run."""
    name = "i-" + hashlib.sha256(request.node.name.encode()).hexdigest()[:20]
    s3.create_bucket(Bucket=name)
    return name


# -- the proxy's corrupt fault, on the wire --------------------------------------------


async def _raw_get(port: int, target: str, extra: str = "") -> tuple[bytes, bytes]:
    """One raw HTTP/1.1 GET on a fresh connection: (head, body) as received."""
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read(-1)
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


def _presigned_target(s3: Any, bucket: str, key: str) -> str:
    """The path and query of a presigned GET (moto then needs no Authorization header)."""
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key})
    return "/" + str(url).split("://", 1)[1].partition("/")[2]


def _diff(a: bytes, b: bytes) -> list[int]:
    assert len(a) == len(b)
    return [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]


async def test_corrupt_inverts_exactly_one_byte_length_unchanged(
    moto: str, s3: Any, bucket: str
) -> None:
    data = random.Random(1).randbytes(100_000)
    s3.put_object(Bucket=bucket, Key="obj", Body=data)
    target = _presigned_target(s3, bucket, "obj")
    async with FaultProxy(moto, rate=1.0, faults={Fault.CORRUPT: 1.0}, seed=SEED) as proxy:
        head, body = await _raw_get(proxy.port, target)
        assert head.startswith(b"HTTP/1.1 200 ")
        assert b"Content-Length: 100000" in head
        assert len(body) == len(data)
        (at,) = _diff(body, data)
        assert body[at] == data[at] ^ 0xFF  # the byte is inverted

        # A ranged GET (206): one byte of the range is inverted.
        head, body = await _raw_get(proxy.port, target, "Range: bytes=1000-50999\r\n")
        assert head.startswith(b"HTTP/1.1 206 ")
        (at,) = _diff(body, data[1000:51000])
        assert body[at] == data[1000 + at] ^ 0xFF

        # An error body passes untouched (the fault is drawn all the same).
        missing = _presigned_target(s3, bucket, "missing")
        head, body = await _raw_get(proxy.port, missing)
        assert head.startswith(b"HTTP/1.1 404 ")
        assert b"<Code>NoSuchKey</Code>" in body
        stats = proxy.snapshot()
    assert stats.corrupted == 2
    assert stats.corrupted_keys == {f"{bucket}/obj": 2}
    assert stats.faults == {"corrupt": 3}


async def test_corrupt_hits_get_bodies_only(moto: str, s3: Any, bucket: str) -> None:
    """PUT, HEAD and the like pass through whole, and count no fault."""
    async with FaultProxy(moto, rate=1.0, faults={Fault.CORRUPT: 1.0}, seed=SEED) as proxy:
        client = boto3.client("s3", endpoint_url=proxy.url)
        body = b"x" * 5000
        put = await asyncio.to_thread(client.put_object, Bucket=bucket, Key="k", Body=body)
        head = await asyncio.to_thread(client.head_object, Bucket=bucket, Key="k")
        assert head["ETag"] == put["ETag"] == f'"{hashlib.md5(body).hexdigest()}"'
        assert head["ContentLength"] == 5000
        stats = proxy.snapshot()
    assert stats.faulted == 0
    assert stats.corrupted == 0
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == body


async def test_corrupt_keeps_chunked_framing() -> None:
    """A chunked body: one data byte is inverted, the chunk framing is intact."""
    payload = bytes(range(256)) * 3

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for i in range(0, len(payload), 100):
                piece = payload[i : i + 100]
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        writer.close()

    upstream = await asyncio.start_server(serve, HOST, 0)
    port = upstream.sockets[0].getsockname()[1]
    try:
        async with FaultProxy(
            f"http://{HOST}:{port}", rate=1.0, faults={Fault.CORRUPT: 1.0}, seed=SEED
        ) as proxy:
            head, chunked = await _raw_get(proxy.port, "/b/k")
            assert proxy.snapshot().corrupted == 1
    finally:
        upstream.close()
        await upstream.wait_closed()
    assert b"Transfer-Encoding: chunked" in head
    # Decode the framing: it must be exactly what the upstream sent.
    pieces, at = [], 0
    while True:
        eol = chunked.index(b"\r\n", at)
        size = int(chunked[at:eol], 16)
        if size == 0:
            assert chunked[eol:] == b"\r\n\r\n"
            break
        pieces.append(chunked[eol + 2 : eol + 2 + size])
        assert chunked[eol + 2 + size : eol + 4 + size] == b"\r\n"
        at = eol + 4 + size
    assert [len(p) for p in pieces] == [100] * 7 + [68]
    data = b"".join(pieces)
    (at,) = _diff(data, payload)
    assert data[at] == payload[at] ^ 0xFF


async def test_corrupt_rate_is_the_share_of_bodies_changed(moto: str, s3: Any, bucket: str) -> None:
    """At rate 0.3, about 30 % of 200 GETs come back with exactly one byte inverted;
    the same seed gives the same ones."""
    data = random.Random(2).randbytes(4096)
    s3.put_object(Bucket=bucket, Key="obj", Body=data)
    target = _presigned_target(s3, bucket, "obj")

    async def run() -> list[int]:
        # (A presigned GET does not count as get_object for ``ops``: no filter.)
        async with FaultProxy(moto, rate=RATE, faults={Fault.CORRUPT: 1.0}, seed=SEED) as proxy:
            changed = []
            for i in range(200):
                _, body = await _raw_get(proxy.port, target)
                diff = _diff(body, data)
                assert len(diff) <= 1
                if diff:
                    changed.append(i)
            assert proxy.snapshot().corrupted == len(changed)
        return changed

    first = await run()
    assert 0.2 * 200 <= len(first) <= 0.4 * 200
    assert await run() == first


# -- the acceptance test ------------------------------------------------------------------

#: Uploaded with boto3's ``upload_file`` and its default TransferConfig (as aws-cli
#: does): one PUT below 8 MiB, parts of 8 MiB above.
AWS_FILES = {
    "aws/empty": 0,
    "aws/one": 1,
    "aws/small-a.txt": 1000,
    "aws/small-b.bin": 64 * 1024,
    "aws/d/small-c.bin": 300_000,
    "aws/d/mid.bin": 2 * MiB + 17,
    "aws/big.bin": 9 * MiB + 5,  # 2 parts: 8 MiB + 1 MiB
}
#: Uploaded with one ``put_object`` each.
PUT_FILES = {f"put/p{i}.dat": 5000 * (i + 1) for i in range(5)}
#: Uploaded by synxfer (parts of 5 MiB from 5 MiB on).
OWN_FILES = {
    **{f"own/s{i:02d}.dat": 3000 * (i + 1) for i in range(14)},
    "own/mid.bin": 3 * MiB + 1,
    "own/big.bin": 6 * MiB + 3,  # 2 parts: 5 MiB + 1 MiB
    "own/d/big2.bin": 10 * MiB + 1,  # 3 parts
}
OWN_CONFIG = TransferConfig(max_threads=4, part_size=5 * MiB, multipart_threshold=5 * MiB)


def _write(root: Path, files: dict[str, int], seed: int) -> dict[str, str]:
    """Create ``files`` (rel -> size) of seeded random bytes; rel -> sha256."""
    rng = random.Random(seed)
    digests = {}
    for rel, size in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = rng.randbytes(size)
        path.write_bytes(data)
        digests[rel] = hashlib.sha256(data).hexdigest()
    return digests


def _landed(root: Path) -> dict[str, str]:
    """rel -> sha256 of every regular file under ``root`` (hidden ones included)."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


async def _upload_tree(
    s3: Any, moto: str, bucket: str, root: Path, own: bool, foreign: bool
) -> dict[str, str]:
    """Upload the test tree to ``bucket`` (straight to moto): rel -> sha256."""
    expected: dict[str, str] = {}
    if foreign:
        expected |= _write(root, AWS_FILES, seed=1) | _write(root, PUT_FILES, seed=2)
        config = Boto3TransferConfig()  # aws-cli's and boto3's defaults
        assert (config.multipart_threshold, config.multipart_chunksize) == (8 * MiB, 8 * MiB)
        for rel in AWS_FILES:
            s3.upload_file(str(root / rel), bucket, rel, Config=config)
        for rel in PUT_FILES:
            s3.put_object(Bucket=bucket, Key=rel, Body=(root / rel).read_bytes())
        etags = {rel: s3.head_object(Bucket=bucket, Key=rel)["ETag"] for rel in AWS_FILES}
        assert etags["aws/big.bin"].endswith('-2"')  # really multipart, 8 MiB parts
        assert "-" not in etags["aws/d/mid.bin"]
    if own:
        expected |= _write(root, OWN_FILES, seed=3)
        async with synxfer.Client(OWN_CONFIG, endpoint_url=moto) as client:
            result = await client.sync_to(root / "own", f"s3://{bucket}/own")
        assert result.ok, result.failures
        assert result.files_transferred == len(OWN_FILES)
        etag = s3.head_object(Bucket=bucket, Key="own/big.bin")["ETag"]
        assert etag.endswith('-2"')
    return expected


async def test_no_corrupt_byte_lands_whoever_uploaded(
    moto: str, s3: Any, bucket: str, tmp_path: Path
) -> None:
    """The issue's "done when": through a proxy corrupting 30 % of the GetObject
    bodies, ``synxfer sync s3://... dir`` over aws-cli/boto3-style objects
    (single-part and multipart), put_object ones and synxfer's own leaves 0
    corrupt files and 0 failed files, and exits 0."""
    expected = await _upload_tree(s3, moto, bucket, tmp_path / "src", own=True, foreign=True)
    dst = tmp_path / "dst"
    cmd = [sys.executable, "-m", "synxfer.cli.main", "sync", f"s3://{bucket}", str(dst)]
    with FaultProxy(
        moto, rate=RATE, faults={Fault.CORRUPT: 1.0}, ops={"get_object"}, seed=SEED
    ) as proxy:
        cmd += ["--endpoint-url", proxy.url]
        proc = await asyncio.to_thread(
            subprocess.run, cmd, capture_output=True, text=True, timeout=300
        )
        stats = proxy.snapshot()
    assert stats.corrupted > 0  # the proxy did corrupt bodies
    landed = _landed(dst)
    corrupt = sorted(rel for rel, digest in landed.items() if expected.get(rel) != digest)
    missing = sorted(set(expected) - set(landed))
    print(f"\n[integrity] corrupted bodies={stats.corrupted} corrupt files={corrupt} "
          f"missing={missing} exit={proc.returncode}")  # fmt: skip
    assert corrupt == [], f"{len(corrupt)} corrupt file(s) landed: {corrupt}"
    assert missing == [], f"{len(missing)} file(s) failed: {proc.stderr[-2000:]}"
    assert proc.returncode == 0, proc.stderr[-2000:]
    # Not by luck: every file was checked against a checksum its source vouches for.
    assert "summary:" in proc.stderr
    unchecked = [line for line in proc.stdout.splitlines() if "not verified" in line]
    assert unchecked == [], unchecked
    assert "not verified" not in proc.stderr, proc.stderr[-2000:]


async def test_synxfers_own_objects_never_land_corrupt(
    moto: str, s3: Any, bucket: str, tmp_path: Path
) -> None:
    """Objects synxfer uploaded (CRC32C, composite for multipart ones), read
    through the corrupting proxy with the part size they were uploaded with:
    every corrupt GET body is detected and fetched again under the retry
    policy, so every file lands whole and verified, none fails."""
    expected = await _upload_tree(s3, moto, bucket, tmp_path / "src", own=True, foreign=False)
    dst = tmp_path / "dst"
    config = OWN_CONFIG.evolve(retry=RetryPolicy(attempts=6, initial_delay=0.01, max_delay=0.2))
    async with (
        FaultProxy(
            moto, rate=RATE, faults={Fault.CORRUPT: 1.0}, ops={"get_object"}, seed=SEED
        ) as proxy,
        synxfer.Client(config, endpoint_url=proxy.url) as client,
    ):
        result = await asyncio.wait_for(client.sync_from(f"s3://{bucket}/own", dst / "own"), 120)
        stats = proxy.snapshot()
    assert stats.corrupted >= 3  # the proxy did corrupt bodies (seeded: 8 today)
    landed = _landed(dst)
    corrupt = sorted(rel for rel, digest in landed.items() if expected.get(rel) != digest)
    failed = sorted(f.path.removeprefix(f"s3://{bucket}/") for f in result.failures)
    print(f"\n[integrity-own] corrupted bodies={stats.corrupted} corrupt files={corrupt} "
          f"failed={failed} retries={result.retries}")  # fmt: skip
    assert corrupt == [], f"{len(corrupt)} corrupt file(s) landed: {corrupt}"
    assert failed == []
    assert sorted(landed) == sorted(expected)  # no temp file left either
    assert result.files_transferred == len(expected)
    assert result.not_verified == 0
    assert 0 < result.retries <= stats.corrupted  # a pass re-fetches all its corrupt ranges


# -- the algorithms --------------------------------------------------------------------


def _reference(kind: str, data: bytes) -> bytes:
    """``kind`` of ``data`` by an implementation other than synxfer's."""
    import zlib

    if kind == "crc32":
        return zlib.crc32(data).to_bytes(4, "big")
    if kind == "crc32c":
        import google_crc32c

        return int(google_crc32c.value(data)).to_bytes(4, "big")
    if kind == "crc64nvme":
        checksums = pytest.importorskip("awscrt.checksums")
        return int(checksums.crc64nvme(data)).to_bytes(8, "big")
    return hashlib.new(kind, data).digest()


@pytest.mark.parametrize("kind", ["crc32", "crc32c", "crc64nvme"])
def test_crc_of_pieces_folds_to_the_crc_of_the_whole(kind: str) -> None:
    """Ranges finish in any order: their CRCs fold into the object's, for all three CRCs."""
    from synxfer.engine import checksums as ck

    if not ck.available(kind):
        pytest.skip(f"{kind} needs awscrt")
    rng = random.Random(kind)
    for _ in range(50):
        pieces = [rng.randbytes(rng.randint(0, 5000)) for _ in range(rng.randint(1, 6))]
        total = 0
        for piece in pieces:
            value = ck.crc_value(kind, bytearray(piece))  # pooled buffers are writable
            total = ck.crc_combine(kind, total, value, len(piece))
        assert ck.to_bytes(kind, total) == _reference(kind, b"".join(pieces))
    # Check values of the catalogue ("123456789").
    check = {"crc32": 0xCBF43926, "crc32c": 0xE3069283, "crc64nvme": 0xAE8B14860A799888}
    assert ck.crc_value(kind, b"123456789") == check[kind]


def test_crc32c_leaves_awscrt_unloaded_until_a_large_transfer() -> None:
    """Without fastcrc: asking what can be verified, and CRC32Cs of any buffer
    size, leave awscrt unloaded (~50 ms with the GIL held) until the process
    has hashed ``_AWSCRT_AFTER`` bytes; then it takes over, with the same values."""
    code = """
import sys, google_crc32c
sys.modules["fastcrc"] = None
from synxfer.engine import checksums as ck
ck._AWSCRT_AFTER = 8 << 20
assert ck.available("crc32c") and ck.available("crc64nvme")
for size in (1 << 20, 5 << 20, 3 << 20):  # the last one crosses 8 MiB
    data = bytearray(b"x" * size)
    assert ck.crc_value("crc32c", data) == google_crc32c.value(bytes(data))
print("awscrt" in sys.modules, end=" ")
data = bytearray(b"y" * (1 << 20))
assert ck.crc_value("crc32c", data) == google_crc32c.value(bytes(data))
print("awscrt" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_crc32c_of_a_writable_buffer_makes_no_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without fastcrc, the engine's pooled buffers are writable, which
    google-crc32c's module functions refuse: they go to its C function through
    ctypes, never through ``bytes`` copies; read-only ``bytes`` still go to the
    module. Same values for whole buffers, slices and continued CRCs."""
    import google_crc32c

    from synxfer.engine import checksums as ck

    installed = ck._installed
    monkeypatch.setattr(ck, "_installed", lambda name: name != "fastcrc" and installed(name))
    if ck._google_extend() is None:
        pytest.skip("google-crc32c has no C library here")
    reference = google_crc32c.extend
    seen: list[type] = []

    def extend(crc: int, data: bytes) -> int:
        seen.append(type(data))
        return int(reference(crc, data))

    monkeypatch.setattr(google_crc32c, "extend", extend)
    monkeypatch.setattr(ck, "_AWSCRT_AFTER", 1 << 62)
    monkeypatch.delitem(sys.modules, "awscrt.checksums", raising=False)
    data = bytearray(random.Random(7).randbytes(3 << 20))
    for piece, previous in (
        (data, 0),
        (memoryview(data)[5:70_000], 0),
        (memoryview(data)[1 << 20 :], 12345),
        (bytearray(), 99),
    ):
        assert ck.crc_value("crc32c", piece, previous) == reference(previous, bytes(piece))
    assert seen == []  # no copies handed to the module
    assert ck.crc_value("crc32c", b"123456789") == 0xE3069283
    assert seen == [bytes]


def test_fastcrc_gives_google_crc32cs_values_over_any_buffer() -> None:
    """fastcrc's CRC32C (``crc32.iscsi``) is google-crc32c's, over 0 bytes and
    up, continued from a previous value piece by piece as the engine folds
    ranges, and over writable buffers: bytearrays, memoryview slices, an mmap
    (the pool's lent download buffers, decision 0019)."""
    google_crc32c = pytest.importorskip("google_crc32c")
    pytest.importorskip("fastcrc")
    from synxfer.engine import checksums as ck

    rng = random.Random(20)
    for size in (0, 1, 3, 8, 63, 64, 4097, 1 << 20, (3 << 20) + 5):
        data = rng.randbytes(size)
        whole = int(google_crc32c.value(data))
        assert ck.crc_value("crc32c", data) == whole
        assert ck.crc_value("crc32c", bytearray(data)) == whole
        previous = rng.getrandbits(32)
        assert ck.crc_value("crc32c", data, previous) == google_crc32c.extend(previous, data)
        cuts = sorted(rng.randint(0, size) for _ in range(rng.randint(1, 5)))
        buffer, crc = bytearray(data), 0
        for start, end in zip([0, *cuts], [*cuts, size], strict=True):
            crc = ck.crc_value("crc32c", memoryview(buffer)[start:end], crc)
        assert crc == whole
    size = 16 << 20
    mapped = mmap.mmap(-1, size)  # writable, as the pool's lent buffers are
    try:
        data = rng.randbytes(size)
        mapped[:] = data
        assert ck.crc_value("crc32c", memoryview(mapped)) == google_crc32c.value(data)
        part = memoryview(mapped)[5 : 8 << 20]
        assert ck.crc_value("crc32c", part, 77) == google_crc32c.extend(77, data[5 : 8 << 20])
        part.release()
    finally:
        mapped.close()


def test_crc32c_comes_from_fastcrc_alone_where_installed() -> None:
    """With fastcrc installed, CRC32Cs of bytes and of writable buffers import
    fastcrc (at the first one, not before) and none of google-crc32c, ctypes
    or awscrt."""
    pytest.importorskip("fastcrc")
    code = """
import sys
from synxfer.engine import checksums as ck
assert ck.available("crc32c")
assert "fastcrc" not in sys.modules
assert ck.crc_value("crc32c", b"123456789") == 0xE3069283
assert ck.crc_value("crc32c", memoryview(bytearray(b"0123456789"))[1:]) == 0xE3069283
assert ck.crc_value("crc32c", bytearray(8 << 20)) == ck.crc_value("crc32c", bytes(8 << 20))
names = ("fastcrc", "google_crc32c", "ctypes", "awscrt")
print(" ".join(name for name in names if name in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["fastcrc"]


@pytest.mark.parametrize(
    ("blocked", "used"),
    [(["fastcrc"], "google_crc32c"), (["fastcrc", "google_crc32c"], "awscrt")],
    ids=["google-crc32c", "awscrt"],
)
def test_crc32c_without_fastcrc_gives_the_same_values(blocked: list[str], used: str) -> None:
    """Without fastcrc, CRC32C falls back to google-crc32c, and without that to
    awscrt: the same values over bytes, bytearrays, slices and continued CRCs."""
    google_crc32c = pytest.importorskip("google_crc32c")
    pytest.importorskip("awscrt")
    rng = random.Random(21)
    cases = [(rng.randbytes(n), rng.getrandbits(32)) for n in (0, 1, 100, 5000, (1 << 20) + 3)]
    expected = [int(google_crc32c.extend(previous, data)) for data, previous in cases]
    code = f"""
import random, sys
for name in {blocked!r}:
    sys.modules[name] = None
from synxfer.engine import checksums as ck
assert ck.available("crc32c")
rng = random.Random(21)
cases = [(rng.randbytes(n), rng.getrandbits(32)) for n in (0, 1, 100, 5000, (1 << 20) + 3)]
for (data, previous), value in zip(cases, {expected!r}, strict=True):
    assert ck.crc_value("crc32c", data, previous) == value
    assert ck.crc_value("crc32c", bytearray(data), previous) == value
    buffer = bytearray(b"--" + data)
    assert ck.crc_value("crc32c", memoryview(buffer)[2:], previous) == value
names = ("fastcrc", "google_crc32c", "awscrt")
print(" ".join(name for name in names if sys.modules.get(name)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [used]


def test_expectations_rank_crcs_first_and_read_composites() -> None:
    """What is checked: CRCs before hashes, whole-object before composite;
    a composite value's part count comes from its -N or the multipart ETag;
    an undecodable value is skipped."""
    from synxfer import ObjectInfo
    from synxfer.engine.verify import expectations

    crc = base64.b64encode(b"\x01\x02\x03\x04").decode()
    md5 = base64.b64encode(bytes(16)).decode()
    info = ObjectInfo(
        "k",
        10,
        etag="0" * 32 + "-3",
        checksums={"md5-composite": f"{md5}-3", "crc32c-composite": crc, "sha256": "!!"},
    )
    ranked = [(e.kind, e.parts) for e in expectations(info)]
    assert ranked == [("crc32c", 3), ("md5", 3)]
    whole = ObjectInfo("k", 10, checksums={"md5": md5, "crc32": crc})
    assert [e.name for e in expectations(whole)] == ["crc32", "md5"]


def test_own_objects_etag_is_an_md5_unless_kms_encrypted() -> None:
    """For an object synxfer uploaded (it carries synxfer-part-size), the ETag
    counts as its MD5 when the backend did not report one -- except under
    SSE-KMS or SSE-C, whose ETags are not MD5s."""
    from synxfer import ObjectInfo
    from synxfer.engine.verify import expectations

    meta = {"synxfer-part-size": "0"}
    digest = hashlib.md5(b"x").hexdigest()
    plain = ObjectInfo("k", 1, etag=digest, metadata=meta)
    assert [(e.name, e.value) for e in expectations(plain)] == [("md5", bytes.fromhex(digest))]
    for sse in ("aws:kms", "SSE-C"):
        assert expectations(dataclasses.replace(plain, encryption=sse)) == []
    assert expectations(dataclasses.replace(plain, encryption="AES256")) != []
    assert expectations(dataclasses.replace(plain, metadata={})) == [], "not synxfer's"


def test_plan_cuts_ranges_at_part_boundaries_and_chains_hashes() -> None:
    from synxfer.engine.verify import Expectation, Layout, plan

    layout = Layout(part_size=5, count=3)  # parts 5 + 5 + 2 of a 12-byte object
    crc = plan(12, 3, Expectation("crc32c", b"", 3, "crc32c-composite"), layout)
    assert [(r.offset, r.length) for r in crc.ranges] == [(0, 3), (3, 2), (5, 3), (8, 2), (10, 2)]
    assert crc.units == [[0], [1], [2], [3], [4]]
    assert not crc.chained
    assert crc.segments == [[0, 1], [2, 3], [4]]  # each part's CRC from its ranges
    md5 = plan(12, 3, Expectation("md5", b"", 3, "md5-composite"), layout)
    assert md5.units == [[0, 1], [2, 3], [4]]
    assert md5.chained
    whole = plan(12, 5, Expectation("sha256", b"", None, "sha256"), None)
    assert [(r.offset, r.length) for r in whole.ranges] == [(0, 5), (5, 5), (10, 2)]
    assert whole.units == [[0, 1, 2]]
    assert whole.chained
    assert plan(0, 5, None, None).ranges[0].length == 0


async def test_find_layout_trusts_only_a_layout_the_last_part_confirms() -> None:
    """Part 1 gives the part size and count; the last part must be where that
    layout puts it, else the object is checked another way (None)."""
    from synxfer import PartInfo
    from synxfer.engine.verify import Layout, find_layout

    class Parts(synxfer.backend.Backend):
        def __init__(self, sizes: list[int], tell_offset: bool = True) -> None:
            self.sizes, self.tell_offset = sizes, tell_offset
            self.asked: list[int] = []

        async def stat_part(self, key: str, number: int, *, if_match: str | None = None) -> Any:
            self.asked.append(number)
            offset = sum(self.sizes[: number - 1]) if self.tell_offset else None
            return PartInfo(number, self.sizes[number - 1], len(self.sizes), offset)

        stat = list_page = read = put = delete = None  # type: ignore[assignment]

    even = Parts([8, 8, 3])
    assert await find_layout(even, "k", 19, 3, None) == Layout(8, 3)
    assert even.asked == [1, 3]
    assert await find_layout(Parts([8, 6, 5]), "k", 19, 3, None) is None  # last part elsewhere
    assert await find_layout(Parts([8, 8, 3]), "k", 19, 2, None) is None  # not the ETag's count
    assert await find_layout(Parts([5, 9, 5], tell_offset=False), "k", 19, 0, None) is None


# -- every checksum kind, through the engine -------------------------------------------


class _Vouch(synxfer.layers.Layer):
    """Makes the server vouch for exactly ``checksums`` (one algorithm), as a
    store that computed it would: on HEADs and GETs alike."""

    def __init__(
        self, inner: synxfer.backend.Backend, checksums: dict[str, dict[str, str]]
    ) -> None:
        super().__init__(inner)
        self.checksums = checksums  # key -> checksums

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        result = await fn(*args)
        if isinstance(result, synxfer.ObjectInfo) and op in ("stat", "read_into"):
            return dataclasses.replace(result, checksums=self.checksums.get(result.key, {}))
        return result


class _CorruptFirst(synxfer.layers.Layer):
    """Inverts one byte of the first read of every range (as the fault proxy
    does on the wire, after the transport's own checks)."""

    def __init__(self, inner: synxfer.backend.Backend) -> None:
        super().__init__(inner)
        self.seen: set[tuple[str, int]] = set()
        self.corrupted = 0

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        result = await fn(*args)
        if op == "read_into":
            key, offset, buf = args[0], args[1], args[2]
            if (key, offset) not in self.seen and len(buf):
                self.seen.add((key, offset))
                buf[len(buf) // 3] ^= 0xFF
                self.corrupted += 1
        return result


def _vouched(kind: str, composite: bool, data: bytes, part: int) -> dict[str, str]:
    """What a store computing ``kind`` would report for ``data`` uploaded in ``part``-byte parts."""
    if not composite:
        return {kind: base64.b64encode(_reference(kind, data)).decode()}
    pieces = [data[i : i + part] for i in range(0, len(data), part)] or [b""]
    joined = b"".join(_reference(kind, p) for p in pieces)
    value = base64.b64encode(_reference(kind, joined)).decode()
    return {f"{kind}-composite": f"{value}-{len(pieces)}"}


CASES = [
    *[(kind, False) for kind in ("crc64nvme", "crc32c", "crc32", "sha256", "sha1", "md5")],
    *[(kind, True) for kind in ("crc32c", "crc32", "sha256", "md5")],
]


#: Uploaded once by synxfer in 8 MiB parts, read back in 5 MiB ranges, so
#: parts span ranges: CRCs fold per part, hashes chain in order.
KIND_FILES = {"one": 1000, "big": 2 * 8 * MiB + 5, "empty": 0}


@pytest.fixture(scope="module")
def kind_tree(moto: str, s3: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    name = "i-kinds-" + hashlib.sha256(b"kinds").hexdigest()[:12]
    s3.create_bucket(Bucket=name)
    src = tmp_path_factory.mktemp("kinds")
    _write(src, KIND_FILES, seed=5)
    up = TransferConfig(max_threads=4, part_size=8 * MiB, multipart_threshold=8 * MiB)

    async def upload() -> None:
        async with synxfer.Client(up, endpoint_url=moto) as client:
            assert (await client.sync_to(src, f"s3://{name}/v")).ok

    asyncio.run(upload())
    return name, src


@pytest.mark.parametrize("protected", [True, False], ids=["verified", "unprotected"])
@pytest.mark.parametrize(("kind", "composite"), CASES, ids=[f"{k}{'-comp' * c}" for k, c in CASES])
async def test_each_checksum_kind_catches_corruption_and_refetches(
    kind: str,
    composite: bool,
    protected: bool,
    moto: str,
    kind_tree: tuple[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Objects whose store vouches for one kind of checksum (whole-object, or
    composite over the 8 MiB parts), read in 5 MiB ranges, every range
    corrupted on its first read: each file lands whole after one re-fetch,
    and counts as verified. Without the check (``expectations`` finds
    nothing), the corrupt bytes land and the files count as not verified."""
    from synxfer.engine import checksums as ck
    from synxfer.engine import verify

    if not ck.available(kind):
        pytest.skip(f"{kind} needs awscrt")
    if not protected:
        monkeypatch.setattr(verify, "expectations", lambda info: [])
    bucket, src = kind_tree
    expected = _landed(src)
    vouched = {
        f"v/{rel}": _vouched(kind, composite, (src / rel).read_bytes(), 8 * MiB)
        for rel in KIND_FILES
    }
    corrupters: list[_CorruptFirst] = []

    def corrupt(b: synxfer.backend.Backend) -> synxfer.backend.Backend:
        corrupters.append(_CorruptFirst(b))
        return corrupters[-1]

    down = TransferConfig(
        max_threads=4, part_size=5 * MiB, retry=RetryPolicy(attempts=3, initial_delay=0.01)
    )
    layers = [lambda b: _Vouch(b, vouched), corrupt]
    async with synxfer.Client(down, endpoint_url=moto, layers=layers) as client:
        result = await client.sync_from(f"s3://{bucket}/v", tmp_path / "dst")
    assert result.ok, result.failures
    landed = _landed(tmp_path / "dst")
    corrupt_files = sorted(rel for rel, digest in landed.items() if expected[rel] != digest)
    # "big" (16 MiB + 5): 5 MiB ranges, cut at the 8 MiB parts when composite
    # (5+3+5+3 MiB+5). A hash is chained over its ranges: one GET each.
    # Otherwise two adjacent ranges go in one GET (10 MiB fetches in the
    # 20 MiB budget, download.fetch_size): two GETs either way.
    chained = protected and kind in ("sha256", "sha1", "md5")
    assert corrupters[0].corrupted == 1 + ((5 if composite else 4) if chained else 2)
    if protected:
        assert corrupt_files == []
        assert result.not_verified == 0
        assert result.retries == 2  # one re-fetch of each file that had bytes
    else:
        assert corrupt_files == ["big", "one"]
        assert result.not_verified == len(KIND_FILES)
        assert result.retries == 0


# -- what cannot be verified is said so -------------------------------------------------


async def test_cli_reports_files_it_could_not_verify(
    moto: str, bucket: str, tmp_path: Path
) -> None:
    """An SSE-KMS object with no additional checksum vouches for nothing (its
    ETag is not an MD5): it is downloaded, and the CLI says it was not
    verified, per file and in the summary; a plain object's ETag is its MD5,
    so it is verified."""
    from botocore.config import Config

    plain = boto3.client("s3", endpoint_url=moto, config=Config(
        request_checksum_calculation="when_required"))  # fmt: skip
    plain.put_object(Bucket=bucket, Key="d/plain", Body=b"p" * 100)
    plain.put_object(Bucket=bucket, Key="d/kms", Body=b"k" * 100, ServerSideEncryption="aws:kms")
    head = plain.head_object(Bucket=bucket, Key="d/kms", ChecksumMode="ENABLED")
    assert not [h for h in head["ResponseMetadata"]["HTTPHeaders"] if "x-amz-checksum-" in h]
    dst = tmp_path / "dst"
    cmd = [sys.executable, "-m", "synxfer.cli.main", "sync", f"s3://{bucket}/d", str(dst)]
    proc = await asyncio.to_thread(
        subprocess.run, [*cmd, "--endpoint-url", moto], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert (dst / "kms").read_bytes() == b"k" * 100
    unchecked = [line for line in proc.stdout.splitlines() if "not verified" in line]
    assert len(unchecked) == 1
    assert "d/kms" in unchecked[0]
    assert proc.stderr.strip().endswith("; not verified: 1"), proc.stderr
    # Per file on stderr too, with the reason (issue 33).
    warned = [line for line in proc.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warned) == 1
    assert "d/kms: not verified: it is aws:kms-encrypted" in warned[0]
    # With --json: the file's done event says so, and the summary counts it.
    cmd[-1] = str(tmp_path / "dst2")
    js = await asyncio.to_thread(
        subprocess.run, [*cmd, "--endpoint-url", moto, "--json"], capture_output=True, text=True
    )
    lines = [json.loads(line) for line in js.stdout.splitlines()]
    verified = {line["src"].rsplit("/", 1)[1]: line.get("verified") for line in lines[:-1]}
    assert verified == {"kms": False, "plain": True}
    assert lines[-1]["type"] == "summary"
    assert lines[-1]["not_verified"] == 1
    assert [w["kind"] for w in lines[-1]["warnings"]] == ["not-verified"]
    assert [line["warning"] for line in lines[:-1] if line.get("warning")] == [
        w["message"] for w in lines[-1]["warnings"]
    ]


async def test_gcs_downloads_are_checked_against_crc32c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GCS vouches for every object's CRC32C (composed objects too): a range
    corrupted after the transport is caught and fetched again."""
    from synxfer_servers.gcs import GcsEmulator, create_bucket

    files = {"big.bin": 2 * 5 * MiB + 9, "small": 3000, "empty": 0}
    src = tmp_path / "src"
    expected = _write(src, files, seed=7)
    corrupters: list[_CorruptFirst] = []

    def corrupt(b: synxfer.backend.Backend) -> synxfer.backend.Backend:
        corrupters.append(_CorruptFirst(b))
        return corrupters[-1]

    config = TransferConfig(
        max_threads=4,
        part_size=5 * MiB,
        multipart_threshold=5 * MiB,
        retry=RetryPolicy(attempts=3, initial_delay=0.01),
    )
    with GcsEmulator() as emulator:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.endpoint_url)
        create_bucket(emulator.endpoint_url, "verified")
        async with synxfer.Client(config) as client:
            assert (await client.sync_to(src, "gs://verified/t")).ok
        async with synxfer.Client(config, layers=[corrupt]) as client:
            result = await client.sync_from("gs://verified/t", tmp_path / "dst")
    assert result.ok, result.failures
    assert _landed(tmp_path / "dst") == expected
    # "small", and the three ranges of "big.bin", two to a GET (download.fetch_size).
    assert corrupters[0].corrupted == 1 + 2
    assert result.retries == 2
    assert result.not_verified == 0


@pytest.mark.parametrize("verify", [True, False])
async def test_block_store_reads_count_as_verified_when_it_checks_blocks(
    verify: bool, tmp_path: Path
) -> None:
    """The block store checks whole blocks against their SHA-256 ids, and the
    engine's ranges are whole blocks: its downloads are verified (unless
    its ``verify`` option is off)."""
    from .test_blockstore import cluster, sites

    src = tmp_path / "src"
    expected = _write(src, {"a": 300 * 1024, "b": 1000}, seed=9)
    async with sites(tmp_path / "d", ["A"]) as urls:
        path = cluster(tmp_path, urls, "A", block_size="64KiB")
        extra = {"blocks": {"cluster": path, "verify": str(verify).lower()}}
        config = TransferConfig(max_threads=1, part_size=128 * 1024)
        async with synxfer.Client(config, backend_options=extra) as client:
            assert (await client.sync_to(src, "blocks://ns/t")).ok
            result = await client.sync_from("blocks://ns/t", tmp_path / "dst")
    assert result.ok, result.failures
    assert _landed(tmp_path / "dst") == expected
    assert result.not_verified == (0 if verify else 2)


async def test_without_retries_a_mismatch_fails_the_file_by_name(
    moto: str, kind_tree: tuple[str, Path], tmp_path: Path
) -> None:
    """The re-fetch is what saves a corrupted download: with one attempt the
    same corruption fails each file, naming the object and the checksum
    compared, and nothing lands under its name (nor a temp file)."""
    bucket, src = kind_tree
    vouched = {
        f"v/{rel}": _vouched("crc32c", False, (src / rel).read_bytes(), 8 * MiB)
        for rel in KIND_FILES
    }
    config = TransferConfig(max_threads=4, part_size=5 * MiB, retry=RetryPolicy(attempts=1))
    layers = [lambda b: _Vouch(b, vouched), _CorruptFirst]
    async with synxfer.Client(config, endpoint_url=moto, layers=layers) as client:
        result = await client.sync_from(f"s3://{bucket}/v", tmp_path / "dst")
    failed = {f.path.rsplit("/", 1)[1]: f.error for f in result.failures}
    assert sorted(failed) == ["big", "one"]
    for name, error in failed.items():
        assert f"s3://{bucket}/v/{name}" in error
        assert "does not match the object's CRC32C" in error
    assert sorted(_landed(tmp_path / "dst")) == ["empty"]
    assert result.retries == 0
