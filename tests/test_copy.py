"""Remote-to-remote copies: server-side within a bucket, streamed otherwise."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest

import synxfer
import synxfer.backend
from synxfer import MiB
from synxfer.layers import Layer

from .conftest import PART, SMALL, tree

FILES = {"a.txt": 10, "d/b.bin": 2 * PART + 17, "d/e/c": 0, "ünï/x": 3}


def _objects(endpoint: str, bucket: str, prefix: str) -> dict[str, bytes]:
    s3 = boto3.client("s3", endpoint_url=endpoint)
    out = {}
    for obj in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []):
        body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
        out[obj["Key"][len(prefix) :]] = body
    return out


@pytest.fixture
def bucket2(s3_endpoint: str) -> str:
    import uuid

    name = f"t2-{uuid.uuid4().hex[:16]}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=name)
    return name


class Streamed(Layer):
    """Claims no copy scope, so copies between two buckets are streamed."""

    def copy_scope(self) -> object | None:
        return None


async def test_sync_between_buckets_streamed_keeps_times(
    bucket: str,
    bucket2: str,
    make_tree: Callable[..., Path],
    s3_endpoint: str,
    tmp_path: Path,
) -> None:
    """Forced to stream (no copy scope), two buckets: every byte read once
    and written once, times kept, a second sync copies nothing."""
    src = make_tree(FILES)
    client = synxfer.Client(SMALL, endpoint_url=s3_endpoint, layers=[Streamed])
    async with client:
        await client.sync_to(src, f"s3://{bucket}/p")
        r = await client.sync(f"s3://{bucket}/p", f"s3://{bucket2}/q")
        assert r.ok, r.failures
        assert r.files_transferred == len(FILES)
        total = sum(FILES.values())
        assert (r.bytes_downloaded, r.bytes_uploaded) == (total, total)
        await _same_objects_times_and_delete(client, bucket, bucket2, src, s3_endpoint, tmp_path)


async def _same_objects_times_and_delete(
    client: synxfer.Client, bucket: str, bucket2: str, src: Path, s3_endpoint: str, tmp_path: Path
) -> None:
    assert _objects(s3_endpoint, bucket2, "q/") == _objects(s3_endpoint, bucket, "p/")
    # The source mtime travelled with the copy.
    await client.sync_from(f"s3://{bucket2}/q", tmp_path / "back")
    assert tree(tmp_path / "back") == tree(src)
    # A second sync copies nothing; --delete removes what the source lacks.
    again = await client.sync(f"s3://{bucket}/p", f"s3://{bucket2}/q")
    assert (again.files_transferred, again.files_skipped) == (0, len(FILES))
    boto3.client("s3", endpoint_url=s3_endpoint).put_object(Bucket=bucket2, Key="q/extra", Body=b"")
    r = await client.sync(f"s3://{bucket}/p", f"s3://{bucket2}/q", delete=True)
    assert r.files_deleted == 1
    assert "extra" not in _objects(s3_endpoint, bucket2, "q/")


async def test_copy_within_a_bucket_is_server_side(
    client: synxfer.Client, bucket: str, make_tree: Callable[..., Path], s3_endpoint: str
) -> None:
    src = make_tree(FILES)
    await client.sync_to(src, f"s3://{bucket}/p")
    r = await client.copy(f"s3://{bucket}/p", f"s3://{bucket}/q", recursive=True)
    assert r.ok
    assert r.files_transferred == len(FILES)
    assert (r.bytes_downloaded, r.bytes_uploaded) == (0, 0)  # no byte crossed the client
    assert _objects(s3_endpoint, bucket, "q/") == _objects(s3_endpoint, bucket, "p/")
    head = boto3.client("s3", endpoint_url=s3_endpoint).head_object(Bucket=bucket, Key="q/a.txt")
    assert "mtime" in head["Metadata"]


async def test_copy_one_object_and_across_backends(
    client: synxfer.Client,
    bucket: str,
    make_tree: Callable[..., Path],
    s3_endpoint: str,
    tmp_path: Path,
) -> None:
    src = make_tree(FILES)
    await client.sync_to(src, f"s3://{bucket}/p")
    r = await client.copy(f"s3://{bucket}/p/d/b.bin", f"s3://{bucket}/single/")
    assert r.files_transferred == 1
    assert _objects(s3_endpoint, bucket, "single/") == {"b.bin": (src / "d/b.bin").read_bytes()}
    # s3 -> file:// -> s3, never through a local temp file of ours.
    mirror = f"file://{tmp_path}/mirror"
    assert (await client.sync(f"s3://{bucket}/p", mirror)).ok
    assert (await client.sync(mirror, f"s3://{bucket}/round")).ok
    assert _objects(s3_endpoint, bucket, "round/") == _objects(s3_endpoint, bucket, "p/")
    assert not list(tmp_path.rglob("*.synxfer-part"))


async def test_streamed_copy_stays_within_the_memory_budget(
    bucket: str, bucket2: str, make_tree: Callable[..., Path], s3_endpoint: str
) -> None:
    src = make_tree({"big": 6 * PART})
    config = SMALL.evolve(max_threads=4, memory_budget=2 * PART)
    async with synxfer.Client(config, endpoint_url=s3_endpoint, layers=[Streamed]) as c:
        await c.sync_to(src, f"s3://{bucket}/p")
        c._engine.scheduler.budget.peak = 0
        r = await c.sync(f"s3://{bucket}/p", f"s3://{bucket2}/p")
        peak = c._engine.scheduler.budget.peak
    assert r.ok
    assert peak == 2 * PART
    assert _objects(s3_endpoint, bucket2, "p/")["big"] == (src / "big").read_bytes()


async def test_copy_checks_the_stream_against_the_source_checksum(
    bucket: str, bucket2: str, make_tree: Callable[..., Path], s3_endpoint: str
) -> None:
    """A source vouching a CRC32C the bytes do not have, and nothing else (no
    synxfer metadata: its ETag is not taken as an MD5): nothing is committed.
    (With another claim the bytes match, the copy lands: test_download_claims.)"""
    google_crc32c = pytest.importorskip("google_crc32c")
    src = make_tree({"x": 2 * PART + 5})
    real = google_crc32c.value((src / "x").read_bytes())
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as c:
        await c.sync_to(src, f"s3://{bucket}/p")

    class Vouch(Streamed):
        async def _call(self, op: str, fn: Any, *args: Any) -> Any:
            result = await fn(*args)
            wrong = base64.b64encode((real ^ 1).to_bytes(4, "big")).decode()
            if isinstance(result, synxfer.ObjectInfo) and op in ("stat", "read_into"):
                return dataclasses.replace(result, checksums={"crc32c": wrong}, metadata={})
            return result

    def wrap(b: synxfer.backend.Backend) -> synxfer.backend.Backend:
        return Vouch(b) if b.bucket == bucket else b

    config = SMALL.evolve(retry=synxfer.RetryPolicy(attempts=3, initial_delay=0.01))
    async with synxfer.Client(config, endpoint_url=s3_endpoint, layers=[wrap]) as c:
        r = await c.sync(f"s3://{bucket}/p", f"s3://{bucket2}/p")
    assert r.files_failed == 1
    error = r.failures[0].error
    assert f"s3://{bucket}/p/x" in error
    assert "does not match the object's CRC32C" in error
    # Read twice, the same both times: fetching again cannot help.
    assert "the data came back the same in 2 attempts" in error
    assert f"nothing was written to s3://{bucket2}/p/x" in error
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    assert s3.list_objects_v2(Bucket=bucket2).get("KeyCount", 0) == 0
    assert s3.list_multipart_uploads(Bucket=bucket2).get("Uploads", []) == []


def _s3_backend(backend: synxfer.backend.Backend) -> Any:
    """The S3 backend under a client's layers."""
    while isinstance(backend, Layer):
        backend = backend.inner
    return backend


async def test_copy_between_buckets_of_one_endpoint_is_server_side(
    bucket: str, bucket2: str, make_tree: Callable[..., Path], s3_endpoint: str, tmp_path: Path
) -> None:
    """Two buckets, one endpoint, the same credentials: CopyObject for small
    objects and UploadPartCopy for a big one (CopyObject's limit lowered to
    reach it), no GET of any body; metadata, content type and mtime kept.
    One request slot (max_threads=1) is enough: the engine holds none around
    the copy, each request takes its own."""
    from synxfer_servers.faultproxy import FaultProxy

    src = make_tree(FILES)
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.put_object(
        Bucket=bucket,
        Key="p/foreign.json",
        Body=b"{}",
        ContentType="application/x-mine",
        Metadata={"owner": "alice", "mtime": "1700000000.5"},
    )
    async with FaultProxy(s3_endpoint, rate=0.0) as proxy:
        config = SMALL.evolve(max_threads=1)
        async with synxfer.Client(config, endpoint_url=proxy.url) as client:
            await client.sync_to(src, f"s3://{bucket}/p")
            dst, _ = await client.backend(f"s3://{bucket2}/")
            _s3_backend(dst).max_copy_size = 6 * MiB  # stand-in for CopyObject's 5 GiB
            _s3_backend(dst).copy_part_size = 5 * MiB
            before = proxy.snapshot()
            r = await asyncio.wait_for(client.sync(f"s3://{bucket}/p", f"s3://{bucket2}/q"), 60)
            ops = proxy.snapshot().ops - before.ops
            assert r.ok, r.failures
            assert r.files_transferred == len(FILES) + 1
            assert (r.bytes_downloaded, r.bytes_uploaded) == (0, 0)
            assert ops["get_object"] == 0, ops
            assert ops["copy_object"] == len(FILES)  # b.bin is over the lowered limit
            assert ops["upload_part"] == 3  # 2 * PART + 17 in 5 MiB part copies
            assert ops["put_object"] == 0
            assert _objects(s3_endpoint, bucket2, "q/") == _objects(s3_endpoint, bucket, "p/")
            for key in ("a.txt", "d/b.bin", "foreign.json"):
                a = s3.head_object(Bucket=bucket, Key=f"p/{key}")
                b = s3.head_object(Bucket=bucket2, Key=f"q/{key}")
                assert b["Metadata"] == a["Metadata"], key
                assert b["ContentType"] == a["ContentType"], key
            assert s3.head_object(Bucket=bucket2, Key="q/foreign.json")["Metadata"] == {
                "owner": "alice",
                "mtime": "1700000000.5",
            }
            s3.delete_object(Bucket=bucket, Key="p/foreign.json")
            s3.delete_object(Bucket=bucket2, Key="q/foreign.json")
            await _same_objects_times_and_delete(
                client, bucket, bucket2, src, s3_endpoint, tmp_path
            )


async def test_server_side_copy_gives_a_timeless_source_its_time(
    client: synxfer.Client, bucket: str, bucket2: str, s3_endpoint: str
) -> None:
    """An object with no stored mtime: its copy (server-side, another bucket)
    carries the source's Last-Modified as its mtime, with the other metadata."""
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", Metadata={"a": "1"})
    modified = s3.head_object(Bucket=bucket, Key="k")["LastModified"].timestamp()
    assert (await client.copy(f"s3://{bucket}/k", f"s3://{bucket2}/k")).ok
    meta = s3.head_object(Bucket=bucket2, Key="k")["Metadata"]
    assert meta["a"] == "1"
    assert float(meta["mtime"]) == modified


async def test_copy_scope_is_endpoint_and_credentials(s3_endpoint: str) -> None:
    """Two S3 buckets share a scope (server-side copies between them) only on
    the same endpoint, region and credential source."""
    from synxfer_s3 import S3Backend

    def backend(bucket: str, **kw: Any) -> S3Backend:
        return S3Backend(
            bucket, synxfer.backend.BackendOptions(**{"endpoint_url": s3_endpoint, **kw})
        )

    closed = backend("a")
    assert closed.copy_scope() is None  # not open yet: nothing to compare
    async with (
        backend("a") as a,
        backend("b") as b,
        backend("c", endpoint_url="http://127.0.0.1:9") as other_endpoint,
        backend("d", region="eu-west-1") as other_region,
        backend("e", extra={"anonymous": "true"}) as unsigned,
    ):
        assert a.copy_scope() is not None
        assert a.copy_scope() == b.copy_scope()
        for other in (other_endpoint, other_region, unsigned):
            assert a.copy_scope() != other.copy_scope()
        assert "testing" not in repr(a.copy_scope())  # no credential in it


# -- GCS: server-side across buckets of one endpoint ------------------------------------


@pytest.fixture(scope="module")
def gcs_emulator() -> Any:
    from synxfer_servers.gcs import GcsEmulator

    with GcsEmulator() as emulator:
        yield emulator.endpoint_url


async def test_gcs_copy_between_buckets_of_one_endpoint_is_server_side(
    gcs_emulator: str, make_tree: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """gs -> gs, two buckets, one emulator: a rewrite each (the backend's
    copy_from), no read of any body; the bytes, metadata and content type
    kept; a second sync copies nothing. A source missing from the other
    bucket fails naming it there."""
    import uuid
    from collections import Counter

    import httpx

    from synxfer_servers.gcs import create_bucket

    from .conftest import CountingLayer

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator)
    a, b = f"ga-{uuid.uuid4().hex[:12]}", f"gb-{uuid.uuid4().hex[:12]}"
    create_bucket(gcs_emulator, a)
    create_bucket(gcs_emulator, b)
    src = make_tree(FILES)
    calls: Counter[str] = Counter()
    layer = lambda backend: CountingLayer(backend, calls)  # noqa: E731
    async with synxfer.Client(SMALL, layers=[layer]) as client:
        await client.sync_to(src, f"gs://{a}/p")
        calls.clear()
        r = await client.sync(f"gs://{a}/p", f"gs://{b}/q")
        assert r.ok, r.failures
        assert r.files_transferred == len(FILES)
        assert (r.bytes_downloaded, r.bytes_uploaded) == (0, 0)
        assert calls["copy"] == len(FILES)
        assert not {op for op in calls if op.startswith(("read", "put", "upload"))}, calls
        again = await client.sync(f"gs://{a}/p", f"gs://{b}/q")
        assert (again.files_transferred, again.files_skipped) == (0, len(FILES))
        dst, _ = await client.backend(f"gs://{b}/")
        with pytest.raises(synxfer.NotFound, match=f"gs://{a}/nothing"):
            await dst.copy_from(a, "nothing", "x", synxfer.WriteOptions())

    def objects(bucket: str, prefix: str) -> dict[str, tuple[bytes, dict[str, str], str]]:
        items = httpx.get(f"{gcs_emulator}/storage/v1/b/{bucket}/o", params={"prefix": prefix})
        out = {}
        for item in items.json().get("items", []):
            name = item["name"]
            path = f"{gcs_emulator}/storage/v1/b/{bucket}/o/{name.replace('/', '%2F')}"
            body = httpx.get(path, params={"alt": "media"}).content
            out[name[len(prefix) :]] = (body, item.get("metadata", {}), item.get("contentType"))
        return out

    copied, original = objects(b, "q/"), objects(a, "p/")
    assert copied == original
    assert set(copied) == set(FILES)
    assert all("mtime" in meta for _, meta, _ in copied.values())


async def test_gcs_copy_scope_is_endpoint_and_credentials(gcs_emulator: str) -> None:
    """Two GCS buckets share a scope only on the same endpoint and credentials."""
    from synxfer_gcs import GcsBackend

    def backend(bucket: str, endpoint: str = gcs_emulator, **extra: str) -> Any:
        return GcsBackend(
            bucket, synxfer.backend.BackendOptions(endpoint_url=endpoint, extra=extra)
        )

    a, b = backend("a"), backend("b")
    assert a.copy_scope() is not None
    assert a.copy_scope() == b.copy_scope()
    assert a.copy_scope() != backend("c", "http://127.0.0.1:9").copy_scope()
    assert a.copy_scope() != backend("d", anonymous="false").copy_scope()
    assert a.copy_scope() != backend("e", credentials_file="/nonexistent.json").copy_scope()
