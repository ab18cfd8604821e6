"""synxfer.fsspec: fsspec's own abstract test suites over synxfer backends, and more.

``fsspec.tests.abstract`` (copy, get, put, open, pipe) runs against
``sx+s3://`` on stock moto over HTTP (127.0.0.1) and against ``sx+file://``. Both
are object stores to fsspec: no empty directories (the suites'
``supports_empty_directories`` is false, as for s3fs). The mv suite does
not apply: it is for local filesystems (its fixtures are not the
abstract ones), and ``mv`` is fsspec's copy-then-delete anyway.
"""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import fsspec  # type: ignore[import-untyped]
import pytest
from fsspec.tests.abstract import (  # type: ignore[import-untyped]
    AbstractCopyTests,
    AbstractFixtures,
    AbstractGetTests,
    AbstractOpenTests,
    AbstractPipeTests,
    AbstractPutTests,
)

import synxfer
from synxfer.fsspec import (
    SxFileFileSystem,
    SxS3FileSystem,
    SynxferFile,
    SynxferFileSystem,
    register,
)

from .conftest import SMALL


@pytest.fixture(scope="module")
def moto_endpoint(stock_moto: Any) -> str:
    """Stock moto, as it ships, in a subprocess (the session's): the suites make
    thousands of small requests, and an in-process server would share the
    test's GIL with the IO thread."""
    return str(stock_moto.endpoint_url)


@pytest.fixture
def s3_bucket(moto_endpoint: str) -> str:
    name = f"f-{uuid.uuid4().hex[:16]}"
    boto3.client("s3", endpoint_url=moto_endpoint).create_bucket(Bucket=name)
    return name


class S3Fixtures(AbstractFixtures):  # type: ignore[misc]
    @pytest.fixture(scope="class")
    @classmethod
    def fs(cls, moto_endpoint: str) -> Iterator[SynxferFileSystem]:
        fs = SxS3FileSystem(endpoint_url=moto_endpoint, config=SMALL, skip_instance_cache=True)
        yield fs
        fs.close()

    @pytest.fixture
    def fs_path(self, s3_bucket: str) -> str:
        return s3_bucket

    @pytest.fixture
    def fs_join(self) -> Callable[..., str]:
        return posixpath.join

    @pytest.fixture
    def supports_empty_directories(self) -> bool:
        return False


class FileFixtures(AbstractFixtures):  # type: ignore[misc]
    @pytest.fixture(scope="class")
    @classmethod
    def fs(cls) -> Iterator[SynxferFileSystem]:
        fs = SxFileFileSystem(config=SMALL, skip_instance_cache=True)
        yield fs
        fs.close()

    @pytest.fixture
    def fs_path(self, tmp_path: Path) -> str:
        root = tmp_path / "remote"
        root.mkdir()
        return str(root)

    @pytest.fixture
    def supports_empty_directories(self) -> bool:
        return False


class TestS3Copy(AbstractCopyTests, S3Fixtures):  # type: ignore[misc]
    pass


class TestS3Get(AbstractGetTests, S3Fixtures):  # type: ignore[misc]
    pass


class TestS3Put(AbstractPutTests, S3Fixtures):  # type: ignore[misc]
    pass


class TestS3Open(AbstractOpenTests, S3Fixtures):  # type: ignore[misc]
    pass


class TestS3Pipe(AbstractPipeTests, S3Fixtures):  # type: ignore[misc]
    pass


class TestFileCopy(AbstractCopyTests, FileFixtures):  # type: ignore[misc]
    pass


class TestFileGet(AbstractGetTests, FileFixtures):  # type: ignore[misc]
    pass


class TestFilePut(AbstractPutTests, FileFixtures):  # type: ignore[misc]
    pass


class TestFileOpen(AbstractOpenTests, FileFixtures):  # type: ignore[misc]
    pass


class TestFilePipe(AbstractPipeTests, FileFixtures):  # type: ignore[misc]
    pass


# -- beyond the abstract suites ------------------------------------------------------------


@pytest.fixture
def s3fs_(moto_endpoint: str) -> Iterator[SynxferFileSystem]:
    fs = SxS3FileSystem(endpoint_url=moto_endpoint, config=SMALL, skip_instance_cache=True)
    yield fs
    fs.close()


def test_protocols_are_registered_through_entry_points(moto_endpoint: str, s3_bucket: str) -> None:
    assert fsspec.get_filesystem_class("sx+s3") is SxS3FileSystem
    assert fsspec.get_filesystem_class("sx+file") is SxFileFileSystem
    assert fsspec.get_filesystem_class("sx+gs").scheme == "gs"
    fs, path = fsspec.core.url_to_fs(
        f"sx+s3://{s3_bucket}/a/b.txt", endpoint_url=moto_endpoint, config=SMALL
    )
    assert isinstance(fs, SxS3FileSystem)
    assert path == f"{s3_bucket}/a/b.txt"
    with fsspec.open(f"sx+s3://{s3_bucket}/a/b.txt", "wb", endpoint_url=moto_endpoint) as f:
        f.write(b"through fsspec.open")
    s3 = boto3.client("s3", endpoint_url=moto_endpoint)
    body = s3.get_object(Bucket=s3_bucket, Key="a/b.txt")["Body"].read()
    assert body == b"through fsspec.open"
    assert fs.unstrip_protocol(path) == f"sx+s3://{s3_bucket}/a/b.txt"
    # Third-party schemes: registered at run time.
    assert register("s3", clobber=True) is SxS3FileSystem


def test_open_reads_by_ranges_and_writes_through_the_engine(
    s3fs_: SynxferFileSystem, moto_endpoint: str, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = os.urandom(12 * 1024 * 1024 + 7)
    path = f"{s3_bucket}/big.bin"
    with s3fs_.open(path, "wb", block_size=1024 * 1024) as f:
        for start in range(0, len(data), 1_000_000):
            f.write(data[start : start + 1_000_000])
    head = boto3.client("s3", endpoint_url=moto_endpoint).head_object(
        Bucket=s3_bucket, Key="big.bin"
    )
    assert head["ContentLength"] == len(data)
    assert head["ETag"].strip('"').endswith("-3"), "12 MiB in 5 MiB parts: a multipart upload"
    assert "mtime" in head["Metadata"]
    fetched: list[tuple[int, int]] = []
    fetch = SynxferFile._fetch_range

    def spy(self: SynxferFile, start: int, end: int) -> bytes:
        fetched.append((start, end))
        return fetch(self, start, end)

    monkeypatch.setattr(SynxferFile, "_fetch_range", spy)
    with s3fs_.open(path, "rb", block_size=256 * 1024) as f:
        assert f.size == len(data)
        f.seek(10_000_000)
        assert f.read(100) == data[10_000_000:10_000_100]
        f.seek(-5, os.SEEK_END)
        assert f.read() == data[-5:]
    assert fetched, "reads go through ranged requests"
    assert sum(end - start for start, end in fetched) <= 4 * 256 * 1024, fetched
    assert s3fs_.cat_file(path, start=-3) == data[-3:]
    assert s3fs_.cat_file(path, 5, 9) == data[5:9]
    assert s3fs_.cat_file(path, len(data) + 10) == b""


def test_bulk_put_and_get_are_one_engine_run(
    s3fs_: SynxferFileSystem,
    s3_bucket: str,
    tmp_path: Path,
    make_tree: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    src = make_tree({"a.txt": 10, "sub/b.bin": 6 * 1024 * 1024, "sub/deep/c": 0})
    calls: list[tuple[str, bool]] = []
    for name in ("copy", "upload_file", "download_file"):
        original = getattr(synxfer.Client, name)

        def spy(self: Any, *args: Any, _name: str = name, _f: Any = original, **kw: Any) -> Any:
            calls.append((_name, bool(kw.get("recursive"))))
            return _f(self, *args, **kw)

        monkeypatch.setattr(synxfer.Client, name, spy)
    s3fs_.put(str(src), f"{s3_bucket}/up", recursive=True)
    assert calls == [("copy", True)]
    assert sorted(s3fs_.find(f"{s3_bucket}/up")) == [
        f"{s3_bucket}/up/a.txt",
        f"{s3_bucket}/up/sub/b.bin",
        f"{s3_bucket}/up/sub/deep/c",
    ]
    calls.clear()
    out = tmp_path / "out"
    s3fs_.get(f"{s3_bucket}/up", str(out), recursive=True)
    assert calls == [("copy", True)]
    for rel in ("a.txt", "sub/b.bin", "sub/deep/c"):
        assert (out / rel).read_bytes() == (src / rel).read_bytes()
    # A list of files goes file by file, each through the engine.
    calls.clear()
    s3fs_.get([f"{s3_bucket}/up/a.txt"], [str(tmp_path / "one.txt")])
    assert calls == [("download_file", False)]


def test_errors_are_the_oserrors_fsspec_callers_expect(
    s3fs_: SynxferFileSystem, s3_bucket: str, tmp_path: Path
) -> None:
    with pytest.raises(FileNotFoundError):
        s3fs_.info(f"{s3_bucket}/missing")
    with pytest.raises(FileNotFoundError):
        s3fs_.open(f"{s3_bucket}/missing", "rb")
    with pytest.raises(FileNotFoundError):
        s3fs_.cat_file(f"{s3_bucket}/missing")
    with pytest.raises(FileNotFoundError):
        s3fs_.ls("no-such-bucket-fsspec")
    with pytest.raises(FileNotFoundError):
        s3fs_.get_file(f"{s3_bucket}/missing", str(tmp_path / "x"))
    with pytest.raises(ValueError, match="'ab'"):
        s3fs_.open(f"{s3_bucket}/k", "ab")
    assert not list(tmp_path.iterdir())


async def test_asynchronous_use_on_the_callers_loop(moto_endpoint: str, s3_bucket: str) -> None:
    fs = SxS3FileSystem(
        endpoint_url=moto_endpoint, config=SMALL, asynchronous=True, skip_instance_cache=True
    )
    await fs._pipe_file(f"{s3_bucket}/x", b"async bytes")
    assert await fs._cat_file(f"{s3_bucket}/x", 6) == b"bytes"
    assert (await fs._info(f"{s3_bucket}/x"))["size"] == 11
    await fs._close()
