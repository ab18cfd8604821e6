"""--no-clobber, --if-size-differ, --if-source-newer (issue 38, item 8) on
stock servers: stock moto, and SeaweedFS and Ceph RGW for the conditional
write itself (``If-None-Match: *``; RGW 16 ignores it on
CompleteMultipartUpload, where the S3 backend's HEAD keeps the object).

A writer that gets in between the plan and the write is another client
(boto3) writing the key from a layer just before synxfer's own PUT or
CompleteMultipartUpload; the servers stay as they ship.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import synxfer
from synxfer import ConfigError, TransferConfig, WriteOptions
from synxfer.layers import Layer

from ._s3server import S3World

PART = 5 * 1024 * 1024
CONFIG = TransferConfig(max_threads=4, part_size=PART, multipart_threshold=PART)


def _body(world: S3World, bucket: str, key: str) -> bytes:
    data: bytes = world.admin().get_object(Bucket=bucket, Key=key)["Body"].read()
    return data


@pytest.fixture
def moto(stock_moto: Any, monkeypatch: pytest.MonkeyPatch) -> S3World:
    world = S3World("stock-moto", stock_moto.endpoint_url, "testing", "testing")
    world.apply(monkeypatch)
    return world


class Intruder(Layer):
    """Another client writes the key just before synxfer's ``op`` reaches the
    store: the write synxfer's listing or HEAD did not see."""

    def __init__(self, inner: Any, world: S3World, bucket: str, op: str) -> None:
        super().__init__(inner)
        self.world, self.bucket, self.op = world, bucket, op
        self.writes = 0

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        if op == self.op:
            key = args[0] if op == "put" else args[0].key
            self.world.admin().put_object(Bucket=self.bucket, Key=key, Body=b"theirs")
            self.writes += 1
        return await fn(*args)


async def _upload_raced(world: S3World, tmp_path: Path, size: int, op: str) -> None:
    bucket = world.new_bucket("nc")
    src = tmp_path / "mine.bin"
    src.write_bytes(os.urandom(size))
    layers: list[Intruder] = []

    def intrude(inner: Any) -> Any:
        layers.append(Intruder(inner, world, bucket, op))
        return layers[-1]

    async with synxfer.Client(CONFIG, endpoint_url=world.endpoint_url, layers=[intrude]) as c:
        result = await c.copy(src, f"s3://{bucket}/k", no_clobber=True)
    assert sum(layer.writes for layer in layers) == 1
    assert result.ok, result.failures
    assert (result.files_skipped, result.files_transferred) == (1, 0)
    assert _body(world, bucket, "k") == b"theirs"  # the other writer's object stays


@pytest.mark.parametrize(("size", "op"), [(100, "put"), (PART + 1, "complete_multipart")])
async def test_conditional_write_keeps_an_object_written_meanwhile(
    s3_world: S3World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, size: int, op: str
) -> None:
    s3_world.apply(monkeypatch)
    await _upload_raced(s3_world, tmp_path, size, op)


async def test_cp_no_clobber_trees_and_single_files(moto: S3World, tmp_path: Path) -> None:
    bucket = moto.new_bucket("nc")
    s3 = moto.admin()
    s3.put_object(Bucket=bucket, Key="up/a.txt", Body=b"old")
    s3.put_object(Bucket=bucket, Key="dst/a.txt", Body=b"old-copy")
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_bytes(b"new")
    (src / "b.txt").write_bytes(b"new-b")
    async with synxfer.Client(CONFIG, endpoint_url=moto.endpoint_url) as c:
        up = await c.copy(src, f"s3://{bucket}/up/", recursive=True, no_clobber=True)
        assert (up.files_skipped, up.files_transferred) == (1, 1)
        assert _body(moto, bucket, "up/a.txt") == b"old"
        one = await c.copy(src / "a.txt", f"s3://{bucket}/up/a.txt", no_clobber=True)
        assert (one.files_skipped, one.files_transferred) == (1, 0)
        assert _body(moto, bucket, "up/a.txt") == b"old"
        # Remote to remote: dst/a.txt stays, dst/b.txt arrives.
        cp = await c.copy(
            f"s3://{bucket}/up/", f"s3://{bucket}/dst/", recursive=True, no_clobber=True
        )
        assert (cp.files_skipped, cp.files_transferred) == (1, 1)
        assert _body(moto, bucket, "dst/a.txt") == b"old-copy"
        # Download: the local file is never replaced.
        down = tmp_path / "down"
        down.mkdir()
        (down / "a.txt").write_bytes(b"local")
        got = await c.copy(f"s3://{bucket}/up/", down, recursive=True, no_clobber=True)
        assert (got.files_skipped, got.files_transferred) == (1, 1)
        assert (down / "a.txt").read_bytes() == b"local"
        assert (down / "b.txt").read_bytes() == b"new-b"
        single = await c.copy(f"s3://{bucket}/up/a.txt", down / "a.txt", no_clobber=True)
        assert single.files_skipped == 1
        assert (down / "a.txt").read_bytes() == b"local"
        # sync: existing destinations stay even when the source is newer.
        (src / "a.txt").write_bytes(b"newer and longer")
        synced = await c.sync(src, f"s3://{bucket}/up/", no_clobber=True)
        assert synced.files_transferred == 0
        assert _body(moto, bucket, "up/a.txt") == b"old"


async def test_mv_no_clobber_keeps_the_source_of_a_kept_file(moto: S3World, tmp_path: Path) -> None:
    bucket = moto.new_bucket("nc")
    src = tmp_path / "mine.txt"
    src.write_bytes(b"mine")
    layers: list[Intruder] = []

    def intrude(inner: Any) -> Any:
        layers.append(Intruder(inner, moto, bucket, "put"))
        return layers[-1]

    async with synxfer.Client(CONFIG, endpoint_url=moto.endpoint_url, layers=[intrude]) as c:
        result = await c.move(src, f"s3://{bucket}/k", no_clobber=True)
    assert result.ok
    assert result.files_skipped == 1
    assert src.read_bytes() == b"mine"  # not deleted: its copy was not made
    assert _body(moto, bucket, "k") == b"theirs"


async def test_if_size_differ_and_if_source_newer(moto: S3World, tmp_path: Path) -> None:
    bucket = moto.new_bucket("nc")
    s3 = moto.admin()
    s3.put_object(Bucket=bucket, Key="same", Body=b"xxx")
    s3.put_object(Bucket=bucket, Key="other", Body=b"xxxx")
    a = tmp_path / "same"
    a.write_bytes(b"abc")
    old = 1_000_000_000  # 2001: older than any object's LastModified
    os.utime(a, (old, old))
    async with synxfer.Client(CONFIG, endpoint_url=moto.endpoint_url) as c:
        r = await c.copy(a, f"s3://{bucket}/same", if_size_differ=True)
        assert r.files_skipped == 1
        assert _body(moto, bucket, "same") == b"xxx"
        r = await c.copy(a, f"s3://{bucket}/other", if_size_differ=True)
        assert r.files_transferred == 1
        assert _body(moto, bucket, "other") == b"abc"
        r = await c.copy(a, f"s3://{bucket}/same", if_source_newer=True)
        assert r.files_skipped == 1
        assert _body(moto, bucket, "same") == b"xxx"
        os.utime(a, None)
        future = a.stat().st_mtime + 3600
        os.utime(a, (future, future))
        r = await c.copy(a, f"s3://{bucket}/same", if_source_newer=True)
        assert r.files_transferred == 1
        # s5cmd's rule: the last condition decides (-n -s: sizes differ, so written).
        b = tmp_path / "b"
        b.write_bytes(b"a longer body")
        r = await c.copy(b, f"s3://{bucket}/same", no_clobber=True, if_size_differ=True)
        assert r.files_transferred == 1
        assert _body(moto, bucket, "same") == b"a longer body"


async def test_if_none_match_refused_where_not_honoured(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    f = tmp_path / "f"
    f.write_bytes(b"x")
    url = (tmp_path / "store").as_uri() + "/k"
    async with synxfer.Client() as c:
        with pytest.raises(ConfigError, match=r"if_none_match"):
            await c.copy(f, url, write_options=WriteOptions(if_none_match=True))


def test_cli_no_clobber(moto: S3World, tmp_path: Path) -> None:
    bucket = moto.new_bucket("nc")
    moto.admin().put_object(Bucket=bucket, Key="k", Body=b"old")
    f = tmp_path / "f"
    f.write_bytes(b"new")
    env = {**moto.environ(), "AWS_ENDPOINT_URL": moto.endpoint_url}
    cmd = [sys.executable, "-m", "synxfer.cli.main", "cp", str(f), f"s3://{bucket}/k"]
    done = subprocess.run([*cmd, "--no-clobber", "--json"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "exists, --no-clobber" in done.stdout
    assert _body(moto, bucket, "k") == b"old"
    bad = subprocess.run(
        [*cmd, "--no-clobber", "--processes", "2"], env=env, capture_output=True, text=True
    )
    assert bad.returncode == 2
    assert "--no-clobber cannot be combined with --files-from" in bad.stderr
    assert "Traceback" not in bad.stderr
    # sync and mv take it too; mv keeps the source it did not copy.
    d = tmp_path / "tree"
    d.mkdir()
    (d / "k").write_bytes(b"newer")
    sync = [sys.executable, "-m", "synxfer.cli.main", "sync", str(d), f"s3://{bucket}/"]
    assert subprocess.run([*sync, "--no-clobber"], env=env, capture_output=True).returncode == 0
    assert _body(moto, bucket, "k") == b"old"
    mv = [sys.executable, "-m", "synxfer.cli.main", "mv", str(f), f"s3://{bucket}/k", "-n"]
    assert subprocess.run(mv, env=env, capture_output=True).returncode == 0
    assert f.read_bytes() == b"new"
    assert _body(moto, bucket, "k") == b"old"


class Squatter(Layer):
    """A local file appears at the destination while the object is read:
    after the plan looked, before the download renames its temp file."""

    def __init__(self, inner: Any, dest: Path) -> None:
        super().__init__(inner)
        self.dest = dest

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        if op in ("read", "read_into") and not self.dest.exists():
            self.dest.write_bytes(b"theirs")
        return await fn(*args)


@pytest.mark.parametrize("size", [100, 3 * PART + 1])  # one GET; ranged GETs
async def test_download_never_renames_over_a_file_made_meanwhile(
    moto: S3World, tmp_path: Path, size: int
) -> None:
    bucket = moto.new_bucket("nc")
    moto.admin().put_object(Bucket=bucket, Key="k", Body=os.urandom(size))
    dest = tmp_path / "out" / "k"
    dest.parent.mkdir()
    layers = [lambda inner: Squatter(inner, dest)]
    async with synxfer.Client(CONFIG, endpoint_url=moto.endpoint_url, layers=layers) as c:
        result = await c.copy(f"s3://{bucket}/k", dest, no_clobber=True)
    assert result.ok, result.failures
    assert (result.files_skipped, result.files_transferred) == (1, 0)
    assert dest.read_bytes() == b"theirs"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["k"]  # no temp file left
