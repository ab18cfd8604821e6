"""Chosen checksums (issue 38 item 5): --checksum-algorithm, WriteOptions.checksum_algorithm.

Against the S3 servers as they ship (``s3_world``: stock moto, SeaweedFS
with auth, Ceph RGW). SeaweedFS does what S3 does: it verifies and keeps
the chosen checksum, FULL_OBJECT for multipart CRCs. Ceph RGW 16 ignores
every ``x-amz-checksum-*`` header; stock moto verifies nothing and keeps
its own (for CRC32C, wrong) values. synxfer stores the right bytes on all
three, says once per endpoint where the claim was not kept, and downloads
verify whatever claim the object carries.
"""

from __future__ import annotations

import logging
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import synxfer
from synxfer import WriteOptions
from synxfer_s3 import _chosen
from synxfer_s3._trust import forget_endpoints
from synxfer_servers.faultproxy import Fault, FaultProxy

from ._s3checksums import checksum_value, composite_value
from ._s3server import admin_client
from .conftest import PART, SMALL

ALGORITHMS = ("CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256", "MD5")
BIG = PART + 12345  # two parts


@pytest.fixture(autouse=True)
def _fresh_verdicts() -> Iterator[None]:
    forget_endpoints()
    _chosen.forget()
    yield
    forget_endpoints()
    _chosen.forget()


@pytest.fixture
def world_env(s3_world: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    s3_world.apply(monkeypatch)
    return s3_world


def _admin(world: Any) -> Any:
    """boto3 to the server, checking no response checksum itself (the test compares bytes)."""
    return admin_client(world, check_checksums=False)


def _head(world: Any, bucket: str, key: str) -> dict[str, str]:
    answer = _admin(world).head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    headers: dict[str, str] = answer["ResponseMetadata"]["HTTPHeaders"]
    return {k: v for k, v in headers.items() if k.startswith("x-amz-checksum")}


def _warnings(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and text in r.getMessage()
    ]


async def test_each_chosen_checksum_is_the_objects_claim(
    world_env: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every algorithm, a single PUT and a 2-part upload: the bytes stored
    are the file's on every server; on SeaweedFS (as on S3) the object
    carries the chosen checksum -- the CRCs FULL_OBJECT, SHA1/SHA256
    COMPOSITE -- as aws-cli would read it; a store that keeps no such claim
    is named once per algorithm, not once per file; every object downloads
    verified or is said to be checked another way."""
    world = world_env
    caplog.set_level(logging.WARNING, logger="synxfer")
    bucket = world.new_bucket()
    rng = random.Random(38)
    small, big = rng.randbytes(70_000), rng.randbytes(BIG)
    (tmp_path / "small").write_bytes(small)
    (tmp_path / "big").write_bytes(big)
    config = SMALL.evolve(state_dir=str(tmp_path / "state"))
    s3 = _admin(world)
    async with synxfer.Client(config) as c:
        for alg in ALGORITHMS:
            options = WriteOptions(checksum_algorithm=alg.lower())  # any case
            for name in ("small", "big", "big2"):
                src = tmp_path / name.rstrip("2")
                r = await c.copy(src, f"s3://{bucket}/{alg}/{name}", write_options=options)
                assert r.ok, r.failures
            for name, data in (("small", small), ("big", big), ("big2", big)):
                key = f"{alg}/{name}"
                assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data, key
            for name, data in (("small", small), ("big", big)):
                got = await c.download_file(f"s3://{bucket}/{alg}/{name}", tmp_path / "back")
                assert (tmp_path / "back").read_bytes() == data
                if world.name == "seaweedfs":  # checked by the chosen claim itself
                    assert got.not_verified == 0
                    assert got.warnings == []
            if world.name != "seaweedfs" or alg == "MD5":
                continue
            name = alg.lower()
            single = _head(world, bucket, f"{alg}/small")
            assert single[f"x-amz-checksum-{name}"] == checksum_value(alg, small)
            multi = _head(world, bucket, f"{alg}/big")
            if alg.startswith("CRC"):
                assert multi["x-amz-checksum-type"] == "FULL_OBJECT"
                assert multi[f"x-amz-checksum-{name}"] == checksum_value(alg, big)
            else:
                assert multi["x-amz-checksum-type"] == "COMPOSITE"
                assert multi[f"x-amz-checksum-{name}"] == f"{composite_value(alg, big, PART)}-2"
    claim_warnings = _warnings(caplog, "did not keep the")
    put_warnings = _warnings(caplog, "did not confirm the")
    if world.name == "seaweedfs":
        assert claim_warnings == put_warnings == []
    elif world.name == "ceph-rgw":  # keeps no claim of any kind: each said once
        assert len(claim_warnings) == 5, claim_warnings
        assert len(put_warnings) == 5, put_warnings
    else:  # stock moto: keeps its own values of multipart objects, none of a PUT
        assert len(put_warnings) == 5, put_warnings
        assert [w for w in claim_warnings if "CRC32C" in w] == claim_warnings
        assert len(claim_warnings) == 1  # it reports a CRC32 as the CRC32C


async def test_a_store_that_ignores_the_chosen_checksum_stores_no_wrong_bytes(
    world_env: Any, tmp_path: Path
) -> None:
    """One byte inverted in 30 % of PUT bodies, SHA256 chosen: stock moto and
    Ceph RGW verify no SHA256 (and do not say so), SeaweedFS does. Every
    object holds its file's bytes: bodies the answer did not confirm carry
    Content-MD5 and are checked by their ETag, as without a choice."""
    world = world_env
    bucket = world.new_bucket()
    rng = random.Random(5)
    files = {f"f{i}": rng.randbytes(rng.choice([900, 40_000, 300_000])) for i in range(10)}
    files["big"] = rng.randbytes(BIG)
    src = tmp_path / "src"
    src.mkdir()
    for name, data in files.items():
        (src / name).write_bytes(data)
    retry = synxfer.RetryPolicy(attempts=8, initial_delay=0.01, max_delay=0.1)
    config = SMALL.evolve(
        state_dir=str(tmp_path / "state"),
        retry=retry,
        write_options=WriteOptions(checksum_algorithm="SHA256"),
    )
    async with FaultProxy(
        world.endpoint_url,
        rate=0.3,
        faults={Fault.CORRUPT_REQUEST: 1.0},
        methods={"PUT"},
        seed=38,
    ) as proxy:
        async with synxfer.Client(config, endpoint_url=proxy.url) as c:
            r = await c.sync_to(src, f"s3://{bucket}/t")
        corrupted = proxy.snapshot().corrupted
    assert corrupted >= 1  # the proxy did flip bytes
    s3 = _admin(world)
    wrong = [
        name
        for name, data in files.items()
        if s3.get_object(Bucket=bucket, Key=f"t/{name}")["Body"].read() != data
    ]
    assert wrong == []
    assert r.ok, r.failures


async def test_a_refused_full_object_type_falls_back_to_composite(
    seaweed: Any,
    weed_env: Any,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SeaweedFS refuses FULL_OBJECT for SHA256 (as S3 does): a client that
    asks for it anyway (forced here: synxfer asks for COMPOSITE) falls back
    to COMPOSITE, says so once for two uploads, and the object keeps the
    composite SHA256."""
    caplog.set_level(logging.WARNING, logger="synxfer")
    monkeypatch.setattr(_chosen, "_type_for", lambda kind: "FULL_OBJECT")
    s3 = _admin(seaweed)  # its keys named: boto3's default session keeps an earlier test's
    s3.create_bucket(Bucket="refused")
    data = random.Random(7).randbytes(BIG)
    (tmp_path / "big").write_bytes(data)
    options = WriteOptions(checksum_algorithm="SHA256")
    async with synxfer.Client(SMALL, endpoint_url=seaweed.endpoint_url) as c:
        for key in ("a", "b"):
            r = await c.copy(tmp_path / "big", f"s3://refused/{key}", write_options=options)
            assert r.ok, r.failures
    head = s3.head_object(Bucket="refused", Key="b", ChecksumMode="ENABLED")
    assert head["ChecksumType"] == "COMPOSITE"
    assert head["ChecksumSHA256"] == f"{composite_value('SHA256', data, PART)}-2"
    assert len(_warnings(caplog, "refuses FULL_OBJECT SHA256")) == 1


def test_full_object_crc_is_folded_from_the_parts() -> None:
    """The whole object's CRC, folded from the parts' CRCs and sizes (awscrt),
    is the CRC of the concatenated bytes, for each CRC and uneven parts."""
    rng = random.Random(9)
    parts = [rng.randbytes(n) for n in (1000, 1000, 17, 1)]
    for alg in ("CRC32", "CRC32C", "CRC64NVME"):
        upload = _chosen.ChosenUpload(alg.lower(), "FULL_OBJECT")
        for n, p in enumerate(parts, 1):
            upload.parts[n] = (checksum_value(alg, p), len(p))
        full, _ = _chosen._whole(upload, [1, 2, 3, 4])
        assert full == checksum_value(alg, b"".join(parts)), alg


def test_cli_bad_values_exit_2(tmp_path: Path) -> None:
    """A wrong name, or a destination that cannot carry a chosen checksum
    (file://), exits 2 naming the option, without a traceback."""
    src = tmp_path / "f"
    src.write_bytes(b"x" * 100)
    synxfer_cli = str(Path(sys.executable).parent / "synxfer")
    bad = subprocess.run(
        [synxfer_cli, "cp", "--checksum-algorithm", "crc16", str(src),
         "s3://b/k"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "--checksum-algorithm" in bad.stderr
    assert "CRC64NVME" in bad.stderr
    assert "Traceback" not in bad.stderr
    local = subprocess.run(
        [synxfer_cli, "cp", "--checksum-algorithm", "SHA256", str(src),
         f"file://{tmp_path}/g"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert local.returncode == 2, local.stderr
    assert "--checksum-algorithm" in local.stderr
    assert "Traceback" not in local.stderr


def test_cli_uploads_with_the_chosen_checksum(seaweed: Any, weed_env: Any, tmp_path: Path) -> None:
    """``synxfer cp --checksum-algorithm crc64nvme`` (aws-cli's flag, any case):
    a multipart object with SeaweedFS's FULL_OBJECT CRC64NVME, as aws-cli
    reads it with ``head-object --checksum-mode ENABLED``."""
    s3 = _admin(seaweed)  # its keys named: boto3's default session keeps an earlier test's
    s3.create_bucket(Bucket="cli-chosen")
    # Over the CLI's 8 MiB multipart threshold: a multipart object (BIG is one part over).
    data = random.Random(11).randbytes(2 * PART + 12345)
    (tmp_path / "big").write_bytes(data)
    synxfer_cli = str(Path(sys.executable).parent / "synxfer")
    done = subprocess.run(
        [synxfer_cli, "cp", "--endpoint-url", seaweed.endpoint_url, "--part-size", "5MiB",
         "--checksum-algorithm", "crc64nvme", str(tmp_path / "big"), "s3://cli-chosen/big",
         "-q", "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    head = s3.head_object(Bucket="cli-chosen", Key="big", ChecksumMode="ENABLED")
    assert head["ChecksumType"] == "FULL_OBJECT"
    assert head["ChecksumCRC64NVME"] == checksum_value("CRC64NVME", data)


async def test_server_side_copy_asks_the_store_for_the_chosen_checksum(
    world_env: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A copy within one endpoint (CopyObject) asks the store to compute the
    chosen checksum (``x-amz-checksum-algorithm``): stock moto keeps it, as S3
    does; SeaweedFS and Ceph RGW ignore it, which is said once for two copies."""
    world = world_env
    caplog.set_level(logging.WARNING, logger="synxfer")
    bucket = world.new_bucket()
    s3 = _admin(world)
    data = random.Random(3).randbytes(50_000)
    s3.put_object(Bucket=bucket, Key="src", Body=data)
    options = WriteOptions(checksum_algorithm="SHA256")
    async with synxfer.Client(SMALL) as c:
        for dst in ("a", "b"):
            r = await c.copy(f"s3://{bucket}/src", f"s3://{bucket}/{dst}", write_options=options)
            assert r.ok, r.failures
    assert s3.get_object(Bucket=bucket, Key="b")["Body"].read() == data
    said = _warnings(caplog, "did not report the SHA256 checksum")
    if world.name == "stock-moto":
        assert _head(world, bucket, "b")["x-amz-checksum-sha256"] == checksum_value("SHA256", data)
        assert said == []
    else:
        assert len(said) == 1, said
