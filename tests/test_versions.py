"""Object versions (issue 38, item 1) on stock moto and SeaweedFS, as they ship.

Buckets are put under versioning with boto3 (PutBucketVersioning), versions
written and inspected with boto3 too; synxfer reads, copies, deletes and
lists them through ``version_id=`` / ``versions=True`` and the CLI's
``--version-id`` / ``--all-versions``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import synxfer
from synxfer import ConfigError, NotFound, ObjectInfo, TransferConfig

from ._s3server import S3World

PART = 5 * 1024 * 1024
#: Ranges of 5 MiB and a budget of one range: an object over 5 MiB is
#: fetched in ranged GETs (a HEAD, then one GET per range), not one GET.
CONFIG = TransferConfig(max_threads=4, part_size=PART, multipart_threshold=PART, memory_budget=PART)
BIG = PART + 123_457


@pytest.fixture
def world(versions_world: S3World) -> S3World:
    return versions_world


def _versioned_bucket(world: S3World) -> str:
    return world.new_versioned_bucket("ver")


def _body(world: S3World, bucket: str, key: str) -> bytes:
    data: bytes = world.admin().get_object(Bucket=bucket, Key=key)["Body"].read()
    return data


def _versions(world: S3World, bucket: str) -> list[tuple[str, str, bool]]:
    """(key, version id, delete marker) of every version boto3 lists."""
    answer = world.admin().list_object_versions(Bucket=bucket)
    found = [(v["Key"], v["VersionId"], False) for v in answer.get("Versions", [])]
    found += [(m["Key"], m["VersionId"], True) for m in answer.get("DeleteMarkers", [])]
    return sorted(found)


def _client(world: S3World) -> synxfer.Client:
    return synxfer.Client(CONFIG, endpoint_url=world.endpoint_url)


# -- downloads ---------------------------------------------------------------


async def test_download_of_a_version_pins_it_on_every_ranged_get(
    world: S3World, tmp_path: Path
) -> None:
    """An older version of the same size as the current one comes back whole
    and verified, in ranged GETs: a range without ``versionId`` would be the
    current version's bytes (refused by If-Match, or mixed in)."""
    bucket = _versioned_bucket(world)
    old, new = os.urandom(BIG), os.urandom(BIG)
    v1 = world.put_version(bucket, "big.bin", old)
    world.put_version(bucket, "big.bin", new)
    small_v1 = world.put_version(bucket, "small.txt", b"first")
    world.put_version(bucket, "small.txt", b"second")
    async with _client(world) as client:
        result = await client.download_file(
            f"s3://{bucket}/big.bin", tmp_path / "old.bin", version_id=v1
        )
        result.raise_for_failures()
        assert (tmp_path / "old.bin").read_bytes() == old
        assert result.not_verified == 0, result.warnings
        # One GET (the single-request path) of an older small version.
        result = await client.copy(
            f"s3://{bucket}/small.txt", str(tmp_path / "small.txt"), version_id=small_v1
        )
        result.raise_for_failures()
        assert (tmp_path / "small.txt").read_bytes() == b"first"
        # The blocking facade passes it along too.
    synxfer.download_file(
        f"s3://{bucket}/small.txt",
        tmp_path / "small2.txt",
        version_id=small_v1,
        endpoint_url=world.endpoint_url,
    ).raise_for_failures()
    assert (tmp_path / "small2.txt").read_bytes() == b"first"


async def test_copy_of_a_version_between_keys(world: S3World) -> None:
    """A remote copy of an older version writes that version's bytes: the
    copy streams (pinned), it is no server-side copy of the current object."""
    bucket = _versioned_bucket(world)
    v1 = world.put_version(bucket, "k", b"old bytes")
    world.put_version(bucket, "k", b"new bytes")
    async with _client(world) as client:
        result = await client.copy(f"s3://{bucket}/k", f"s3://{bucket}/restored", version_id=v1)
        result.raise_for_failures()
        assert result.not_verified == 0
    assert _body(world, bucket, "restored") == b"old bytes"
    assert _body(world, bucket, "k") == b"new bytes"


# -- deletes -----------------------------------------------------------------


async def test_rm_of_a_version_deletes_that_version_only(world: S3World) -> None:
    bucket = _versioned_bucket(world)
    v1 = world.put_version(bucket, "k", b"one")
    v2 = world.put_version(bucket, "k", b"two")
    v3 = world.put_version(bucket, "k", b"three")
    world.put_version(bucket, "other", b"x")
    async with _client(world) as client:
        result = await client.rm(f"s3://{bucket}/k", version_id=v2)
        assert result.files_deleted == 1
        kept = [(k, v) for k, v, _ in _versions(world, bucket) if k == "k"]
        assert sorted(kept) == sorted([("k", v1), ("k", v3)])
        assert _body(world, bucket, "k") == b"three"
        # Deleting the current version makes the one before it current.
        await client.rm(f"s3://{bucket}/k", version_id=v3)
        assert _body(world, bucket, "k") == b"one"
        assert _body(world, bucket, "other") == b"x"
        # A version that is not there is an error naming it, not a silent 204.
        with pytest.raises(NotFound, match="no version"):
            await client.rm(f"s3://{bucket}/k", version_id=v2)


async def test_rm_of_a_delete_marker_brings_the_object_back(world: S3World) -> None:
    bucket = _versioned_bucket(world)
    world.put_version(bucket, "k", b"kept")
    marker = world.admin().delete_object(Bucket=bucket, Key="k")["VersionId"]
    async with _client(world) as client:
        items = [i async for i in client.ls(f"s3://{bucket}/", versions=True)]
        assert any(isinstance(i, ObjectInfo) and i.delete_marker for i in items)
        await client.rm(f"s3://{bucket}/k", version_id=marker)
    assert _body(world, bucket, "k") == b"kept"


# -- listings and sync -------------------------------------------------------


async def test_ls_versions_lists_every_version_and_delete_marker(world: S3World) -> None:
    bucket = _versioned_bucket(world)
    v1 = world.put_version(bucket, "a/k", b"1")
    v2 = world.put_version(bucket, "a/k", b"22")
    g1 = world.put_version(bucket, "gone", b"333")
    marker = world.admin().delete_object(Bucket=bucket, Key="gone")["VersionId"]
    async with _client(world) as client:
        items = [i async for i in client.ls(f"s3://{bucket}/", recursive=True, versions=True)]
        folded = [i async for i in client.ls(f"s3://{bucket}/", versions=True)]
        current = [i async for i in client.ls(f"s3://{bucket}/", recursive=True)]
    assert all(isinstance(i, ObjectInfo) for i in items)
    got = [(i.key, i.version_id, i.is_latest, i.delete_marker, i.size) for i in items]  # type: ignore[union-attr]
    assert got == [
        ("a/k", v2, True, False, 2),
        ("a/k", v1, False, False, 1),
        ("gone", marker, True, True, 0),
        ("gone", g1, False, False, 3),
    ]
    assert folded[0] == "a/"
    assert [(i.key, i.version_id) for i in folded[1:]] == [("gone", marker), ("gone", g1)]  # type: ignore[union-attr]
    # A plain listing: current versions only, no delete marker.
    assert [(i.key, i.size) for i in current] == [("a/k", 2)]  # type: ignore[union-attr]


async def test_sync_ignores_noncurrent_versions(world: S3World, tmp_path: Path) -> None:
    bucket = _versioned_bucket(world)
    world.put_version(bucket, "d/k", b"old")
    world.put_version(bucket, "d/k", b"current")
    world.put_version(bucket, "d/gone", b"deleted later")
    world.admin().delete_object(Bucket=bucket, Key="d/gone")
    async with _client(world) as client:
        result = await client.sync_from(f"s3://{bucket}/d/", tmp_path / "out")
        result.raise_for_failures()
    files = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    assert files == {"k": b"current"}


# -- bad input ---------------------------------------------------------------


async def test_bad_version_input_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    async with synxfer.Client() as client:
        with pytest.raises(ConfigError, match=r"version-id.*local path"):
            await client.copy(str(tmp_path / "f"), "s3://b/k", version_id="v")
        with pytest.raises(ConfigError, match="--recursive"):
            await client.copy("s3://b/p/", str(tmp_path), recursive=True, version_id="v")
        with pytest.raises(ConfigError, match="expected a version id"):
            await client.download_file("s3://b/k", tmp_path / "o", version_id="")
        with pytest.raises(ConfigError, match="names a prefix"):
            await client.rm("s3://b/p/", version_id="v")
        with pytest.raises(ConfigError, match="--recursive"):
            await client.rm("s3://b/p", recursive=True, version_id="v")
        # Backends without versions refuse before anything is opened.
        url = (tmp_path / "f").as_uri()
        with pytest.raises(ConfigError, match="file:// has no object versions"):
            await client.download_file(url, tmp_path / "o", version_id="v")
        with pytest.raises(ConfigError, match="gs:// has no object versions"):
            await client.rm("gs://b/k", version_id="v")
        with pytest.raises(ConfigError, match=r"--all-versions.*file://"):
            [i async for i in client.ls(tmp_path.as_uri() + "/", versions=True)]


async def test_missing_version_names_it(world: S3World, tmp_path: Path) -> None:
    bucket = _versioned_bucket(world)
    world.put_version(bucket, "k", b"x")
    v = world.put_version(bucket, "other", b"y")  # a real id, of another key
    async with _client(world) as client:
        with pytest.raises((NotFound, ConfigError), match=r"no (such )?version"):
            await client.download_file(f"s3://{bucket}/k", tmp_path / "o", version_id=v)
    assert not (tmp_path / "o").exists()


# -- the command -------------------------------------------------------------


@pytest.fixture
def moto(stock_moto: Any, monkeypatch: pytest.MonkeyPatch) -> S3World:
    w = S3World("stock-moto", stock_moto.endpoint_url, "testing", "testing-secret-never-printed")
    w.apply(monkeypatch)
    return w


def test_cli_versions(moto: S3World, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from synxfer.cli.main import main

    bucket = _versioned_bucket(moto)
    v1 = moto.put_version(bucket, "k", b"one")
    v2 = moto.put_version(bucket, "k", b"two!")
    marker = moto.admin().delete_object(Bucket=bucket, Key="k")["VersionId"]
    common = ["--endpoint-url", moto.endpoint_url]
    url = f"s3://{bucket}/k"

    assert main(["ls", "--all-versions", f"s3://{bucket}/", *common]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[2:] for line in lines] == [
        ["0", "k", marker, "latest", "delete-marker"],
        ["4", "k", v2],
        ["3", "k", v1],
    ]
    assert main(["ls", "--all-versions", "--json", f"s3://{bucket}/", *common]) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (first["version_id"], first["is_latest"], first["delete_marker"]) == (
        marker,
        True,
        True,
    )

    assert main(["cp", url, str(tmp_path / "v1"), "--version-id", v1, *common]) == 0
    assert (tmp_path / "v1").read_bytes() == b"one"
    # Removing the delete marker brings the object back as it was.
    assert main(["rm", url, "--version-id", marker, *common]) == 0
    assert _body(moto, bucket, "k") == b"two!"
    capsys.readouterr()

    # A version that does not exist: an error naming it, no traceback.
    assert main(["cp", url, str(tmp_path / "x"), "--version-id", marker, *common]) == 1
    err = capsys.readouterr().err
    assert "no version" in err
    assert "Traceback" not in err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["cp", "s3://b/p/", "DIR", "--recursive", "--version-id", "v"], "--recursive"),
        (["cp", "LOCAL", "s3://b/k", "--version-id", "v"], "is a local path"),
        (["cp", "s3://b/k", "DIR", "--version-id", ""], "expected a version id"),
        (["rm", "s3://b/p", "--recursive", "--version-id", "v"], "--recursive"),
        (["rm", "gs://b/k", "--version-id", "v"], "gs:// has no object versions"),
        (["ls", "--all-versions", "FILEURL"], "--all-versions / versions=True: file://"),
    ],
)
def test_cli_bad_version_input_exits_2(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from synxfer.cli.main import main

    (tmp_path / "f").write_bytes(b"x")
    subst = {"DIR": str(tmp_path), "LOCAL": str(tmp_path / "f"), "FILEURL": tmp_path.as_uri()}
    assert main([subst.get(a, a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert says in err
    assert "Traceback" not in err


# -- fsspec ------------------------------------------------------------------


def test_fsspec_version_aware(moto: S3World, tmp_path: Path) -> None:
    """s3fs's spelling: ``path?versionId=V``, ``open(version_id=)``,
    ``ls(versions=True)``, ``info()['VersionId']``; only with version_aware."""
    from synxfer.fsspec import filesystem_class

    bucket = _versioned_bucket(moto)
    old, new = os.urandom(BIG), os.urandom(BIG)
    v1 = moto.put_version(bucket, "k", old)
    v2 = moto.put_version(bucket, "k", new)
    cls = filesystem_class("s3")
    fs = cls(
        config=CONFIG, endpoint_url=moto.endpoint_url, version_aware=True, skip_instance_cache=True
    )
    path = f"{bucket}/k?versionId={v1}"
    assert fs.info(path)["VersionId"] == v1
    assert fs.info(f"{bucket}/k")["VersionId"] == v2
    # Block reads of the file: every ranged read names the version.
    with fs.open(f"{bucket}/k", version_id=v1, block_size=PART) as f:
        assert f.read() == old
    assert fs.cat_file(path, start=PART, end=PART + 10) == old[PART : PART + 10]
    assert fs.cat(path) == old
    fs.get(path, str(tmp_path / "old"))
    assert (tmp_path / "old").read_bytes() == old
    listed = fs.ls(f"{bucket}/", versions=True)
    assert [(e["name"], e["VersionId"]) for e in listed] == [
        (f"{bucket}/k", v2),
        (f"{bucket}/k", v1),
    ]
    fs.rm(path)
    assert [e["VersionId"] for e in fs.ls(f"{bucket}/", versions=True)] == [v2]
    assert fs.cat(f"{bucket}/k") == new
    # Not version aware: s3fs's ValueError; '?versionId=' is then part of a key.
    plain = cls(config=CONFIG, endpoint_url=moto.endpoint_url, skip_instance_cache=True)
    with pytest.raises(ValueError, match="not version aware"):
        plain.open(f"{bucket}/k", version_id=v1)
    with pytest.raises(FileNotFoundError):
        plain.info(f"{bucket}/k?versionId={v2}")
