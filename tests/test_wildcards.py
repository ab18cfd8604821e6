"""Wildcard sources as s5cmd takes them (issue 38, item 7), on stock moto.

``cp 's3://b/logs/2026-*/*.gz' dir/`` copies every key the glob matches
(``*`` also matches ``/``, as ``--include`` does), named below the
wildcard's directory as s5cmd names them (``dir/2026-01/a.gz``), listing
only from the pattern's literal part; local globs alike; no match is an
error; ``--raw`` takes ``*`` literally.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, ClassVar

import boto3  # type: ignore[import-untyped]
import pytest

import synxfer
from synxfer import NotFound
from synxfer.layers import Layer

from ._s3server import S3World

KEYS = {
    "logs/2026-01/a.gz": b"a",
    "logs/2026-01/b.txt": b"b",
    "logs/2026-02/deep/c.gz": b"c",
    "logs/2025-12/d.gz": b"d",
    "other/x.gz": b"x",
    "raw/star*key": b"literal",
    "raw/starXkey": b"other",
}


@pytest.fixture
def moto(stock_moto: Any, monkeypatch: pytest.MonkeyPatch) -> S3World:
    world = S3World("stock-moto", stock_moto.endpoint_url, "testing", "testing")
    world.apply(monkeypatch)
    return world


@pytest.fixture
def bucket(moto: S3World) -> str:
    s3 = boto3.client("s3", endpoint_url=moto.endpoint_url)
    name = f"wc-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    for key, body in KEYS.items():
        s3.put_object(Bucket=name, Key=key, Body=body)
    return name


def _keys(moto: S3World, bucket: str, prefix: str) -> dict[str, bytes]:
    s3 = boto3.client("s3", endpoint_url=moto.endpoint_url)
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return {o["Key"]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read() for o in listed}


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


class Listings(Layer):
    """Records the prefixes listed (every listing goes through ``list_page``)."""

    prefixes: ClassVar[set[str]] = set()

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        if op == "list_page":
            Listings.prefixes.add(args[0])
        return await fn(*args)


async def test_remote_glob_downloads_what_matches_named_below_the_wildcard(
    moto: S3World, bucket: str, tmp_path: Path
) -> None:
    Listings.prefixes = set()
    async with synxfer.Client(endpoint_url=moto.endpoint_url, layers=[Listings]) as c:
        result = await c.copy(f"s3://{bucket}/logs/2026-*/*.gz", tmp_path / "out")
    assert result.ok, result.failures
    assert _files(tmp_path / "out") == {"2026-01/a.gz": b"a", "2026-02/deep/c.gz": b"c"}
    assert Listings.prefixes == {"logs/2026-"}  # the literal part, not the bucket


async def test_remote_glob_to_remote_and_filters(moto: S3World, bucket: str) -> None:
    async with synxfer.Client(endpoint_url=moto.endpoint_url) as c:
        result = await c.copy(
            f"s3://{bucket}/logs/*", f"s3://{bucket}/copy/", filters=[("exclude", "*.txt")]
        )
    assert result.files_transferred == 3
    assert set(_keys(moto, bucket, "copy/")) == {
        "copy/2026-01/a.gz",
        "copy/2026-02/deep/c.gz",
        "copy/2025-12/d.gz",
    }


async def test_local_glob_uploads_and_mv_moves_only_matches(
    moto: S3World, bucket: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "a.csv").write_bytes(b"1")
    (data / "b.txt").write_bytes(b"2")
    (data / "sub" / "c.csv").write_bytes(b"3")
    async with synxfer.Client(endpoint_url=moto.endpoint_url) as c:
        up = await c.copy(f"{data}/*.csv", f"s3://{bucket}/in/")
        assert up.files_transferred == 2
        assert _keys(moto, bucket, "in/") == {"in/a.csv": b"1", "in/sub/c.csv": b"3"}
        moved = await c.move(f"{data}/*.csv", f"s3://{bucket}/moved/")
    assert moved.files_transferred == 2
    assert _files(data) == {"b.txt": b"2"}  # the matches moved, the rest stays


async def test_a_name_that_exists_is_itself_and_raw_is_literal(
    moto: S3World, bucket: str, tmp_path: Path
) -> None:
    async with synxfer.Client(endpoint_url=moto.endpoint_url) as c:
        # An object named with a '*' is that object (fsspec passes such names).
        itself = await c.copy(f"s3://{bucket}/raw/star*key", tmp_path / "one")
        assert itself.files_transferred == 1
        assert (tmp_path / "one").read_bytes() == b"literal"
        # 'star?key' names no object: a glob, matching both keys...
        both = await c.copy(f"s3://{bucket}/raw/star?key", tmp_path / "both")
        assert both.files_transferred == 2
        assert _files(tmp_path / "both") == {"star*key": b"literal", "starXkey": b"other"}
        # ...unless --raw: then it is a key, and there is none.
        with pytest.raises(NotFound, match=r"star\?key: no such object"):
            await c.copy(f"s3://{bucket}/raw/star?key", tmp_path / "three", raw=True)


async def test_no_match_is_an_error(moto: S3World, bucket: str, tmp_path: Path) -> None:
    async with synxfer.Client(endpoint_url=moto.endpoint_url) as c:
        with pytest.raises(NotFound, match=r"no object matches the wildcard .*--raw"):
            await c.copy(f"s3://{bucket}/logs/2027-*", tmp_path)
        with pytest.raises(NotFound, match=r"no file matches the wildcard"):
            await c.copy(f"{tmp_path}/*.nothing", f"s3://{bucket}/in/")


def test_cli_wildcards(moto: S3World, bucket: str, tmp_path: Path) -> None:
    env = {**moto.environ(), "AWS_ENDPOINT_URL": moto.endpoint_url}

    def synxfer_cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "synxfer.cli.main", *args]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)

    ok = synxfer_cli("cp", f"s3://{bucket}/logs/2026-*/*.gz", f"{tmp_path}/logs/")
    assert ok.returncode == 0, ok.stderr
    assert _files(tmp_path / "logs") == {"2026-01/a.gz": b"a", "2026-02/deep/c.gz": b"c"}
    none = synxfer_cli("cp", f"s3://{bucket}/nope/*.gz", f"{tmp_path}/x/")
    assert none.returncode == 1
    assert "no object matches the wildcard" in none.stderr
    assert "Traceback" not in none.stderr
    missing = synxfer_cli("cp", f"{tmp_path}/*.none", f"s3://{bucket}/in/")
    assert missing.returncode == 1
    assert "no file matches the wildcard" in missing.stderr
    raw = synxfer_cli("cp", "--raw", f"{tmp_path}/*.none", f"s3://{bucket}/in/")
    assert raw.returncode == 2
    assert "does not exist" in raw.stderr
