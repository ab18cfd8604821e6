"""Streamed remote copies are verified as downloads are (issue 11's follow-up).

Objects written by boto3 the way aws-cli writes them (``upload_file``: 8 MiB
parts above 8 MiB; here also 10 MiB parts; ``put_object``) are copied from
S3 through a :class:`FaultProxy` that inverts one byte of a share of the
GetObject bodies, to another endpoint (``scp://`` on a second moto server)
and to GCS (the emulator): every copy is checked against what the source
vouches for -- its CRCs, else its (multipart) ETag, the ranges cut at the
source's parts -- and a corrupt range is fetched and sent again. When the
corruption never stops, the copy fails naming the object and nothing is
left at the destination (no object, no multipart upload, no component).
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from boto3.s3.transfer import TransferConfig as Boto3TransferConfig
from botocore.config import Config

import synxfer
from synxfer import MiB, RetryPolicy, TransferConfig
from synxfer_servers.faultproxy import Fault, FaultProxy

SEED = 14
#: The share of the source's GetObject bodies with one byte inverted.
RATE = 0.25

#: rel -> (size, boto3 multipart chunk size; 0: one put_object)
FOREIGN = {
    "f/big.bin": (9 * MiB + 5, 8 * MiB),  # 2 parts: 8 MiB + 1 MiB
    # 3 parts (10 + 10 MiB + 4099 bytes), read in 5 MiB ranges. Not a 1-byte last
    # part: the proxy would invert that byte the same way each time, and a unit
    # that comes back the same twice counts as confirmed (see engine/verify.py),
    # so the copy failed whenever that byte was corrupted twice (flaky).
    "f/ten.bin": (20 * MiB + 4099, 10 * MiB),
    "f/small.bin": (300_000, 0),
    "f/mid.bin": (6 * MiB + 7, 0),  # one put, copied in parts (threshold 5 MiB)
}

CONFIG = TransferConfig(
    max_threads=4,
    part_size=5 * MiB,
    multipart_threshold=5 * MiB,
    retry=RetryPolicy(attempts=6, initial_delay=0.01, max_delay=0.1),
)


@pytest.fixture(scope="module")
def second_s3() -> Iterator[str]:
    """Another S3 endpoint (moto): copies to it cannot be server-side."""
    from synxfer_servers.s3 import moto_server

    with moto_server() as server:
        yield server.endpoint_url


@pytest.fixture(scope="module")
def gcs() -> Iterator[str]:
    from synxfer_servers.gcs import GcsEmulator

    with GcsEmulator() as emulator:
        yield emulator.endpoint_url


def _upload_foreign(endpoint: str, bucket: str, tmp: Path, *, crc: bool) -> dict[str, str]:
    """Upload :data:`FOREIGN` with boto3; rel -> sha256. ``crc``: boto3's
    default checksums (CRC32); else none (the ETags are the only verifiers)."""
    config = None if crc else Config(request_checksum_calculation="when_required")
    s3 = boto3.client("s3", endpoint_url=endpoint, config=config)
    s3.create_bucket(Bucket=bucket)
    rng = random.Random(SEED)
    digests = {}
    for rel, (size, chunk) in FOREIGN.items():
        data = rng.randbytes(size)
        digests[rel] = hashlib.sha256(data).hexdigest()
        if chunk:
            path = tmp / rel.replace("/", "_")
            path.write_bytes(data)
            transfer = Boto3TransferConfig(multipart_threshold=chunk, multipart_chunksize=chunk)
            s3.upload_file(str(path), bucket, rel, Config=transfer)
        else:
            s3.put_object(Bucket=bucket, Key=rel, Body=data)
    etags = {rel: s3.head_object(Bucket=bucket, Key=rel)["ETag"] for rel in FOREIGN}
    assert etags["f/big.bin"].endswith('-2"')
    assert etags["f/ten.bin"].endswith('-3"')
    assert "-" not in etags["f/mid.bin"]
    return digests


def _s3_objects(endpoint: str, bucket: str) -> dict[str, str]:
    s3 = boto3.client("s3", endpoint_url=endpoint)
    out = {}
    for obj in s3.list_objects_v2(Bucket=bucket).get("Contents", []):
        body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
        out[obj["Key"]] = hashlib.sha256(body).hexdigest()
    return out


def _gcs_objects(endpoint: str, bucket: str) -> dict[str, str]:
    """Every object the emulator holds in ``bucket`` (hidden components too)."""
    items = httpx.get(f"{endpoint}/storage/v1/b/{bucket}/o").json().get("items", [])
    out = {}
    for item in items:
        name = item["name"]
        r = httpx.get(
            f"{endpoint}/storage/v1/b/{bucket}/o/{name.replace('/', '%2F')}",
            params={"alt": "media"},
        )
        out[name] = hashlib.sha256(r.content).hexdigest()
    return out


_NAMES: dict[tuple[str, str], int] = {}


def _name(prefix: str) -> str:
    """A bucket name fixed by the test and the call: the fault proxy's seeded
    draws depend on each request's path, so with fixed names a test corrupts
    the same GETs on every run (random names made "did the proxy corrupt
    anything" a coin toss)."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    n = _NAMES[test, prefix] = _NAMES.get((test, prefix), 0) + 1
    digest = hashlib.sha256(f"{test}|{prefix}|{n}".encode()).hexdigest()[:12]
    return f"{prefix}-{digest}"


def _proxy(s3_endpoint: str, rate: float) -> FaultProxy:
    return FaultProxy(
        s3_endpoint, rate=rate, faults={Fault.CORRUPT: 1.0}, ops={"get_object"}, seed=SEED
    )


@pytest.mark.parametrize("crc", [True, False], ids=["boto3-crc", "etag-only"])
async def test_s3_to_another_endpoint_refetches_corrupt_ranges(
    crc: bool, s3_endpoint: str, second_s3: str, tmp_path: Path
) -> None:
    """s3 -> scp (another moto): streamed; a quarter of the source's GET bodies
    corrupted; every object lands whole, none fails."""
    src, dst = _name("cv-src"), _name("cv-dst")
    expected = _upload_foreign(s3_endpoint, src, tmp_path, crc=crc)
    boto3.client("s3", endpoint_url=second_s3).create_bucket(Bucket=dst)
    async with _proxy(s3_endpoint, RATE) as proxy:
        endpoints = {"s3": proxy.url, "scp": second_s3}
        async with synxfer.Client(CONFIG, endpoints=endpoints) as client:
            result = await client.sync(f"s3://{src}/f", f"scp://{dst}/f")
        stats = proxy.snapshot()
    assert stats.corrupted > 0
    assert result.ok, result.failures
    assert result.files_transferred == len(FOREIGN)
    assert result.bytes_downloaded >= sum(size for size, _ in FOREIGN.values())
    assert result.retries > 0
    assert _s3_objects(second_s3, dst) == expected


async def test_s3_to_gcs_checks_the_multipart_etag(
    s3_endpoint: str, gcs: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """s3 -> gs, objects whose only verifiers are their ETags (the MD5 of
    the part MD5s for multipart ones): corrupt ranges are caught against
    them and fetched again; every object lands whole."""
    from synxfer_servers.gcs import create_bucket

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs)
    src, dst = _name("cv-src"), _name("cv-gs")
    expected = _upload_foreign(s3_endpoint, src, tmp_path, crc=False)
    create_bucket(gcs, dst)
    async with _proxy(s3_endpoint, RATE) as proxy:
        async with synxfer.Client(CONFIG, endpoints={"s3": proxy.url}) as client:
            result = await client.sync(f"s3://{src}/f", f"gs://{dst}/f")
        stats = proxy.snapshot()
    assert stats.corrupted > 0
    assert result.ok, result.failures
    assert result.retries > 0
    assert _gcs_objects(gcs, dst) == expected


async def test_persistent_corruption_fails_and_leaves_nothing(
    s3_endpoint: str, second_s3: str, gcs: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every GET body corrupted: after the last attempt each copy fails,
    naming the object, the checksum compared and the attempts; nothing is
    left at either destination (no object, no multipart upload, no
    component)."""
    from synxfer_servers.gcs import create_bucket

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs)
    src, dst, gs = _name("cv-src"), _name("cv-dst"), _name("cv-gs")
    _upload_foreign(s3_endpoint, src, tmp_path, crc=False)
    second: Any = boto3.client("s3", endpoint_url=second_s3)
    second.create_bucket(Bucket=dst)
    create_bucket(gcs, gs)
    config = CONFIG.evolve(retry=RetryPolicy(attempts=3, initial_delay=0.01, max_delay=0.05))
    async with _proxy(s3_endpoint, 1.0) as proxy:
        endpoints = {"s3": proxy.url, "scp": second_s3}
        async with synxfer.Client(config, endpoints=endpoints) as client:
            to_scp = await client.sync(f"s3://{src}/f", f"scp://{dst}/f")
            to_gs = await client.sync(f"s3://{src}/f", f"gs://{gs}/f")
    for result, where in ((to_scp, f"scp://{dst}/f"), (to_gs, f"gs://{gs}/f")):
        assert result.files_failed == len(FOREIGN)
        failed = {f.path.removeprefix(f"s3://{src}/"): f.error for f in result.failures}
        assert sorted(failed) == sorted(FOREIGN)
        for rel, error in failed.items():
            assert f"s3://{src}/{rel}" in error
            assert "does not match the object's MD5" in error
            assert "3 attempts" in error
            assert f"nothing was written to {where}/{rel.removeprefix('f/')}" in error
        assert "MD5 of the part MD5s (multipart ETag)" in failed["f/ten.bin"]
    assert second.list_objects_v2(Bucket=dst).get("KeyCount", 0) == 0
    assert second.list_multipart_uploads(Bucket=dst).get("Uploads", []) == []
    assert _gcs_objects(gcs, gs) == {}


# -- what cannot be verified is said so ------------------------------------------------


async def test_copies_a_source_vouches_nothing_for_count_as_not_verified(
    s3_endpoint: str, gcs: str, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SSE-KMS objects with no additional checksum vouch for nothing (their
    ETag is not an MD5): streamed to gs they are copied, one whole and one in
    parts, and counted as not verified -- in TransferResult.not_verified, in
    the CLI's per-file line and its summary, and in --json's done events --
    as downloads are; a plain object (its ETag an MD5) is verified. A
    server-side copy never crosses the client: not counted."""
    import asyncio
    import json
    import subprocess
    import sys

    from synxfer_servers.gcs import create_bucket

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs)
    s3 = boto3.client(
        "s3", endpoint_url=s3_endpoint, config=Config(request_checksum_calculation="when_required")
    )
    s3.put_object(Bucket=bucket, Key="d/plain", Body=b"p" * 100)
    s3.put_object(Bucket=bucket, Key="d/kms", Body=b"k" * 100, ServerSideEncryption="aws:kms")
    big = random.Random(SEED).randbytes(6 * MiB + 7)  # over the threshold: copied in parts
    s3.put_object(Bucket=bucket, Key="d/kms-big", Body=big, ServerSideEncryption="aws:kms")
    head = s3.head_object(Bucket=bucket, Key="d/kms-big", ChecksumMode="ENABLED")
    assert not [h for h in head["ResponseMetadata"]["HTTPHeaders"] if "x-amz-checksum-" in h]
    gs, gs2, gs3, other = _name("nv-gs"), _name("nv-gs"), _name("nv-gs"), _name("nv-s3")
    for name in (gs, gs2, gs3):
        create_bucket(gcs, name)
    s3.create_bucket(Bucket=other)
    async with synxfer.Client(CONFIG, endpoints={"s3": s3_endpoint}) as client:
        streamed = await client.sync(f"s3://{bucket}/d", f"gs://{gs}/d")
        server_side = await client.sync(f"s3://{bucket}/d", f"s3://{other}/d")
    assert streamed.ok, streamed.failures
    assert streamed.files_transferred == 3
    assert streamed.not_verified == 2
    assert server_side.ok, server_side.failures
    assert (server_side.files_transferred, server_side.bytes_downloaded) == (3, 0)
    assert server_side.not_verified == 0
    want = {"d/plain": b"p" * 100, "d/kms": b"k" * 100, "d/kms-big": big}
    assert _gcs_objects(gcs, gs) == {k: hashlib.sha256(v).hexdigest() for k, v in want.items()}

    cmd = [sys.executable, "-m", "synxfer.cli.main", "sync", f"s3://{bucket}/d", f"gs://{gs2}/d"]
    cmd += ["--endpoint", f"s3={s3_endpoint}"]
    proc = await asyncio.to_thread(subprocess.run, cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    unchecked = sorted(line for line in proc.stdout.splitlines() if "not verified" in line)
    assert len(unchecked) == 2, proc.stdout
    assert f"s3://{bucket}/d/kms " in unchecked[0]
    assert f"s3://{bucket}/d/kms-big " in unchecked[1]
    assert proc.stderr.strip().endswith("; not verified: 2"), proc.stderr
    # With --json: each done event says so, and the summary counts them.
    cmd[5] = f"gs://{gs3}/d"
    js = await asyncio.to_thread(
        subprocess.run, [*cmd, "--json"], capture_output=True, text=True, timeout=120
    )
    assert js.returncode == 0, js.stderr
    lines = [json.loads(line) for line in js.stdout.splitlines()]
    verified = {line["src"].rsplit("/", 1)[1]: line.get("verified") for line in lines[:-1]}
    assert verified == {"kms": False, "kms-big": False, "plain": True}
    assert lines[-1]["not_verified"] == 2
