"""Interop both ways with the aws command line (aws-cli v1, from the dev extra)
on SeaweedFS with S3 auth on, so every request of both tools is signed and
checked: keys that need escaping, an empty object, a multipart object, and
synxfer's ``mtime`` metadata.

aws-cli reads what synxfer wrote byte for byte (and sees the ``mtime`` it
stored); synxfer reads what aws-cli wrote, and verifies every file against a
checksum the store vouches for -- aws-cli uploads with CRC32, composite for a
multipart object, whose part layout synxfer has to find.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

import synxfer
from synxfer import MiB
from synxfer.engine.meta import parse_mtime

from ._s3server import PORTABLE_KEYS

#: Files of the tree both tools move: names that need escaping in a URL or a
#: signature (the portable odd keys), an empty file, and one of 11 MiB + 7
#: bytes (three 5 MiB parts for both tools; aws-cli's threshold is set by its
#: config file below).
EMPTY = "empty"
BIG = "sub/big.bin"
BIG_SIZE = 11 * MiB + 7
PART = 5 * MiB

AWS_CONFIG = """\
[default]
s3 =
    multipart_threshold = 5MB
    multipart_chunksize = 5MB
"""


def _aws() -> Path:
    aws = Path(sys.executable).with_name("aws")
    if not aws.exists():
        pytest.skip("aws-cli is not installed in this environment (pip install -e '.[dev]')")
    return aws


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, bytes]:
    """The files, written under ``tmp_path/tree``: relative name -> content."""
    rng = random.Random(7)
    files = {name: f"{name} {rng.random()}".encode() for name in PORTABLE_KEYS}
    files[EMPTY] = b""
    files[BIG] = rng.randbytes(BIG_SIZE)
    for name, data in files.items():
        path = tmp_path / "tree" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


def aws(weed: Any, tmp_path: Path, *args: str) -> str:
    """Run ``aws --endpoint-url <weed> args...``; its stdout. A stalled read
    times out after 5 s (``--cli-read-timeout``) and is retried by aws-cli:
    its urllib3 sometimes misreads SeaweedFS's ``100 Continue`` followed by
    the response in one segment, and would wait its default 60 s."""
    config = tmp_path / "aws-config"
    config.write_text(AWS_CONFIG)
    env = dict(os.environ, AWS_CONFIG_FILE=str(config), AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    cmd = [str(_aws()), "--endpoint-url", weed.endpoint_url, "--cli-read-timeout", "5", *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{cmd}: {done.stderr[-2000:]}"
    return done.stdout


def aws_cp(weed: Any, tmp_path: Path, src: str, dst: str) -> None:
    """``aws s3 cp --recursive src dst``."""
    aws(weed, tmp_path, "s3", "cp", "--recursive", "--only-show-errors", src, dst)


def head_object(weed: Any, tmp_path: Path, key: str) -> Any:
    """``aws s3api head-object`` of ``key``, with its checksums."""
    out = aws(weed, tmp_path, "s3api", "head-object", "--bucket", weed.bucket, "--key", key,
              "--checksum-mode", "ENABLED")  # fmt: skip
    return json.loads(out)


def read_tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


CONFIG = synxfer.TransferConfig(max_threads=4, part_size=PART, multipart_threshold=PART)


async def test_awscli_reads_what_synxfer_wrote(
    weed_env: Any, tree: dict[str, bytes], tmp_path: Path
) -> None:
    _aws()
    prefix = f"sx-{uuid.uuid4().hex[:8]}"
    url = f"s3://{weed_env.bucket}/{prefix}/"
    async with synxfer.Client(CONFIG, endpoint_url=weed_env.endpoint_url) as client:
        up = await client.sync_to(tmp_path / "tree", url)
    assert up.ok, up.to_dict()
    assert up.files_transferred == len(tree)

    listed = aws(weed_env, tmp_path, "s3", "ls", "--recursive", url)
    keys = {line.split(maxsplit=3)[3] for line in listed.splitlines()}
    assert keys == {f"{prefix}/{name}" for name in tree}

    aws_cp(weed_env, tmp_path, url, str(tmp_path / "o"))
    assert read_tree(tmp_path / "o") == tree

    head = head_object(weed_env, tmp_path, f"{prefix}/{BIG}")
    assert head["ETag"].endswith('-3"')  # three parts, as synxfer cut them
    mtime_ns = (tmp_path / "tree" / BIG).stat().st_mtime_ns
    assert parse_mtime(head["Metadata"].get("mtime")) == mtime_ns


async def test_synxfer_reads_and_verifies_what_awscli_wrote(
    weed_env: Any, tree: dict[str, bytes], tmp_path: Path
) -> None:
    _aws()
    prefix = f"aws-{uuid.uuid4().hex[:8]}"
    url = f"s3://{weed_env.bucket}/{prefix}/"
    aws_cp(weed_env, tmp_path, str(tmp_path / "tree"), url)
    head = head_object(weed_env, tmp_path, f"{prefix}/{BIG}")
    assert head["ETag"].endswith('-3"')  # aws-cli cut it in three parts too
    assert head["ChecksumCRC32"].endswith("-3")  # and sent a CRC32 of each

    async with synxfer.Client(CONFIG, endpoint_url=weed_env.endpoint_url) as client:
        down = await client.sync_from(url, tmp_path / "o")
        assert down.ok, down.to_dict()
        assert down.files_transferred == len(tree)
        # Every file was checked against a checksum the store vouches for,
        # the multipart one included (its part layout asked of the store).
        assert down.not_verified == 0, down.to_dict()
        assert read_tree(tmp_path / "o") == tree
        # Nothing differs now, so a second sync moves nothing.
        again = await client.sync_from(url, tmp_path / "o")
    assert again.files_transferred == 0, again.to_dict()
    assert again.files_skipped == len(tree)
