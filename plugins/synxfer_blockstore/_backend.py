"""The ``blocks://`` client: objects as replicated, content-addressed blocks.

See the package docstring for the model; this module maps the backend SDK
onto ``synxfer-blockd`` sites:

* ``put`` / ``upload_part`` split the bytes into blocks of ``block_size``
  (copying and hashing them in one worker-thread call, so the engine's
  buffer is free as soon as the call returns), then store each block at the
  sites the placement policy picks, falling back to the policy's next
  choice when a site fails, so every block keeps its replica count.
* ``complete_multipart`` / ``put`` / ``copy`` / ``delete`` write a manifest
  (or a tombstone) to **every** site in parallel and succeed when at least
  ``write_quorum`` sites (default: a majority) stored it. Sites that missed
  it catch up from their peers' change feed (``synxfer-blockd --peers``).
* ``read`` fetches the manifest from the nearest site that answers, then
  each covering block (or the covered range of it) from the replica with the
  lowest expected time, failing over to the next replica on an error, a
  missing block, a corrupt block or a stall, and, with ``hedge``, sending a
  second request to the next replica when the first is slow; the first
  answer wins. Whole blocks are checked against their SHA-256 id (in a
  worker thread) before use.
* ``stat`` and ``list_page`` read manifests from the nearest site.

Requests in flight: nearly every call sends several requests at once (a
block to each replica, a manifest to every site, blocks of a read, hedges),
so every primitive that sends requests is in ``capabilities.fan_out``: the
scheduler holds no slot around the call, and each request takes one slot of
``options.requests`` (the client's request limit). Within the backend, block
transfers also share one semaphore of ``max_connections`` slots; a hedge
takes a free one or is not sent. RTT probes are the backend's own and take
no request slot.

Multipart uploads in progress live in this backend instance (their blocks
are already on the sites); aborting one forgets it, and the blocks, which no
manifest references, go at the sites' next garbage collection.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import hashlib
import itertools
import json
import random
import secrets
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NoReturn, TypeVar, cast
from urllib.parse import quote, urlencode, urlsplit

from synxfer import (
    BackendError,
    CompletedPart,
    IntegrityError,
    ListPage,
    MultipartUpload,
    NotFound,
    ObjectInfo,
    PermissionDenied,
    PreconditionFailed,
    ReadResult,
    TransientError,
    WriteOptions,
)
from synxfer.backend import (
    Backend,
    BackendOptions,
    Capabilities,
    Checksum,
    HttpClient,
    Payload,
    bounded_map,
    to_thread_holding,
)

from ._hedge import Unreachable, race
from ._options import read_options
from .placement import PlacementContext
from .protocol import (
    API,
    HEADER_ACTIVE,
    HEADER_RATE,
    MAX_BLOCK_SIZE,
    MAX_BLOCKS,
    MIN_BLOCK_SIZE,
    BlockRef,
    Manifest,
    block_id,
    check_key,
    compute_etag,
)
from .rtt import SiteMonitor

__all__ = ["BlockStoreBackend"]

T = TypeVar("T")

#: Primitives that send requests: each request takes a slot of options.requests
#: (``read_into`` and ``delete_many`` too: their defaults call ``read`` and
#: ``delete``).
_FAN_OUT = frozenset(
    {
        "stat",
        "list_page",
        "read",
        "read_into",
        "put",
        "delete",
        "delete_many",
        "copy",
        "upload_part",
        "complete_multipart",
    }
)


def _split_and_hash(data: Payload, block_size: int) -> list[tuple[str, bytes]]:
    """Copy ``data`` into blocks and hash each: ``[(id, bytes), ...]``. Blocking."""
    view = memoryview(data)
    out = []
    for pos in range(0, len(view), block_size):
        chunk = bytes(view[pos : pos + block_size])
        out.append((block_id(chunk), chunk))
    return out


@dataclass
class _Upload:
    """A multipart upload in progress: its options and the blocks of each part."""

    key: str
    options: WriteOptions
    parts: dict[int, tuple[str, list[BlockRef]]] = field(default_factory=dict)


class BlockStoreBackend(Backend):
    """A bucket (namespace) of a multi-site block store. See the package docstring.

    Options (``BackendOptions.extra``, each overriding the cluster file's
    key of the same name): ``cluster`` (path of the cluster file),
    ``namespace``, ``block_size`` (64KiB..8MiB, default 1MiB), ``policy``
    (default ``localclosest``), ``read_choice`` (``rtt`` or ``load``, default
    ``load``), ``hedge`` (default true), ``hedge_factor`` (hedge after this
    many expected times, default 2), ``stall_timeout`` (seconds without an
    answer before failing over, default 10), ``probe_interval`` (seconds
    between RTT probes, default 2; 0 = probe only when opening),
    ``rtt_window`` (probes averaged, default 5), ``warmup_timeout`` (seconds
    ``open`` waits for the first RTTs, default 3; slower sites are measured
    in the background and count as unknown meanwhile), ``write_quorum`` (sites
    that must store a manifest, default a majority), ``read_exclude``
    (comma-separated sites never read from, unless no other replica
    exists), ``verify`` (check whole blocks against their id, default
    true), ``seed`` (seed of the random policies).
    """

    scheme: ClassVar[str] = "blocks"

    def __init__(self, bucket: str, options: BackendOptions | None = None) -> None:
        self.options = options or BackendOptions()
        self.bucket = bucket
        #: The cluster, and what this backend was configured with (see the
        #: class docstring and :mod:`._options`).
        self.cluster, self.settings = read_options(bucket, self.options)
        cfg = self.settings
        self.namespace, self.block_size, self.policy = cfg.namespace, cfg.block_size, cfg.policy
        self.read_choice, self.verify = cfg.read_choice, cfg.verify
        self.hedge, self.hedge_factor = cfg.hedge, cfg.hedge_factor
        self.stall_timeout, self.warmup_timeout = cfg.stall_timeout, cfg.warmup_timeout
        self.probe_interval, self.rtt_window = cfg.probe_interval, cfg.rtt_window
        self.write_quorum, self.read_exclude = cfg.write_quorum, cfg.read_exclude
        self._rng = random.Random(cfg.seed)
        self.capabilities = Capabilities(
            multipart=True,
            min_part_size=self.block_size,
            max_part_size=MAX_BLOCKS * self.block_size,
            max_parts=10_000,
            max_single_put=MAX_BLOCKS * self.block_size,
            ranged_reads=True,
            server_side_copy=True,
            metadata=True,
            batch_delete=False,
            part_checksum=None,
            part_size_multiple=self.block_size,  # every part ends on a block boundary
            fan_out=_FAN_OUT,
            # Whole blocks are checked against their SHA-256 ids (``verify``),
            # and the engine's ranges are whole blocks.
            verified_reads=self.verify,
        )
        self.sites: tuple[str, ...] = tuple(self.cluster.sites)
        self.local = self.cluster.local
        self.writer = secrets.token_hex(8)
        self._slots = asyncio.Semaphore(max(1, self.options.max_connections))
        self._session: HttpClient | None = None
        self._probe_task: asyncio.Task[None] | None = None
        self._warm_task: asyncio.Task[None] | None = None
        self._uploads: dict[str, _Upload] = {}
        #: Block bytes read from each site so far (for benchmarks and operators).
        self.read_bytes: dict[str, int] = {}
        self._last_stamp = 0
        self.monitor = SiteMonitor(
            self.sites,
            self._ping,
            window=self.rtt_window,
            interval=self.probe_interval or 1.0,
            probe_timeout=min(self.options.connect_timeout + 5.0, 30.0),
        )

    def __repr__(self) -> str:
        return (
            f"<BlockStoreBackend {self.url()} local={self.local} sites={len(self.sites)} "
            f"policy={self.policy.name} block_size={self.block_size}>"
        )

    # -- lifecycle -----------------------------------------------------------

    async def open(self) -> None:
        """Open the HTTP client, measure every site's RTT, start re-probing."""
        if self._session is not None:
            return
        # The SDK's client, as every plugin's data plane (decision 0017): per
        # site, block transfers (max_connections), their hedges and the
        # manifest and probe requests beside them.
        self._session = HttpClient(
            max_connections=2 * max(1, self.options.max_connections) + 8,
            connect_timeout=self.options.connect_timeout,
            read_timeout=self.options.read_timeout,
        )
        # Measure every site before the first placement, but never wait on a
        # stalled site for long: its probes finish in the background.
        self._warm_task = asyncio.create_task(self.monitor.warm_up())
        await asyncio.wait({self._warm_task}, timeout=self.warmup_timeout)
        if self.probe_interval > 0:
            self._probe_task = asyncio.create_task(self.monitor.run())

    async def aclose(self) -> None:
        """Stop probing and close the session. Safe to call twice."""
        for task in (self._probe_task, self._warm_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._probe_task = self._warm_task = None
        session, self._session = self._session, None
        if session is not None:
            await session.aclose()

    # -- HTTP ----------------------------------------------------------------

    def _http(self) -> HttpClient:
        if self._session is None:
            raise BackendError(f"{self!r} is not open", url=self.url())
        return self._session

    async def _request(
        self,
        site: str,
        method: str,
        path: str,
        *,
        url: str,
        params: Mapping[str, str] | None = None,
        data: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        seconds: float | None = None,
        slot: bool = True,
    ) -> tuple[int, bytes, Mapping[str, str]]:
        """One request to ``site``: (status, body, headers). Network errors -> TransientError.

        With ``slot`` (every request of a primitive: they are all in ``fan_out``)
        it holds a slot of ``options.requests``, waited for before the timeout
        starts.
        """
        session = self._http()
        base = urlsplit(self.cluster.url(site))
        port = base.port or (443 if base.scheme == "https" else 80)
        target = quote(base.path + API + path, safe="/-._~")
        if params:
            target += "?" + urlencode(params, quote_via=quote, safe="")
        # The token goes in this header only: the HttpClient puts no header in
        # a message.
        hdrs = {
            "host": base.netloc,
            "authorization": f"Bearer {self.cluster.token.reveal()}",
            **{k.lower(): v for k, v in (headers or {}).items()},
        }
        if data is not None:
            hdrs.setdefault("content-type", "application/octet-stream")
        held = self.options.requests.slot() if slot else contextlib.nullcontext()
        try:
            async with held, asyncio.timeout(seconds):
                resp = await session.request(
                    method, base.scheme, base.hostname or "", port, target, hdrs, data, label=url
                )
        except TimeoutError:
            raise TransientError(f"site {site} did not answer in time", url=url) from None
        except TransientError as exc:
            if isinstance(exc.__cause__, OSError):  # could not connect at all
                raise Unreachable(f"site {site} unreachable: {exc}", url=url) from None
            raise TransientError(f"site {site}: {exc}", url=url) from None
        return resp.status, bytes(resp.body), resp.headers

    def _fail(self, site: str, status: int, body: bytes, url: str, what: str) -> NoReturn:
        """Raise the synxfer error for an unexpected HTTP status."""
        try:
            doc = json.loads(body)
            code, message = str(doc.get("error", "")), str(doc.get("message", ""))
        except (ValueError, AttributeError):
            code, message = "", body[:200].decode("utf-8", "replace")
        detail = f"{what} at site {site}: HTTP {status} {code} {message}".strip()
        if status in (401, 403):
            raise PermissionDenied(detail + " (check the cluster's token)", url=url, status=status)
        if status == 404:
            raise NotFound(detail, url=url, status=404)
        if status in (408, 429) or status >= 500 or code in ("BadDigest", "IncompleteBody"):
            raise TransientError(detail, url=url, status=status)
        raise BackendError(detail, url=url, status=status)

    def _note_load(self, site: str, headers: Mapping[str, str]) -> None:
        active, rate = headers.get(HEADER_ACTIVE.lower()), headers.get(HEADER_RATE.lower())
        if active is not None:
            with contextlib.suppress(ValueError):
                self.monitor.record_load(site, int(active), float(rate or 0))

    async def _ping(self, site: str) -> Mapping[str, Any]:
        status, body, _ = await self._request(
            site,
            "GET",
            "/ping",
            url=self.cluster.url(site),
            seconds=self.monitor.probe_timeout,
            slot=False,  # the backend's own probes, not a caller's requests
        )
        if status != 200:
            self._fail(site, status, body, self.cluster.url(site), "ping")
        doc = json.loads(body)
        return cast("Mapping[str, Any]", doc) if isinstance(doc, dict) else {}

    def _nearest(self) -> list[str]:
        """Sites by RTT, for metadata requests (manifests, listings)."""
        return self.monitor.rank(list(self.sites), 0, "rtt")

    # -- keys, stamps, manifests ---------------------------------------------

    def _key(self, key: str) -> str:
        try:
            return check_key(key)
        except ValueError as exc:
            raise BackendError(f"invalid key for {self.url()}: {exc}", status=400) from None

    def _stamp(self) -> int:
        self._last_stamp = max(time.time_ns(), self._last_stamp + 1)
        return self._last_stamp

    def _info(self, m: Manifest) -> ObjectInfo:
        return ObjectInfo(
            key=m.key,
            size=m.size,
            mtime=m.mtime,
            etag=m.etag,
            metadata=dict(m.metadata),
            content_type=m.content_type,
        )

    def _manifest(
        self, key: str, blocks: Sequence[BlockRef], options: WriteOptions, *, deleted: bool = False
    ) -> Manifest:
        if len(blocks) > MAX_BLOCKS:
            raise BackendError(
                f"{self.url(key)}: {len(blocks)} blocks is more than the {MAX_BLOCKS} an object "
                f"may have; use a larger block_size",
                url=self.url(key),
                status=400,
            )
        size = sum(b.size for b in blocks)
        stamp = self._stamp()
        return Manifest(
            bucket=self.namespace,
            key=key,
            size=size,
            blocks=tuple(blocks),
            stamp=stamp,
            writer=self.writer,
            etag="" if deleted else compute_etag(size, blocks),
            mtime=stamp / 1e9,
            metadata=dict(options.metadata),
            content_type=options.content_type,
            deleted=deleted,
            block_size=self.block_size,
            policy=self.policy.name,
        )

    async def _write_manifest(self, m: Manifest) -> None:
        """Store ``m`` at every site; at least ``write_quorum`` must acknowledge."""
        url = self.url(m.key)
        body = json.dumps(m.to_json(), separators=(",", ":")).encode()
        params = {"bucket": m.bucket, "key": m.key}

        async def one(site: str) -> None:
            status, resp, _ = await self._request(
                site,
                "PUT",
                "/manifest",
                url=url,
                params=params,
                data=body,
                headers={"Content-Type": "application/json"},
            )
            if status != 200:
                self._fail(site, status, resp, url, "storing the manifest")

        results = await asyncio.gather(*(one(s) for s in self.sites), return_exceptions=True)
        errors = [(s, r) for s, r in zip(self.sites, results, strict=True) if r is not None]
        acks = len(self.sites) - len(errors)
        for _, exc in errors:
            if isinstance(exc, PermissionDenied | asyncio.CancelledError):
                raise exc
        if acks < self.write_quorum:
            detail = "; ".join(f"{s}: {e}" for s, e in errors)
            raise TransientError(
                f"the manifest reached {acks} of {len(self.sites)} sites "
                f"({self.write_quorum} needed): {detail}",
                url=url,
            )

    async def _read_manifest(self, key: str) -> Manifest:
        """The live manifest of ``key`` from the nearest site (hedged, with failover).

        A 404 from a site is an answer (the object does not exist there, and
        every write reaches every site it can), not a reason to ask another.
        """
        url = self.url(key)
        params = {"bucket": self.namespace, "key": key}

        async def attempt(site: str, seconds: float) -> Manifest:
            status, body, _ = await self._request(
                site, "GET", "/manifest", url=url, params=params, seconds=seconds
            )
            if status == 404:
                raise NotFound(f"no such object: {url}", url=url, status=404)
            if status != 200:
                self._fail(site, status, body, url, "reading the manifest")
            try:
                m = Manifest.from_json(json.loads(body))
            except ValueError as exc:
                raise TransientError(
                    f"site {site} sent an invalid manifest: {exc}", url=url
                ) from None
            if (m.bucket, m.key) != (self.namespace, key) or m.deleted:
                raise TransientError(f"site {site} answered with another manifest", url=url)
            return m

        return await self._race(self._nearest(), attempt, 0, url, "the manifest", final=NotFound)

    # -- writing blocks ------------------------------------------------------

    async def _put_block(self, site: str, bid: str, data: bytes, url: str) -> None:
        status, body, _ = await self._request(
            site,
            "PUT",
            f"/blocks/{bid}",
            url=url,
            data=data,
            headers={"Content-Type": "application/octet-stream"},
            seconds=self.options.read_timeout,
        )
        if status not in (200, 201):
            self._fail(site, status, body, url, f"storing block {bid[:12]}")

    async def _place_block(self, block: tuple[str, bytes], url: str) -> BlockRef:
        """Store one block where the policy says; fall back to its next choices."""
        bid, data = block
        ctx = PlacementContext(self.local, self.sites, self.monitor.rtt_table(), self._rng)
        order = self.policy.choose(ctx)
        want = self.policy.replicas(len(self.sites))
        queue = list(order)
        placed: list[str] = []
        errors: list[str] = []
        wave, queue = queue[:want], queue[want:]
        while wave:
            results = await asyncio.gather(
                *(self._put_block(site, bid, data, url) for site in wave), return_exceptions=True
            )
            for site, result in zip(wave, results, strict=True):
                if result is None:
                    placed.append(site)
                elif isinstance(result, TransientError):
                    errors.append(f"{site}: {result}")
                else:
                    raise result
            missing = want - len(placed)
            wave, queue = queue[:missing], queue[missing:]
        if len(placed) < want:
            raise TransientError(
                f"block {bid[:12]} reached {len(placed)} of {want} sites: {'; '.join(errors)}",
                url=url,
            )
        return BlockRef(bid, len(data), tuple(placed))

    async def _store(self, data: Payload, url: str) -> list[BlockRef]:
        """Split ``data`` into blocks and place every block."""
        blocks = await to_thread_holding(_split_and_hash, data, self.block_size)
        warm = self._warm_task
        if self.policy.uses_rtt and warm is not None and not warm.done():
            # Placing by RTT before every site is measured would pick wrongly.
            await asyncio.wait({warm}, timeout=self.monitor.probe_timeout)
        return await bounded_map(lambda b: self._place_block(b, url), blocks, self._slots)

    # -- reading blocks ------------------------------------------------------

    async def _get_block(
        self, site: str, ref: BlockRef, start: int, end: int, url: str, seconds: float
    ) -> bytes:
        """Bytes ``[start, end)`` of block ``ref`` from ``site``, verified when whole."""
        whole = start == 0 and end == ref.size
        headers = None if whole else {"Range": f"bytes={start}-{end - 1}"}
        # The request slot is taken before the site counts the request as in flight.
        async with self.options.requests.slot():
            with self.monitor.track(site, end - start):
                status, body, resp_headers = await self._request(
                    site,
                    "GET",
                    f"/blocks/{ref.id}",
                    url=url,
                    headers=headers,
                    seconds=seconds,
                    slot=False,
                )
                self._note_load(site, resp_headers)
        if status not in (200, 206):
            self._fail(site, status, body, url, f"reading block {ref.id[:12]}")
        if status == 200 and not whole:
            body = body[start:end]
        if len(body) != end - start:
            raise TransientError(
                f"site {site} sent {len(body)} bytes of block {ref.id[:12]}, not {end - start}",
                url=url,
            )
        if whole and self.verify and await asyncio.to_thread(block_id, body) != ref.id:
            raise IntegrityError(f"{url}: block {ref.id[:12]} from site {site} is corrupt")
        self.read_bytes[site] = self.read_bytes.get(site, 0) + len(body)
        return body

    def _replicas(self, ref: BlockRef, nbytes: int) -> list[str]:
        known = [s for s in ref.sites if s in self.cluster.sites]
        preferred = [s for s in known if s not in self.read_exclude] or known
        return self.monitor.rank(preferred, nbytes, self.read_choice)

    async def _fetch(self, piece: tuple[BlockRef, int, int], url: str) -> bytes:
        """One block (range) from the best replica, with failover and hedging."""
        ref, start, end = piece
        sites = self._replicas(ref, end - start)
        if not sites:
            raise BackendError(
                f"{url}: block {ref.id[:12]} has no replica at a known site "
                f"({', '.join(ref.sites)})",
                url=url,
            )

        async def attempt(site: str, seconds: float) -> bytes:
            return await self._get_block(site, ref, start, end, url, seconds)

        return await self._race(
            sites, attempt, end - start, url, f"block {ref.id[:12]}", hedge_slots=True
        )

    async def _race(
        self,
        sites: Sequence[str],
        attempt: Callable[[str, float], Coroutine[Any, Any, T]],
        nbytes: int,
        url: str,
        what: str,
        *,
        final: type[BaseException] | None = None,
        hedge_slots: bool = False,
    ) -> T:
        """:func:`~synxfer_blockstore._hedge.race` with this backend's settings;
        with ``hedge_slots`` a hedge needs a free block-transfer slot."""
        return await race(
            sites,
            attempt,
            monitor=self.monitor,
            nbytes=nbytes,
            url=url,
            what=what,
            hedge=self.hedge,
            hedge_factor=self.hedge_factor,
            stall_timeout=self.stall_timeout,
            final=final,
            hedge_slots=self._slots if hedge_slots else None,
        )

    # -- primitives ----------------------------------------------------------

    async def stat(self, key: str) -> ObjectInfo:
        """Info of ``key`` from its manifest at the nearest site."""
        return self._info(await self._read_manifest(self._key(key)))

    async def list_page(self, prefix: str, cursor: str | None = None) -> ListPage:
        """Up to 1000 objects under ``prefix`` after ``cursor``, from the nearest site."""
        url = self.url(prefix)
        params = {"bucket": self.namespace, "prefix": prefix, "limit": "1000"}
        if cursor is not None:
            params["after"] = cursor

        async def attempt(site: str, seconds: float) -> ListPage:
            status, body, _ = await self._request(
                site, "GET", "/list", url=url, params=params, seconds=seconds
            )
            if status != 200:
                self._fail(site, status, body, url, "listing")
            try:
                doc = json.loads(body)
                items = [
                    ObjectInfo(
                        key=str(item["key"]),
                        size=int(item["size"]),
                        mtime=float(item.get("mtime") or 0.0) or None,
                        etag=item.get("etag") or None,
                        metadata=dict(item.get("metadata") or {}),
                        content_type=item.get("content_type"),
                    )
                    for item in doc["items"]
                ]
                nxt = doc.get("next")
            except (ValueError, KeyError, TypeError) as exc:
                raise TransientError(
                    f"site {site} sent an invalid listing: {exc}", url=url
                ) from None
            return ListPage(items=items, cursor=str(nxt) if nxt is not None else None)

        return await self._race(self._nearest(), attempt, 0, url, "the listing")

    async def read(
        self,
        key: str,
        offset: int = 0,
        length: int | None = None,
        *,
        if_match: str | None = None,
    ) -> ReadResult:
        """Bytes ``[offset, offset+length)`` of ``key``, block by block from the best replicas."""
        if offset < 0 or (length is not None and length < 0):
            raise ValueError(f"offset and length must be >= 0 (got {offset}, {length})")
        url, info, pieces = await self._pieces(key, offset, length, if_match)
        chunks = await bounded_map(lambda p: self._fetch(p, url), pieces, self._slots)
        return ReadResult(b"".join(chunks), info)

    async def read_into(
        self,
        key: str,
        offset: int,
        buf: memoryview,
        *,
        if_match: str | None = None,
        whole: bool = False,
    ) -> ObjectInfo:
        """Bytes ``[offset, offset+len(buf))`` of ``key``, each block copied to
        its place in ``buf`` as it arrives (no join, no second copy).

        The manifest says the object's size before any block is read, so an
        object that does not fit ``buf`` (``whole`` or an empty ``buf``: the
        object's bytes from ``offset`` must fill it exactly) is refused
        without reading a block.
        """
        if offset < 0:
            raise ValueError(f"offset must be >= 0 (got {offset})")
        if buf.format != "B" or buf.ndim != 1:
            buf = buf.cast("B")
        n = buf.nbytes
        url, info, pieces = await self._pieces(key, offset, n, if_match)
        available = max(0, info.size - offset)
        if available < n or ((whole or n == 0) and available != n):
            raise PreconditionFailed(
                f"expected {n} bytes at offset {offset}, but the object has {info.size} bytes",
                url=url,
            )
        starts = itertools.accumulate((end - start for _, start, end in pieces), initial=0)

        async def place(item: tuple[int, tuple[BlockRef, int, int]]) -> None:
            at, piece = item
            data = await self._fetch(piece, url)
            buf[at : at + len(data)] = data

        await bounded_map(place, zip(starts, pieces, strict=False), self._slots)
        return info

    async def _pieces(
        self, key: str, offset: int, length: int | None, if_match: str | None
    ) -> tuple[str, ObjectInfo, list[tuple[BlockRef, int, int]]]:
        """The object's URL and info, and the block ranges (block, start, end)
        that hold its bytes ``[offset, offset+length)``."""
        key = self._key(key)
        url = self.url(key)
        m = await self._read_manifest(key)
        info = self._info(m)
        if if_match is not None and if_match.strip('"') != m.etag:
            raise PreconditionFailed(
                f"{url} changed (ETag {m.etag[:16]}…, expected {if_match[:16]}…)",
                url=url,
                status=412,
            )
        end = m.size if length is None else min(m.size, offset + length)
        pieces: list[tuple[BlockRef, int, int]] = []
        if offset >= end:
            return url, info, pieces
        offsets = m.offsets()
        index = bisect.bisect_right(offsets, offset) - 1
        while index < len(m.blocks) and offsets[index] < end:
            ref, base = m.blocks[index], offsets[index]
            pieces.append((ref, max(offset, base) - base, min(end, base + ref.size) - base))
            index += 1
        return url, info, pieces

    async def put(
        self,
        key: str,
        data: Payload,
        options: WriteOptions,
        checksum: Checksum | None = None,
    ) -> ObjectInfo:
        """Store ``data`` as blocks, then its manifest at every site."""
        key = self._key(key)
        refs = await self._store(data, self.url(key))
        m = self._manifest(key, refs, options)
        await self._write_manifest(m)
        return self._info(m)

    async def delete(self, key: str) -> None:
        """Write a tombstone at every site; a missing key is fine."""
        key = self._key(key)
        await self._write_manifest(self._manifest(key, [], WriteOptions(), deleted=True))

    async def copy(self, src_key: str, dst_key: str, options: WriteOptions) -> ObjectInfo:
        """A new manifest naming ``src_key``'s blocks: no data moves."""
        src = await self._read_manifest(self._key(src_key))
        m = self._manifest(self._key(dst_key), src.blocks, options)
        await self._write_manifest(m)
        return self._info(m)

    async def create_multipart(self, key: str, options: WriteOptions) -> MultipartUpload:
        """Start an upload; its state lives in this backend until completed or aborted."""
        key = self._key(key)
        upload_id = secrets.token_hex(16)
        self._uploads[upload_id] = _Upload(key, options)
        return MultipartUpload(key=key, upload_id=upload_id)

    def _upload(self, upload: MultipartUpload) -> _Upload:
        state = self._uploads.get(upload.upload_id)
        if state is None or state.key != upload.key:
            raise NotFound(
                f"no such multipart upload {upload.upload_id} of {self.url(upload.key)}",
                url=self.url(upload.key),
                status=404,
            )
        return state

    async def upload_part(
        self,
        upload: MultipartUpload,
        number: int,
        data: Payload,
        checksum: Checksum | None = None,
    ) -> CompletedPart:
        """Store the part's blocks; a part sent again replaces the earlier one."""
        if not 1 <= number <= self.capabilities.max_parts:
            raise BackendError(
                f"part number {number} is outside 1..{self.capabilities.max_parts}",
                url=self.url(upload.key),
                status=400,
            )
        self._upload(upload)
        size = len(data)
        refs = await self._store(data, self.url(upload.key)) if size else []
        state = self._upload(upload)  # aborted meanwhile?
        digest = hashlib.sha256()
        for ref in refs:
            digest.update(f"{ref.id} {ref.size}\n".encode())
        etag = digest.hexdigest()
        state.parts[number] = (etag, refs)
        return CompletedPart(number=number, etag=etag, size=size)

    async def complete_multipart(
        self, upload: MultipartUpload, parts: Sequence[CompletedPart]
    ) -> ObjectInfo:
        """Join the parts' blocks in number order and write the manifest."""
        state = self._upload(upload)
        url = self.url(upload.key)
        ordered = sorted(parts, key=lambda p: p.number)
        numbers = [p.number for p in ordered]
        if not ordered or len(set(numbers)) != len(numbers):
            raise BackendError(
                f"cannot complete {url}: parts must be given, each number once (got {numbers})",
                url=url,
                status=400,
            )
        blocks: list[BlockRef] = []
        for part in ordered:
            stored = state.parts.get(part.number)
            if stored is None or stored[0] != part.etag:
                raise BackendError(
                    f"cannot complete {url}: part {part.number} was not uploaded "
                    f"with ETag {part.etag} (InvalidPart)",
                    url=url,
                    status=400,
                )
            blocks.extend(stored[1])
        m = self._manifest(upload.key, blocks, state.options)
        await self._write_manifest(m)
        self._uploads.pop(upload.upload_id, None)
        return self._info(m)

    async def abort_multipart(self, upload: MultipartUpload) -> None:
        """Forget the upload; its blocks go at the sites' next garbage collection."""
        self._uploads.pop(upload.upload_id, None)

    # -- for benchmarks and operators -----------------------------------------

    def rtt_table(self) -> dict[str, float]:
        """Mean RTT (seconds) of every site as measured now."""
        return self.monitor.rtt_table()

    async def locate(self, key: str) -> list[tuple[str, ...]]:
        """The replica sites of each block of ``key``."""
        m = await self._read_manifest(self._key(key))
        return [ref.sites for ref in m.blocks]

    @staticmethod
    def block_size_range() -> tuple[int, int]:
        """Allowed block sizes (bytes)."""
        return MIN_BLOCK_SIZE, MAX_BLOCK_SIZE
