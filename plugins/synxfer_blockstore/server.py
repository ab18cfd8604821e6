"""``synxfer-blockd``: one site of the replicated block store.

One process serves one site over HTTP (aiohttp) on 127.0.0.1. It stores:

* **Blocks**, content-addressed: ``DATA/blocks/ab/cd/<sha256>``. A PUT is
  read whole (at most ``--max-block-size`` bytes), hashed in a worker
  thread and refused (400 ``BadDigest``) unless its SHA-256 is the id it
  was sent to; it is written to ``DATA/tmp/``, fsynced (unless
  ``--no-fsync``), and renamed into place, so a block file is always whole
  and a restart loses nothing that was acknowledged. Leftover temp files are
  removed at start. GETs serve one ``Range`` at a time.
* **Manifests** (object name -> size, block ids, replica sites, metadata) in
  SQLite (``DATA/manifests.sqlite3``, WAL, ``synchronous=FULL``), one
  worker thread owns the connection. Each site keeps, per object, the
  manifest with the greatest ``(stamp, writer)``: last writer wins, deletes
  are tombstones. Clients write a manifest to every site; sites also pull
  each other's change feed (``--peers``, every ``--sync-interval`` seconds
  and at start), so a site that was down or unreachable converges, and any
  site can serve a listing.

Security: every request needs ``Authorization: Bearer <token>`` (the token
comes from ``--token-file`` or ``$SYNXFER_BLOCKD_TOKEN`` and is never
logged); block ids must be 64 lowercase hex digits, so no request names a
path; request bodies are bounded; the server binds loopback unless
``--allow-remote`` is given (and then it should sit behind TLS).

Emulating a busy site: ``--serve-rate 16MiB`` paces block data leaving the
site through one shared timeline, as a NIC or disk of that capacity would;
responses carry the site's load (``X-Blockd-Active``, ``X-Blockd-Rate``) and
so does ``/v1/ping``, which load-aware clients use.

Garbage: deleting an object removes (tombstones) its manifest; its blocks
stay until ``POST /v1/gc?grace=SECONDS`` (or ``--gc-interval``) deletes
every block no live manifest references and that is older than the grace
period (a block of an upload in progress is not referenced yet).

``synxfer-blockd --port 0`` binds a free port and prints one JSON line on
stdout (``{"port": ..., "url": ..., "site": ...}``) once it is serving.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import hmac
import ipaddress
import json
import logging
import os
import signal
import sqlite3
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

import aiohttp
from aiohttp import web

from .protocol import (
    API,
    BLOCK_ID,
    HEADER_ACTIVE,
    HEADER_RATE,
    HEADER_SITE,
    MAX_BLOCK_SIZE,
    SITE_NAME,
    Manifest,
    MiB,
    block_id,
    check_bucket,
    check_key,
    parse_range,
    parse_size,
)

__all__ = [
    "TOKEN_ENV",
    "BlockStore",
    "Blockd",
    "ManifestDB",
    "ServerConfig",
    "main",
    "make_app",
    "serve",
]

log = logging.getLogger("synxfer_blockstore.server")

#: Environment variable holding the bearer token when no ``--token-file`` is given.
TOKEN_ENV = "SYNXFER_BLOCKD_TOKEN"

_CHUNK = 64 * 1024
_LIST_LIMIT = 1000
_SYNC_LIMIT = 500
_EMPTY: Mapping[str, str] = MappingProxyType({})

T = TypeVar("T")


class DigestMismatch(Exception):
    """A block's bytes do not hash to the id it was sent to."""


@dataclass(frozen=True)
class ServerConfig:
    """Settings of one ``synxfer-blockd`` site. The token never appears in ``repr``."""

    data_dir: Path
    site: str
    token: str = field(repr=False)
    max_block_size: int = MAX_BLOCK_SIZE
    max_manifest_bytes: int = 48 * MiB
    fsync: bool = True
    serve_rate: float | None = None
    peers: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    sync_interval: float = 30.0
    gc_interval: float | None = None
    gc_grace: float = 3600.0
    max_inflight: int = 64

    def __post_init__(self) -> None:
        if not SITE_NAME.match(self.site):
            raise ValueError(f"invalid site name {self.site!r}")
        if not self.token:
            raise ValueError("a bearer token is required")
        if self.serve_rate is not None and self.serve_rate <= 0:
            raise ValueError("serve_rate must be > 0 bytes per second")


# -- storage (blocking; called from worker threads) ----------------------------


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


# -- the service ---------------------------------------------------------------


class Pacer:
    """One shared transmission timeline: data leaves at ``rate`` bytes per second.

    Each chunk reserves the next ``len/rate`` seconds of the timeline and
    waits until its slot has passed, so concurrent responses share the
    capacity (interleaved chunk by chunk) and a queue builds up under load.
    """

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._free_at = 0.0

    async def take(self, nbytes: int) -> None:
        """Wait until ``nbytes`` may leave."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        self._free_at = max(now, self._free_at) + nbytes / self.rate
        await asyncio.sleep(self._free_at - now)


class Blockd:
    """The state of one site: its config, stores and load counters."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self.store = BlockStore(config.data_dir, fsync=config.fsync)
        self.db = ManifestDB(config.data_dir / "manifests.sqlite3")
        self.pacer = Pacer(config.serve_rate) if config.serve_rate else None
        self.slots = asyncio.Semaphore(config.max_inflight)
        self.active = 0  # block GETs being served
        self.pending_bytes = 0  # their bytes not yet sent
        self._token = config.token.encode("utf-8")

    def authorized(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header carries this site's token."""
        scheme, _, token = (header or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            token.strip().encode("utf-8"), self._token
        )

    def load_headers(self) -> dict[str, str]:
        """Headers telling a client how busy this site is."""
        return {
            HEADER_SITE: self.config.site,
            HEADER_ACTIVE: str(self.active),
            HEADER_RATE: str(int(self.config.serve_rate or 0)),
        }

    async def gc(self, grace: float) -> tuple[int, int]:
        """Mark (live manifests) and sweep (unreferenced blocks older than ``grace``)."""
        live = await self.db.call(self.db.live_blocks)
        return await asyncio.to_thread(self.store.collect, live, grace)

    async def sync_once(self, session: aiohttp.ClientSession) -> None:
        """Pull every peer's change feed once; errors are logged and retried later."""
        for name, url in self.config.peers.items():
            try:
                await self._sync_peer(session, name, url.rstrip("/"))
            except (aiohttp.ClientError, TimeoutError, ValueError, KeyError) as exc:
                log.warning("site %s: sync from peer %s failed: %s", self.config.site, name, exc)

    async def _sync_peer(self, session: aiohttp.ClientSession, name: str, url: str) -> None:
        cursor = await self.db.call(self.db.get_cursor, name)
        for _ in range(1000):  # bounded per round; the next round continues
            async with session.get(
                f"{url}{API}/sync", params={"after": str(cursor), "limit": str(_SYNC_LIMIT)}
            ) as resp:
                if resp.status != 200:
                    raise ValueError(f"HTTP {resp.status}")
                page = await resp.json()
            items = []
            for raw in page["changes"]:
                doc = json.loads(raw)
                items.append((Manifest.from_json(doc), raw))
            if items:
                applied = await self.db.call(self.db.apply, items)
                if any(applied):
                    log.info(
                        "site %s: %d manifest(s) from peer %s",
                        self.config.site,
                        sum(applied),
                        name,
                    )
            cursor = int(page["last"])
            await self.db.call(self.db.set_cursor, name, cursor)
            if not page["more"]:
                return


BLOCKD = web.AppKey("blockd", Blockd)


def _error(status: int, code: str, message: str, **headers: str) -> web.Response:
    return web.json_response({"error": code, "message": message}, status=status, headers=headers)


@web.middleware
async def _middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    state = request.app[BLOCKD]
    if not state.authorized(request.headers.get("Authorization")):
        challenge = {"WWW-Authenticate": "Bearer"}
        return _error(401, "Unauthorized", "a valid bearer token is required", **challenge)
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("site %s: %s %s failed", state.config.site, request.method, request.path)
        return _error(500, "InternalError", "internal error; see the server log")


def _bid(request: web.Request) -> str | web.Response:
    bid = request.match_info["id"]
    if not BLOCK_ID.match(bid):
        return _error(400, "InvalidBlockId", "a block id is 64 lowercase hex digits (SHA-256)")
    return bid


def _names(request: web.Request, *, key: bool = True) -> tuple[str, str] | web.Response:
    try:
        bucket = check_bucket(request.query.get("bucket", ""))
        name = check_key(request.query.get("key", "")) if key else ""
    except ValueError as exc:
        return _error(400, "InvalidName", str(exc))
    return bucket, name


def _limit(request: web.Request, default: int) -> int:
    try:
        return max(1, min(int(request.query.get("limit", default)), default))
    except ValueError:
        return default


async def _ping(request: web.Request) -> web.Response:
    state = request.app[BLOCKD]
    return web.json_response(
        {
            "site": state.config.site,
            "active": state.active,
            "pending_bytes": state.pending_bytes,
            "rate": state.config.serve_rate or 0,
            "time": time.time(),
        },
        headers=state.load_headers(),
    )


async def _put_block(request: web.Request) -> web.Response:
    state = request.app[BLOCKD]
    bid = _bid(request)
    if isinstance(bid, web.Response):
        return bid
    length = request.content_length
    if length is None:
        return _error(411, "LengthRequired", "a block PUT needs Content-Length")
    if length > state.config.max_block_size:
        return _error(
            413, "BlockTooLarge", f"blocks are at most {state.config.max_block_size} bytes"
        )
    if length == 0:
        return _error(400, "EmptyBlock", "blocks are not empty")
    async with state.slots:
        data = await request.read()
        if len(data) != length:
            return _error(400, "IncompleteBody", "the body is shorter than Content-Length")
        try:
            created = await asyncio.to_thread(state.store.put, bid, data)
        except DigestMismatch:
            return _error(400, "BadDigest", "the block's SHA-256 is not its id; nothing stored")
    return web.json_response(
        {"id": bid, "size": length, "created": created},
        status=201 if created else 200,
        headers=state.load_headers(),
    )


async def _get_block(request: web.Request) -> web.StreamResponse:
    state = request.app[BLOCKD]
    bid = _bid(request)
    if isinstance(bid, web.Response):
        return bid
    size = await asyncio.to_thread(state.store.size, bid)
    if size is None:
        return _error(404, "NoSuchBlock", f"no block {bid}")
    if request.method == "HEAD":
        headers = {**state.load_headers(), "Accept-Ranges": "bytes", "Content-Length": str(size)}
        return web.Response(status=200, headers=headers)
    status, start, end = 200, 0, size
    content_range = None
    if "Range" in request.headers:
        try:
            rng = parse_range(request.headers["Range"], size)
        except IndexError:
            return _error(
                416, "InvalidRange", "range not satisfiable", **{"Content-Range": f"bytes */{size}"}
            )
        except ValueError as exc:
            return _error(400, "InvalidRange", str(exc))
        if rng is not None:
            status, (start, end) = 206, rng
            content_range = f"bytes {start}-{end - 1}/{size}"
    # Counted before the headers are made, so the load they report includes this request.
    unsent = end - start
    state.active += 1
    state.pending_bytes += unsent
    try:
        headers = {**state.load_headers(), "Accept-Ranges": "bytes"}
        if content_range:
            headers["Content-Range"] = content_range
        async with state.slots:
            try:
                data = await asyncio.to_thread(state.store.read, bid, start, end)
            except FileNotFoundError:
                return _error(404, "NoSuchBlock", f"no block {bid}")
            if state.pacer is None:
                return web.Response(body=data, status=status, headers=headers)
            resp = web.StreamResponse(status=status, headers=headers)
            resp.content_length = len(data)
            await resp.prepare(request)
            view = memoryview(data)
            for pos in range(0, len(data), _CHUNK):
                chunk = view[pos : pos + _CHUNK]
                await state.pacer.take(len(chunk))
                await resp.write(bytes(chunk))
                unsent -= len(chunk)
                state.pending_bytes -= len(chunk)
            await resp.write_eof()
            return resp
    finally:
        state.active -= 1
        state.pending_bytes -= unsent


async def _delete_block(request: web.Request) -> web.Response:
    state = request.app[BLOCKD]
    bid = _bid(request)
    if isinstance(bid, web.Response):
        return bid
    await asyncio.to_thread(state.store.delete, bid)
    return web.Response(status=204)


async def _list_blocks(request: web.Request) -> web.Response:
    state = request.app[BLOCKD]
    after = request.query.get("after", "")
    blocks, nxt = await asyncio.to_thread(
        state.store.list_blocks, after, _limit(request, _LIST_LIMIT)
    )
    return web.json_response({"blocks": [{"id": b, "size": s} for b, s in blocks], "next": nxt})


async def _put_manifest(request: web.Request) -> web.Response:
    state = request.app[BLOCKD]
    names = _names(request)
    if isinstance(names, web.Response):
        return names
    length = request.content_length
    if length is None:
        return _error(411, "LengthRequired", "a manifest PUT needs Content-Length")
    if length > state.config.max_manifest_bytes:
        return _error(413, "ManifestTooLarge", "manifest too large")
    raw = await request.read()
    try:
        doc = json.loads(raw)
        manifest = Manifest.from_json(doc)
    except ValueError as exc:
        return _error(400, "InvalidManifest", str(exc))
    if (manifest.bucket, manifest.key) != names:
        return _error(400, "InvalidManifest", "the manifest names another object")
    [applied] = await state.db.call(
        state.db.apply, [(manifest, json.dumps(doc, separators=(",", ":")))]
    )
    return web.json_response({"applied": applied}, headers=state.load_headers())


async def _get_manifest(request: web.Request) -> web.Response:
    state = request.app[BLOCKD]
    names = _names(request)
    if isinstance(names, web.Response):
        return names
    raw = await state.db.call(state.db.get, *names)
    if raw is None or json.loads(raw).get("deleted"):
        return _error(404, "NoSuchKey", f"no object {names[1]!r} in {names[0]!r}")
    return web.Response(text=raw, content_type="application/json", headers=state.load_headers())


async def _list(request: web.Request) -> web.Response:
    state = request.app[BLOCKD]
    names = _names(request, key=False)
    if isinstance(names, web.Response):
        return names
    prefix = request.query.get("prefix", "")
    after = request.query.get("after")
    docs, nxt = await state.db.call(
        state.db.list_live, names[0], prefix, after, _limit(request, _LIST_LIMIT)
    )
    items = []
    for raw in docs:
        doc = json.loads(raw)
        items.append(
            {
                name: doc.get(name)
                for name in ("key", "size", "etag", "mtime", "metadata", "content_type")
            }
        )
    return web.json_response({"items": items, "next": nxt}, headers=state.load_headers())


async def _sync(request: web.Request) -> web.Response:
    state = request.app[BLOCKD]
    try:
        after = int(request.query.get("after", "0"))
    except ValueError:
        return _error(400, "InvalidCursor", "after must be an integer")
    docs, last, more = await state.db.call(state.db.changes, after, _limit(request, _SYNC_LIMIT))
    return web.json_response({"changes": docs, "last": last, "more": more})


async def _gc(request: web.Request) -> web.Response:
    state = request.app[BLOCKD]
    try:
        grace = float(request.query.get("grace", state.config.gc_grace))
    except ValueError:
        return _error(400, "InvalidGrace", "grace must be a number of seconds")
    deleted, kept = await state.gc(max(grace, 0.0))
    return web.json_response({"deleted": deleted, "kept": kept})


async def _background(app: web.Application) -> AsyncIterator[None]:
    """Peer sync and GC loops, for the app's lifetime."""
    state = app[BLOCKD]
    tasks: list[asyncio.Task[None]] = []
    session: aiohttp.ClientSession | None = None
    if state.config.peers:
        session = aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {state.config.token}"},
            timeout=aiohttp.ClientTimeout(total=60, sock_connect=10),
        )

        async def sync_loop(session: aiohttp.ClientSession) -> None:
            while True:
                await state.sync_once(session)
                await asyncio.sleep(state.config.sync_interval)

        tasks.append(asyncio.create_task(sync_loop(session)))
    if state.config.gc_interval:
        interval = state.config.gc_interval

        async def gc_loop() -> None:
            while True:
                await asyncio.sleep(interval)
                deleted, kept = await state.gc(state.config.gc_grace)
                site = state.config.site
                log.info("site %s: gc deleted %d block(s), kept %d", site, deleted, kept)

        tasks.append(asyncio.create_task(gc_loop()))
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if session is not None:
            await session.close()
        await asyncio.to_thread(state.db.close)


def make_app(config: ServerConfig) -> web.Application:
    """The aiohttp application of one site."""
    app = web.Application(
        middlewares=[_middleware],
        client_max_size=max(config.max_block_size, config.max_manifest_bytes) + 1,
    )
    app[BLOCKD] = Blockd(config)
    app.router.add_get(f"{API}/ping", _ping)
    app.router.add_put(f"{API}/blocks/{{id}}", _put_block)
    app.router.add_get(f"{API}/blocks/{{id}}", _get_block)  # HEAD too
    app.router.add_delete(f"{API}/blocks/{{id}}", _delete_block)
    app.router.add_get(f"{API}/blocks", _list_blocks)
    app.router.add_put(f"{API}/manifest", _put_manifest)
    app.router.add_get(f"{API}/manifest", _get_manifest)
    app.router.add_get(f"{API}/list", _list)
    app.router.add_get(f"{API}/sync", _sync)
    app.router.add_post(f"{API}/gc", _gc)
    app.cleanup_ctx.append(_background)
    return app


@contextlib.asynccontextmanager
async def serve(
    config: ServerConfig, host: str = "127.0.0.1", port: int = 0, *, access_log: bool = False
) -> AsyncIterator[str]:
    """Run a site in this event loop; yields its base URL (``http://host:port``)."""
    app = make_app(config)
    runner = web.AppRunner(app, access_log=log if access_log else None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0][1]
        yield f"http://{host}:{bound}"
    finally:
        await runner.cleanup()


# -- command line --------------------------------------------------------------


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _peers(text: str) -> dict[str, str]:
    peers: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, url = item.partition("=")
        if not sep or not SITE_NAME.match(name) or not url.startswith(("http://", "https://")):
            raise argparse.ArgumentTypeError(
                f"invalid peer {item!r}: expected NAME=http://HOST:PORT"
            )
        peers[name] = url
    return peers


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``synxfer-blockd``."""
    p = argparse.ArgumentParser(
        prog="synxfer-blockd",
        description="One site of synxfer's replicated block store (blocks:// backend).",
    )
    p.add_argument("--data-dir", type=Path, required=True, help="where blocks and manifests live")
    p.add_argument("--site", required=True, help="this site's name, as in the cluster file")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port; 0 picks a free one (printed)")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow binding a non-loopback address (put TLS in front of it)",
    )
    p.add_argument(
        "--token-file", type=Path, help=f"file holding the bearer token (else ${TOKEN_ENV})"
    )
    p.add_argument("--peers", type=_peers, default={}, help="NAME=URL,... to pull manifests from")
    p.add_argument("--sync-interval", type=float, default=30.0, help="seconds between peer syncs")
    p.add_argument(
        "--max-block-size", type=_size, default=MAX_BLOCK_SIZE, help="largest block accepted"
    )
    p.add_argument("--no-fsync", action="store_true", help="do not fsync blocks (faster, unsafe)")
    p.add_argument(
        "--serve-rate",
        type=_size,
        default=None,
        help="emulate a site of this capacity: block data leaves at most at SIZE per second",
    )
    p.add_argument("--gc-interval", type=float, default=None, help="seconds between block GCs")
    p.add_argument(
        "--gc-grace", type=float, default=3600.0, help="GC keeps blocks younger than this (s)"
    )
    p.add_argument("--access-log", action="store_true", help="log every request (never the token)")
    p.add_argument("-v", "--verbose", action="store_true", help="log more")
    return p


def _read_token(args: argparse.Namespace) -> str:
    if args.token_file is not None:
        return str(args.token_file.read_text(encoding="utf-8")).strip()
    return os.environ.get(TOKEN_ENV, "").strip()


async def _run(config: ServerConfig, host: str, port: int, access_log: bool) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with serve(config, host, port, access_log=access_log) as url:
        bound = int(url.rsplit(":", 1)[1])
        print(json.dumps({"port": bound, "url": url, "site": config.site}), flush=True)
        log.info("site %s serving %s on %s", config.site, config.data_dir, url)
        if config.peers:
            log.info("site %s pulls manifests from %s", config.site, ", ".join(config.peers))
        await stop.wait()
    log.info("site %s stopped", config.site)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``synxfer-blockd``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose or args.access_log else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s blockd %(levelname)s %(message)s",
    )
    if not _is_loopback(args.host) and not args.allow_remote:
        parser.error(f"refusing to bind {args.host!r}: not a loopback address (see --allow-remote)")
    if not SITE_NAME.match(args.site):
        parser.error(f"invalid site name {args.site!r}")
    try:
        token = _read_token(args)
    except OSError as exc:
        parser.error(f"cannot read the token file: {exc.strerror or exc}")
    if not token:
        parser.error(f"no token: give --token-file or set ${TOKEN_ENV}")
    config = ServerConfig(
        data_dir=args.data_dir,
        site=args.site,
        token=token,
        max_block_size=args.max_block_size,
        fsync=not args.no_fsync,
        serve_rate=float(args.serve_rate) if args.serve_rate else None,
        peers=args.peers,
        sync_interval=args.sync_interval,
        gc_interval=args.gc_interval,
        gc_grace=args.gc_grace,
    )
    try:
        asyncio.run(_run(config, args.host, args.port, args.access_log))
    except OSError as exc:
        print(f"synxfer-blockd: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
