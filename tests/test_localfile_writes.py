"""Positional writes: all bytes land, in calls of at most ``WRITE_CHUNK`` bytes,
one writer thread at a time per file.

The chunking is a speed rule (docs/decisions/0012-write-chunks.md): a
``pwrite`` larger than 32 KiB makes the page cache allocate folios above
order 3, which on this kind of machine (a VM with free-page reporting) cost
up to several times the kernel time of 32 KiB writes. The bytes must land
the same either way. So is the lock per file (``LocalFile``): threads
writing one file at once spin on its inode lock in the kernel.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from synxfer.engine import localfile
from synxfer.engine.localfile import WRITE_CHUNK, LocalFile, pwrite_all


@pytest.mark.parametrize(
    "size", [0, 1, WRITE_CHUNK - 1, WRITE_CHUNK, WRITE_CHUNK + 1, 3 * WRITE_CHUNK + 17]
)
def test_pwrite_all_writes_every_byte_at_the_offset(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    path = tmp_path / "f"
    path.write_bytes(b"x" * 5)
    fd = os.open(path, os.O_WRONLY)
    try:
        pwrite_all(fd, bytearray(data), 5)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"x" * 5 + data


def test_pwrite_all_hands_the_kernel_at_most_one_chunk_per_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes: list[int] = []
    real = os.pwrite

    def recording(fd: int, data: memoryview, offset: int) -> int:
        sizes.append(len(data))
        return real(fd, data, offset)

    monkeypatch.setattr(localfile.os, "pwrite", recording)
    data = os.urandom(8 * 1024 * 1024 + 3)
    path = tmp_path / "part"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        pwrite_all(fd, memoryview(data), 0)
    finally:
        os.close(fd)
    assert path.read_bytes() == data
    assert max(sizes) == WRITE_CHUNK
    assert sum(sizes) == len(data)
    # Order-3 folios at most (decision 0012): 256 KiB writes were not enough.
    assert WRITE_CHUNK <= 32 * 1024


def test_pwrite_all_goes_on_after_a_short_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.pwrite

    def short(fd: int, data: memoryview, offset: int) -> int:
        return real(fd, data[: max(1, len(data) // 3)], offset)

    monkeypatch.setattr(localfile.os, "pwrite", short)
    data = os.urandom(WRITE_CHUNK + 1000)
    path = tmp_path / "short"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        pwrite_all(fd, data, 0)
    finally:
        os.close(fd)
    assert path.read_bytes() == data


def test_writes_to_one_file_take_turns_and_their_checksums_do_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parts of one file are written one thread at a time; what each write
    computes afterwards (``then``, a checksum) runs in parallel."""
    real = os.pwrite
    writing = 0
    most = 0
    counter = threading.Lock()

    def slow(fd: int, data: memoryview, offset: int) -> int:
        nonlocal writing, most
        with counter:
            writing += 1
            most = max(most, writing)
        time.sleep(0.005)  # widen the window in which another write could start
        try:
            return real(fd, data, offset)
        finally:
            with counter:
                writing -= 1

    monkeypatch.setattr(localfile.os, "pwrite", slow)
    # Two checksums must be computing at once to pass this barrier.
    meet = threading.Barrier(2, timeout=10)

    def then(data: memoryview) -> int:
        meet.wait()
        return len(data)

    parts = [os.urandom(WRITE_CHUNK + 100) for _ in range(4)]
    path = tmp_path / "f"

    async def main() -> list[int | None]:
        with concurrent.futures.ThreadPoolExecutor(4) as executor:
            f = await LocalFile.open(path, os.O_WRONLY | os.O_CREAT, executor)
            try:
                return await asyncio.gather(
                    *(f.write(i * len(p), p, then) for i, p in enumerate(parts))
                )
            finally:
                await f.close()

    assert asyncio.run(main()) == [len(p) for p in parts]
    assert most == 1
    assert path.read_bytes() == b"".join(parts)


# -- the chunked writes in one C call (decision 0052) --------------------------------------

_STRACED = """
import os, sys
from synxfer.engine import _os
from synxfer.engine.localfile import pwrite_all
data = bytearray(os.urandom({size}))
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)
pwrite_all(fd, data, 7)
os.close(fd)
assert open(sys.argv[1], "rb").read()[7:] == data
print("native" if _os._native and _os._native[0] is not None else "python")
"""


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_the_c_loop_hands_the_kernel_at_most_one_chunk_per_call(tmp_path: Path) -> None:
    """A writable buffer goes to ``_pwrite.c`` (one C call): every byte lands
    at the offset, and each ``pwrite`` the kernel sees is at most
    ``WRITE_CHUNK`` (decision 0012's rule, seen by ``strace``)."""
    size = 1024 * 1024 + 3
    script = tmp_path / "w.py"
    script.write_text(_STRACED.format(size=size))
    trace = tmp_path / "trace"
    # Built first, untraced: a build inside the trace runs the compiler and
    # linker beside the writes, and strace splits a call two processes
    # make at once into "unfinished" and "resumed" lines (seen under load).
    subprocess.run([sys.executable, str(script), str(tmp_path / "warm")], timeout=120, check=True)
    strace = ["strace", "-f", "-e", "trace=pwrite64", "-o", str(trace)]
    out = subprocess.run(
        [*strace, sys.executable, str(script), str(tmp_path / "f")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    if out.stdout.split() != ["native"]:
        pytest.skip("no C compiler here: the Python loop wrote (tested above)")
    calls = re.findall(r"pwrite64\(\d+, .*, (\d+), \d+\) = \d+", trace.read_text())
    sizes = [int(n) for n in calls]
    assert sum(sizes) == size
    assert max(sizes) == WRITE_CHUNK


def test_without_a_compiler_the_python_loop_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No C compiler (``CC`` names none, empty caches): ``chunked_pwrite``
    says so and ``pwrite_all`` writes every byte itself; a read-only buffer
    never goes to C."""
    from synxfer.engine import _os

    monkeypatch.setattr(_os, "_native", [])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    data = bytearray(os.urandom(3 * WRITE_CHUNK + 5))
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        assert not _os.chunked_pwrite(fd, memoryview(data), 0, WRITE_CHUNK)
        assert _os._native == [None]
        pwrite_all(fd, data, 0)
        assert not _os.chunked_pwrite(fd, memoryview(bytes(data)), 0, WRITE_CHUNK)
    finally:
        os.close(fd)
    assert (tmp_path / "f").read_bytes() == data


def test_a_failed_write_in_c_is_the_oserror_pwrite_raises(tmp_path: Path) -> None:
    from synxfer.engine import _os

    path = tmp_path / "ro"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(OSError, match="Bad file descriptor") as raised:
            pwrite_all(fd, bytearray(2 * WRITE_CHUNK), 0)
    finally:
        os.close(fd)
    assert raised.value.errno == errno.EBADF
    if _os._native and _os._native[0] is None:
        pytest.skip("no C compiler here: the Python loop raised")
