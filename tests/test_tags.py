"""Object tags (issue 38 item 3): ``WriteOptions(tags=...)`` / ``--tagging``
on upload (PutObject and CreateMultipartUpload), kept by a server-side copy
(CopyObject keeps them itself; a copy in parts -- UploadPartCopy copies no
tags -- reads GetObjectTagging and sets them, on create or, past 2 KiB,
with PutObjectTagging afterwards, as aws-cli does), replaced when given;
refused where a store has no tags (gs://) and when they break S3's limits.
On stock moto, SeaweedFS and Ceph RGW, as they ship (RGW 16 keeps the
source's tags on a CopyObject told to REPLACE them: they are set after).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import synxfer
from synxfer import ConfigError, TransferConfig, WriteOptions
from synxfer.backend import check_write_options
from synxfer.layers import Layer

from ._s3server import S3World

PART = 5 * 1024 * 1024
CONFIG = TransferConfig(max_threads=4, part_size=PART, multipart_threshold=PART)
TAGS = {"project": "alpha beta", "owner": "a+b@example.org", "path": "x/y:z=1", "empty": ""}


@pytest.fixture(params=["stock-moto", "seaweedfs", "ceph-rgw"])
def world(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> S3World:
    if request.param == "stock-moto":
        moto = request.getfixturevalue("stock_moto")
        w = S3World("stock-moto", moto.endpoint_url, "testing", "testing")
    elif request.param == "seaweedfs":
        weed = request.getfixturevalue("seaweed_session")
        w = S3World("seaweedfs", weed.endpoint_url, weed.access_key, weed.secret_key)
    else:  # Ceph RGW 16 ignores CopyObject's REPLACE tagging directive: set after
        rgw = request.getfixturevalue("ceph_rgw")
        w = S3World("ceph-rgw", rgw.endpoint_url, rgw.access_key, rgw.secret_key, rgw.region)
    w.apply(monkeypatch)
    return w


def _tags(world: S3World, bucket: str, key: str) -> dict[str, str]:
    got = world.admin().get_object_tagging(Bucket=bucket, Key=key)["TagSet"]
    return {t["Key"]: t["Value"] for t in got}


def _lower_copy_limit(backend: Any) -> None:
    """CopyObject's 5 GiB limit lowered, so a 5 MiB + 17 object is copied in parts."""
    while isinstance(backend, Layer):
        backend = backend.inner
    backend.max_copy_size = PART
    backend.copy_part_size = PART


def _files(tmp_path: Path) -> tuple[Path, Path]:
    small, big = tmp_path / "small.txt", tmp_path / "big.bin"
    small.write_bytes(b"tagged\n")
    big.write_bytes(os.urandom(PART + 17))  # two parts
    return small, big


async def test_upload_tags_then_copies_keep_or_replace_them(world: S3World, tmp_path: Path) -> None:
    bucket = world.new_bucket("tg")
    small, big = _files(tmp_path)
    tagged = CONFIG.evolve(write_options=WriteOptions(tags=TAGS))
    async with synxfer.Client(tagged, endpoint_url=world.endpoint_url) as client:
        (await client.upload_file(small, f"s3://{bucket}/s")).raise_for_failures()
        (await client.upload_file(big, f"s3://{bucket}/m")).raise_for_failures()
    assert _tags(world, bucket, "s") == TAGS  # PutObject
    assert _tags(world, bucket, "m") == TAGS  # CreateMultipartUpload

    async with synxfer.Client(CONFIG, endpoint_url=world.endpoint_url) as client:
        (await client.copy(f"s3://{bucket}/s", f"s3://{bucket}/s2")).raise_for_failures()
        _lower_copy_limit((await client.backend(f"s3://{bucket}/"))[0])
        (await client.copy(f"s3://{bucket}/m", f"s3://{bucket}/m2")).raise_for_failures()
        new = {"stage": "copied"}
        for src, dst in (("s", "s3"), ("m", "m3")):
            r = await client.copy(
                f"s3://{bucket}/{src}", f"s3://{bucket}/{dst}", write_options=WriteOptions(tags=new)
            )
            r.raise_for_failures()
    assert _tags(world, bucket, "s2") == TAGS  # CopyObject's COPY directive
    assert _tags(world, bucket, "m2") == TAGS  # UploadPartCopy: GetObjectTagging, then create
    assert _tags(world, bucket, "s3") == new  # REPLACE
    assert _tags(world, bucket, "m3") == new
    assert world.admin().get_object(Bucket=bucket, Key="m2")["Body"].read() == big.read_bytes()


async def test_copy_in_parts_keeps_tags_too_long_for_the_header(
    world: S3World, tmp_path: Path
) -> None:
    """Ten tags of the longest keys and values S3 allows: over the 2 KiB of
    x-amz-tagging once URL-encoded, so they are set after the copy completes."""
    bucket = world.new_bucket("tg")
    _, big = _files(tmp_path)
    long = {f"{i}" + "k" * 127: "v/" * 128 for i in range(10)}
    async with synxfer.Client(CONFIG, endpoint_url=world.endpoint_url) as client:
        (await client.upload_file(big, f"s3://{bucket}/m")).raise_for_failures()
    tagging = "&".join(f"{k}={v}" for k, v in long.items())
    world.admin().put_object_tagging(
        Bucket=bucket,
        Key="m",
        Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in long.items()]},
    )
    assert len(tagging) > 2048
    async with synxfer.Client(CONFIG, endpoint_url=world.endpoint_url) as client:
        _lower_copy_limit((await client.backend(f"s3://{bucket}/"))[0])
        (await client.copy(f"s3://{bucket}/m", f"s3://{bucket}/m2")).raise_for_failures()
    assert _tags(world, bucket, "m2") == long


def test_cli_tagging_and_bad_values(
    world: S3World, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from synxfer.cli.main import main

    bucket = world.new_bucket("tg")
    small, _ = _files(tmp_path)
    cmd = ["cp", str(small), f"s3://{bucket}/k"]
    assert main([*cmd, "--tagging", "team=data%20eng&tier=1"]) == 0, capfd.readouterr().err
    assert _tags(world, bucket, "k") == {"team": "data eng", "tier": "1"}
    for bad, says in (
        ("a=1&a=2", "given twice"),
        ("&".join(f"k{i}=v" for i in range(11)), "at most 10"),
        ("k=" + "v" * 257, "at most 256"),
        ("aws:x=1", "reserved"),
        ("novalue", "expected key=value"),
    ):
        with pytest.raises(SystemExit) as exited:  # argparse's own errors exit
            raise SystemExit(main([*cmd, "--tagging", bad]))
        err = capfd.readouterr().err
        assert exited.value.code == 2, (bad, err)
        assert "--tagging" in err, err
        assert says in err, err
        assert "Traceback" not in err


def test_stores_without_tags_refuse_them() -> None:
    """gs:// has no object tags: a client refuses them before anything moves."""
    from synxfer_gcs import GcsBackend

    with pytest.raises(ConfigError, match=r"WriteOptions\(tags=\.\.\.\)"):
        check_write_options(WriteOptions(tags={"a": "1"}), GcsBackend.capabilities, "gs://b/")


@pytest.mark.parametrize(
    ("tags", "says"),
    [
        ({f"k{i}": "v" for i in range(11)}, "at most 10"),
        ({"k" * 129: "v"}, "1 to 128"),
        ({"": "v"}, "1 to 128"),
        ({"k": "v" * 257}, "at most 256"),
        ({"aws:created": "1"}, "reserved"),
        ({"k": "a#b"}, "refuses"),
    ],
)
def test_write_options_check_s3_limits(tags: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError, match=r"WriteOptions\(tags=\.\.\.\)") as err:
        WriteOptions(tags=tags)
    assert says in str(err.value)
