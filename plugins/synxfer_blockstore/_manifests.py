"""``synxfer-blockd``'s manifests, in SQLite.

``DATA/manifests.sqlite3`` (WAL, ``synchronous=FULL``); one worker thread
owns the connection. Per object the site keeps the manifest with the
greatest ``(stamp, writer)``: last writer wins, deletes are tombstones. A
sequence number per change feeds the peers' anti-entropy sync.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from .protocol import Manifest

__all__ = ["ManifestDB"]

T = TypeVar("T")


class ManifestDB:
    """Manifests in SQLite; one worker thread owns the connection (use :meth:`call`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="blockd-db")

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the database thread."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def close(self) -> None:
        """Close the connection (on its thread) and stop the thread."""

        def _close() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        with contextlib.suppress(RuntimeError):
            self._executor.submit(_close).result()
        self._executor.shutdown(wait=True)

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.executescript(
                """
                CREATE TABLE IF NOT EXISTS manifests (
                    bucket TEXT NOT NULL, key TEXT NOT NULL,
                    stamp INTEGER NOT NULL, writer TEXT NOT NULL,
                    deleted INTEGER NOT NULL, seq INTEGER NOT NULL, doc TEXT NOT NULL,
                    PRIMARY KEY (bucket, key)
                );
                CREATE INDEX IF NOT EXISTS manifests_seq ON manifests (seq);
                CREATE TABLE IF NOT EXISTS peers (name TEXT PRIMARY KEY, cursor INTEGER NOT NULL);
                """
            )
            self._conn = conn
        return self._conn

    def apply(self, items: list[tuple[Manifest, str]]) -> list[bool]:
        """Store each manifest unless the site has a newer version; True where stored."""
        db = self._db()
        applied: list[bool] = []
        db.execute("BEGIN IMMEDIATE")
        try:
            (seq,) = db.execute("SELECT coalesce(max(seq), 0) FROM manifests").fetchone()
            for m, raw in items:
                row = db.execute(
                    "SELECT stamp, writer FROM manifests WHERE bucket = ? AND key = ?",
                    (m.bucket, m.key),
                ).fetchone()
                if row is not None and (row[0], row[1]) >= m.version:
                    applied.append(False)
                    continue
                seq += 1
                db.execute(
                    "INSERT OR REPLACE INTO manifests "
                    "(bucket, key, stamp, writer, deleted, seq, doc) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (m.bucket, m.key, m.stamp, m.writer, int(m.deleted), seq, raw),
                )
                applied.append(True)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return applied

    def get(self, bucket: str, key: str) -> str | None:
        """The stored document (tombstones included), or None."""
        row = (
            self._db()
            .execute("SELECT doc FROM manifests WHERE bucket = ? AND key = ?", (bucket, key))
            .fetchone()
        )
        return None if row is None else str(row[0])

    def list_live(
        self, bucket: str, prefix: str, after: str | None, limit: int
    ) -> tuple[list[str], str | None]:
        """Live documents with keys starting with ``prefix`` after ``after``, and a cursor.

        At most ``10 * limit`` rows are scanned per call, so a long run of
        tombstones gives a short (even empty) page with a cursor, never a
        long stall.
        """
        if after is not None and after >= prefix:
            sql, bound = "key > ?", after
        else:
            sql, bound = "key >= ?", prefix
        cur = self._db().execute(
            f"SELECT key, deleted, doc FROM manifests WHERE bucket = ? AND {sql} ORDER BY key",
            (bucket, bound),
        )
        items: list[str] = []
        scanned = 0
        try:
            for key, deleted, doc in cur:
                if not key.startswith(prefix):
                    return items, None
                scanned += 1
                if not deleted:
                    items.append(doc)
                if len(items) >= limit or scanned >= 10 * limit:
                    nxt = cur.fetchone()
                    if nxt is None or not nxt[0].startswith(prefix):
                        return items, None
                    return items, str(key)
            return items, None
        finally:
            cur.close()

    def changes(self, after: int, limit: int) -> tuple[list[str], int, bool]:
        """Documents changed after sequence number ``after``: (docs, last seq, more?)."""
        rows = (
            self._db()
            .execute(
                "SELECT seq, doc FROM manifests WHERE seq > ? ORDER BY seq LIMIT ?",
                (after, limit + 1),
            )
            .fetchall()
        )
        more = len(rows) > limit
        rows = rows[:limit]
        last = rows[-1][0] if rows else after
        return [str(r[1]) for r in rows], int(last), more

    def get_cursor(self, peer: str) -> int:
        """How far this site has read ``peer``'s change feed."""
        row = self._db().execute("SELECT cursor FROM peers WHERE name = ?", (peer,)).fetchone()
        return 0 if row is None else int(row[0])

    def set_cursor(self, peer: str, cursor: int) -> None:
        """Remember how far ``peer``'s change feed has been read."""
        self._db().execute(
            "INSERT OR REPLACE INTO peers (name, cursor) VALUES (?, ?)", (peer, cursor)
        )

    def live_blocks(self) -> set[str]:
        """Ids of every block a live manifest references (the GC's mark phase)."""
        live: set[str] = set()
        for (doc,) in self._db().execute("SELECT doc FROM manifests WHERE deleted = 0"):
            with contextlib.suppress(ValueError, TypeError, IndexError):
                live.update(b[0] for b in json.loads(doc)["blocks"])
        return live
