"""The resume journal: what a multipart upload or a ranged download has done.

A small SQLite database (standard library) under the state directory. For an
upload in progress it records the source file's identity (path, device,
inode, size, mtime), the multipart upload id, the part size, the checksum
the upload was created to carry when one was chosen (its algorithm and
type), and every part the server acknowledged with its ETag and the checksum completing the upload
needs (some servers' part listings omit it); for a download in progress, the
object's ETag and size, the part size, the temp file and each part written
with its MD5. After a crash, kill -9 or Ctrl-C the same command resumes from
there: the upload is reconciled with the server (ListParts) and only the
missing parts are sent; the download rewrites only the missing ranges.

Entries are removed when a transfer completes or is given up; an upload's
only once the upload is gone from the server (completed, aborted, unknown to
it). An entry whose abort was refused (credentials revoked mid-run) stays,
so the next run resumes that upload instead of orphaning it and sending it
all again. SQLite runs in WAL mode with ``synchronous=NORMAL``: every
acknowledged write survives the death of the process (not necessarily of
the machine). :class:`Journal`'s calls block; the engine uses
:class:`ResumeJournal`, which makes them from one
dedicated thread, never the event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, NamedTuple, TypeVar

__all__ = ["DownloadEntry", "Journal", "ResumeJournal", "UploadEntry", "default_state_dir"]

log = logging.getLogger("synxfer")

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS uploads (
    dest TEXT PRIMARY KEY, src TEXT NOT NULL, dev INTEGER, ino INTEGER, size INTEGER,
    mtime_ns INTEGER, upload_id TEXT NOT NULL, part_size INTEGER, started REAL,
    codec TEXT NOT NULL DEFAULT '', checksum TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS upload_parts (
    dest TEXT NOT NULL, upload_id TEXT NOT NULL, number INTEGER NOT NULL,
    etag TEXT NOT NULL, size INTEGER NOT NULL, checksum TEXT,
    PRIMARY KEY (dest, upload_id, number)
);
CREATE TABLE IF NOT EXISTS downloads (
    dest TEXT PRIMARY KEY, src TEXT NOT NULL, etag TEXT, size INTEGER, part_size INTEGER,
    temp TEXT NOT NULL, started REAL
);
CREATE TABLE IF NOT EXISTS download_parts (
    dest TEXT NOT NULL, temp TEXT NOT NULL, number INTEGER NOT NULL, md5 BLOB, crc32c INTEGER,
    PRIMARY KEY (dest, temp, number)
);
"""
#: Bumped when the schema changes; an older journal is dropped (it is a cache:
#: the cost is one restart of the transfers it described).
_VERSION = 5


#: The journal's file in its state directory.
JOURNAL_NAME: Final = "journal.sqlite3"


def default_state_dir() -> Path:
    """``$XDG_CACHE_HOME/synxfer``, else ``~/.cache/synxfer``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "synxfer"


class UploadEntry(NamedTuple):
    dest: str
    src: str
    identity: tuple[int, int, int, int]  # dev, ino, size, mtime_ns
    upload_id: str
    part_size: int
    parts: dict[int, tuple[str, int, str | None]]  # number -> (etag, size, checksum)
    # The encoding of the bytes the parts hold ("": the file's own bytes;
    # "zstd-3": its zstd stream at level 3): an upload resumes only as it began.
    codec: str = ""
    # The checksum the upload was created to carry, in the backend's words
    # (MultipartUpload.checksum: "SHA256/COMPOSITE"); "": the backend's own.
    checksum: str = ""


class DownloadEntry(NamedTuple):
    dest: str
    src: str
    etag: str | None
    size: int
    part_size: int
    temp: str
    parts: dict[int, tuple[bytes | None, int | None]]
    # number -> (md5, crc32c)


class Journal:
    """The journal at ``directory/journal.sqlite3``; methods block (use one thread)."""

    def __init__(self, directory: Path) -> None:
        import sqlite3  # here, not at import: a run without multipart files never needs it

        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / JOURNAL_NAME
        self._db = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=30
        )
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            if self._db.execute("PRAGMA user_version").fetchone()[0] != _VERSION:
                for table in ("uploads", "upload_parts", "downloads", "download_parts"):
                    self._db.execute(f"DROP TABLE IF EXISTS {table}")
                self._db.execute(f"PRAGMA user_version = {_VERSION}")
            self._db.executescript(_SCHEMA)

    def __repr__(self) -> str:
        return f"<Journal {self.path}>"

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- uploads ---------------------------------------------------------------

    def upload_get(self, dest: str) -> UploadEntry | None:
        with self._lock:
            row = self._db.execute(
                "SELECT src, dev, ino, size, mtime_ns, upload_id, part_size, codec, checksum "
                "FROM uploads "
                "WHERE dest = ?",
                (dest,),
            ).fetchone()
            if row is None:
                return None
            parts = self._db.execute(
                "SELECT number, etag, size, checksum FROM upload_parts "
                "WHERE dest = ? AND upload_id = ?",
                (dest, row[5]),
            ).fetchall()
        return UploadEntry(
            dest, row[0], (row[1], row[2], row[3], row[4]), row[5], row[6],
            {n: (etag, size, checksum) for n, etag, size, checksum in parts}, row[7], row[8],
        )  # fmt: skip

    def upload_start(
        self,
        dest: str,
        src: str,
        identity: tuple[int, int, int, int],
        upload_id: str,
        part_size: int,
        codec: str = "",
        checksum: str = "",
    ) -> None:
        with self._lock, self._db:
            self._db.execute("BEGIN")
            self._db.execute("DELETE FROM upload_parts WHERE dest = ?", (dest,))
            self._db.execute(
                "INSERT OR REPLACE INTO uploads VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (dest, src, *identity, upload_id, part_size, time.time(), codec, checksum),
            )

    def upload_part(
        self,
        dest: str,
        upload_id: str,
        number: int,
        etag: str,
        size: int,
        checksum: str | None = None,
    ) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO upload_parts VALUES (?, ?, ?, ?, ?, ?)",
                (dest, upload_id, number, etag, size, checksum),
            )

    def upload_done(self, dest: str) -> None:
        with self._lock, self._db:
            self._db.execute("BEGIN")
            self._db.execute("DELETE FROM upload_parts WHERE dest = ?", (dest,))
            self._db.execute("DELETE FROM uploads WHERE dest = ?", (dest,))

    def uploads_under(self, prefix: str) -> list[tuple[str, str]]:
        """``(dest, upload_id)`` of every upload in progress whose URL starts with ``prefix``."""
        with self._lock:
            rows = self._db.execute(
                "SELECT dest, upload_id FROM uploads WHERE substr(dest, 1, ?) = ?",
                (len(prefix), prefix),
            ).fetchall()
        return [(d, u) for d, u in rows]

    # -- downloads -------------------------------------------------------------

    def download_get(self, dest: str) -> DownloadEntry | None:
        with self._lock:
            row = self._db.execute(
                "SELECT src, etag, size, part_size, temp FROM downloads WHERE dest = ?", (dest,)
            ).fetchone()
            if row is None:
                return None
            parts = self._db.execute(
                "SELECT number, md5, crc32c FROM download_parts WHERE dest = ? AND temp = ?",
                (dest, row[4]),
            ).fetchall()
        src, etag, size, part_size, temp = row
        return DownloadEntry(
            dest, src, etag, size, part_size, temp, {n: (md5, crc) for n, md5, crc in parts}
        )

    def download_start(
        self, dest: str, src: str, etag: str | None, size: int, part_size: int, temp: str
    ) -> None:
        with self._lock, self._db:
            self._db.execute("BEGIN")
            self._db.execute("DELETE FROM download_parts WHERE dest = ?", (dest,))
            self._db.execute(
                "INSERT OR REPLACE INTO downloads VALUES (?, ?, ?, ?, ?, ?, ?)",
                (dest, src, etag, size, part_size, temp, time.time()),
            )

    def download_parts(
        self, dest: str, temp: str, parts: Sequence[tuple[int, bytes | None, int | None]]
    ) -> None:
        """Record ``parts`` (``(number, md5, crc32c)`` each) as written, in
        one transaction: a fetch of several ranges is one commit."""
        with self._lock, self._db:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT OR REPLACE INTO download_parts VALUES (?, ?, ?, ?, ?)",
                [(dest, temp, number, md5, crc32c) for number, md5, crc32c in parts],
            )

    def download_done(self, dest: str) -> None:
        with self._lock, self._db:
            self._db.execute("BEGIN")
            self._db.execute("DELETE FROM download_parts WHERE dest = ?", (dest,))
            self._db.execute("DELETE FROM downloads WHERE dest = ?", (dest,))


class ResumeJournal:
    """The journal as the engine uses it: one async method per operation.

    Each call runs on the journal's own thread; the database is opened there
    on first use, under ``state_dir`` (default :func:`default_state_dir`).
    When resume is off, or once the journal proved unusable, calls do nothing
    and lookups find nothing. A journal that cannot be opened or written
    (read-only cache dir, full disk) turns resume off for this client with a
    warning; transfers go on.
    """

    def __init__(self, enabled: bool, state_dir: str | None = None) -> None:
        self._enabled = enabled
        self._state_dir = state_dir
        self._thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="synxfer-journal"
        )
        self._journal: Journal | None = None

    def __repr__(self) -> str:
        return f"<ResumeJournal {'on' if self._enabled else 'off'}>"

    @property
    def enabled(self) -> bool:
        """True while transfers keep a journal (and so survive interruption)."""
        return self._enabled

    def close(self) -> None:
        if self._journal is not None:
            self._thread.submit(self._journal.close).result()
        self._thread.shutdown(wait=True)

    async def _run(self, call: Callable[[Journal], T], off: T, *, lookup: bool = False) -> T:
        """``call(journal)`` on the journal's thread; ``off`` when resume is off.

        A ``lookup`` finds nothing (``off``) without creating the journal
        when there is none yet: a sync of small files (its look for abandoned
        uploads) then neither loads sqlite3 nor writes a database."""
        if not self._enabled:
            return off
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._thread, self._call, call, off, lookup)
        except Exception as exc:
            import sqlite3  # here: a run that never opened the journal never needs it

            if not isinstance(exc, sqlite3.Error | OSError):
                raise
            log.warning("the resume journal is unusable (%s); continuing without resume", exc)
            self._enabled = False
            return off

    def _call(self, call: Callable[[Journal], T], off: T, lookup: bool) -> T:
        if self._journal is None:
            state = Path(self._state_dir) if self._state_dir else default_state_dir()
            if lookup and not (state / JOURNAL_NAME).exists():
                return off  # nothing was ever journaled here
            self._journal = Journal(state)
        return call(self._journal)

    # -- uploads ---------------------------------------------------------------

    async def upload_get(self, dest: str) -> UploadEntry | None:
        return await self._run(lambda j: j.upload_get(dest), None, lookup=True)

    async def upload_start(
        self,
        dest: str,
        src: str,
        identity: tuple[int, int, int, int],
        upload_id: str,
        part_size: int,
        codec: str = "",
        checksum: str = "",
    ) -> None:
        await self._run(
            lambda j: j.upload_start(dest, src, identity, upload_id, part_size, codec, checksum),
            None,
        )

    async def upload_part(
        self,
        dest: str,
        upload_id: str,
        number: int,
        etag: str,
        size: int,
        checksum: str | None = None,
    ) -> None:
        await self._run(
            lambda j: j.upload_part(dest, upload_id, number, etag, size, checksum), None
        )

    async def upload_done(self, dest: str) -> None:
        await self._run(lambda j: j.upload_done(dest), None)

    async def uploads_under(self, prefix: str) -> list[tuple[str, str]]:
        """``(dest, upload_id)`` of every journaled upload under ``prefix``."""
        return await self._run(lambda j: j.uploads_under(prefix), [], lookup=True)

    # -- downloads -------------------------------------------------------------

    async def download_get(self, dest: str) -> DownloadEntry | None:
        return await self._run(lambda j: j.download_get(dest), None, lookup=True)

    async def download_start(
        self, dest: str, src: str, etag: str | None, size: int, part_size: int, temp: str
    ) -> None:
        await self._run(lambda j: j.download_start(dest, src, etag, size, part_size, temp), None)

    async def download_parts(
        self, dest: str, temp: str, parts: Sequence[tuple[int, bytes | None, int | None]]
    ) -> None:
        await self._run(lambda j: j.download_parts(dest, temp, parts), None)

    async def download_done(self, dest: str) -> None:
        await self._run(lambda j: j.download_done(dest), None)
