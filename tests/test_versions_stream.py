"""``cat --version-id`` / ``cp URL - --version-id`` and ``get_bytes`` /
``open`` / ``get_stream`` with ``version_id=`` (issue 38, item 1's gap), on
stock moto and SeaweedFS: the older version's bytes, every ranged GET of
the stream pinned to it (both versions are the same size, so a range of
the current one would pass any size check); bad input exit 2, a missing
version exit 1. Before, ``cp URL - --version-id`` streamed the current
object: the option was dropped.
"""

from __future__ import annotations

import random
import subprocess
import sys
from typing import Any

import pytest

import synxfer
from synxfer import TransferConfig

from ._s3server import S3World

PART = 5 * 1024 * 1024
CONFIG = TransferConfig(max_threads=4, part_size=PART, multipart_threshold=PART, memory_budget=PART)
SIZE = 2 * PART + 4321  # three ranges


@pytest.fixture
def world(versions_world: S3World) -> S3World:
    return versions_world


def _two_versions(world: S3World) -> tuple[str, str, bytes, bytes]:
    """A versioned bucket's ``k``: an older version and the current one, of one size."""
    bucket = world.new_versioned_bucket("vst")
    old, new = random.Random(1).randbytes(SIZE), random.Random(2).randbytes(SIZE)
    v1 = world.put_version(bucket, "k", old)
    world.put_version(bucket, "k", new)
    return bucket, v1, old, new


def _cli(world: S3World, *argv: str) -> subprocess.CompletedProcess[bytes]:
    cmd = [sys.executable, "-m", "synxfer.cli.main", *argv, "--endpoint-url", world.endpoint_url]
    return subprocess.run(cmd, env=world.environ(), capture_output=True, timeout=120)


async def test_streams_of_a_version(world: S3World) -> None:
    bucket, v1, old, new = _two_versions(world)
    url = f"s3://{bucket}/k"
    async with synxfer.Client(CONFIG, endpoint_url=world.endpoint_url) as client:
        assert await client.get_bytes(url, version_id=v1) == old
        assert await client.get_bytes(url) == new
        chunks = [chunk async for chunk in client.open(url, version_id=v1)]
        assert b"".join(chunks) == old
    cat = _cli(world, "cat", url, "--version-id", v1, "--part-size", "5MiB")
    assert cat.returncode == 0, cat.stderr
    assert cat.stdout == old
    cp = _cli(world, "cp", url, "-", "--version-id", v1, "--part-size", "5MiB")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == old


def test_cli_stream_version_errors(stock_moto: Any) -> None:
    world = S3World("stock-moto", stock_moto.endpoint_url, "testing", "testing-secret")
    bucket, v1, _, _ = _two_versions(world)
    url = f"s3://{bucket}/k"
    missing = _cli(world, "cat", url, "--version-id", v1 + "x")
    assert missing.returncode in (1, 2), missing.stderr  # S3: 400 on a malformed id
    assert b"version" in missing.stderr
    assert missing.stdout == b""
    for argv, says in [
        (("cp", "-", url, "--version-id", v1), b"--version-id"),
        (("cat", f"s3://{bucket}/p/", "--version-id", v1), b"names a prefix"),
        (("cat", url, "--version-id", ""), b"expected a version id"),
    ]:
        bad = _cli(world, *argv)
        assert bad.returncode == 2, (argv, bad.stderr)
        assert says in bad.stderr
        assert b"Traceback" not in bad.stderr
