"""The conformance kit against the reference ``file`` backend, plus its own rules.

Also checks the kit's skipping machinery (``requires`` markers and
``conformance_skips``) with a reduced-capability variant of the backend.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from synxfer import (
    BackendError,
    BucketNotFound,
    NotFound,
    PreconditionFailed,
    TransientError,
    WriteOptions,
)
from synxfer._url import parse_location
from synxfer.backend import Backend, BackendOptions, Capabilities, resolve
from synxfer.testing import BackendConformance, BackendFixtures, make_checksum
from synxfer_file import FileBackend


def md5_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


class FileFixtures(BackendFixtures):
    """A FileBackend on a fresh temporary directory, with tiny list pages."""

    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[Backend]:
        root = tmp_path / "root"
        root.mkdir()
        options = BackendOptions(extra={"list_page_size": "3"})
        async with FileBackend(str(root), options) as backend:
            yield backend


class TestFileBackend(FileFixtures, BackendConformance):
    """Every conformance test, on the local filesystem."""


class TestFileBackendFsyncPrefixed(FileFixtures, BackendConformance):
    """Again, with fsync on and every key under a per-test prefix."""

    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[Backend]:
        options = BackendOptions(extra={"fsync": "true"})
        async with FileBackend(str(tmp_path), options) as backend:
            yield backend

    @pytest.fixture
    def key_prefix(self) -> str:
        return "some prefix/ü/"


# -- the kit's skipping machinery ---------------------------------------------


class MinimalFileBackend(FileBackend):
    """A FileBackend declaring nothing optional (it still works, but must not be asked)."""

    capabilities = Capabilities(
        multipart=False,
        ranged_reads=False,
        server_side_copy=False,
        metadata=False,
        part_checksum=None,
    )


class MinimalFixtures(BackendFixtures):
    conformance_skips: ClassVar[dict[str, str]] = {
        "test_listed_in_conformance_skips": "this test must never run"
    }

    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[Backend]:
        async with MinimalFileBackend(str(tmp_path), BackendOptions()) as backend:
            yield backend


class TestMinimalBackend(MinimalFixtures, BackendConformance):
    """Capability-gated kit tests are skipped; the rest pass."""

    @pytest.mark.requires("multipart")
    async def test_requires_skips(self, backend: Backend) -> None:
        pytest.fail("a test requiring a missing capability ran")

    @pytest.mark.requires("ranged_reads", "server_side_copy")
    async def test_requires_skips_any_missing(self, backend: Backend) -> None:
        pytest.fail("a test requiring missing capabilities ran")

    async def test_listed_in_conformance_skips(self) -> None:
        pytest.fail("a test listed in conformance_skips ran")


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[Backend]:
    """A minimal backend for plain (non-kit) test functions."""
    async with MinimalFileBackend(str(tmp_path), BackendOptions()) as b:
        yield b


@pytest.mark.requires("batch_delete")
async def test_plugin_skips_plain_tests(backend: Backend) -> None:
    pytest.fail("the pytest plugin did not skip a test requiring a missing capability")


@pytest.mark.requires("metadata")
async def test_plugin_skips_via_dependent_fixture(
    wrapped: Backend,  # depends on `backend`, which the plugin finds
) -> None:
    pytest.fail("the pytest plugin did not skip a test whose fixture uses `backend`")


@pytest.fixture
def wrapped(backend: Backend) -> Backend:
    return backend


class TestPluginRunsWhenCapable:
    ran: ClassVar[list[str]] = []

    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[Backend]:
        async with FileBackend(str(tmp_path)) as b:
            yield b

    @pytest.mark.requires("multipart", "part_checksum")
    async def test_runs(self, backend: Backend) -> None:
        self.ran.append("yes")

    def test_it_ran(self) -> None:
        assert self.ran == ["yes"]


def test_make_checksum() -> None:
    assert make_checksum(None, b"x") is None
    md5 = make_checksum("md5", b"hello")
    assert md5 is not None
    assert (md5.algorithm, md5.value) == ("md5", md5_b64(b"hello"))
    crc = make_checksum("crc32c", b"123456789")
    assert crc is not None
    assert base64.b64decode(crc.value) == (0xE3069283).to_bytes(4, "big")


# -- rules specific to the file backend ----------------------------------------


@pytest.fixture
async def fb(tmp_path: Path) -> AsyncIterator[FileBackend]:
    async with FileBackend(str(tmp_path)) as b:
        yield b


def test_registry_and_urls(tmp_path: Path) -> None:
    assert resolve("file") is FileBackend
    loc = parse_location("file:///data/dir/x.txt")
    root = FileBackend(loc.bucket, BackendOptions())
    assert root.url(loc.key) == "file:///data/dir/x.txt"
    assert root.url() == "file:///"
    b = FileBackend(str(tmp_path), BackendOptions())
    assert b.url("a/b") == f"file://{tmp_path}/a/b"
    assert repr(b) == f"<FileBackend file://{tmp_path}/>"


async def test_missing_root(tmp_path: Path) -> None:
    with pytest.raises(BucketNotFound):
        await FileBackend(str(tmp_path / "nope")).open()


def test_bad_options() -> None:
    from synxfer import ConfigError

    with pytest.raises(ConfigError):
        FileBackend("/", BackendOptions(extra={"list_page_size": "many"}))
    with pytest.raises(ConfigError):
        FileBackend("")


@pytest.mark.parametrize(
    "key",
    ["", "/abs", "../escape", "a/../../escape", "a//b", "a/./b", "dir/", "nul\x00byte",
     ".x.synxfer-meta", "d/.synxfer-mpu-0123456789abcdef0123456789abcdef/part-00001",
     ".f.synxfer-tmp-0123456789abcdef"],
)  # fmt: skip
async def test_unsafe_keys_refused(fb: FileBackend, tmp_path: Path, key: str) -> None:
    for call in (
        lambda: fb.put(key, b"x", WriteOptions()),
        lambda: fb.stat(key),
        lambda: fb.read(key),
        lambda: fb.delete(key),
        lambda: fb.create_multipart(key, WriteOptions()),
        lambda: fb.copy("src", key, WriteOptions()),
    ):
        with pytest.raises(BackendError) as info:
            await call()
        assert not isinstance(info.value, NotFound)
        assert repr(key) in str(info.value), "the error names the key"
    assert not (tmp_path.parent / "escape").exists()


async def test_layout_on_disk(fb: FileBackend, tmp_path: Path) -> None:
    await fb.put("d/a.txt", b"abc", WriteOptions(metadata={"k": "v"}, content_type="text/plain"))
    sidecar = json.loads((tmp_path / "d" / ".a.txt.synxfer-meta").read_text())
    assert sidecar["etag"] == hashlib.md5(b"abc").hexdigest()
    assert sidecar["metadata"] == {"k": "v"}
    assert sidecar["content_type"] == "text/plain"
    upload = await fb.create_multipart("d/big.bin", WriteOptions())
    staging = tmp_path / "d" / f".synxfer-mpu-{upload.upload_id}"
    assert staging.is_dir(), "parts are staged next to the target"
    part = await fb.upload_part(upload, 1, b"part one", make_checksum("md5", b"part one"))
    assert sorted(os.listdir(tmp_path / "d")) == sorted(
        [".a.txt.synxfer-meta", "a.txt", staging.name]
    )
    assert [i.key for i in (await fb.list_page("")).items] == ["d/a.txt"]
    await fb.complete_multipart(upload, [part])
    assert not staging.exists()
    upload = await fb.create_multipart("d/aborted.bin", WriteOptions())
    await fb.abort_multipart(upload)
    await fb.abort_multipart(upload)  # twice is fine
    assert sorted(os.listdir(tmp_path / "d")) == sorted(
        [".a.txt.synxfer-meta", "a.txt", ".big.bin.synxfer-meta", "big.bin"]
    )
    await fb.delete("d/a.txt")
    assert sorted(os.listdir(tmp_path / "d")) == [".big.bin.synxfer-meta", "big.bin"]


async def test_multipart_etag_is_s3_style(fb: FileBackend) -> None:
    chunks = [b"a" * 100, b"b" * 50]
    upload = await fb.create_multipart("m", WriteOptions())
    parts = [await fb.upload_part(upload, n, c) for n, c in enumerate(chunks, start=1)]
    info = await fb.complete_multipart(upload, parts)
    digests = b"".join(hashlib.md5(c).digest() for c in chunks)
    assert info.etag == hashlib.md5(digests).hexdigest() + "-2"
    assert (await fb.stat("m")).etag == info.etag


async def test_complete_checks_parts(fb: FileBackend) -> None:
    upload = await fb.create_multipart("m", WriteOptions())
    part = await fb.upload_part(upload, 1, b"data")
    with pytest.raises(BackendError, match="InvalidPart"):
        await fb.complete_multipart(upload, [part, part.__class__(2, part.etag, 4)])
    with pytest.raises(BackendError, match="InvalidPart"):
        await fb.complete_multipart(upload, [part.__class__(1, "0" * 32, 4)])
    with pytest.raises(BackendError):
        await fb.complete_multipart(upload, [])
    with pytest.raises(BackendError):
        await fb.upload_part(upload, 0, b"x")
    with pytest.raises(NotFound):
        await fb.stat("m")
    await fb.complete_multipart(upload, [part])
    assert (await fb.read("m")).data == b"data"
    with pytest.raises(NotFound):
        await fb.complete_multipart(upload, [part])


async def test_wrong_checksum_is_transient(fb: FileBackend) -> None:
    with pytest.raises(TransientError, match="BadDigest"):
        await fb.put("k", b"data", WriteOptions(), make_checksum("md5", b"other"))
    upload = await fb.create_multipart("k", WriteOptions())
    with pytest.raises(TransientError, match="BadDigest"):
        await fb.upload_part(upload, 1, b"data", make_checksum("md5", b"other"))
    with pytest.raises(BackendError):
        await fb.put("k", b"data", WriteOptions(), make_checksum("crc32c", b"data"))


async def test_foreign_and_rewritten_files(fb: FileBackend, tmp_path: Path) -> None:
    (tmp_path / "foreign.txt").write_bytes(b"placed by hand")
    info = await fb.stat("foreign.txt")
    assert (info.size, info.etag, dict(info.metadata)) == (14, None, {})
    assert (await fb.read("foreign.txt")).data == b"placed by hand"
    with pytest.raises(PreconditionFailed):
        await fb.read("foreign.txt", if_match="anything")
    put = await fb.put("ours.txt", b"v1", WriteOptions(metadata={"k": "v"}))
    assert (await fb.stat("ours.txt")).etag == put.etag
    # Rewritten behind the backend's back: the sidecar no longer applies.
    (tmp_path / "ours.txt").write_bytes(b"edited by hand")
    info = await fb.stat("ours.txt")
    assert (info.size, info.etag, dict(info.metadata)) == (14, None, {})
    with pytest.raises(PreconditionFailed):
        await fb.read("ours.txt", if_match=put.etag)
    listed = {i.key: i for i in (await fb.list_page("")).items}
    assert listed["ours.txt"].etag is None
    assert listed["foreign.txt"].size == 14


async def test_directories_are_not_objects(fb: FileBackend, tmp_path: Path) -> None:
    (tmp_path / "adir" / "sub").mkdir(parents=True)
    with pytest.raises(NotFound):
        await fb.stat("adir")
    with pytest.raises(NotFound):
        await fb.read("adir/sub")
    await fb.delete("adir")  # not an object: nothing to delete
    assert (tmp_path / "adir").is_dir()
    with pytest.raises(BackendError):
        await fb.put("adir", b"x", WriteOptions())
    await fb.put("file", b"x", WriteOptions())
    with pytest.raises(BackendError) as info:
        await fb.put("file/child", b"x", WriteOptions())
    assert not isinstance(info.value, NotFound)
    assert [i.key for i in (await fb.list_page("")).items] == ["file"]


async def test_list_order_and_cursor_edges(tmp_path: Path) -> None:
    names = ["a", "a-", "a.txt", "a/b", "a/b/c", "a0", "b/x/y/z", "é"]
    async with FileBackend(str(tmp_path), BackendOptions(extra={"list_page_size": "1"})) as b:
        for name in names:
            if name in ("a", "a/b"):
                continue  # a file cannot also be a directory
            await b.put(name, b"", WriteOptions())
        expected = sorted(n for n in names if n not in ("a", "a/b"))
        keys, cursor, pages = [], None, 0
        while True:
            page = await b.list_page("", cursor)
            pages += 1
            keys += [i.key for i in page.items]
            if page.cursor is None:
                break
            cursor = page.cursor
        assert keys == expected
        assert pages == len(expected)
        # A cursor that is not a key resumes after it all the same.
        page = await b.list_page("a", "a.zzz")
        assert [i.key for i in page.items] == ["a/b/c"]
        assert [i.key for i in (await b.list_page("../", None)).items] == []


async def test_blocking_calls_run_off_the_event_loop(
    fb: FileBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop_thread = threading.get_ident()
    seen: list[str] = []

    def spy(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == loop_thread:
                seen.append(name)
            return fn(*args, **kwargs)

        return wrapper

    for name in ("open", "stat", "scandir", "replace", "unlink", "makedirs", "mkdir", "fstat"):
        monkeypatch.setattr(os, name, spy(name, getattr(os, name)))
    await fb.open()
    await fb.put("x/y", b"data", WriteOptions())
    await fb.stat("x/y")
    await fb.read("x/y", 1, 2)
    await fb.list_page("")
    await fb.copy("x/y", "x/z", WriteOptions())
    upload = await fb.create_multipart("x/m", WriteOptions())
    part = await fb.upload_part(upload, 1, b"p")
    await fb.complete_multipart(upload, [part])
    await fb.delete("x/y")
    await asyncio.sleep(0)
    assert seen == [], f"blocking calls on the event loop thread: {seen}"


async def test_long_names(fb: FileBackend, tmp_path: Path) -> None:
    key = "d/" + "n" * 250  # the longest names most filesystems allow are 255 bytes
    put = await fb.put(key, b"long", WriteOptions(metadata={"k": "v"}))
    info = await fb.stat(key)
    assert (info.etag, dict(info.metadata)) == (put.etag, {"k": "v"})
    assert [i.key for i in (await fb.list_page("d/")).items] == [key]
    assert len(os.listdir(tmp_path / "d")) == 2
    await fb.delete(key)
    assert os.listdir(tmp_path / "d") == []
