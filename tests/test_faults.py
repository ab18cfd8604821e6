"""Fault injection end to end: the real engine against moto behind a FaultProxy.

Every test runs ``synxfer.Client`` (engine, retry layer, S3 backend) against
``synxfer_servers.faultproxy.FaultProxy`` in front of moto, and checks the
result *independently*: objects are listed and read back with boto3 straight
from moto (not through the proxy), downloads are compared with the source.

moto runs in a subprocess (its own GIL: about a third faster than in-process
on two cores), except for the server-restart test, which needs moto's state
to survive a restart and so runs it in-process. Each test is bounded in
files, bytes and time; ``test_mixed_faults_large`` only runs with
``SYNXFER_SLOW=1``. Figures (retries, faults, elapsed) are printed (``-s``)
and recorded as junit properties.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import os
import random
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

import synxfer
from synxfer import EventKind, MiB, RetryPolicy, TransferConfig
from synxfer_servers.faultproxy import Fault, FaultProxy, ProxyRequest
from synxfer_servers.s3 import HOST, MotoProcess

PART = 5 * MiB
#: Short backoffs so tests stay quick, and more attempts than the default 6: at
#: 20 % faults a request fails 6 times in a row with probability 0.2**6 = 6.4e-5,
#: which over the ~3000 requests of the mixed test would fail a file in ~1 run
#: out of 5. With 10 attempts that is 1e-7 per request.
FAST_RETRY = RetryPolicy(attempts=10, initial_delay=0.05, max_delay=1.0)
CONFIG = TransferConfig(
    max_threads=4,
    part_size=PART,
    multipart_threshold=PART,
    retry=FAST_RETRY,
    connect_timeout=5.0,
    read_timeout=10.0,
)
#: The tree of the per-fault tests: small files and one 3-part multipart file.
SMALL_FILES = 40
BIG = 2 * PART + 1000

#: Every fault a client is expected to recover from, equally weighted.
MIXED = {
    Fault.SLOWDOWN: 1.0,
    Fault.INTERNAL_ERROR: 1.0,
    Fault.RESET: 1.0,
    Fault.RESET_AFTER: 1.0,
    Fault.TRUNCATE: 1.0,
}


# -- fixtures and helpers --------------------------------------------------------


@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    """moto in a subprocess for this module: its endpoint URL."""
    with MotoProcess() as server:
        yield server.endpoint_url


@pytest.fixture(scope="module")
def s3(moto: str) -> Any:
    """A boto3 client straight to moto, never through the proxy."""
    return boto3.client("s3", endpoint_url=moto)


@pytest.fixture
def bucket(s3: Any, request: pytest.FixtureRequest) -> str:
    """A fresh bucket named after the test, so the proxy's draws (which depend on
    the request path) repeat from run to run."""
    name = bucket_name(request.node.name)
    s3.create_bucket(Bucket=name)
    return name


def bucket_name(test: str) -> str:
    return "f-" + hashlib.sha256(test.encode()).hexdigest()[:20]


@dataclasses.dataclass(frozen=True)
class Blob:
    """A file's or object's content, by size and digests (never held in memory)."""

    size: int
    md5: str
    sha256: str

    @classmethod
    def of(cls, chunks: Iterable[bytes]) -> Blob:
        md5, sha = hashlib.md5(usedforsecurity=False), hashlib.sha256()
        size = 0
        for chunk in chunks:
            md5.update(chunk)
            sha.update(chunk)
            size += len(chunk)
        return cls(size, md5.hexdigest(), sha.hexdigest())


def write_files(root: Path, files: dict[str, int], seed: int = 0) -> dict[str, Blob]:
    """Create ``files`` (rel -> size) of seeded random bytes under ``root``."""
    rng = random.Random(seed)
    out = {}
    for rel, size in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:

            def chunks(f: Any = f, size: int = size) -> Iterator[bytes]:
                for at in range(0, size, MiB):
                    chunk = rng.randbytes(min(MiB, size - at))
                    f.write(chunk)
                    yield chunk

            out[rel] = Blob.of(chunks())
    return out


def read_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        while chunk := f.read(MiB):
            yield chunk


def local_tree(root: Path) -> dict[str, Blob]:
    """Every regular file under ``root`` (hidden temp files included), by content."""
    return {
        p.relative_to(root).as_posix(): Blob.of(read_chunks(p))
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def small_tree(n: int, size: int = 1024, big: int = 0) -> dict[str, int]:
    """``n`` small files in 10 directories, plus ``big`` bytes in ``big.bin`` if > 0."""
    files = {f"d{i % 10}/f{i:04d}.dat": size for i in range(n)}
    if big:
        files["big.bin"] = big
    return files


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Blob]]:
    """The per-fault tests' source tree (shared, read-only)."""
    root = tmp_path_factory.mktemp("source")
    return root, write_files(root, small_tree(SMALL_FILES, big=BIG), seed=1)


def verify_bucket(
    s3: Any, bucket: str, prefix: str, expected: dict[str, Blob], *, read_all: bool = True
) -> None:
    """List and GET every object from moto directly; each must equal its source.

    Without ``read_all``, objects uploaded in one piece are checked by the
    listing's ETag (moto's MD5 of the bytes it stored) and only multipart
    objects are read back: as strict, and much quicker for many files.
    """
    found: dict[str, tuple[int, str]] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            found[obj["Key"][len(prefix) :]] = (obj["Size"], obj["ETag"].strip('"'))
    assert {rel: size for rel, (size, _) in found.items()} == {
        rel: blob.size for rel, blob in expected.items()
    }
    to_read = set(expected)
    if not read_all:
        single = {rel for rel, (_, etag) in found.items() if "-" not in etag}
        bad = [rel for rel in single if found[rel][1] != expected[rel].md5]
        assert not bad, f"{len(bad)} object(s) differ from their source, e.g. {bad[:3]}"
        to_read -= single

    def fetch(rel: str) -> Blob:
        body = s3.get_object(Bucket=bucket, Key=prefix + rel)["Body"]
        return Blob.of(body.iter_chunks(MiB))

    names = sorted(to_read)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        got = dict(zip(names, pool.map(fetch, names), strict=True))
    bad = [rel for rel in names if got[rel] != expected[rel]]
    assert not bad, f"{len(bad)} object(s) differ from their source, e.g. {bad[:3]}"


def no_uploads_left(s3: Any, bucket: str) -> list[Any]:
    uploads: list[Any] = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    return uploads


def report(record_property: Any, name: str, **figures: object) -> None:
    """Show figures with ``-s`` and keep them in the junit XML."""
    print(f"\n[{name}] " + " ".join(f"{k}={v}" for k, v in figures.items()))
    for key, value in figures.items():
        record_property(f"{name}.{key}", value)


# -- each fault alone --------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        Fault.SLOWDOWN,
        Fault.INTERNAL_ERROR,
        Fault.RESET,
        Fault.RESET_AFTER,
        Fault.TRUNCATE,
        Fault.STALL,
    ],
)
async def test_each_fault_alone_is_recovered(
    fault: Fault,
    moto: str,
    s3: Any,
    bucket: str,
    source: tuple[Path, dict[str, Blob]],
    tmp_path: Path,
    record_property: Any,
) -> None:
    """20 % of requests hit by one kind of fault: sync_to then sync_from complete,
    every object equals its source, the download equals the source, retries > 0."""
    root, contents = source
    config = CONFIG
    stall_seconds = 30.0
    filters: list[tuple[str, str]] = []
    if fault is Fault.STALL:
        # A stall costs a read timeout: keep both small, and the tree smaller.
        config = CONFIG.evolve(read_timeout=1.5)
        stall_seconds = 6.0
        filters = [("exclude", "*"), ("include", "d[12]/*"), ("include", "big.bin")]
        contents = {k: v for k, v in contents.items() if k == "big.bin" or k[:3] in ("d1/", "d2/")}
    started = time.monotonic()
    async with (
        FaultProxy(
            moto, rate=0.2, faults={fault: 1.0}, seed=7, stall_seconds=stall_seconds
        ) as proxy,
        synxfer.Client(config, endpoint_url=proxy.url) as client,
    ):
        up = await client.sync_to(root, f"s3://{bucket}/t", filters=filters)
        assert up.ok, up.failures
        assert up.files_transferred == len(contents)
        verify_bucket(s3, bucket, "t/", contents)

        dst = tmp_path / "dst"
        down = await client.sync_from(f"s3://{bucket}/t", dst)
        assert down.ok, down.failures
        assert down.files_transferred == len(contents)
        stats = proxy.snapshot()
    assert local_tree(dst) == contents
    assert stats.faults[fault.value] > 0
    assert up.retries + down.retries > 0
    report(
        record_property,
        f"alone-{fault.value}",
        requests=stats.requests,
        faults=stats.faults[fault.value],
        retries_up=up.retries,
        retries_down=down.retries,
        elapsed=round(time.monotonic() - started, 2),
    )


async def test_trickling_response_is_abandoned(
    moto: str, s3: Any, bucket: str, tmp_path: Path
) -> None:
    """A server that sends headers, then a few bytes now and then, never trips a
    read timeout; only progress-based stall detection gives up on it early.

    Without it (``min_throughput=0``) the download waits until the proxy gives
    up (``stall_seconds``, 3 s here), then retries the truncated body:
    correct, but slow. With 64 KiB/s the 4 KiB read gets ~1.06 s.
    """
    data = os.urandom(4096)
    s3.put_object(Bucket=bucket, Key="t/slow.bin", Body=data)
    config = CONFIG.evolve(read_timeout=1.0, min_throughput=64 * 1024)
    async with (
        FaultProxy(
            moto,
            rate=1.0,
            faults={Fault.TRICKLE: 1.0},
            ops={"get_object"},
            max_faults=1,
            stall_seconds=3.0,
            trickle_bytes_per_second=20.0,
        ) as proxy,
        synxfer.Client(config, endpoint_url=proxy.url) as client,
    ):
        started = time.monotonic()
        r = await client.download_file(f"s3://{bucket}/t/slow.bin", tmp_path / "slow.bin")
        elapsed = time.monotonic() - started
        assert proxy.snapshot().faults[Fault.TRICKLE.value] == 1
    assert r.ok, r.failures
    assert (tmp_path / "slow.bin").read_bytes() == data
    assert elapsed < 2.0, f"a trickling GET held the download for {elapsed:.1f}s"


# -- truncated downloads -----------------------------------------------------------


async def test_truncated_get_is_detected_and_retried(
    moto: str, s3: Any, bucket: str, tmp_path: Path, record_property: Any
) -> None:
    """Cut GET bodies are detected (length), retried, and never leave a partial
    file; a key whose every GET is cut fails alone, leaving nothing behind."""
    src = tmp_path / "src"
    contents = write_files(src, small_tree(30, size=3000, big=2 * PART + 17), seed=3)
    async with synxfer.Client(CONFIG, endpoint_url=moto) as direct:
        assert (await direct.sync_to(src, f"s3://{bucket}/t")).ok

    async with (
        FaultProxy(
            moto, rate=0.3, faults={Fault.TRUNCATE: 1.0}, ops={"get_object"}, seed=11
        ) as proxy,
        synxfer.Client(CONFIG, endpoint_url=proxy.url) as client,
    ):
        dst = tmp_path / "dst"
        r = await client.sync_from(f"s3://{bucket}/t", dst)
        truncated = proxy.snapshot().faults[Fault.TRUNCATE.value]
    assert r.ok, r.failures
    assert truncated > 0
    assert r.retries >= truncated  # a cut body is synxfer's to retry: its headers had arrived
    assert local_tree(dst) == contents  # no temp file either

    # Every GET of the multipart object is cut: it fails after its retries,
    # and neither it nor a temp file appears; the other files are complete.
    def big_only(req: ProxyRequest) -> bool:
        return req.key == "t/big.bin"

    config = CONFIG.evolve(retry=RetryPolicy(attempts=3, initial_delay=0.01, max_delay=0.05))
    async with (
        FaultProxy(
            moto, rate=1.0, faults={Fault.TRUNCATE: 1.0}, ops={"get_object"}, match=big_only
        ) as proxy,
        synxfer.Client(config, endpoint_url=proxy.url) as client,
    ):
        dst2 = tmp_path / "dst2"
        r2 = await client.sync_from(f"s3://{bucket}/t", dst2)
    assert [Path(f.path).name for f in r2.failures] == ["big.bin"]
    assert r2.files_transferred == len(contents) - 1
    expected = {k: v for k, v in contents.items() if k != "big.bin"}
    assert local_tree(dst2) == expected  # no big.bin, whole or partial, no temp file
    report(record_property, "truncate-get", truncated=truncated, retries=r.retries)


# -- permanent errors --------------------------------------------------------------


async def test_access_denied_on_one_key_fails_that_file_fast(
    moto: str, s3: Any, bucket: str, tmp_path: Path
) -> None:
    """A 403 is not retried: the file fails after one request, the others go on."""
    src = tmp_path / "src"
    contents = write_files(src, small_tree(20), seed=4)
    denied = "t/d7/f0007.dat"
    async with (
        FaultProxy(
            moto,
            rate=1.0,
            faults={Fault.ACCESS_DENIED: 1.0},
            match=lambda req: req.key == denied,
        ) as proxy,
        synxfer.Client(CONFIG, endpoint_url=proxy.url) as client,
    ):
        r = await client.sync_to(src, f"s3://{bucket}/t")
        stats = proxy.snapshot()
    assert [Path(f.path).name for f in r.failures] == ["f0007.dat"]
    assert "AccessDenied" in r.failures[0].error
    assert r.retries == 0
    assert stats.keys[f"{bucket}/{denied}"] == 1  # one request, no retry
    assert r.files_transferred == len(contents) - 1
    verify_bucket(s3, bucket, "t/", {k: v for k, v in contents.items() if k != "d7/f0007.dat"})


async def test_access_denied_everywhere_raises_at_once(
    moto: str, bucket: str, tmp_path: Path
) -> None:
    (tmp_path / "f").write_bytes(b"x")
    async with (
        FaultProxy(moto, rate=1.0, faults={Fault.ACCESS_DENIED: 1.0}) as proxy,
        synxfer.Client(CONFIG, endpoint_url=proxy.url) as client,
    ):
        started = time.monotonic()
        with pytest.raises(synxfer.PermissionDenied, match="AccessDenied"):
            await client.sync_to(tmp_path, f"s3://{bucket}/t")
        with pytest.raises(synxfer.PermissionDenied, match="AccessDenied"):
            await client.sync_from(f"s3://{bucket}/t", tmp_path / "d")
        elapsed = time.monotonic() - started
        requests = proxy.snapshot().requests
    assert requests == 2  # one listing each, never retried
    assert elapsed < 2.0


async def test_missing_bucket_raises_at_once(moto: str, tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    async with (
        FaultProxy(moto) as proxy,
        synxfer.Client(CONFIG, endpoint_url=proxy.url) as client,
    ):
        started = time.monotonic()
        with pytest.raises(synxfer.BucketNotFound, match="no-such-bucket-here"):
            await client.sync_to(tmp_path, "s3://no-such-bucket-here/t")
        with pytest.raises(synxfer.BucketNotFound, match="no-such-bucket-here"):
            await client.sync_from("s3://no-such-bucket-here/t", tmp_path / "d")
        elapsed = time.monotonic() - started
        requests = proxy.snapshot().requests
    assert requests == 2
    assert elapsed < 2.0
    assert not (tmp_path / "d").exists()


# -- multipart uploads that give up ----------------------------------------------


@pytest.mark.parametrize(
    ("op", "fault"),
    [
        ("complete_multipart", Fault.SLOWDOWN),  # retry budget exhausted on complete
        ("upload_part", Fault.RESET),  # ... on a part
        ("upload_part", Fault.ACCESS_DENIED),  # a permanent error on a part
    ],
)
async def test_multipart_that_gives_up_is_aborted(
    op: str, fault: Fault, moto: str, s3: Any, bucket: str, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    write_files(src, {"big.bin": 2 * PART + 1, "small.txt": 10}, seed=5)
    config = CONFIG.evolve(retry=RetryPolicy(attempts=3, initial_delay=0.01, max_delay=0.05))
    async with (
        FaultProxy(moto, rate=1.0, faults={fault: 1.0}, ops={op}) as proxy,
        synxfer.Client(config, endpoint_url=proxy.url) as client,
    ):
        r = await client.sync_to(src, f"s3://{bucket}/t")
        stats = proxy.snapshot()
    assert [Path(f.path).name for f in r.failures] == ["big.bin"]
    assert r.files_transferred == 1
    assert stats.ops["abort_multipart"] == 1
    assert no_uploads_left(s3, bucket) == []
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert keys == ["t/small.txt"]  # no partial object is visible
    if fault is Fault.ACCESS_DENIED:
        assert r.retries == 0


@pytest.mark.parametrize(
    ("op", "aborts"),
    [
        # Complete applied, reply lost: the retry gets NoSuchUpload and the
        # backend recognises its own completed object; nothing is aborted.
        ("complete_multipart", 0),
        # Create applied, reply lost: the retry creates a second upload; the
        # orphaned first one is found (list_uploads) and aborted.
        ("create_multipart", 1),
    ],
)
async def test_applied_request_whose_reply_is_lost(
    op: str, aborts: int, moto: str, s3: Any, bucket: str, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    contents = write_files(src, {"big.bin": 2 * PART + 99}, seed=6)
    async with (
        FaultProxy(
            moto,
            rate=1.0,
            faults={Fault.RESET_AFTER: 1.0},
            ops={op},
            max_faults=1,
        ) as proxy,
        synxfer.Client(CONFIG, endpoint_url=proxy.url) as client,
    ):
        r = await client.sync_to(src, f"s3://{bucket}/t")
        stats = proxy.snapshot()
    assert r.ok, r.failures
    assert r.retries == 1
    assert stats.ops[op] == 2  # the first one was applied by the server
    assert stats.ops["abort_multipart"] == aborts
    verify_bucket(s3, bucket, "t/", contents)
    assert no_uploads_left(s3, bucket) == []


# -- restarts ----------------------------------------------------------------------


class _RestartableMoto:
    """moto in this process on a fixed port, stoppable and restartable.

    moto keeps its state per process, so buckets and objects survive a restart.
    """

    def __init__(self) -> None:
        from synxfer_servers.s3 import _moto_app

        self._app = _moto_app()
        self.port = 0
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        from werkzeug.serving import make_server

        self._server = make_server(HOST, self.port, self._app, threaded=True)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"


@pytest.mark.parametrize("what", ["proxy", "server"])
async def test_restart_mid_run(what: str, tmp_path: Path, record_property: Any) -> None:
    """The endpoint goes away for half a second in the middle of a sync, then
    comes back on the same port: the run completes, the gap covered by retries.

    ``proxy``: the proxy's listener stops (every open connection reset, new
    ones refused) and restarts. ``server``: moto itself stops and restarts
    behind the proxy (the proxy answers 502 meanwhile).
    """
    server = _RestartableMoto()
    server.start()
    s3 = boto3.client("s3", endpoint_url=server.endpoint_url)
    name = bucket_name(f"restart-{what}")
    s3.create_bucket(Bucket=name)
    src = tmp_path / "src"
    contents = write_files(src, small_tree(100, big=2 * PART + 5), seed=8)
    # Enough retries, spaced enough, to outlast the gap whatever the jitter draws.
    config = CONFIG.evolve(retry=RetryPolicy(attempts=8, initial_delay=0.2, max_delay=2.0))
    done = 0
    progressed = asyncio.Event()

    def count(event: synxfer.Event) -> None:
        nonlocal done
        done += event.kind is EventKind.DONE
        if done >= 30:
            progressed.set()

    try:
        async with (
            FaultProxy(server.endpoint_url) as proxy,
            synxfer.Client(config, endpoint_url=proxy.url, on_event=count) as client,
        ):
            task = asyncio.create_task(client.sync_to(src, f"s3://{name}/t"))
            async with asyncio.timeout(30):
                await progressed.wait()
            assert not task.done()
            if what == "proxy":
                await proxy.restart(downtime=0.5)
            else:
                await asyncio.to_thread(server.stop)
                await asyncio.sleep(0.5)
                await asyncio.to_thread(server.start)
            async with asyncio.timeout(60):
                r = await task
            stats = proxy.snapshot()
        assert r.ok, r.failures
        assert r.files_transferred == len(contents)
        assert r.retries > 0
        if what == "server":
            assert stats.upstream_errors > 0
        verify_bucket(s3, name, "t/", contents)
        assert no_uploads_left(s3, name) == []
        report(record_property, f"restart-{what}", retries=r.retries, elapsed=round(r.elapsed, 2))
    finally:
        server.stop()


# -- everything at once ----------------------------------------------------------


async def _mixed_run(
    moto: str, s3: Any, bucket: str, tmp_path: Path, n_small: int, big: int
) -> dict[str, object]:
    src = tmp_path / "src"
    contents = write_files(src, small_tree(n_small, big=big), seed=9)
    uploaded = (len(contents), sum(blob.size for blob in contents.values()))
    async with (
        FaultProxy(moto, rate=0.2, faults=MIXED, seed=2024) as proxy,
        synxfer.Client(CONFIG, endpoint_url=proxy.url) as client,
    ):
        up = await client.sync_to(src, f"s3://{bucket}/m")
        assert up.ok, up.failures[:5]
        assert up.files_transferred == len(contents)
        verify_bucket(s3, bucket, "m/", contents, read_all=False)
        # Deletions under faults too (DeleteObjects is a POST: never retried by aiohttp).
        gone = [rel for rel in contents if rel.startswith("d3/")]
        for rel in gone:
            (src / rel).unlink()
            del contents[rel]
        pruned = await client.sync_to(src, f"s3://{bucket}/m", delete=True)
        assert pruned.ok, pruned.failures[:5]
        assert (pruned.files_deleted, pruned.files_transferred) == (len(gone), 0)
        verify_bucket(s3, bucket, "m/", contents, read_all=False)
        dst = tmp_path / "dst"
        down = await client.sync_from(f"s3://{bucket}/m", dst)
        assert down.ok, down.failures[:5]
        assert down.files_transferred == len(contents)
        stats = proxy.snapshot()
    got = local_tree(dst)
    assert got.keys() == contents.keys()
    bad = [rel for rel, blob in got.items() if blob != contents[rel]]
    assert not bad, bad[:5]
    assert all(stats.faults[k.value] > 0 for k in MIXED), stats.faults
    assert up.retries > 0
    assert down.retries > 0
    assert no_uploads_left(s3, bucket) == []
    return {
        "files": uploaded[0],
        "bytes": uploaded[1],
        "deleted": pruned.files_deleted,
        "requests": stats.requests,
        "faults": stats.faulted,
        "by_kind": dict(sorted(stats.faults.items())),
        "retries_up": up.retries,
        "retries_delete": pruned.retries,
        "retries_down": down.retries,
        "elapsed_up": round(up.elapsed, 2),
        "elapsed_down": round(down.elapsed, 2),
    }


async def test_mixed_faults(
    moto: str, s3: Any, bucket: str, tmp_path: Path, record_property: Any
) -> None:
    """20 % of all requests faulted (503, 500, reset, reset-after, truncate) on
    1000 x 1 KiB + 24 MiB (5 MiB parts): the upload, a ``--delete`` pass and the
    download complete, and everything verifies."""
    figures = await _mixed_run(moto, s3, bucket, tmp_path, 1000, 24 * MiB)
    report(record_property, "mixed-ci", **figures)


@pytest.mark.skipif(os.environ.get("SYNXFER_SLOW") != "1", reason="set SYNXFER_SLOW=1 to run")
async def test_mixed_faults_large(
    moto: str, s3: Any, bucket: str, tmp_path: Path, record_property: Any
) -> None:
    """The same on 1000 x 1 KiB + 256 MiB: run once locally, not in CI."""
    figures = await _mixed_run(moto, s3, bucket, tmp_path, 1000, 256 * MiB)
    report(record_property, "mixed-large", **figures)


# -- the proxy itself ----------------------------------------------------------------


def test_proxy_threaded_mode_and_draws_repeat(moto: str, s3: Any, bucket: str) -> None:
    """The synchronous context manager runs its own loop; the same seed gives the
    same faults to the same requests, whatever else happened before; a blocking
    restart keeps the port."""
    from botocore.exceptions import ClientError

    s3.put_object(Bucket=bucket, Key="k", Body=b"v")

    def head(client: Any) -> int:
        try:
            client.head_object(Bucket=bucket, Key="k")
        except ClientError as exc:
            return int(exc.response["Error"]["Code"])
        return 200

    def run(seed: int) -> list[int]:
        with FaultProxy(moto, rate=0.5, faults={Fault.SLOWDOWN: 1.0}, seed=seed) as proxy:
            client = boto3.client("s3", endpoint_url=proxy.url, config=_no_retries())
            statuses = [head(client) for _ in range(12)]
            stats = proxy.snapshot()
            port = proxy.port
            proxy.configure(rate=0.0)
            proxy.restart_blocking(downtime=0.1)
            assert proxy.port == port
            assert head(client) == 200
        assert stats.requests == 12
        assert stats.faults.get("503", 0) == statuses.count(503)
        return statuses

    first = run(1)
    assert 0 < first.count(503) < 12
    assert run(1) == first
    assert run(2) != first


async def test_proxy_relays_chunked_bodies() -> None:
    """Chunked requests and responses pass through whole, framing included;
    ``truncate`` cuts a chunked response short of its last chunk."""

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # A minimal upstream: answers each request with its body, chunked.
        with contextlib.suppress(asyncio.IncompleteReadError):
            await serve(reader, writer)
        writer.close()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while head := await reader.readuntil(b"\r\n\r\n"):
            assert b"transfer-encoding: chunked" in head.lower()
            body = b""
            while (size := int((await reader.readuntil(b"\r\n")).strip(), 16)) > 0:
                body += (await reader.readexactly(size + 2))[:-2]
            await reader.readuntil(b"\r\n")  # no trailers
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for i in range(0, len(body), 7):
                piece = body[i : i + 7]
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    upstream = await asyncio.start_server(echo, HOST, 0)
    port = upstream.sockets[0].getsockname()[1]
    payload = b"chunks of a body, relayed as they are"
    request = b"PUT /b/k HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    request += b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (payload[:10], payload[10:]))
    request += b"0\r\n\r\n"

    async def send(proxy: FaultProxy, times: int) -> bytes:
        reader, writer = await asyncio.open_connection(HOST, proxy.port)
        for _ in range(times):  # on one kept-alive connection
            writer.write(request)
        await writer.drain()
        writer.write_eof()
        data = await reader.read(-1)
        writer.close()
        return data

    try:
        async with FaultProxy(f"http://{HOST}:{port}") as proxy:
            data = await send(proxy, 2)
        replies = data.split(b"HTTP/1.1 200 OK\r\n")[1:]
        assert len(replies) == 2
        for reply in replies:
            _, _, chunked = reply.partition(b"\r\n\r\n")
            assert chunked.endswith(b"0\r\n\r\n")
            assert b"".join(chunked.split(b"\r\n")[1::2]) == payload
        async with FaultProxy(
            f"http://{HOST}:{port}", rate=1.0, faults={Fault.TRUNCATE: 1.0}
        ) as proxy:
            data = await send(proxy, 1)
        assert data.startswith(b"HTTP/1.1 200 OK\r\n")
        assert not data.endswith(b"0\r\n\r\n")
        assert len(data) < len(replies[0]) + 17
    finally:
        upstream.close()
        await upstream.wait_closed()


def _no_retries() -> Any:
    from botocore.config import Config

    return Config(retries={"total_max_attempts": 1})


async def test_proxy_wire_faults(moto: str, s3: Any, bucket: str) -> None:
    """What each fault looks like to a raw HTTP client."""
    s3.put_object(Bucket=bucket, Key="obj", Body=b"0123456789" * 100)
    # Presigned, so moto accepts a request without an Authorization header.
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "obj"})
    target = url.split("://", 1)[1].partition("/")[2]
    request = f"GET /{target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()

    async def exchange(proxy: FaultProxy) -> tuple[bytes, str]:
        reader, writer = await asyncio.open_connection(HOST, proxy.port)
        writer.write(request)
        await writer.drain()
        try:
            data = await reader.read(-1)
            how = "eof"
        except ConnectionResetError:
            data, how = b"", "reset"
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
        return data, how

    async def with_fault(fault: Fault, **kw: Any) -> tuple[bytes, str]:
        async with FaultProxy(moto, rate=1.0, faults={fault: 1.0}, **kw) as proxy:
            return await exchange(proxy)

    data, how = await with_fault(Fault.SLOWDOWN)
    assert data.startswith(b"HTTP/1.1 503 ")
    assert b"<Code>SlowDown</Code>" in data
    data, _ = await with_fault(Fault.INTERNAL_ERROR)
    assert data.startswith(b"HTTP/1.1 500 ")
    assert b"<Code>InternalError</Code>" in data
    data, _ = await with_fault(Fault.ACCESS_DENIED)
    assert data.startswith(b"HTTP/1.1 403 ")
    assert b"<Code>AccessDenied</Code>" in data
    assert await with_fault(Fault.RESET) == (b"", "reset")
    assert await with_fault(Fault.RESET_AFTER) == (b"", "reset")
    data, how = await with_fault(Fault.TRUNCATE)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert b"Content-Length: 1000" in head
    assert (body, how) == (b"0123456789" * 50, "eof")
    started = time.monotonic()
    assert await with_fault(Fault.STALL, stall_seconds=0.3) == (b"", "eof")
    assert 0.3 <= time.monotonic() - started < 2.0
