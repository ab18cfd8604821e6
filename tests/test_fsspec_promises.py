"""fsspec's promises (issue 38, item 9) on stock moto, and ``sign()`` on SeaweedFS.

``with fs.transaction:`` holds writes until the block ends and discards them
on an error; ``modified()``/``created()``; ``ls("")`` lists the buckets;
writing into a missing bucket raises FileNotFoundError naming the bucket;
``sign()`` gives a URL that plain urllib can fetch from a server that checks
signatures. (Folder markers and ``rm(recursive=True)``:
tests/test_robustness_stock.py.)
"""

from __future__ import annotations

import datetime
import os
import tempfile
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest

from synxfer.fsspec import SxS3FileSystem, SynxferFileSystem

from .conftest import SMALL


@pytest.fixture
def spool_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the filesystem's temporary files go, to count leftovers."""
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    return spool


@pytest.fixture
def fs(stock_moto: Any) -> Iterator[SynxferFileSystem]:
    fs = SxS3FileSystem(
        endpoint_url=stock_moto.endpoint_url, config=SMALL, skip_instance_cache=True
    )
    yield fs
    fs.close()


@pytest.fixture
def bucket(stock_moto: Any) -> str:
    name = f"p-{uuid.uuid4().hex[:16]}"
    boto3.client("s3", endpoint_url=stock_moto.endpoint_url).create_bucket(Bucket=name)
    return name


def _keys(stock_moto: Any, bucket: str) -> list[str]:
    s3 = boto3.client("s3", endpoint_url=stock_moto.endpoint_url)
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


def test_transaction_holds_writes_until_it_commits(
    fs: SynxferFileSystem, bucket: str, stock_moto: Any, spool_dir: Path
) -> None:
    big = os.urandom(6 * 1024 * 1024 + 3)  # more than a block: spooled as it is written
    with fs.transaction:
        with fs.open(f"{bucket}/t/a.bin", "wb", block_size=1024 * 1024) as f:
            f.write(big)
        fs.pipe(f"{bucket}/t/b.txt", b"piped")
        assert _keys(stock_moto, bucket) == []  # nothing reached the store yet
        assert len(list(spool_dir.iterdir())) == 2
    assert _keys(stock_moto, bucket) == ["t/a.bin", "t/b.txt"]
    assert fs.cat_file(f"{bucket}/t/a.bin") == big
    assert fs.cat_file(f"{bucket}/t/b.txt") == b"piped"
    assert list(spool_dir.iterdir()) == []
    # After the transaction, writes go straight through again.
    fs.pipe(f"{bucket}/t/c.txt", b"now")
    assert "t/c.txt" in _keys(stock_moto, bucket)


def test_failed_transaction_discards_its_writes(
    fs: SynxferFileSystem, bucket: str, stock_moto: Any, spool_dir: Path
) -> None:
    def fail_in_a_transaction() -> None:
        with fs.transaction:
            with fs.open(f"{bucket}/t/a.bin", "wb") as f:
                f.write(b"x" * 1000)
            fs.pipe(f"{bucket}/t/b.txt", b"piped")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_in_a_transaction()
    assert _keys(stock_moto, bucket) == []
    assert list(spool_dir.iterdir()) == []  # the spooled files went too
    assert not fs.exists(f"{bucket}/t/a.bin")


def test_modified_and_created(fs: SynxferFileSystem, bucket: str) -> None:
    path = f"{bucket}/d/obj.txt"
    fs.pipe(path, b"123")
    modified = fs.modified(path)
    assert isinstance(modified, datetime.datetime)
    assert modified.tzinfo is not None
    assert modified.timestamp() == fs.info(path)["mtime"]
    assert fs.created(path) == modified
    with pytest.raises(IsADirectoryError):
        fs.modified(f"{bucket}/d")
    with pytest.raises(FileNotFoundError):
        fs.modified(f"{bucket}/missing")


def test_ls_empty_path_lists_buckets(fs: SynxferFileSystem, bucket: str) -> None:
    names = fs.ls("", detail=False)
    assert bucket in names
    entries = {e["name"]: e for e in fs.ls("")}
    assert entries[bucket]["type"] == "directory"
    assert fs.info("")["type"] == "directory"
    assert fs.isdir(bucket)


@pytest.mark.parametrize("how", ["pipe", "open", "put_file"])
def test_write_to_missing_bucket_names_the_bucket(
    fs: SynxferFileSystem, how: str, tmp_path: Path, spool_dir: Path
) -> None:
    missing = f"no-such-{uuid.uuid4().hex[:12]}"
    path = f"{missing}/k.txt"
    local = tmp_path / "local.txt"
    local.write_bytes(b"data")

    def write() -> None:
        if how == "pipe":
            fs.pipe(path, b"data")
        elif how == "open":
            with fs.open(path, "wb") as f:
                f.write(b"data")
        else:
            fs.put_file(str(local), path)

    with pytest.raises(FileNotFoundError) as info:
        write()
    message = str(info.value)
    assert f"the bucket sx+s3://{missing} does not exist" in message
    assert "synxfer-fsspec" not in message  # not the temp file
    assert info.value.filename == path
    assert list(spool_dir.iterdir()) == []


def test_sign_gives_a_url_urllib_can_fetch(weed_env: Any) -> None:
    fs = SxS3FileSystem(endpoint_url=weed_env.endpoint_url, skip_instance_cache=True)
    try:
        path = f"{weed_env.bucket}/signed/obj.bin"
        data = os.urandom(70_000)
        fs.pipe(path, data)
        url = fs.sign(path, expiration=60)
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.read() == data
        put_url = fs.sign(f"{weed_env.bucket}/signed/up.bin", expiration=60, method="PUT")
        request = urllib.request.Request(put_url, data=b"up", method="PUT")
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
        assert fs.cat_file(f"{weed_env.bucket}/signed/up.bin") == b"up"
        with pytest.raises(ValueError, match="expires_in"):
            fs.sign(path, expiration=0)
    finally:
        fs.close()


def test_sign_where_the_backend_cannot(tmp_path: Path) -> None:
    from synxfer.fsspec import SxFileFileSystem

    fs = SxFileFileSystem(skip_instance_cache=True)
    try:
        with pytest.raises(NotImplementedError, match="sx\\+file:// cannot sign"):
            fs.sign(str(tmp_path / "x"))
    finally:
        fs.close()
