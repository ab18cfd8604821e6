"""``rm --all-versions`` / ``rm(all_versions=True)`` (issue 38, item 1's gap).

On stock moto and SeaweedFS (both keep versions as they ship): every
version and delete marker of a key, or under a prefix with ``--recursive``,
goes in DeleteObjects batches naming each ``VersionId`` (counted by a proxy:
no DELETE per version); a dry run names each and deletes nothing; the rest
of the bucket is untouched; bad input is exit 2 naming the option.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import synxfer
from synxfer import Action, EventKind, NotFound
from synxfer_servers.faultproxy import FaultProxy

from ._s3server import S3World


@pytest.fixture
def world(versions_world: S3World) -> S3World:
    return versions_world


def _bucket(world: S3World) -> str:
    """A versioned bucket: ``d/a`` (two versions and a delete marker), ``d/a2``,
    ``d/sub/c``, ``d/old`` (written before versioning: version ``null``), and
    ``other/x``."""
    name = world.new_bucket("rmv")
    s3 = world.admin()
    s3.put_object(Bucket=name, Key="d/old", Body=b"before versioning")
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    for key, body in [
        ("d/a", b"one"),
        ("d/a", b"two"),
        ("d/a2", b"a2"),
        ("d/sub/c", b"c"),
        ("other/x", b"x"),
    ]:
        s3.put_object(Bucket=name, Key=key, Body=body)
    s3.delete_object(Bucket=name, Key="d/a")
    return name


def _versions(world: S3World, bucket: str) -> list[tuple[str, bool]]:
    """(key, delete marker) of every version boto3 lists."""
    answer = world.admin().list_object_versions(Bucket=bucket)
    found = [(v["Key"], False) for v in answer.get("Versions", [])]
    found += [(m["Key"], True) for m in answer.get("DeleteMarkers", [])]
    return sorted(found)


async def test_rm_all_versions_under_a_prefix(world: S3World) -> None:
    bucket = _bucket(world)
    before = _versions(world, bucket)
    under = [v for v in before if v[0].startswith("d/")]
    assert len(under) == 6
    with FaultProxy(world.endpoint_url, rate=0.0) as proxy:
        async with synxfer.Client(endpoint_url=proxy.url) as client:
            dry = await client.rm(
                f"s3://{bucket}/d", recursive=True, all_versions=True, dryrun=True
            )
            assert dry.files_deleted == 6
            assert _versions(world, bucket) == before
            result = await client.rm(f"s3://{bucket}/d", recursive=True, all_versions=True)
        ops = proxy.snapshot().ops
    assert result.ok
    assert result.files_deleted == 6
    assert _versions(world, bucket) == [("other/x", False)]
    assert ops["delete_objects"] == 1
    assert ops["delete_object"] == 0


async def test_rm_all_versions_of_one_key_with_filters_and_events(world: S3World) -> None:
    """One key: its versions and marker only (``d/a2`` shares its prefix);
    each event names the version; ``--exclude`` applies under a prefix."""
    bucket = _bucket(world)
    seen: list[str] = []

    def on_event(event: Any) -> None:
        if event.action is Action.DELETE and event.kind is EventKind.DONE:
            seen.append(event.dst)

    async with synxfer.Client(endpoint_url=world.endpoint_url, on_event=on_event) as client:
        result = await client.rm(f"s3://{bucket}/d/a", all_versions=True)
        assert result.files_deleted == 3
        assert sorted(s.split(" (")[1].split()[0] for s in seen) == ["delete", "version", "version"]
        assert all(s.startswith(f"s3://{bucket}/d/a (") for s in seen)
        assert [k for k, _ in _versions(world, bucket)] == ["d/a2", "d/old", "d/sub/c", "other/x"]
        result = await client.rm(
            f"s3://{bucket}/d/",
            recursive=True,
            all_versions=True,
            filters=[("exclude", "sub/*")],
        )
        assert result.files_deleted == 2
        assert [k for k, _ in _versions(world, bucket)] == ["d/sub/c", "other/x"]
        with pytest.raises(NotFound, match="nor any version"):
            await client.rm(f"s3://{bucket}/d/a", all_versions=True)


@pytest.fixture
def moto(stock_moto: Any, monkeypatch: pytest.MonkeyPatch) -> S3World:
    w = S3World("stock-moto", stock_moto.endpoint_url, "testing", "testing-secret-never-printed")
    w.apply(monkeypatch)
    return w


def test_cli_rm_all_versions(moto: S3World, capsys: pytest.CaptureFixture[str]) -> None:
    from synxfer.cli.main import main

    bucket = _bucket(moto)
    common = ["--endpoint-url", moto.endpoint_url]
    url = f"s3://{bucket}/d/a"
    assert main(["rm", url, "--all-versions", "--dryrun", *common]) == 0
    out = capsys.readouterr().out
    assert out.count("(dryrun) delete: ") == 3
    assert "(delete marker " in out
    assert len(_versions(moto, bucket)) == 7
    assert main(["rm", url, "--all-versions", *common]) == 0
    assert capsys.readouterr().out.count("delete: ") == 3
    assert len(_versions(moto, bucket)) == 4
    # Nothing left of the key: exit 1, said without a traceback.
    assert main(["rm", url, "--all-versions", *common]) == 1
    err = capsys.readouterr().err
    assert "nor any version" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["rm", "s3://b/p/", "--all-versions"], "--all-versions / all_versions=True: s3://b/p/"),
        (["rm", "s3://b", "--all-versions"], "add --recursive"),
        (["rm", "s3://b/k", "--all-versions", "--version-id", "v"], "--version-id"),
        (["rm", "FILEURL", "--all-versions"], "--all-versions / all_versions=True: file://"),
    ],
)
def test_cli_bad_all_versions_input_exits_2(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from synxfer.cli.main import main

    (tmp_path / "f").write_bytes(b"x")
    assert main([(tmp_path / "f").as_uri() if a == "FILEURL" else a for a in argv]) == 2
    err = capsys.readouterr().err
    assert says in err
    assert "Traceback" not in err
