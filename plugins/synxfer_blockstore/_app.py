"""``synxfer-blockd``'s HTTP service: one site's state, its handlers, the aiohttp app.

See :mod:`synxfer_blockstore.server` for what a site does and
:mod:`synxfer_blockstore.protocol` for the API. :func:`serve` runs a site
in the caller's event loop (tests do); ``synxfer-blockd`` runs one per
process.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import aiohttp
from aiohttp import web

from ._manifests import ManifestDB
from ._store import BlockStore, DigestMismatch
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
    check_bucket,
    check_key,
    parse_range,
)

__all__ = ["Blockd", "Pacer", "ServerConfig", "make_app", "serve"]

log = logging.getLogger("synxfer_blockstore.server")

_CHUNK = 64 * 1024
_LIST_LIMIT = 1000
_SYNC_LIMIT = 500
_EMPTY: Mapping[str, str] = MappingProxyType({})


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
