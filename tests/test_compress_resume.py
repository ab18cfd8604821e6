"""Compressed uploads resume through the ordinary journal (issue 36).

The CLI uploads a compressible file with ``--compress zstd`` to stock moto
(as it ships) through a counting proxy, is interrupted (SIGINT) once about
half the compressed bytes arrived, and runs again: the rerun compresses the
file again but does not send the parts the server already holds (their ETag
is the MD5 of the part it compressed again). Before issue 36 a compressed
upload always started over and sent every part again.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from synxfer import MiB
from synxfer.engine.journal import Journal
from synxfer_servers.faultproxy import FaultProxy

from ._s3server import S3World

pytest.importorskip("zstandard")


def _half_random(n: int, seed: int) -> bytes:
    """``n`` bytes that zstd stores at about half: 32 KiB of noise, 32 KiB of zeros."""
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < n:
        out += rng.randbytes(32 * 1024) + bytes(32 * 1024)
    return bytes(out[:n])


def _cli(proxy_url: str, src: Path, url: str) -> list[str]:
    return [
        sys.executable, "-m", "synxfer.cli.main", "cp", str(src), url, "--compress", "zstd",
        "--endpoint-url", proxy_url, "--part-size", "5MiB", "--max-threads", "1",
        "--bwlimit", "16MiB", "-q",
    ]  # fmt: skip


def test_an_interrupted_compressed_upload_resumes(stock_moto: Any, tmp_path: Path) -> None:
    world = S3World("stock-moto", stock_moto.endpoint_url, "testing", "testing-secret")
    bucket = world.new_bucket("compress-resume")
    src = tmp_path / "big.txt"
    data = _half_random(30 * MiB, 36)  # about 20 MiB stored: 3 parts of 5 MiB
    src.write_bytes(data)
    env = {**world.environ(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    url = f"s3://{bucket}/big.txt"
    with FaultProxy(world.endpoint_url, rate=0.0) as proxy:
        cmd = _cli(proxy.url, src, url)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while proxy.snapshot().body_bytes < 11 * MiB:  # parts 1 and 2 in the proxy's hands
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode != 0, "the first run was not interrupted"
        first = proxy.snapshot().body_bytes
        entry = Journal(tmp_path / "cache" / "synxfer").upload_get(url)
        rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
        again = proxy.snapshot().body_bytes - first
    s3 = world.admin()
    head = s3.head_object(Bucket=bucket, Key="big.txt")
    stored = head["ContentLength"]
    assert head["Metadata"]["synxfer-encoding"] == "zstd"
    assert head["Metadata"]["synxfer-size"] == str(len(data))
    assert 10 * MiB < stored < 20 * MiB
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert Journal(tmp_path / "cache" / "synxfer").upload_get(url) is None
    assert entry is not None, f"the interrupted upload was not journaled: {err!r}"
    assert entry.codec == "zstd-3"
    # At least parts 1 and 2 (10 MiB) were kept: the rerun sent the rest only.
    assert again <= stored - 10 * MiB + 64 * 1024, f"rerun sent {again} of {stored} bytes"
    back = tmp_path / "back.txt"
    get = subprocess.run(
        [sys.executable, "-m", "synxfer.cli.main", "cp", url, str(back),
         "--endpoint-url", world.endpoint_url, "-q"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert get.returncode == 0, get.stderr
    assert back.read_bytes() == data


def test_an_interrupted_compressed_download_resumes(stock_moto: Any, tmp_path: Path) -> None:
    """The CLI downloads a compressed object (three stored parts) from stock
    moto through a proxy that notes each GET's range, is interrupted (SIGINT)
    once the journal holds a range, and runs again: the rerun fetches only
    the ranges the first run had not written, verifies the stored bytes and
    decodes them to the original file. Before issue 36 a compressed download
    kept nothing (no journal, its temp file removed) and fetched it all again."""
    world = S3World("stock-moto", stock_moto.endpoint_url, "testing", "testing-secret")
    bucket = world.new_bucket("compress-resume-down")
    src = tmp_path / "big.txt"
    data = _half_random(24 * MiB, 37)  # about 12 MiB stored: 5 + 5 + 2 MiB
    src.write_bytes(data)
    cache = tmp_path / "cache"
    env = {**world.environ(), "XDG_CACHE_HOME": str(cache)}
    url = f"s3://{bucket}/big.txt"
    up = subprocess.run(
        [*_cli(world.endpoint_url, src, url)[:-3], "-q"],  # no bandwidth limit
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert up.returncode == 0, up.stderr
    stored = world.admin().head_object(Bucket=bucket, Key="big.txt")["ContentLength"]
    assert 10 * MiB < stored < 15 * MiB
    dest = tmp_path / "out" / "big.txt"
    dest.parent.mkdir()
    ranges: list[str] = []

    def note(request: Any) -> bool:
        if request.method == "GET" and request.key == "big.txt":
            ranges.append(request.headers.get("range", "bytes=0-"))
        return False

    def fetched(since: int) -> int:
        total = 0
        for r in ranges[since:]:
            first, _, last = r.removeprefix("bytes=").partition("-")
            total += (int(last) if last else stored - 1) - int(first) + 1
        return total

    # rate 1 so the proxy asks `note` of every request; `note` never faults one.
    with FaultProxy(world.endpoint_url, rate=1.0, match=note) as proxy:
        cmd = [
            sys.executable, "-m", "synxfer.cli.main", "cp", url, str(dest),
            "--endpoint-url", proxy.url, "--part-size", "5MiB", "--max-threads", "1",
            "--bwlimit", "4MiB",
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while _journaled_ranges(cache) < 1:  # the first range is written and journaled
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode != 0, "the first run was not interrupted"
        assert not dest.exists()
        kept = _journaled_ranges(cache)
        first = len(ranges)
        rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
        again = fetched(first)
    assert dest.read_bytes() == data
    assert "not verified" not in rerun.stdout + rerun.stderr, rerun.stdout
    assert kept >= 1, err
    # What the first run had written was not fetched again.
    assert 0 < again <= stored - kept * 5 * MiB, f"rerun fetched {again} of {stored} bytes"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["big.txt"]  # no temp file left
    assert _journaled_ranges(cache) == 0


def _journaled_ranges(cache: Path) -> int:
    """Ranges of downloads the journal under ``cache`` records as written."""
    import sqlite3

    path = cache / "synxfer" / "journal.sqlite3"
    if not path.exists():
        return 0
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        return int(db.execute("SELECT count(*) FROM download_parts").fetchone()[0])
    except sqlite3.OperationalError:  # the tables are not made yet
        return 0
    finally:
        db.close()


async def test_a_download_stopped_after_its_last_range_only_decodes_again(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    """Cancelled once every stored range is written and journaled (before
    the decode put the file in place), the rerun fetches nothing: the
    journal vouches for the temp file's stored bytes, which are decoded."""
    import asyncio

    import synxfer
    from synxfer import EventKind

    from .conftest import SMALL

    config = SMALL.evolve(compress="zstd", state_dir=str(tmp_path / "state"))
    data = _half_random(24 * MiB, 39)  # about 12 MiB stored: ranged, 3 ranges
    src = tmp_path / "big.txt"
    src.write_bytes(data)
    url = f"s3://{bucket}/big.txt"
    dest = tmp_path / "out" / "big.txt"
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as client:
        up = await client.copy(str(src), url)
        assert up.ok, up.failures
    stored = up.bytes_uploaded
    assert stored > 2 * SMALL.part_size  # fetched in ranges, journaled
    seen = 0
    task: asyncio.Task[Any] | None = None

    def on_event(event: synxfer.Event) -> None:
        nonlocal seen
        if event.kind is EventKind.PROGRESS and task is not None:
            seen += event.nbytes
            if seen >= stored:
                task.cancel()

    async with synxfer.Client(config, endpoint_url=s3_endpoint, on_event=on_event) as client:
        task = asyncio.ensure_future(client.copy(url, str(dest)))
        with pytest.raises(asyncio.CancelledError):
            await task
    assert not dest.exists()
    assert seen == stored
    journal = Journal(tmp_path / "state")
    entry = journal.download_get(str(dest))
    journal.close()
    assert entry is not None, "the interrupted download was not journaled"
    assert len(entry.parts) == 3, entry
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as client:
        again = await client.copy(url, str(dest))
    assert again.ok, again.failures
    assert again.bytes_downloaded == 0, again
    assert again.not_verified == 0
    assert dest.read_bytes() == data
    assert sorted(p.name for p in dest.parent.iterdir()) == ["big.txt"]
