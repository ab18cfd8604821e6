"""Remote-to-remote copies: server-side within a bucket, streamed otherwise."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest

import synxfer
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


async def test_sync_between_buckets_streams_and_keeps_times(
    client: synxfer.Client,
    bucket: str,
    bucket2: str,
    make_tree: Callable[..., Path],
    s3_endpoint: str,
    tmp_path: Path,
) -> None:
    src = make_tree(FILES)
    await client.sync_to(src, f"s3://{bucket}/p")
    r = await client.sync(f"s3://{bucket}/p", f"s3://{bucket2}/q")
    assert r.ok, r.failures
    assert r.files_transferred == len(FILES)
    total = sum(FILES.values())
    # Streamed through memory: every byte read once and written once.
    assert (r.bytes_downloaded, r.bytes_uploaded) == (total, total)
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
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
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
    """A source vouching a CRC32C the bytes do not have: nothing is committed."""
    google_crc32c = pytest.importorskip("google_crc32c")
    src = make_tree({"x": 2 * PART + 5})
    real = google_crc32c.value((src / "x").read_bytes())
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as c:
        await c.sync_to(src, f"s3://{bucket}/p")

    class Vouch(Layer):
        async def _call(self, op: str, fn: Any, *args: Any) -> Any:
            result = await fn(*args)
            wrong = base64.b64encode((real ^ 1).to_bytes(4, "big")).decode()
            if isinstance(result, synxfer.ReadResult):
                info = dataclasses.replace(result.info, checksums={"crc32c": wrong})
                return synxfer.ReadResult(result.data, info)
            return result

    def wrap(b: synxfer.Backend) -> synxfer.Backend:
        return Vouch(b) if b.bucket == bucket else b

    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint, layers=[wrap]) as c:
        r = await c.sync(f"s3://{bucket}/p", f"s3://{bucket2}/p")
    assert r.files_failed == 1
    assert "CRC32C" in r.failures[0].error
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    assert s3.list_objects_v2(Bucket=bucket2).get("KeyCount", 0) == 0
    assert s3.list_multipart_uploads(Bucket=bucket2).get("Uploads", []) == []
