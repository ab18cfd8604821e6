"""Positional writes: all bytes land, in calls of at most ``WRITE_CHUNK`` bytes.

The chunking is a speed rule (docs/decisions/0012-write-chunks.md): a single
``pwrite`` of a whole 8 MiB part made the page cache allocate large folios,
which cost several times the kernel time of 256 KiB writes on this kind of
machine. The bytes must land the same either way.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from synxfer.engine import localfile
from synxfer.engine.localfile import WRITE_CHUNK, pwrite_all


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
