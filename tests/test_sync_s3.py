"""The engine end to end against a real S3 server (moto over HTTP on 127.0.0.1)."""

from __future__ import annotations

import base64
import dataclasses
import os
import resource
import shutil
import signal
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest

import synxfer
import synxfer.backend
import synxfer.layers
from synxfer import Action, EventKind, MiB

from .conftest import PART, SMALL, CountingLayer, run_forked, tree

EDGE_SIZES = {
    "empty.bin": 0,
    "one.bin": 1,
    "below.bin": PART - 1,
    "exactly-threshold.bin": PART,
    "threshold-plus-one.bin": PART + 1,
    "multi/part.bin": 2 * PART + 3,
    "nested/déjà vu/ünïcödé 文件.txt": 1234,
    "nested/a/b/c/d.txt": 17,
}


def _keys(endpoint: str, bucket: str, prefix: str = "") -> dict[str, int]:
    s3 = boto3.client("s3", endpoint_url=endpoint)
    out: dict[str, int] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            out[obj["Key"]] = obj["Size"]
    return out


async def test_round_trip_edge_sizes_and_names(
    client: synxfer.Client,
    bucket: str,
    make_tree: Callable[..., Path],
    tmp_path: Path,
    s3_endpoint: str,
) -> None:
    src = make_tree(EDGE_SIZES)
    up = await client.sync_to(src, f"s3://{bucket}/data")
    assert up.ok, up.failures
    assert up.files_transferred == len(EDGE_SIZES)
    assert up.bytes_transferred == sum(EDGE_SIZES.values())
    assert _keys(s3_endpoint, bucket) == {f"data/{k}": v for k, v in EDGE_SIZES.items()}

    # Multipart objects really were sent in parts (S3-style "-N" ETag).
    head = boto3.client("s3", endpoint_url=s3_endpoint).head_object(
        Bucket=bucket, Key="data/multi/part.bin"
    )
    assert head["ETag"].strip('"').endswith("-3")
    assert head["Metadata"]["synxfer-part-size"] == str(PART)

    dst = tmp_path / "copy"
    down = await client.sync_from(f"s3://{bucket}/data", dst)
    assert down.ok, down.failures
    assert down.files_transferred == len(EDGE_SIZES)
    assert tree(dst) == tree(src)  # same bytes and same mtimes, to the nanosecond
    assert not list(dst.rglob("*.synxfer-part"))


async def test_second_sync_moves_nothing_both_ways(
    client: synxfer.Client, bucket: str, make_tree: Callable[..., Path], tmp_path: Path
) -> None:
    src = make_tree({"a": 10, "b/c": PART + 5, "b/d": 0})
    url = f"s3://{bucket}/p/"
    assert (await client.sync_to(src, url)).files_transferred == 3
    again = await client.sync_to(src, url)
    assert (again.files_transferred, again.bytes_transferred, again.files_skipped) == (0, 0, 3)

    dst = tmp_path / "dst"
    assert (await client.sync_from(url, dst)).files_transferred == 3
    again = await client.sync_from(url, dst)
    assert (again.files_transferred, again.bytes_transferred, again.files_skipped) == (0, 0, 3)
    # And the downloaded copy, synced back up, is also already in place.
    assert (await client.sync_to(dst, url)).files_transferred == 0


async def test_changed_file_is_resent_alone(
    client: synxfer.Client, bucket: str, make_tree: Callable[..., Path], tmp_path: Path
) -> None:
    src = make_tree({"same.txt": 100, "grows.txt": 100, "touched.txt": 100})
    url = f"s3://{bucket}/p"
    await client.sync_to(src, url)
    (src / "grows.txt").write_bytes(b"x" * 101)
    later = (src / "touched.txt").stat().st_mtime_ns + 5_000_000_000
    (src / "touched.txt").write_bytes(b"y" * 100)  # same size, newer content
    os.utime(src / "touched.txt", ns=(later, later))

    events: list[synxfer.Event] = []
    async with synxfer.Client(
        SMALL, endpoint_url=client._options.endpoint_url, on_event=events.append
    ) as c:
        r = await c.sync_to(src, url)
    done = sorted(Path(e.src).name for e in events if e.kind is EventKind.DONE)
    assert done == ["grows.txt", "touched.txt"]
    assert (r.files_transferred, r.files_skipped) == (2, 1)

    dst = tmp_path / "dst"
    await client.sync_from(url, dst)
    assert (dst / "touched.txt").read_bytes() == b"y" * 100


async def test_delete_and_filters(
    client: synxfer.Client, bucket: str, make_tree: Callable[..., Path], s3_endpoint: str
) -> None:
    src = make_tree({"keep.txt": 3, "skip.tmp": 3, "logs/a.log": 3, "logs/b.txt": 3})
    url = f"s3://{bucket}/p"
    # aws-cli ordering: later filters win.
    r = await client.sync_to(
        src, url, filters=[("exclude", "logs/*"), ("include", "*.txt"), ("exclude", "*.tmp")]
    )
    assert r.files_transferred == 2
    assert set(_keys(s3_endpoint, bucket)) == {"p/keep.txt", "p/logs/b.txt"}

    (src / "keep.txt").unlink()
    boto3.client("s3", endpoint_url=s3_endpoint).put_object(Bucket=bucket, Key="p/x.tmp", Body=b"1")
    no_delete = await client.sync_to(src, url, exclude=["*.tmp", "logs/*"])
    assert no_delete.files_deleted == 0
    r = await client.sync_to(src, url, delete=True, exclude=["*.tmp", "logs/*"])
    # keep.txt is gone from the source: deleted. x.tmp is excluded: left alone.
    assert r.files_deleted == 1
    assert set(_keys(s3_endpoint, bucket)) == {"p/logs/b.txt", "p/x.tmp"}


async def test_sync_from_delete_removes_local_extras(
    client: synxfer.Client, bucket: str, make_tree: Callable[..., Path], tmp_path: Path
) -> None:
    src = make_tree({"a": 1, "b": 2})
    await client.sync_to(src, f"s3://{bucket}/p")
    dst = tmp_path / "dst"
    (dst / "sub").mkdir(parents=True)
    (dst / "sub" / "extra").write_bytes(b"zz")
    r = await client.sync_from(f"s3://{bucket}/p", dst, delete=True)
    assert r.files_deleted == 1
    assert r.files_transferred == 2
    assert sorted(tree(dst)) == ["a", "b"]


async def test_dryrun_transfers_nothing(
    client: synxfer.Client,
    bucket: str,
    make_tree: Callable[..., Path],
    tmp_path: Path,
    s3_endpoint: str,
) -> None:
    src = make_tree({"a": 10, "b": PART + 1})
    r = await client.sync_to(src, f"s3://{bucket}/p", dryrun=True)
    assert r.dryrun
    assert r.files_transferred == 2
    assert r.bytes_transferred == PART + 11
    assert _keys(s3_endpoint, bucket) == {}

    await client.sync_to(src, f"s3://{bucket}/p")
    dst = tmp_path / "dst"
    r = await client.sync_from(f"s3://{bucket}/p", dst, dryrun=True)
    assert r.files_transferred == 2
    assert not dst.exists() or not any(dst.iterdir())
    (src / "a").unlink()
    r = await client.sync_to(src, f"s3://{bucket}/p", delete=True, dryrun=True)
    assert r.files_deleted == 1
    assert "p/a" in _keys(s3_endpoint, bucket)


async def test_compare_modes(
    client: synxfer.Client, bucket: str, make_tree: Callable[..., Path]
) -> None:
    src = make_tree({"f": 64})
    url = f"s3://{bucket}/p"
    await client.sync_to(src, url)
    # Same size, older mtime, different content: only --checksum notices.
    (src / "f").write_bytes(b"z" * 64)
    os.utime(src / "f", ns=(1_000_000_000, 1_000_000_000))
    assert (await client.sync_to(src, url)).files_transferred == 0
    assert (await client.sync_to(src, url, size_only=True)).files_transferred == 0
    assert (await client.sync_to(src, url, checksum=True)).files_transferred == 1
    assert (await client.sync_to(src, url, checksum=True)).files_transferred == 0
    # --exact-timestamps notices any difference in time, older included.
    os.utime(src / "f", ns=(2_000_000_000, 2_000_000_000))
    assert (await client.sync_to(src, url)).files_transferred == 0
    assert (await client.sync_to(src, url, exact_timestamps=True)).files_transferred == 1
    with pytest.raises(synxfer.ConfigError, match="cannot be combined"):
        await client.sync_to(src, url, checksum=True, size_only=True)


async def test_checksum_mode_on_multipart_objects(
    client: synxfer.Client, bucket: str, make_tree: Callable[..., Path], tmp_path: Path
) -> None:
    src = make_tree({"big": 2 * PART + 1})
    url = f"s3://{bucket}/p"
    await client.sync_to(src, url)
    dst = tmp_path / "dst"
    await client.sync_from(url, dst)
    assert (await client.sync_from(url, dst, checksum=True)).files_transferred == 0
    data = bytearray((dst / "big").read_bytes())
    data[PART + 7] ^= 0xFF  # flip a byte in the second part
    (dst / "big").write_bytes(bytes(data))
    assert (await client.sync_from(url, dst, checksum=True)).files_transferred == 1
    assert (dst / "big").read_bytes() == (src / "big").read_bytes()


async def test_single_file_upload_download_and_cp(
    client: synxfer.Client, bucket: str, tmp_path: Path
) -> None:
    f = tmp_path / "one.bin"
    f.write_bytes(os.urandom(PART + 100))
    r = await client.upload_file(f, f"s3://{bucket}/dir/")
    assert r.ok
    assert r.files_transferred == 1
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    r = await client.download_file(f"s3://{bucket}/dir/one.bin", out_dir)
    assert (out_dir / "one.bin").read_bytes() == f.read_bytes()
    # cp always copies, even when the destination is identical.
    r = await client.copy(f, f"s3://{bucket}/dir/one.bin")
    assert r.files_transferred == 1
    r = await client.copy(f"s3://{bucket}/dir", tmp_path / "rec", recursive=True)
    assert r.files_transferred == 1
    assert (tmp_path / "rec" / "one.bin").exists()


async def test_ls_and_rm(
    client: synxfer.Client, bucket: str, make_tree: Callable[..., Path]
) -> None:
    src = make_tree({"a.txt": 1, "d/b.txt": 1, "d/e/c.txt": 1})
    await client.sync_to(src, f"s3://{bucket}/p")
    top = [e if isinstance(e, str) else e.key async for e in client.ls(f"s3://{bucket}/p/")]
    assert top == ["p/a.txt", "p/d/"]
    deep = [e.key async for e in client.ls(f"s3://{bucket}/p/", recursive=True)]  # type: ignore[union-attr]
    assert deep == ["p/a.txt", "p/d/b.txt", "p/d/e/c.txt"]
    r = await client.rm(f"s3://{bucket}/p/d", recursive=True)
    assert r.files_deleted == 2
    r = await client.rm(f"s3://{bucket}/p/a.txt")
    assert r.files_deleted == 1
    assert [e async for e in client.ls(f"s3://{bucket}/", recursive=True)] == []


# -- bad input -------------------------------------------------------------------


async def test_unsafe_keys_are_refused_and_nothing_escapes(
    client: synxfer.Client, bucket: str, s3_endpoint: str, tmp_path: Path
) -> None:
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    for key in ("p/ok.txt", "p/../escape.txt", "p/a/../../escape2.txt", "p//abs.txt"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"data")
    dst = tmp_path / "inner" / "dst"
    r = await client.sync_from(f"s3://{bucket}/p", dst)
    assert r.files_transferred == 1
    assert r.files_failed == 3
    assert all("refusing" in f.error for f in r.failures)
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["inner/dst/ok.txt"]


async def test_missing_bucket_is_a_clear_error(client: synxfer.Client, tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"1")
    with pytest.raises(synxfer.BucketNotFound, match="no-such-bucket"):
        await client.sync_to(tmp_path, "s3://no-such-bucket/p")
    with pytest.raises(synxfer.NotFound):
        await client.download_file("s3://no-such-bucket/k", tmp_path / "x")


async def test_missing_object_is_not_found(
    client: synxfer.Client, bucket: str, tmp_path: Path
) -> None:
    with pytest.raises(synxfer.NotFound, match="nope"):
        await client.download_file(f"s3://{bucket}/nope", tmp_path / "x")
    assert not (tmp_path / "x").exists()


async def test_bad_locations(client: synxfer.Client, tmp_path: Path) -> None:
    with pytest.raises(synxfer.ConfigError, match="no such directory"):
        await client.sync_to(tmp_path / "missing", "s3://bkt/p")
    with pytest.raises(synxfer.InvalidURL, match="no bucket"):
        await client.sync_to(tmp_path, "s3:///p")
    with pytest.raises(synxfer.UnknownScheme, match="'nosuch'"):
        await client.sync_to(tmp_path, "nosuch://bkt/p")
    with pytest.raises(synxfer.ConfigError, match="both local"):
        await client.sync(tmp_path, tmp_path / "x")


async def test_vanished_file_fails_alone(
    bucket: str, make_tree: Callable[..., Path], s3_endpoint: str
) -> None:
    """A file that disappears before it is read fails; every other file transfers."""
    src = make_tree({"a": 5, "b": 5, "c": 5})

    def on_event(e: synxfer.Event) -> None:
        if e.kind is EventKind.STARTED and e.src.endswith("/a"):
            (src / "b").unlink()

    config = SMALL.evolve(max_files=1)
    async with synxfer.Client(config, endpoint_url=s3_endpoint, on_event=on_event) as c:
        r = await c.sync_to(src, f"s3://{bucket}/p")
    assert r.files_transferred == 2
    assert [(f.action, Path(f.path).name) for f in r.failures] == [(Action.UPLOAD, "b")]
    assert "No such file" in r.failures[0].error
    assert set(_keys(s3_endpoint, bucket)) == {"p/a", "p/c"}


def test_unreadable_file_fails_alone(bucket: str, s3_endpoint: str) -> None:
    """chmod 000 on one file: it fails with a clear error, the others transfer.

    Root reads any file, so the upload runs in a forked child that has
    dropped to ``nobody`` (after a warm-up upload in this process).
    """
    tmp = Path(tempfile.mkdtemp(prefix="synxfer-unreadable-"))
    try:
        tmp.chmod(0o755)
        for name in ("a", "b", "c"):
            (tmp / name).write_bytes(b"data")
            (tmp / name).chmod(0o644)
        synxfer.sync_to(tmp, f"s3://{bucket}/warm-up", endpoint_url=s3_endpoint)
        (tmp / "b").chmod(0)

        def upload() -> object:
            r = synxfer.sync_to(tmp, f"s3://{bucket}/p", endpoint_url=s3_endpoint)
            return [r.files_transferred, r.files_failed, [f.error for f in r.failures]]

        transferred, failed, errors = run_forked(upload, as_nobody=True)  # type: ignore[misc]
    finally:
        shutil.rmtree(tmp)
    assert (transferred, failed) == (2, 1)
    assert "Permission denied" in errors[0]
    assert f"{tmp}/b" in errors[0]
    assert {k for k in _keys(s3_endpoint, bucket) if k.startswith("p/")} == {"p/a", "p/c"}


def test_disk_full_on_download_fails_that_file_cleanly(
    bucket: str, make_tree: Callable[..., Path], s3_endpoint: str, tmp_path: Path
) -> None:
    """A file the disk cannot hold (RLIMIT_FSIZE) fails with the OS error
    naming it; its temp file is removed; the other files arrive."""
    src = make_tree({"small-a": 1000, "huge": 3 * PART, "small-b": 1000})
    synxfer.sync_to(src, f"s3://{bucket}/p", endpoint_url=s3_endpoint, config=SMALL)
    dst = tmp_path / "dst"

    def download() -> object:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG, not a core dump
        resource.setrlimit(resource.RLIMIT_FSIZE, (PART, PART))
        r = synxfer.sync_from(f"s3://{bucket}/p", dst, endpoint_url=s3_endpoint, config=SMALL)
        return [r.files_transferred, [(f.path, f.error) for f in r.failures]]

    transferred, failures = run_forked(download)  # type: ignore[misc]
    assert transferred == 2
    [(path, error)] = failures
    assert path.endswith("/p/huge")
    assert "File too large" in error
    assert str(dst) in error  # the message names the local file
    assert sorted(p.name for p in dst.iterdir()) == ["small-a", "small-b"]  # no temp left


async def test_symlinks_skipped_unless_followed(
    bucket: str, make_tree: Callable[..., Path], s3_endpoint: str
) -> None:
    src = make_tree({"real/f": 3})
    (src / "link").symlink_to(src / "real")
    (src / "real" / "loop").symlink_to(src)
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as c:
        r = await c.sync_to(src, f"s3://{bucket}/a")
    assert set(_keys(s3_endpoint, bucket)) == {"a/real/f"}
    assert r.files_skipped == 2
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint, follow_symlinks=True) as c:
        r = await c.sync_to(src, f"s3://{bucket}/b")
    # The loop back to the root is detected, not followed forever.
    assert set(_keys(s3_endpoint, bucket, "b/")) == {"b/real/f", "b/link/f"}


def test_blocking_facade(
    bucket: str, make_tree: Callable[..., Path], s3_endpoint: str, tmp_path: Path
) -> None:
    src = make_tree({"x": 3 * MiB})
    r = synxfer.sync_to(src, f"s3://{bucket}/p", endpoint_url=s3_endpoint, config=SMALL)
    assert r.ok
    assert r.files_transferred == 1
    r = synxfer.sync_from(f"s3://{bucket}/p", tmp_path / "d", endpoint_url=s3_endpoint)
    assert (tmp_path / "d" / "x").read_bytes() == (src / "x").read_bytes()


async def test_failing_event_callback_does_not_fail_transfers(
    bucket: str, make_tree: Callable[..., Path], s3_endpoint: str
) -> None:
    def explode(e: synxfer.Event) -> None:
        raise RuntimeError("callback bug")

    src = make_tree({"a": 3, "b": 3})
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint, on_event=explode) as c:
        r = await c.sync_to(src, f"s3://{bucket}/p")
    assert r.ok
    assert r.files_transferred == 2


class _CorruptOnce(synxfer.layers.Layer):
    """Flips one byte of the first put and the first part in flight, keeping
    the checksum of the original bytes: what a bad NIC or proxy would do."""

    def __init__(self, inner: synxfer.backend.Backend) -> None:
        super().__init__(inner)
        self.corrupted: set[str] = set()

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        if op in ("put", "upload_part") and op not in self.corrupted:
            self.corrupted.add(op)
            data_at = 1 if op == "put" else 2
            bad = bytearray(args[data_at])
            bad[len(bad) // 2] ^= 0x01
            args = (*args[:data_at], bytes(bad), *args[data_at + 1 :])
        return await fn(*args)


async def test_corruption_in_flight_is_refused_and_retried(
    bucket: str, make_tree: Callable[..., Path], s3_endpoint: str, tmp_path: Path
) -> None:
    src = make_tree({"small": 1000, "big": 2 * PART + 10})
    layers: list[_CorruptOnce] = []

    def corrupt(b: synxfer.backend.Backend) -> synxfer.backend.Backend:
        layers.append(_CorruptOnce(b))
        return layers[-1]

    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint, layers=[corrupt]) as c:
        r = await c.sync_to(src, f"s3://{bucket}/p")
        assert r.ok, r.failures
        assert layers[0].corrupted == {"put", "upload_part"}
        assert r.retries == 2  # the server refused both corrupted bodies (BadDigest)
        down = await c.sync_from(f"s3://{bucket}/p", tmp_path / "d")
    assert down.ok
    assert tree(tmp_path / "d") == tree(src)


class _VouchCrc32c(synxfer.layers.Layer):
    """Makes the server report a whole-object CRC32C, as GCS does (``x-goog-hash``).

    ``alone``: and nothing else -- no synxfer metadata, so the ETag cannot
    vouch for the bytes either (a wrong claim with another that matches
    lands the file: tests/test_download_claims.py)."""

    def __init__(
        self, inner: synxfer.backend.Backend, crc_b64: str, *, alone: bool = False
    ) -> None:
        super().__init__(inner)
        self.crc_b64 = crc_b64
        self.alone = alone

    def _vouch(self, info: synxfer.ObjectInfo) -> synxfer.ObjectInfo:
        if self.alone:
            return dataclasses.replace(info, checksums={"crc32c": self.crc_b64}, metadata={})
        return dataclasses.replace(info, checksums={"crc32c": self.crc_b64})

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        result = await fn(*args)
        if isinstance(result, synxfer.ReadResult):
            return synxfer.ReadResult(result.data, self._vouch(result.info))
        if isinstance(result, synxfer.ObjectInfo) and op in ("stat", "read_into"):
            return self._vouch(result)
        return result


@pytest.mark.parametrize("honest", [True, False])
async def test_downloads_are_checked_against_server_crc32c(
    honest: bool, bucket: str, make_tree: Callable[..., Path], s3_endpoint: str, tmp_path: Path
) -> None:
    google_crc32c = pytest.importorskip("google_crc32c")
    src = make_tree({"big": 2 * PART + 99})  # three ranges, CRCs folded
    crc = google_crc32c.value((src / "big").read_bytes()) ^ (0 if honest else 1)
    crc_b64 = base64.b64encode(crc.to_bytes(4, "big")).decode()
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as c:
        await c.sync_to(src, f"s3://{bucket}/p")
    config = SMALL.evolve(resume=False)
    layer = [lambda b: _VouchCrc32c(b, crc_b64, alone=not honest)]
    async with synxfer.Client(config, endpoint_url=s3_endpoint, layers=layer) as c:
        r = await c.sync_from(f"s3://{bucket}/p", tmp_path / "d")
    if honest:
        assert r.ok
        assert tree(tmp_path / "d") == tree(src)
    else:
        assert r.files_failed == 1
        # Retried under the retry policy: the whole file was fetched once
        # more; every range came back the same, so no attempt could help
        # and the file failed, naming the checksum compared.
        assert r.retries == 1
        assert r.bytes_downloaded == 2 * (2 * PART + 99)
        assert "CRC32C" in r.failures[0].error
        assert "the data came back the same in 2 attempts" in r.failures[0].error
        assert not (tmp_path / "d" / "big").exists()
        assert list((tmp_path / "d").iterdir()) == []  # no temp file either


async def test_resync_of_downloaded_tree_needs_no_head_requests(
    client: synxfer.Client,
    bucket: str,
    make_tree: Callable[..., Path],
    s3_endpoint: str,
    tmp_path: Path,
) -> None:
    """Downloads tag their files with the object's ETag (an xattr); an
    untouched file whose tag matches the listing is skipped without a HEAD."""
    src = make_tree({"a": 100, "b/c": PART + 1, "d": 7})
    url = f"s3://{bucket}/p"
    await client.sync_to(src, url)
    dst = tmp_path / "dst"
    await client.sync_from(url, dst)
    counts: Counter[str] = Counter()
    async with synxfer.Client(
        SMALL, endpoint_url=s3_endpoint, layers=[lambda b: CountingLayer(b, counts)]
    ) as c:
        r = await c.sync_from(url, dst)
        assert (r.files_transferred, r.files_skipped) == (0, 3)
        assert counts["stat"] == 0
        # Touch one file (same size, new time): its tag no longer applies.
        os.utime(dst / "a", ns=(1, 1))
        r = await c.sync_from(url, dst)
    assert r.files_transferred == 1
    assert (dst / "a").read_bytes() == (src / "a").read_bytes()
