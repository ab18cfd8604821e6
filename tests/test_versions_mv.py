"""``mv --version-id`` / ``move(version_id=)`` (issue 38, item 1's gap), on
stock moto and SeaweedFS: that version is copied (pinned, verified) and then
that version of the source is deleted -- not the key, which would add a
delete marker and keep the version -- so the other versions stay as they
were. Bad input is exit 2 naming the option.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import synxfer

from ._s3server import S3World


@pytest.fixture
def world(versions_world: S3World) -> S3World:
    return versions_world


def _bucket(world: S3World) -> str:
    return world.new_versioned_bucket("vmv")


def _versions(world: S3World, bucket: str, key: str) -> list[tuple[str, bool]]:
    """(version id, delete marker) of each version of ``key``."""
    answer = world.admin().list_object_versions(Bucket=bucket, Prefix=key)
    found = [(v["VersionId"], False) for v in answer.get("Versions", []) if v["Key"] == key]
    found += [(m["VersionId"], True) for m in answer.get("DeleteMarkers", []) if m["Key"] == key]
    return found


async def test_move_of_a_version(world: S3World, tmp_path: Path) -> None:
    bucket = _bucket(world)
    s3 = world.admin()
    old = world.put_version(bucket, "k", b"old bytes")
    new = world.put_version(bucket, "k", b"new bytes!")
    async with synxfer.Client(endpoint_url=world.endpoint_url) as client:
        result = await client.move(f"s3://{bucket}/k", tmp_path / "k.old", version_id=old)
        assert result.ok
        assert (tmp_path / "k.old").read_bytes() == b"old bytes"
        # The old version is gone; the current one stays current, no marker added.
        assert _versions(world, bucket, "k") == [(new, False)]
        assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"new bytes!"

        first = world.put_version(bucket, "r", b"first")
        second = world.put_version(bucket, "r", b"second")
        dst = f"s3://{bucket}/restored"
        result = await client.move(f"s3://{bucket}/r", dst, version_id=second)
        assert result.ok
        assert s3.get_object(Bucket=bucket, Key="restored")["Body"].read() == b"second"
        # The current version moved: the one before it is current again.
        assert _versions(world, bucket, "r") == [(first, False)]
        assert s3.get_object(Bucket=bucket, Key="r")["Body"].read() == b"first"


def test_cli_mv_version(
    stock_moto: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from synxfer.cli.main import main

    world = S3World("stock-moto", stock_moto.endpoint_url, "testing", "testing-secret")
    world.apply(monkeypatch)
    bucket = _bucket(world)
    old = world.put_version(bucket, "k", b"old")
    new = world.put_version(bucket, "k", b"newer")
    common = ["--endpoint-url", world.endpoint_url]
    url = f"s3://{bucket}/k"
    assert main(["mv", url, str(tmp_path / "k"), "--version-id", old, *common]) == 0
    assert (tmp_path / "k").read_bytes() == b"old"
    assert _versions(world, bucket, "k") == [(new, False)]
    capsys.readouterr()
    for argv, says in [
        (
            ["mv", f"s3://{bucket}/p/", str(tmp_path), "--recursive", "--version-id", old],
            "--recursive",
        ),
        (["mv", str(tmp_path / "k"), url, "--version-id", old], "is a local path"),
        (["mv", url, str(tmp_path / "x"), "--version-id", ""], "expected a version id"),
    ]:
        assert main([*argv, *common]) == 2
        err = capsys.readouterr().err
        assert says in err
        assert "--version-id" in err
        assert "Traceback" not in err
