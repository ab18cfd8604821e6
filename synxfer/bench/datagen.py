"""Seeded random benchmark data, generated once per row geometry and reused.

Files live under ``<work_dir>/data/<files>x<size>B/``; the directory is
reused when it holds exactly the expected files with the expected sizes.
Content is incompressible pseudo-random bytes from :class:`random.Random`
seeded with ``(seed, files, size, index)``, so every run (and every
machine) benchmarks the same bytes.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

from .._config import MiB
from .scenarios import Row

__all__ = ["CHUNK", "ensure_row_data", "expected_files", "row_data_dir"]

#: Bytes written per write call.
CHUNK = MiB
#: Files per subdirectory for rows with many files.
FANOUT = 1000


def row_data_dir(work_dir: Path, row: Row) -> Path:
    """Where the files of ``row`` live (keyed by geometry, not by name)."""
    return work_dir / "data" / f"{row.files}x{row.size}B"


def expected_files(row: Row) -> list[str]:
    """Relative paths of the row's files (``/``-separated)."""
    names = [f"f{i:06d}.bin" for i in range(row.files)]
    if row.files <= FANOUT:
        return names
    return [f"d{i // FANOUT:04d}/{name}" for i, name in enumerate(names)]


def _matches(root: Path, row: Row) -> bool:
    want = expected_files(row)
    found: dict[str, int] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            full = Path(dirpath) / name
            found[full.relative_to(root).as_posix()] = full.stat().st_size
    return len(found) == len(want) and all(found.get(rel) == row.size for rel in want)


def _write(path: Path, size: int, rng: random.Random) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        left = size
        while left > 0:
            n = min(CHUNK, left)
            f.write(rng.randbytes(n))
            left -= n
    tmp.replace(path)


def ensure_row_data(work_dir: Path, row: Row, *, seed: int = 0) -> tuple[Path, bool]:
    """Make sure the files of ``row`` exist; returns ``(directory, generated)``.

    ``generated`` is False when matching data was already there.
    """
    root = row_data_dir(work_dir, row)
    if root.is_dir() and _matches(root, row):
        return root, False
    if root.exists():
        shutil.rmtree(root)
    for index, rel in enumerate(expected_files(row)):
        rng = random.Random(f"{seed}:{row.files}:{row.size}:{index}")
        _write(root / rel, row.size, rng)
    return root, True
