"""``--compress zstd``: objects stored compressed, transparent on the way back
(moto's S3 over HTTP on 127.0.0.1, real files)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
import zstandard

import synxfer
from synxfer import ConfigError

from .conftest import SMALL, tree

ZSTD = SMALL.evolve(compress="zstd")

_WORDS = [
    "".join(random.Random(i).choices("abcdefghijklmnopqrstuvwxyz", k=1 + i % 9)) for i in range(900)
]


def _text(n: int, seed: int = 0) -> bytes:
    """English-like text: words drawn with a skewed law, in lines."""
    rng = random.Random(seed)
    out = bytearray()
    weights = [1 / (i + 1) for i in range(len(_WORDS))]
    while len(out) < n:
        out += (" ".join(rng.choices(_WORDS, weights, k=12)) + ".\n").encode()
    return bytes(out[:n])


def _half_zeros(n: int, seed: int = 0) -> bytes:
    """64 KiB of random bytes, 64 KiB of zeros, ...: compresses to about half."""
    rng = random.Random(seed)
    block = 64 * 1024
    return b"".join(
        rng.randbytes(min(block, n - i)) if (i // block) % 2 == 0 else bytes(min(block, n - i))
        for i in range(0, n, block)
    )[:n]


#: Name -> contents: empty, small text, incompressible, and two multipart ones
#: (with 5 MiB parts: ~8 MiB and ~11 MiB compressed).
def _files() -> dict[str, bytes]:
    rng = random.Random(7)
    return {
        "empty.bin": b"",
        "prose.txt": _text(300_000),
        "noise.bin": rng.randbytes(200_000),
        "big/half.bin": _half_zeros(16 * 1024 * 1024 + 123),
        "big/noise.bin": rng.randbytes(11 * 1024 * 1024 + 5),
    }


@pytest.fixture(scope="module")
def contents() -> dict[str, bytes]:
    return _files()


@pytest.fixture
def src(tmp_path: Path, contents: dict[str, bytes]) -> Path:
    root = tmp_path / "src"
    for rel, data in contents.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _s3(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint)


def _stored(endpoint: str, bucket: str, prefix: str) -> dict[str, dict[str, Any]]:
    s3 = _s3(endpoint)
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            head = s3.head_object(Bucket=bucket, Key=o["Key"])
            out[o["Key"][len(prefix) :]] = {
                "size": o["Size"],
                "etag": o["ETag"].strip('"'),
                "metadata": head["Metadata"],
            }
    return out


def _leftovers(root: Path) -> list[str]:
    return [p.name for p in root.rglob("*") if "synxfer-part" in p.name]


async def test_round_trip_metadata_and_resync(
    s3_endpoint: str, bucket: str, src: Path, tmp_path: Path, contents: dict[str, bytes]
) -> None:
    url = f"s3://{bucket}/z/"
    async with synxfer.Client(ZSTD, endpoint_url=s3_endpoint) as client:
        up = await client.sync_to(src, url)
        assert up.ok, up.failures
        stored = _stored(s3_endpoint, bucket, "z/")
        assert set(stored) == set(contents)
        # The bytes that crossed the wire are the compressed ones.
        assert up.bytes_transferred == sum(o["size"] for o in stored.values())
        assert up.bytes_uploaded == up.bytes_transferred
        for rel, data in contents.items():
            meta = stored[rel]["metadata"]
            assert meta["synxfer-encoding"] == "zstd"
            assert meta["synxfer-size"] == str(len(data))
            assert int(meta["mtime"].split(".")[0]) == int((src / rel).stat().st_mtime)
        # Compressible data shrinks; incompressible grows by a few bytes only.
        assert stored["prose.txt"]["size"] < 0.6 * len(contents["prose.txt"])
        assert stored["big/half.bin"]["size"] < 0.6 * len(contents["big/half.bin"])
        assert stored["noise.bin"]["size"] <= len(contents["noise.bin"]) + 1024
        # Multipart: the compressed stream cut in 5 MiB parts, the last shorter.
        assert stored["big/half.bin"]["etag"].endswith("-2")
        assert stored["big/noise.bin"]["etag"].endswith("-3")
        assert stored["big/noise.bin"]["metadata"]["synxfer-part-size"] == str(5 * 1024 * 1024)
        assert stored["prose.txt"]["metadata"]["synxfer-part-size"] == "0"

        # A second sync of unchanged files moves nothing.
        again = await client.sync_to(src, url)
        assert again.ok, again.failures
        assert again.files_transferred == 0, again
        assert again.files_skipped == len(contents)

        # Down: transparent, with the original mtimes; a resync moves nothing.
        dest = tmp_path / "dest"
        down = await client.sync_from(url, dest)
        assert down.ok, down.failures
        assert down.bytes_downloaded == up.bytes_transferred
        got = tree(dest)
        assert {rel: data for rel, (data, _) in got.items()} == contents
        for rel, (_, mtime_ns) in got.items():
            assert mtime_ns == (src / rel).stat().st_mtime_ns
        assert _leftovers(dest) == []
        down2 = await client.sync_from(url, dest)
        assert down2.ok, down2.failures
        assert down2.files_transferred == 0, down2

        # A changed file (same size, newer) goes again; the others do not.
        changed = src / "prose.txt"
        changed.write_bytes(_text(len(contents["prose.txt"]), seed=1))
        os.utime(changed, ns=(changed.stat().st_atime_ns, changed.stat().st_mtime_ns + 10**9))
        third = await client.sync_to(src, url)
        assert third.ok, third.failures
        assert third.files_transferred == 1, third


async def test_progress_counts_the_files_bytes_read(
    s3_endpoint: str, bucket: str, src: Path, contents: dict[str, bytes]
) -> None:
    """A compressed upload's PROGRESS events count the file's bytes read
    (raw), not the compressed bytes sent: each file's events add up to its
    size, so the progress reaches 100 % of the plan's total (the original
    sizes); bytes_uploaded still counts what crossed the wire."""
    from synxfer import EventKind
    from synxfer.progress import TransferProgress

    events: list[synxfer.Event] = []
    progress = TransferProgress()

    def on_event(event: synxfer.Event) -> None:
        events.append(event)
        progress.update(event)

    async with synxfer.Client(ZSTD, endpoint_url=s3_endpoint, on_event=on_event) as client:
        up = await client.sync_to(src, f"s3://{bucket}/p/")
    assert up.ok, up.failures
    total = sum(len(data) for data in contents.values())
    per_file: dict[str, int] = {}
    for event in events:
        if event.kind is EventKind.PROGRESS:
            rel = Path(event.src).relative_to(src).as_posix()
            per_file[rel] = per_file.get(rel, 0) + event.nbytes
    assert per_file == {rel: len(data) for rel, data in contents.items()}
    # Several events for the multipart files: the bar moves as parts go.
    assert sum(1 for e in events if e.kind is EventKind.PROGRESS and "half" in e.src) == 2
    assert progress.bytes_total == total
    assert progress.bytes_done == total
    assert progress.fraction == 1.0
    stored = _stored(s3_endpoint, bucket, "p/")
    assert up.bytes_uploaded == sum(o["size"] for o in stored.values()) < 0.8 * total


async def test_plain_client_sees_the_compressed_bytes(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    data = _text(100_000, seed=3)
    path = tmp_path / "a.txt"
    path.write_bytes(data)
    async with synxfer.Client(ZSTD.evolve(compress_level=19), endpoint_url=s3_endpoint) as client:
        result = await client.copy(str(path), f"s3://{bucket}/a.txt")
    assert result.ok, result.failures
    body = _s3(s3_endpoint).get_object(Bucket=bucket, Key="a.txt")["Body"].read()
    assert body != data
    assert len(body) < len(data) // 2
    assert zstandard.ZstdDecompressor().decompress(body) == data


async def test_uncompressed_objects_are_untouched_and_cp_without_compress_decompresses(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    data = _text(50_000, seed=4)
    s3 = _s3(s3_endpoint)
    # An object that merely looks compressed (zstd bytes) but has no metadata.
    frame = zstandard.ZstdCompressor().compress(data)
    s3.put_object(Bucket=bucket, Key="plain.zst", Body=frame)
    path = tmp_path / "c.txt"
    path.write_bytes(data)
    async with synxfer.Client(ZSTD, endpoint_url=s3_endpoint) as client:
        assert (await client.copy(str(path), f"s3://{bucket}/c.txt")).ok
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as client:
        res = await client.copy(f"s3://{bucket}/", str(tmp_path / "out"), recursive=True)
    assert res.ok, res.failures
    assert (tmp_path / "out" / "plain.zst").read_bytes() == frame
    assert (tmp_path / "out" / "c.txt").read_bytes() == data


def _put_compressed(s3: Any, bucket: str, key: str, body: bytes, size: int) -> None:
    s3.put_object(
        Bucket=bucket,
        Key=key,
        Body=body,
        Metadata={"synxfer-encoding": "zstd", "synxfer-size": str(size), "mtime": "1.0"},
    )


@pytest.mark.parametrize("big", [False, True], ids=["one-range", "ranges"])
async def test_corrupt_stored_object_fails_and_leaves_nothing(
    s3_endpoint: str, bucket: str, tmp_path: Path, big: bool
) -> None:
    data = _half_zeros(12 * 1024 * 1024) if big else _text(200_000, seed=5)
    frame = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(data))
    if big:
        assert len(frame) > 5 * 1024 * 1024  # fetched in ranges
    frame[len(frame) // 3] ^= 0x40  # stored corrupt: its own ETag/MD5 matches
    s3 = _s3(s3_endpoint)
    _put_compressed(s3, bucket, "bad", bytes(frame), len(data))
    dest = tmp_path / "d"
    dest.mkdir()
    async with synxfer.Client(ZSTD, endpoint_url=s3_endpoint) as client:
        res = await client.copy(f"s3://{bucket}/bad", str(dest / "bad"))
    assert not res.ok
    (failure,) = res.failures
    assert "zstd" in failure.error, failure.error
    assert "nothing was written" in failure.error, failure.error
    assert list(dest.iterdir()) == []


@pytest.mark.parametrize("recorded", [-1, +1], ids=["shorter", "longer"])
async def test_size_other_than_recorded_fails(
    s3_endpoint: str, bucket: str, tmp_path: Path, recorded: int
) -> None:
    data = _text(100_000, seed=6)
    s3 = _s3(s3_endpoint)
    frame = zstandard.ZstdCompressor().compress(data)
    _put_compressed(s3, bucket, "k", frame, len(data) + recorded)
    dest = tmp_path / "d"
    dest.mkdir()
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as client:
        res = await client.copy(f"s3://{bucket}/k", str(dest / "k"))
    assert not res.ok
    assert "synxfer-size" in res.failures[0].error, res.failures[0].error
    assert list(dest.iterdir()) == []


async def test_truncated_stream_fails(s3_endpoint: str, bucket: str, tmp_path: Path) -> None:
    data = _text(100_000, seed=8)
    frame = zstandard.ZstdCompressor(write_checksum=True).compress(data)
    _put_compressed(_s3(s3_endpoint), bucket, "t", frame[: len(frame) // 2], len(data))
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as client:
        res = await client.copy(f"s3://{bucket}/t", str(tmp_path / "t"))
    assert not res.ok
    assert not (tmp_path / "t").exists()
    assert _leftovers(tmp_path) == []


def test_config_checks() -> None:
    with pytest.raises(ConfigError, match="unknown compression 'gzip'"):
        synxfer.TransferConfig(compress="gzip")
    with pytest.raises(ConfigError, match="compress_level"):
        synxfer.TransferConfig(compress="zstd", compress_level=23)
    # The user's metadata cannot set synxfer's keys (refused when a client opens a backend).
    from synxfer._config import _RESERVED_METADATA

    assert {"synxfer-encoding", "synxfer-size"} <= _RESERVED_METADATA
    assert synxfer.TransferConfig(compress="zstd").compress_level == 3


def test_missing_zstandard_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(ConfigError, match=r"pip install 'synxfer\[zstd\]'"):
        synxfer.TransferConfig(compress="zstd")


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", *args], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def cli_env(s3_endpoint: str) -> dict[str, str]:
    return {**os.environ, "AWS_ENDPOINT_URL": s3_endpoint}


_MAIN = "import sys; from synxfer.cli.main import main; sys.exit(main(sys.argv[1:]))"


def test_cli_compress_round_trip_and_errors(
    cli_env: dict[str, str], s3_endpoint: str, bucket: str, src: Path, tmp_path: Path
) -> None:
    small = src / "prose.txt"
    url = f"s3://{bucket}/cli/prose.txt"
    flags = ("--compress", "zstd", "--compress-level", "9")
    proc = _cli(cli_env, _MAIN, "cp", str(small), url, *flags)
    assert proc.returncode == 0, proc.stderr
    head = _s3(s3_endpoint).head_object(Bucket=bucket, Key="cli/prose.txt")
    assert head["Metadata"]["synxfer-encoding"] == "zstd"
    assert head["ContentLength"] < small.stat().st_size
    # S3 lists no metadata: ls prints the stored (compressed) size, as aws-cli would.
    proc = _cli(cli_env, _MAIN, "ls", f"s3://{bucket}/cli/")
    assert proc.returncode == 0, proc.stderr
    assert f" {head['ContentLength']} prose.txt" in proc.stdout, proc.stdout
    proc = _cli(cli_env, _MAIN, "cp", url, str(tmp_path / "back.txt"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "back.txt").read_bytes() == small.read_bytes()

    proc = _cli(cli_env, _MAIN, "cp", str(small), url, "--compress-level", "0")
    assert proc.returncode == 2
    assert "--compress-level" in proc.stderr
    proc = _cli(cli_env, _MAIN, "cp", str(small), url, "--compress", "gzip")
    assert proc.returncode == 2
    assert "--compress" in proc.stderr
    # Without zstandard: exit 2, the flag and the install line, nothing sent.
    blocked = "import sys; sys.modules['zstandard'] = None; " + _MAIN
    none = f"s3://{bucket}/cli/none"
    proc = _cli(cli_env, blocked, "cp", str(small), none, "--compress", "zstd")
    assert proc.returncode == 2, proc.stderr
    assert "--compress" in proc.stderr
    assert "pip install 'synxfer[zstd]'" in proc.stderr
    assert "Contents" not in _s3(s3_endpoint).list_objects_v2(Bucket=bucket, Prefix="cli/none")
    # Downloading a compressed object without zstandard: that file fails, saying why.
    proc = _cli(cli_env, blocked, "cp", url, str(tmp_path / "nope.txt"))
    assert proc.returncode != 0
    assert "pip install 'synxfer[zstd]'" in proc.stderr + proc.stdout
    assert not (tmp_path / "nope.txt").exists()


def test_make_helpers_are_deterministic() -> None:
    a: Callable[[int, int], bytes] = _text
    assert a(1000, 1) == a(1000, 1)
    assert a(1000, 1) != a(1000, 2)


def test_original_size_from_metadata() -> None:
    from synxfer import ObjectInfo
    from synxfer.engine.compress import original_size

    meta = {"synxfer-encoding": "zstd", "synxfer-size": "1000"}
    assert original_size(ObjectInfo("k", 300, metadata=meta)) == 1000
    assert original_size(ObjectInfo("k", 300)) == 300  # a listing without metadata
    assert original_size(ObjectInfo("k", 300, metadata={"synxfer-size": "1000"})) == 300
