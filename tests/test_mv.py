"""``mv``: copy, then delete the source of each file whose copy completed (moto over HTTP)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest

import synxfer
from synxfer import ConfigError
from synxfer.backend import Backend
from synxfer.cli.main import main
from synxfer.layers import Layer

from .conftest import PART, SMALL, tree, write_tree

FILES = {"a.txt": 100, "sub/b.bin": 70_000, "sub/deep/c.bin": PART + 123, "empty": 0}


def _objects(endpoint: str, bucket: str, prefix: str) -> dict[str, bytes]:
    s3 = boto3.client("s3", endpoint_url=endpoint)
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
    return {
        k[len(prefix) :]: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in sorted(keys)
    }


class _FailPut(Layer):
    """Puts (and part uploads) of keys ending in ``name`` fail, not to be retried away."""

    def __init__(self, inner: Backend, name: str) -> None:
        super().__init__(inner)
        self.name = name

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        if op in ("put", "create_multipart") and str(args[0]).endswith(self.name):
            raise synxfer.PermissionDenied(f"refused {args[0]}")
        return await super()._call(op, fn, *args)


async def test_move_up_then_down_then_across(s3_endpoint: str, bucket: str, tmp_path: Path) -> None:
    src = tmp_path / "src"
    contents = write_tree(src, FILES)
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as c:
        up = await c.move(src, f"s3://{bucket}/up/", recursive=True)
        assert up.ok
        assert (up.files_transferred, up.files_deleted) == (4, 4)
        assert tree(src) == {}  # every source file gone (directories stay)
        assert _objects(s3_endpoint, bucket, "up/") == contents

        across = await c.move(f"s3://{bucket}/up/", f"s3://{bucket}/there/", recursive=True)
        assert across.ok
        assert _objects(s3_endpoint, bucket, "up/") == {}
        assert _objects(s3_endpoint, bucket, "there/") == contents

        down = await c.move(f"s3://{bucket}/there/", tmp_path / "dst", recursive=True)
        assert down.ok
        assert _objects(s3_endpoint, bucket, "there/") == {}
        assert {k: v for k, (v, _) in tree(tmp_path / "dst").items()} == contents


async def test_move_keeps_the_source_of_a_failed_file(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    write_tree(src, FILES)
    config = SMALL.evolve(retry=synxfer.RetryPolicy(attempts=1))
    layers = [lambda inner: _FailPut(inner, "sub/b.bin")]
    async with synxfer.Client(config, endpoint_url=s3_endpoint, layers=layers) as c:
        result = await c.move(src, f"s3://{bucket}/p/", recursive=True)
    assert [f.path for f in result.failures] == [str(src / "sub/b.bin")]
    assert result.files_deleted == 3
    assert set(tree(src)) == {"sub/b.bin"}  # the only source left
    assert set(_objects(s3_endpoint, bucket, "p/")) == {"a.txt", "sub/deep/c.bin", "empty"}


async def test_move_single_files_and_refusals(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    write_tree(tmp_path, {"one.txt": 10})
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as c:
        await c.move(tmp_path / "one.txt", f"s3://{bucket}/x/")
        assert not (tmp_path / "one.txt").exists()
        await c.move(f"s3://{bucket}/x/one.txt", f"s3://{bucket}/y/two.txt")
        assert set(_objects(s3_endpoint, bucket, "")) == {"y/two.txt"}
        with pytest.raises(ConfigError, match="same object"):
            await c.move(f"s3://{bucket}/y/two.txt", f"s3://{bucket}/y/")
        with pytest.raises(ConfigError, match="into itself"):
            await c.move(f"s3://{bucket}/y/", f"s3://{bucket}/y/z/", recursive=True)
        with pytest.raises(ConfigError, match="recursive=True"):
            await c.move(f"s3://{bucket}/y/", tmp_path / "d")
        dry = await c.move(f"s3://{bucket}/y/two.txt", tmp_path / "back.txt", dryrun=True)
        assert (dry.files_transferred, dry.files_deleted) == (1, 1)
        assert set(_objects(s3_endpoint, bucket, "")) == {"y/two.txt"}  # nothing moved
        await c.move(f"s3://{bucket}/y/two.txt", tmp_path / "back.txt")
        assert (tmp_path / "back.txt").read_bytes() == write_tree(tmp_path / "x", {"o": 10})["o"]
        assert _objects(s3_endpoint, bucket, "") == {}


def test_cli_mv(s3_endpoint: str, bucket: str, tmp_path: Path, capsys: Any) -> None:
    src = tmp_path / "src"
    contents = write_tree(src, {"a.txt": 5, "b/c.txt": 7})
    code = main(["mv", "--recursive", str(src), f"s3://{bucket}/m/", "--endpoint-url", s3_endpoint])
    assert code == 0
    out, err = capsys.readouterr()
    lines = sorted(out.splitlines())
    assert lines == sorted(
        [
            f"upload: {src}/a.txt to s3://{bucket}/m/a.txt",
            f"upload: {src}/b/c.txt to s3://{bucket}/m/b/c.txt",
            f"delete: {src}/a.txt",
            f"delete: {src}/b/c.txt",
        ]
    )
    assert "summary: 2 transferred" in err
    assert "2 deleted" in err
    assert tree(src) == {}
    assert _objects(s3_endpoint, bucket, "m/") == contents
    # Into itself: a usage error (exit 2), nothing touched.
    args = ["mv", "--recursive", f"s3://{bucket}/m/", f"s3://{bucket}/m/in/"]
    assert main([*args, "--endpoint-url", s3_endpoint]) == 2
    assert _objects(s3_endpoint, bucket, "m/") == contents
