"""Portability (issue 38, item 10): the fallbacks of ``synxfer.engine._os``, forced on Linux.

macOS has no ``os.posix_fallocate`` and no ``os.getxattr``/``os.setxattr``;
Windows has none of those, no ``os.preadv``/``os.pwritev``, no
``os.pread``/``os.pwrite`` and no ``O_CLOEXEC``. Each platform's calls are
taken away here, then a real upload and download round trip on stock moto
(multipart and single-request files, ranged and whole downloads) must come
back byte-exact.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

import synxfer
from synxfer import MiB
from synxfer.engine import _os

from .conftest import SMALL

#: What each platform lacks, of what the engine would use on Linux.
MISSING = {
    "macos": ("posix_fallocate", "getxattr", "setxattr"),
    "windows": ("preadv", "pwritev", "pread", "pwrite", "posix_fallocate", "getxattr", "setxattr"),
}


@pytest.mark.parametrize("platform", sorted(MISSING))
async def test_round_trip_without_the_calls(
    platform: str, stock_moto: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in MISSING[platform]:
        monkeypatch.delattr(os, name, raising=False)
    seeks = 0
    real_lseek = os.lseek

    def counting_lseek(fd: int, pos: int, how: int) -> int:
        nonlocal seeks
        seeks += 1
        return real_lseek(fd, pos, how)

    monkeypatch.setattr(os, "lseek", counting_lseek)
    up = tmp_path / "up"
    up.mkdir()
    # 12 MiB: three 5 MiB parts up, ranged reads down; 2 MiB: one PUT, one
    # whole-file write (preallocated on Linux); 1 byte; empty.
    files = {"big.bin": 12 * MiB + 7, "mid.bin": 2 * MiB, "one.bin": 1, "empty.bin": 0}
    data = {name: os.urandom(size) for name, size in files.items()}
    for name, payload in data.items():
        (up / name).write_bytes(payload)
    bucket = f"port-{uuid.uuid4().hex[:12]}"
    url = f"s3://{bucket}/p/"
    async with synxfer.Client(SMALL, endpoint_url=stock_moto.endpoint_url) as client:
        await client.make_bucket(f"s3://{bucket}")
        result = await client.copy(str(up), url, recursive=True)
        assert result.ok, result
        down = tmp_path / "down"
        result = await client.copy(url, str(down), recursive=True)
        assert result.ok, result
        # No download tags without xattrs: sizes and times decide, nothing moves.
        again = await client.sync(url, str(down))
        assert again.ok, again
        assert again.files_transferred == 0
    for name, payload in data.items():
        assert (down / name).read_bytes() == payload, name
    if platform == "windows":
        assert seeks > 0  # the seek fallback did the reads and writes


def test_seek_fallback_is_positional_under_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without pread/pwrite, threads writing and reading one descriptor at
    different offsets (as the engine's parts do) still land where asked."""
    for name in MISSING["windows"]:
        monkeypatch.delattr(os, name, raising=False)
    chunk, count = 64 * 1024, 16
    blocks = [bytes([i]) * chunk for i in range(count)]
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | _os.OPEN_FLAGS)
    try:
        assert not _os.preallocate(fd, chunk * count)  # nothing to do it with

        def write(i: int) -> None:
            view = memoryview(blocks[i])
            done = 0
            while done < chunk:
                done += _os.pwrite_from(fd, view[done:], i * chunk + done)

        threads = [threading.Thread(target=write, args=(i,)) for i in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        back = [bytearray(chunk) for _ in range(count)]

        def read(i: int) -> None:
            assert _os.pread_into(fd, memoryview(back[i]), i * chunk) == chunk

        threads = [threading.Thread(target=read, args=(i,)) for i in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [bytes(b) for b in back] == blocks
        assert _os.pread_into(fd, memoryview(bytearray(10)), chunk * count) == 0
    finally:
        os.close(fd)


def test_imports_without_the_calls() -> None:
    """A fresh interpreter without any of them (nor O_CLOEXEC) imports the
    library, the CLI and the S3 plugin."""
    names = (*MISSING["windows"], "O_CLOEXEC")
    code = (
        "import os\n"
        f"for name in {names!r}:\n"
        "    if hasattr(os, name): delattr(os, name)\n"
        "import synxfer, synxfer.cli.main, synxfer.fsspec, synxfer_s3\n"
        "from synxfer.engine import _os\n"
        "assert _os.OPEN_FLAGS == 0, _os.OPEN_FLAGS\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
