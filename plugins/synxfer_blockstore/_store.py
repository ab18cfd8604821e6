"""``synxfer-blockd``'s block files: content-addressed, verified, written atomically.

``DATA/blocks/ab/cd/<sha256>``. A block is verified against its id before it
is stored, written to ``DATA/tmp/``, fsynced (unless told not to) and
renamed into place, so a block file is always whole and a restart loses
nothing that was acknowledged. Every method blocks: the server calls them in
worker threads.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from .protocol import BLOCK_ID, block_id

__all__ = ["BlockStore", "DigestMismatch"]


class DigestMismatch(Exception):
    """A block's bytes do not hash to the id it was sent to."""


class BlockStore:
    """Content-addressed block files under ``root``. Every method blocks."""

    def __init__(self, root: Path, *, fsync: bool = True) -> None:
        self.root = root
        self.blocks = root / "blocks"
        self.tmp = root / "tmp"
        self.fsync = fsync
        self.blocks.mkdir(parents=True, exist_ok=True)
        self.tmp.mkdir(parents=True, exist_ok=True)
        for leftover in self.tmp.iterdir():  # writes cut short by a crash
            with contextlib.suppress(OSError):
                leftover.unlink()

    def path(self, bid: str) -> Path:
        """Where block ``bid`` lives; ValueError unless ``bid`` is a block id."""
        if not BLOCK_ID.match(bid):
            raise ValueError(f"invalid block id {bid!r}")
        return self.blocks / bid[:2] / bid[2:4] / bid

    def put(self, bid: str, data: bytes) -> bool:
        """Verify and store a block atomically; False if it was already there."""
        path = self.path(bid)
        if block_id(data) != bid:
            raise DigestMismatch(bid)
        if path.is_file():
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.tmp, prefix=bid[:16] + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                if self.fsync:
                    f.flush()
                    os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        if self.fsync:
            _fsync_dir(path.parent)
        return True

    def size(self, bid: str) -> int | None:
        """Size of a block, or None if absent."""
        try:
            return self.path(bid).stat().st_size
        except FileNotFoundError:
            return None

    def read(self, bid: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of a block (FileNotFoundError if absent)."""
        with open(self.path(bid), "rb") as f:
            f.seek(start)
            return f.read(end - start)

    def delete(self, bid: str) -> bool:
        """Remove a block; False if it was not there."""
        try:
            self.path(bid).unlink()
        except FileNotFoundError:
            return False
        return True

    def iter_ids(self) -> Iterator[str]:
        """Every stored block id, in order."""
        for d1 in sorted(p.name for p in self.blocks.iterdir() if p.is_dir()):
            for d2 in sorted(p.name for p in (self.blocks / d1).iterdir() if p.is_dir()):
                for name in sorted(os.listdir(self.blocks / d1 / d2)):
                    if BLOCK_ID.match(name):
                        yield name

    def list_blocks(self, after: str, limit: int) -> tuple[list[tuple[str, int]], str | None]:
        """Up to ``limit`` ``(id, size)`` after ``after``, and the next cursor."""
        out: list[tuple[str, int]] = []
        for bid in self.iter_ids():
            if bid <= after:
                continue
            size = self.size(bid)
            if size is None:
                continue
            if len(out) == limit:
                return out, out[-1][0]
            out.append((bid, size))
        return out, None

    def collect(self, live: set[str], grace: float) -> tuple[int, int]:
        """Delete unreferenced blocks older than ``grace`` seconds: (deleted, kept)."""
        deleted = kept = 0
        horizon = time.time() - grace
        for bid in list(self.iter_ids()):
            if bid in live:
                kept += 1
                continue
            try:
                if self.path(bid).stat().st_mtime > horizon:
                    kept += 1
                    continue
            except FileNotFoundError:
                continue
            if self.delete(bid):
                deleted += 1
        return deleted, kept


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
