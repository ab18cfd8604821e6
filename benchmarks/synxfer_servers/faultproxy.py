"""A fault-injecting HTTP/1.1 proxy to put between a client and an S3 server.

:class:`FaultProxy` listens on ``127.0.0.1`` (a free port, or a given one),
forwards every request to one upstream ``host:port`` (moto, SeaweedFS, ...)
and, for a configurable share of the requests, injects a fault instead::

    async with FaultProxy(moto_url, rate=0.2, faults={Fault.SLOWDOWN: 1}) as proxy:
        async with synxfer.Client(config, endpoint_url=proxy.url) as client:
            result = await client.sync_to(src, "s3://bucket/prefix")
        print(proxy.snapshot().faults)

It is also a synchronous context manager that runs its own event loop in a
thread, for subprocess tests, benchmarks and the CLI::

    with FaultProxy(moto_url, rate=0.2) as proxy:
        subprocess.run(["synxfer", "sync", src, url, "--endpoint-url", proxy.url])

Only the proxy's address changes for the client: the ``Host`` header and the
rest of the request are forwarded untouched (``Expect`` aside, see below), so
SigV4 signatures stay valid for servers that check them.

**Which requests are hit.** A request is *eligible* when it passes every
filter given: ``methods`` (``"GET"``, ``"PUT"``, ...), ``ops`` (S3 operation
names as :mod:`synxfer_servers.s3` counts them: ``put_object``,
``upload_part``, ``get_object``, ``head_object``, ``create_multipart``,
``complete_multipart``, ``abort_multipart``, ``list_objects``,
``delete_objects``, ...) and ``match`` (any predicate on a
:class:`ProxyRequest`; it runs on the proxy's event loop and must neither
raise nor block). An eligible request is faulted with probability
``rate``; the kind of fault is drawn from ``faults`` (kind -> weight). After
``max_faults`` faults (when set), nothing more is injected.

The draw is a pure function of ``seed``, the request's identity (method,
path, query without ``uploadId``, ``Range`` header) and how many times that
identity was seen before: the n-th attempt of a given request gets the same
fate on every run, however the client's concurrency interleaves requests.
So runs repeat, and a retry of a faulted request gets a fresh draw.

**The faults on the wire.** Every fault is drawn, and happens, after the
proxy has read the whole request, head and body:

``503`` (:attr:`Fault.SLOWDOWN`)
    Not forwarded. Answers ``HTTP/1.1 503 Slow Down`` with
    ``Content-Type: application/xml``, a ``Content-Length``, and the S3 body
    ``<Error><Code>SlowDown</Code><Message>Please reduce your request
    rate.</Message>...</Error>`` (no body for a HEAD request). The connection
    stays open (keep-alive) unless the client asked to close it.
``500`` (:attr:`Fault.INTERNAL_ERROR`)
    The same with ``HTTP/1.1 500 Internal Server Error`` and
    ``<Code>InternalError</Code>``. Not forwarded.
``403`` (:attr:`Fault.ACCESS_DENIED`)
    The same with ``HTTP/1.1 403 Forbidden`` and ``<Code>AccessDenied</Code>``:
    a *permanent* error, for fail-fast tests (usually with ``match`` naming a
    key and ``rate=1``). Not forwarded.
``reset`` (:attr:`Fault.RESET`)
    Not forwarded. The client connection is closed abortively: ``SO_LINGER``
    is set to ``{on, 0}`` and the socket closed, so the kernel sends a TCP
    RST and no response byte. The client sees ``ECONNRESET`` (or a
    disconnect) while waiting for the response. The server never saw the
    request.
``reset-after`` (:attr:`Fault.RESET_AFTER`)
    Forwarded: the proxy sends the request upstream and reads the server's
    *whole* response (so a write has been applied), discards it, then resets
    the client connection as for ``reset``. The client cannot tell whether
    its write happened; a retry must cope (e.g. CompleteMultipartUpload
    retried after the upload was already completed answers NoSuchUpload).
``truncate`` (:attr:`Fault.TRUNCATE`)
    Forwarded. The response's status line and headers are sent as for any
    response (``Content-Length`` or ``Transfer-Encoding: chunked`` intact), then
    only the first ``truncate_fraction`` of the body bytes as they came from
    the server (at least one byte short of the whole, raw chunk framing
    included for chunked bodies), then the connection is closed gracefully
    (FIN). A response with no body (HEAD, ``Content-Length: 0``, 204) is cut
    in the middle of its header block instead. The server applied the
    request.
``stall`` (:attr:`Fault.STALL`)
    Not forwarded. The request is read, then nothing at all is sent for
    ``stall_seconds`` (set it longer than the client's read timeout); the
    connection is then closed (FIN). If the client gives up and closes first,
    the stall ends at once. :meth:`FaultProxy.stop` ends every stall too.
``trickle`` (:attr:`Fault.TRICKLE`)
    Forwarded. The response's status line and headers are sent at once, then
    the body at ``trickle_bytes_per_second`` (one piece every 0.1 s; ``0``
    sends no body byte at all), so a client's per-read timeout never fires.
    After ``stall_seconds`` the connection is closed (FIN) whatever was sent:
    a slow-but-alive server, which only progress-based stall detection
    catches early.
``corrupt-request`` (:attr:`Fault.CORRUPT_REQUEST`)
    Forwarded with exactly one byte of the *request* body inverted (``b ^
    0xFF``, at a position drawn like the fault itself); the head (its
    ``Content-Length``, ``Content-MD5``, ``x-amz-checksum-*`` and signature)
    is untouched. Only ever drawn for requests with a body (for any other
    the draw injects nothing and counts nothing): with ``methods={"PUT"}``,
    what a bit flipped on the way to the server does to an upload, which
    only a server that verifies the body's checksum refuses. Counted in
    :attr:`ProxyStats.corrupted` and ``corrupted_keys`` as well.
``corrupt`` (:attr:`Fault.CORRUPT`)
    Forwarded; only ever drawn for ``GET`` requests (for any other method
    the draw injects nothing and counts nothing). If the response is a
    success (2xx, ``206`` included) with at least one body byte, exactly one
    byte of the body is inverted (``b ^ 0xFF``) at a position drawn like the
    fault itself; the status line, the headers (``Content-Length``,
    ``ETag``, checksums) and the framing are untouched, so the client sees
    a well-formed response with the same length and wrong content: what a
    bit-flipping NIC, a bad cache or a buggy middlebox does. A
    ``Content-Length`` body is streamed, a chunked or read-until-close one
    is buffered to pick a data byte (chunk framing is never touched). Other
    responses (errors, HEAD, empty bodies) pass unchanged, though the fault
    was drawn. :attr:`ProxyStats.corrupted` counts the bodies changed, by key
    in :attr:`ProxyStats.corrupted_keys`. ``GET`` also lists buckets and
    reads other XML; ``ops={"get_object"}`` confines the fault to object
    bodies.

``bad-chunk`` (:attr:`Fault.BAD_CHUNK`)
    Forwarded. The whole response is read; if it has at least one body
    byte, it is sent chunked (re-framed as one chunk when the server gave a
    ``Content-Length``, which is dropped) with one byte of the *first
    chunk-size line* inverted (``b ^ 0xFF``), so the size is no hex number:
    what a flipped bit does to a chunked listing. The connection is then
    closed (FIN). Responses without a body pass unchanged, though the fault
    was drawn.
``repeat-token`` (:attr:`Fault.REPEAT_TOKEN`)
    Forwarded; only ever drawn for requests that carry a
    ``continuation-token`` query parameter (ListObjectsV2's second page and
    later) and for ListMultipartUploads (``GET ?uploads``); for any other
    request the draw injects nothing and counts nothing. A successful XML
    answer is sent with its ``NextContinuationToken`` set to the token the
    request carried -- for ListMultipartUploads, ``NextKeyMarker`` and
    ``NextUploadIdMarker`` set to the request's markers, or on a first page
    to its last upload -- and ``IsTruncated`` true, with a corrected
    ``Content-Length``: a server whose paging repeats, so a client that
    follows tokens blindly lists forever. With ``rate=1`` every later page
    repeats.

Note that HTTP clients resend a request by themselves when a reused
connection was closed before any byte of the answer (aiohttp for idempotent
requests; synxfer's S3 client once, on a connection that died while idle):
such ``reset`` faults may never reach the caller's own retry logic, so its
retry count can be lower than :attr:`ProxyStats.faulted`.

**Plumbing.** Requests with ``Expect: 100-continue`` get ``HTTP/1.1 100
Continue`` from the proxy itself and are forwarded without the ``Expect``
header (which SigV4 never signs). Request bodies (``Content-Length`` or
chunked) are read whole, then forwarded; response bodies are streamed
(``Content-Length``, chunked, or until the server closes). Each client
connection gets its own upstream connection, kept alive as long as both
sides allow. ``Connection`` and ``Keep-Alive`` are hop-by-hop: the client's
connection stays open even when the server closes its own after each
response (moto's werkzeug does), and the proxy sends ``Connection: close``
only when it is about to close. If the upstream cannot be reached the proxy answers ``502 Bad
Gateway`` (``<Code>BadGateway</Code>``) and counts it in
:attr:`ProxyStats.upstream_errors`, not as a fault.

**Counters** (:meth:`FaultProxy.snapshot`, thread-safe): requests seen, by
operation and by key; requests forwarded; faults by kind, in total and by
operation; 502s. :meth:`FaultProxy.configure` changes the fault settings
while the proxy runs (from any thread).

**Restart.** :meth:`FaultProxy.stop` closes the listener and resets every
open connection (a crashed server); :meth:`FaultProxy.start` listens again
on the *same* port, so clients pointing at :attr:`FaultProxy.url` recover by
retrying. :meth:`FaultProxy.restart` does both with a pause between; in the
threaded mode use the ``*_blocking`` variants.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import enum
import itertools
import random
import re
import socket
import struct
import threading
from collections.abc import AsyncIterator, Callable, Collection, Coroutine, Mapping
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from .s3 import HOST, _classify

__all__ = ["Fault", "FaultProxy", "ProxyRequest", "ProxyStats"]

T = TypeVar("T")

#: Bytes read from a socket at a time when streaming a body.
_CHUNK = 256 * 1024
#: Largest request or response head accepted (status line + headers).
_MAX_HEAD = 1024 * 1024


class Fault(enum.StrEnum):
    """The kinds of fault a :class:`FaultProxy` injects (see the module docstring)."""

    SLOWDOWN = "503"
    INTERNAL_ERROR = "500"
    ACCESS_DENIED = "403"
    RESET = "reset"
    RESET_AFTER = "reset-after"
    CORRUPT_REQUEST = "corrupt-request"
    TRUNCATE = "truncate"
    STALL = "stall"
    TRICKLE = "trickle"
    CORRUPT = "corrupt"
    BAD_CHUNK = "bad-chunk"
    REPEAT_TOKEN = "repeat-token"


#: Status line, S3 error code and message of the faults answered by the proxy.
_ERROR_REPLIES: dict[Fault, tuple[str, str, str]] = {
    Fault.SLOWDOWN: ("503 Slow Down", "SlowDown", "Please reduce your request rate."),
    Fault.INTERNAL_ERROR: (
        "500 Internal Server Error",
        "InternalError",
        "We encountered an internal error. Please try again.",
    ),
    Fault.ACCESS_DENIED: ("403 Forbidden", "AccessDenied", "Access Denied"),
}

#: The default mix: every fault that a client should recover from, equally weighted.
RECOVERABLE: Mapping[Fault | str, float] = {
    Fault.SLOWDOWN: 1.0,
    Fault.INTERNAL_ERROR: 1.0,
    Fault.RESET: 1.0,
    Fault.RESET_AFTER: 1.0,
    Fault.TRUNCATE: 1.0,
}


@dataclasses.dataclass(frozen=True)
class ProxyRequest:
    """What the proxy knows of a request when it decides its fate.

    ``target`` is the raw request target (``/bucket/key?query``); ``bucket``
    and ``key`` are decoded from a path-style target (``key`` is ``""`` for
    bucket-level requests); ``op`` is the S3 operation name; ``headers`` maps
    lower-case names to values.
    """

    method: str
    target: str
    bucket: str
    key: str
    op: str
    query: Mapping[str, str]
    headers: Mapping[str, str]


@dataclasses.dataclass
class ProxyStats:
    """Counters of a :class:`FaultProxy`; get a consistent copy from ``snapshot()``.

    ``requests`` counts every request whose head was read; ``forwarded`` those
    sent upstream (including ``reset-after`` and ``truncate`` faults);
    ``faulted`` the faults injected, also by kind (``faults``, keyed by the
    :class:`Fault` value, e.g. ``"503"`` or ``"reset"``) and by operation
    (``faults_by_op``). ``ops`` and ``keys`` count requests by S3 operation
    and by ``bucket/key``. ``corrupted`` counts the response bodies in which
    a ``corrupt`` fault inverted a byte (and the request bodies a
    ``corrupt-request`` one did), and ``corrupted_keys`` the same by
    ``bucket/key``. ``body_bytes`` sums the request bodies forwarded (what
    the server received of uploads). ``upstream_errors`` counts 502 answers given
    because the upstream could not be reached; ``connections`` the client
    connections accepted.

    The proxy also remembers how often it saw each request identity (for the
    draw): about 100 bytes per distinct request, fine for tests and
    benchmarks, not for a proxy left running for days.
    """

    connections: int = 0
    requests: int = 0
    forwarded: int = 0
    faulted: int = 0
    upstream_errors: int = 0
    faults: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    faults_by_op: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    ops: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    keys: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    corrupted: int = 0
    corrupted_keys: collections.Counter[str] = dataclasses.field(
        default_factory=collections.Counter
    )
    body_bytes: int = 0

    def copy(self) -> ProxyStats:
        """A deep copy."""
        return dataclasses.replace(
            self,
            faults=collections.Counter(self.faults),
            faults_by_op=collections.Counter(self.faults_by_op),
            ops=collections.Counter(self.ops),
            keys=collections.Counter(self.keys),
            corrupted_keys=collections.Counter(self.corrupted_keys),
        )


@dataclasses.dataclass(frozen=True)
class _Settings:
    """The fault settings, replaced as a whole by ``configure`` (under the lock)."""

    rate: float
    faults: tuple[tuple[Fault, float], ...]
    seed: int
    methods: frozenset[str]
    ops: frozenset[str]
    match: Callable[[ProxyRequest], bool] | None
    stall_seconds: float
    truncate_fraction: float
    trickle_bytes_per_second: float
    max_faults: int | None


class _Head:
    """A parsed HTTP message head: first line, headers in order, lower-case lookup."""

    def __init__(self, raw: bytes) -> None:
        text = raw.decode("latin-1")
        lines = text.split("\r\n")
        self.first = lines[0]
        self.headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep:
                raise ValueError(f"malformed header line {line!r}")
            self.headers.append((name.strip(), value.strip()))
        self.lower = {name.lower(): value for name, value in self.headers}

    def get(self, name: str) -> str | None:
        return self.lower.get(name)

    def encode(self, drop: Collection[str] = (), add: Collection[tuple[str, str]] = ()) -> bytes:
        lines = [self.first]
        lines += [f"{n}: {v}" for n, v in self.headers if n.lower() not in drop]
        lines += [f"{n}: {v}" for n, v in add]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def content_length(self) -> int | None:
        value = self.get("content-length")
        if value is None:
            return None
        n = int(value)
        if n < 0:
            raise ValueError(f"negative Content-Length {value!r}")
        return n

    def chunked(self) -> bool:
        return "chunked" in (self.get("transfer-encoding") or "").lower()

    def wants_close(self, version: str) -> bool:
        tokens = {t.strip().lower() for t in (self.get("connection") or "").split(",")}
        return "close" in tokens or (version == "HTTP/1.0" and "keep-alive" not in tokens)


class _ClientGone(Exception):
    """The client closed its connection between requests: end quietly."""


async def _read_head(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            raise _ClientGone from None
        raise
    except asyncio.LimitOverrunError as exc:
        raise ValueError("message head too large") from exc


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    """A whole chunked body, framing included (raw, as received)."""
    out = bytearray()
    async for piece in _iter_chunked(reader):
        out += piece
    return bytes(out)


async def _iter_chunked(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """Yield the raw bytes of a chunked body, framing included, up to its end."""
    while True:
        line = await reader.readuntil(b"\r\n")
        yield line
        size = int(line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while True:  # trailers, up to an empty line
                trailer = await reader.readuntil(b"\r\n")
                yield trailer
                if trailer == b"\r\n":
                    return
        remaining = size + 2  # data and its CRLF
        while remaining:
            piece = await reader.read(min(remaining, _CHUNK))
            if not piece:
                raise asyncio.IncompleteReadError(b"", remaining)
            remaining -= len(piece)
            yield piece


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close ``writer``'s connection abortively: SO_LINGER {1, 0}, so a TCP RST."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def _error_reply(
    status: str, code: str, message: str, request_id: str, head_only: bool, keep_alive: bool
) -> bytes:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message>"
        f"<RequestId>{request_id}</RequestId></Error>"
    ).encode()
    lines = [
        f"HTTP/1.1 {status}",
        "Content-Type: application/xml",
        f"Content-Length: {len(body)}",
        f"x-amz-request-id: {request_id}",
        "Server: synxfer-faultproxy",
    ]
    if not keep_alive:
        lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    return head if head_only else head + body


class _Upstream:
    """One keep-alive connection to the upstream server, opened on demand.

    ``address`` is asked for the upstream's address at every new connection,
    so a change of :attr:`FaultProxy.upstream` applies to the next one.
    """

    def __init__(self, address: Callable[[], tuple[str, int]]) -> None:
        self.address = address
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.used = False  # has it carried a complete exchange already?

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.reader is None or self.writer is None:
            host, port = self.address()
            self.reader, self.writer = await asyncio.open_connection(host, port, limit=_MAX_HEAD)
            self.used = False
        return self.reader, self.writer

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


class FaultProxy:
    """A fault-injecting HTTP/1.1 proxy in front of ``upstream`` (see the module docstring).

    ``upstream`` is ``"http://host:port"`` (or ``"host:port"``); assigning
    :attr:`upstream` later redirects new upstream connections. ``rate`` is
    the probability that an eligible request is faulted; ``faults`` weighs the
    kinds (default: :data:`RECOVERABLE`, every recoverable kind equally);
    ``seed`` makes runs repeat; ``methods``, ``ops`` and ``match`` restrict
    which requests are eligible (all when empty/None); ``max_faults`` caps
    the number of faults injected. ``stall_seconds`` is how long a ``stall``
    or a ``trickle`` lasts at most; ``truncate_fraction`` the share of the
    body a ``truncate`` lets through; ``trickle_bytes_per_second`` the pace
    of a ``trickle``. ``port`` 0 picks a free port at the first start; restarts
    reuse it.
    """

    def __init__(
        self,
        upstream: str,
        *,
        rate: float = 0.0,
        faults: Mapping[Fault | str, float] | None = None,
        seed: int = 0,
        methods: Collection[str] = (),
        ops: Collection[str] = (),
        match: Callable[[ProxyRequest], bool] | None = None,
        max_faults: int | None = None,
        stall_seconds: float = 30.0,
        truncate_fraction: float = 0.5,
        trickle_bytes_per_second: float = 10.0,
        port: int = 0,
    ) -> None:
        self.upstream = upstream
        self.port = port
        self._lock = threading.Lock()
        self._stats = ProxyStats()
        self._seen: collections.Counter[str] = collections.Counter()
        self._settings = self._make_settings(
            rate=rate,
            faults=RECOVERABLE if faults is None else faults,
            seed=seed,
            methods=methods,
            ops=ops,
            match=match,
            max_faults=max_faults,
            stall_seconds=stall_seconds,
            truncate_fraction=truncate_fraction,
            trickle_bytes_per_second=trickle_bytes_per_second,
        )
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._request_ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None

    # -- configuration -------------------------------------------------------

    @staticmethod
    def _make_settings(
        *,
        rate: float,
        faults: Mapping[Fault | str, float],
        seed: int,
        methods: Collection[str],
        ops: Collection[str],
        match: Callable[[ProxyRequest], bool] | None,
        max_faults: int | None,
        stall_seconds: float,
        truncate_fraction: float,
        trickle_bytes_per_second: float,
    ) -> _Settings:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be within [0, 1] (got {rate})")
        if any(w < 0 for w in faults.values()):
            raise ValueError("fault weights must be >= 0")
        weighted = tuple((Fault(k), float(w)) for k, w in faults.items() if w > 0)
        if rate > 0 and not weighted:
            raise ValueError("rate > 0 needs at least one fault with a positive weight")
        if stall_seconds < 0:
            raise ValueError(f"stall_seconds must be >= 0 (got {stall_seconds})")
        if not 0.0 <= truncate_fraction < 1.0:
            raise ValueError(f"truncate_fraction must be within [0, 1) (got {truncate_fraction})")
        if trickle_bytes_per_second < 0:
            raise ValueError(
                f"trickle_bytes_per_second must be >= 0 (got {trickle_bytes_per_second})"
            )
        if max_faults is not None and max_faults < 0:
            raise ValueError(f"max_faults must be >= 0 (got {max_faults})")
        return _Settings(
            rate=rate,
            faults=weighted,
            seed=seed,
            methods=frozenset(m.upper() for m in methods),
            ops=frozenset(ops),
            match=match,
            stall_seconds=stall_seconds,
            truncate_fraction=truncate_fraction,
            trickle_bytes_per_second=trickle_bytes_per_second,
            max_faults=max_faults,
        )

    def configure(self, **changes: Any) -> None:
        """Change fault settings while running (thread-safe).

        Accepts the keyword arguments of the constructor except ``upstream``
        and ``port``: ``rate``, ``faults``, ``seed``, ``methods``, ``ops``,
        ``match``, ``max_faults``, ``stall_seconds``, ``truncate_fraction``,
        ``trickle_bytes_per_second``.
        ``configure(rate=0)`` turns faults off.
        """
        with self._lock:
            s = self._settings
            current: dict[str, Any] = {
                "rate": s.rate,
                "faults": dict(s.faults),
                "seed": s.seed,
                "methods": s.methods,
                "ops": s.ops,
                "match": s.match,
                "max_faults": s.max_faults,
                "stall_seconds": s.stall_seconds,
                "truncate_fraction": s.truncate_fraction,
                "trickle_bytes_per_second": s.trickle_bytes_per_second,
            }
            unknown = set(changes) - set(current)
            if unknown:
                raise TypeError(f"unknown setting(s): {', '.join(sorted(unknown))}")
            current.update(changes)
            self._settings = self._make_settings(**current)

    # -- counters --------------------------------------------------------------

    def snapshot(self) -> ProxyStats:
        """A consistent copy of the counters (thread-safe)."""
        with self._lock:
            return self._stats.copy()

    def reset_stats(self) -> None:
        """Zero every counter (thread-safe). Attempt counts for the draw are kept."""
        with self._lock:
            self._stats = ProxyStats()

    # -- addresses ---------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: the endpoint URL to give clients."""
        if not self.port:
            raise RuntimeError("FaultProxy has not been started")
        return f"http://{HOST}:{self.port}"

    def _upstream_address(self) -> tuple[str, int]:
        raw = self.upstream if "://" in self.upstream else f"http://{self.upstream}"
        parts = urlsplit(raw)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"upstream must be http://host:port (got {self.upstream!r})")
        return parts.hostname, parts.port

    def __repr__(self) -> str:
        state = f"{self.url} -> {self.upstream}" if self._server is not None else "stopped"
        return f"<FaultProxy {state} rate={self._settings.rate}>"

    # -- lifecycle (in the caller's event loop) ----------------------------------

    async def start(self) -> None:
        """Listen on 127.0.0.1 (on :attr:`port`, or a free port the first time)."""
        if self._server is not None:
            raise RuntimeError("FaultProxy is already listening")
        self._upstream_address()  # validate early
        self._server = await asyncio.start_server(
            self._handle, HOST, self.port, limit=_MAX_HEAD, reuse_address=True
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop listening and reset every open connection, like a crashed server.

        Safe to call when stopped. :meth:`start` listens again on the same port.
        """
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._writers):
            _abort(writer)
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        if handlers:
            await asyncio.gather(*handlers, return_exceptions=True)
        if server is not None:
            await server.wait_closed()

    async def restart(self, downtime: float = 0.0) -> None:
        """:meth:`stop`, wait ``downtime`` seconds (connections are refused), :meth:`start`."""
        await self.stop()
        await asyncio.sleep(downtime)
        await self.start()

    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- lifecycle (own event loop in a thread) ----------------------------------

    def __enter__(self) -> FaultProxy:
        if self._thread is not None:
            raise RuntimeError("FaultProxy is already running in a thread")
        loop = asyncio.new_event_loop()
        started: concurrent.futures.Future[None] = concurrent.futures.Future()

        def main() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:
                started.set_exception(exc)
                loop.close()
                return
            started.set_result(None)
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self.stop())
                loop.close()

        self._thread_loop = loop
        self._thread = threading.Thread(target=main, name=f"faultproxy-{id(self):x}", daemon=True)
        self._thread.start()
        try:
            started.result(timeout=30)
        except BaseException:
            self._thread.join(timeout=10)
            self._thread = self._thread_loop = None
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        thread, loop = self._thread, self._thread_loop
        self._thread = self._thread_loop = None
        if thread is None or loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)

    def _blocking(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        loop = self._thread_loop
        if loop is None:
            coro.close()
            raise RuntimeError("the *_blocking methods need the proxy running in a thread")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    def stop_blocking(self) -> None:
        """:meth:`stop`, from any thread, when running in the threaded mode."""
        self._blocking(self.stop())

    def start_blocking(self) -> None:
        """:meth:`start`, from any thread, when running in the threaded mode."""
        self._blocking(self.start())

    def restart_blocking(self, downtime: float = 0.0) -> None:
        """:meth:`restart`, from any thread, when running in the threaded mode."""
        self._blocking(self.restart(downtime), timeout=60.0 + downtime)

    # -- deciding ----------------------------------------------------------------

    def _decide(self, req: ProxyRequest) -> tuple[Fault | None, _Settings, float]:
        """Count the request; return the fault to inject (or None), the settings
        used, and a draw in ``[0, 1)`` for where in the body a fault strikes."""
        query = "&".join(f"{k}={v}" for k, v in sorted(req.query.items()) if k != "uploadId")
        identity = f"{req.method} {urlsplit(req.target).path}?{query} {req.headers.get('range')}"
        with self._lock:
            s = self._settings
            st = self._stats
            st.requests += 1
            st.ops[req.op] += 1
            if req.key:
                st.keys[f"{req.bucket}/{req.key}"] += 1
            attempt = self._seen[identity]
            self._seen[identity] += 1
            if (
                s.rate <= 0.0
                or (s.methods and req.method not in s.methods)
                or (s.ops and req.op not in s.ops)
                or (s.max_faults is not None and st.faulted >= s.max_faults)
            ):
                return None, s, 0.0
        # The predicate is user code: run it outside the lock.
        if s.match is not None and not s.match(req):
            return None, s, 0.0
        rng = random.Random(f"{s.seed}|{identity}|{attempt}")
        if rng.random() >= s.rate:
            return None, s, 0.0
        kinds = [k for k, _ in s.faults]
        fault = rng.choices(kinds, weights=[w for _, w in s.faults])[0]
        where = rng.random()
        if fault is Fault.CORRUPT and req.method != "GET":
            return None, s, 0.0
        if fault is Fault.CORRUPT_REQUEST and not _has_body(req):
            return None, s, 0.0
        if fault is Fault.REPEAT_TOKEN and not (
            req.query.get("continuation-token") or (req.method == "GET" and "uploads" in req.query)
        ):
            return None, s, 0.0
        with self._lock:
            st = self._stats
            if s.max_faults is not None and st.faulted >= s.max_faults:
                return None, s, 0.0
            st.faulted += 1
            st.faults[fault.value] += 1
            st.faults_by_op[req.op] += 1
        return fault, s, where

    @staticmethod
    def _describe(method: str, target: str, head: _Head) -> ProxyRequest:
        parts = urlsplit(target)
        path = unquote(parts.path)
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": parts.query,
            "HTTP_HOST": head.get("host") or "",
        }
        copy_source = head.get("x-amz-copy-source")
        if copy_source is not None:
            environ["HTTP_X_AMZ_COPY_SOURCE"] = copy_source
        bucket, _, key = path.lstrip("/").partition("/")
        return ProxyRequest(
            method=method,
            target=target,
            bucket=bucket,
            key=key,
            op=_classify(environ).op,
            query=dict(parse_qsl(parts.query, keep_blank_values=True)),
            headers=dict(head.lower),
        )

    # -- serving -----------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._writers.add(writer)
        with self._lock:
            self._stats.connections += 1
        upstream = _Upstream(self._upstream_address)
        try:
            while await self._one_request(reader, writer, upstream):
                pass
        except (_ClientGone, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client left, or broke the protocol: drop the connection
        except ValueError:
            pass  # a malformed message
        except asyncio.CancelledError:
            _abort(writer)
            raise
        finally:
            upstream.close()
            self._writers.discard(writer)
            self._handlers.discard(task)
            if not writer.transport.is_closing():
                writer.close()

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream: _Upstream
    ) -> bool:
        """Serve one request; True to keep the client connection for another."""
        head = _Head(await _read_head(reader))
        method, target, version = head.first.split(" ", 2)
        if (head.get("expect") or "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
        if head.chunked():
            body = await _read_chunked(reader)
        else:
            body = await reader.readexactly(head.content_length() or 0)
        keep_alive = not head.wants_close(version)

        req = self._describe(method, target, head)
        fault, settings, where = self._decide(req)
        if fault is Fault.CORRUPT_REQUEST and body:
            altered = bytearray(body)
            altered[min(len(body) - 1, int(where * len(body)))] ^= 0xFF
            body = bytes(altered)
            self._count_corrupted(f"{req.bucket}/{req.key}")
        request_id = f"FAULTPROXY{next(self._request_ids):08d}"

        if fault is not None and fault in _ERROR_REPLIES:
            status, code, message = _ERROR_REPLIES[fault]
            writer.write(
                _error_reply(status, code, message, request_id, method == "HEAD", keep_alive)
            )
            await writer.drain()
            return keep_alive
        if fault is Fault.RESET:
            _abort(writer)
            return False
        if fault is Fault.STALL:
            with contextlib.suppress(TimeoutError, ConnectionError):
                async with asyncio.timeout(settings.stall_seconds):
                    await reader.read(1)  # b"" as soon as the client gives up
            writer.close()
            return False

        raw = head.encode(drop=("expect",))
        try:
            up_reader, reply = await self._exchange(upstream, raw, body, method)
        except OSError:
            with self._lock:
                self._stats.upstream_errors += 1
            upstream.close()
            writer.write(
                _error_reply(
                    "502 Bad Gateway",
                    "BadGateway",
                    f"The upstream {self.upstream} could not be reached.",
                    request_id,
                    method == "HEAD",
                    keep_alive,
                )
            )
            await writer.drain()
            return keep_alive
        with self._lock:
            self._stats.forwarded += 1
            self._stats.body_bytes += len(body)
        corrupt_at = where if fault is Fault.CORRUPT else None
        return await self._relay(
            up_reader,
            upstream,
            reply,
            method,
            writer,
            fault,
            settings,
            keep_alive,
            corrupt_at,
            f"{req.bucket}/{req.key}",
            req.query,
        )

    async def _exchange(
        self, upstream: _Upstream, raw: bytes, body: bytes, method: str
    ) -> tuple[asyncio.StreamReader, _Head]:
        """Send the request upstream and read the final response head.

        A kept-alive upstream connection the server closed meanwhile is
        replaced once, transparently.
        """
        for attempt in (0, 1):
            reused = upstream.used
            up_reader, up_writer = await upstream.connect()
            try:
                up_writer.write(raw)
                if body:
                    up_writer.write(body)
                await up_writer.drain()
                while True:
                    reply = _Head(await up_reader.readuntil(b"\r\n\r\n"))
                    status = int(reply.first.split(" ", 2)[1])
                    if not 100 <= status < 200 or status == 101:
                        return up_reader, reply
            except (ConnectionError, asyncio.IncompleteReadError) as exc:
                upstream.close()
                stale = isinstance(exc, ConnectionError) or not exc.partial
                if not (reused and stale and attempt == 0):
                    raise ConnectionError(f"upstream failed: {exc!r}") from exc
        raise AssertionError("unreachable")

    async def _relay(
        self,
        up_reader: asyncio.StreamReader,
        upstream: _Upstream,
        reply: _Head,
        method: str,
        writer: asyncio.StreamWriter,
        fault: Fault | None,
        settings: _Settings,
        keep_alive: bool,
        corrupt_at: float | None = None,
        name: str = "",
        query: Mapping[str, str] | None = None,
    ) -> bool:
        """Pass the upstream response to the client (whole, cut, altered, or not at all).

        ``corrupt_at`` (a ``corrupt`` fault) places the inverted byte: that
        fraction of the way through a successful response's body data.
        ``query``: the request's (a ``repeat-token`` fault sends its
        continuation token or markers back as the next ones).
        """
        version, status_text = reply.first.split(" ", 1)
        status = int(status_text.split(" ", 1)[0])
        no_body = method == "HEAD" or status in (204, 304)
        length = None if no_body else reply.content_length()
        chunked = not no_body and reply.chunked()
        until_close = not no_body and length is None and not chunked
        upstream_close = until_close or reply.wants_close(version)
        # Connection and Keep-Alive are hop-by-hop: the client's connection
        # stays open whatever the server does with the proxy's, if it can.
        client_keep = keep_alive and not until_close
        head = reply.encode(
            drop=("connection", "keep-alive"),
            add=() if client_keep else [("Connection", "close")],
        )
        complete = False  # the upstream response was read to its end
        corrupt = corrupt_at is not None and 200 <= status < 300 and not no_body

        async def body_pieces() -> AsyncIterator[bytes]:
            if no_body:
                return
            if chunked:
                async for piece in _iter_chunked(up_reader):
                    yield piece
                return
            remaining = length
            while remaining is None or remaining > 0:
                piece = await up_reader.read(
                    _CHUNK if remaining is None else min(_CHUNK, remaining)
                )
                if not piece:
                    if remaining is None:
                        return
                    raise asyncio.IncompleteReadError(b"", remaining)
                if remaining is not None:
                    remaining -= len(piece)
                yield piece

        try:
            if fault is Fault.RESET_AFTER:
                async for _ in body_pieces():
                    pass
                complete = True
                _abort(writer)
                return False
            if fault is Fault.TRICKLE:
                body = bytearray()
                async for piece in body_pieces():
                    body += piece
                complete = True
                await self._trickle(writer, head, bytes(body), settings)
                return False
            if fault is Fault.TRUNCATE:
                body = bytearray()
                async for piece in body_pieces():
                    body += piece
                complete = True
                if body:
                    cut = min(len(body) - 1, int(len(body) * settings.truncate_fraction))
                    writer.write(head + bytes(body[:cut]))
                else:
                    writer.write(head[: max(1, len(head) // 2)])
                await writer.drain()
                writer.close()
                return False
            if fault is Fault.BAD_CHUNK or fault is Fault.REPEAT_TOKEN:
                raw = bytearray()
                async for piece in body_pieces():
                    raw += piece
                complete = True
                data = _dechunk(raw) if chunked else bytes(raw)
                if fault is Fault.REPEAT_TOKEN and 200 <= status < 300 and data:
                    data = _repeat_token(data, query or {})
                    writer.write(_reframed(reply, data, client_keep, chunk=False) + data)
                    await writer.drain()
                    return client_keep
                if fault is Fault.BAD_CHUNK and data:
                    size = f"{len(data):x}".encode()
                    bad = bytes([size[0] ^ 0xFF]) + size[1:]
                    framed = bad + b"\r\n" + data + b"\r\n0\r\n\r\n"
                    writer.write(_reframed(reply, data, False, chunk=True) + framed)
                    await writer.drain()
                    writer.close()
                    return False
                writer.write(head + bytes(raw))
                await writer.drain()
                return client_keep
            if corrupt and length is None:
                # Chunked or until close: the data's length is known at the end only.
                raw = bytearray()
                async for piece in body_pieces():
                    raw += piece
                complete = True
                spans = _chunk_spans(raw) if chunked else [(0, len(raw))]
                at = _data_offset(spans, corrupt_at or 0.0)
                if at is not None:
                    raw[at] ^= 0xFF
                    self._count_corrupted(name)
                writer.write(head + bytes(raw))
                await writer.drain()
                return client_keep
            # The byte to invert, as an offset into a Content-Length body.
            target = int((corrupt_at or 0.0) * length) if corrupt and length else -1
            offset = 0
            writer.write(head)
            async for piece in body_pieces():
                if offset <= target < offset + len(piece):
                    altered = bytearray(piece)
                    altered[target - offset] ^= 0xFF
                    piece = bytes(altered)
                    self._count_corrupted(name)
                offset += len(piece)
                writer.write(piece)
                await writer.drain()
            complete = True
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            # The server broke off mid-response (or the client left): so does the proxy.
            upstream.close()
            _abort(writer)
            return False
        finally:
            if upstream_close or not complete:
                upstream.close()
            else:
                upstream.used = True
        return client_keep

    def _count_corrupted(self, name: str) -> None:
        with self._lock:
            self._stats.corrupted += 1
            self._stats.corrupted_keys[name] += 1

    @staticmethod
    async def _trickle(
        writer: asyncio.StreamWriter, head: bytes, body: bytes, settings: _Settings
    ) -> None:
        """Send ``head`` now, then ``body`` slowly, for ``stall_seconds`` at most; close."""
        writer.write(head)
        await writer.drain()
        step = 0.1
        credit = 0.0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settings.stall_seconds
        sent = 0
        while sent < len(body) and loop.time() < deadline:
            await asyncio.sleep(min(step, max(0.0, deadline - loop.time())))
            credit += settings.trickle_bytes_per_second * step
            n = min(len(body) - sent, int(credit))
            if n <= 0:
                continue
            credit -= n
            writer.write(body[sent : sent + n])
            sent += n
            await writer.drain()
        writer.close()


def _dechunk(raw: bytes | bytearray) -> bytes:
    """The data of a raw chunked body (framing and trailers dropped)."""
    return b"".join(bytes(raw[at : at + n]) for at, n in _chunk_spans(raw))


def _reframed(reply: _Head, data: bytes, keep_alive: bool, *, chunk: bool) -> bytes:
    """``reply``'s head for ``data`` sent again: chunked, or with its own length."""
    add = [("Transfer-Encoding", "chunked")] if chunk else [("Content-Length", str(len(data)))]
    if not keep_alive:
        add.append(("Connection", "close"))
    drop = ("connection", "keep-alive", "content-length", "transfer-encoding")
    return reply.encode(drop=drop, add=add)


def _xml_text(value: str) -> bytes:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").encode()


def _set_element(body: bytes, name: bytes, value: bytes, root: bytes) -> bytes:
    """``body`` with element ``name`` holding ``value`` (added at the end of ``root``)."""
    tag = b"<" + name + b">" + value + b"</" + name + b">"
    out, n = re.subn(b"<" + name + b">[^<]*</" + name + b">", lambda _: tag, body)
    if not n:
        out = out.replace(b"</" + root + b">", tag + b"</" + root + b">", 1)
    return out


def _repeat_token(body: bytes, query: Mapping[str, str]) -> bytes:
    """A listing page that says it is truncated and names, as the next page,
    the one the request asked for (see ``Fault.REPEAT_TOKEN``)."""
    out = re.sub(rb"<IsTruncated>[^<]*</IsTruncated>", b"<IsTruncated>true</IsTruncated>", body)
    if b"<ListMultipartUploadsResult" in out:
        key = _xml_text(query.get("key-marker", ""))
        upload = _xml_text(query.get("upload-id-marker", ""))
        if not key:  # a first page: its last upload comes next again
            keys = re.findall(rb"<Key>([^<]*)</Key>", out)
            uploads = re.findall(rb"<UploadId>([^<]*)</UploadId>", out)
            if not keys or not uploads:
                return body
            key, upload = keys[-1], uploads[-1]
        root = b"ListMultipartUploadsResult"
        out = _set_element(out, b"NextKeyMarker", key, root)
        return _set_element(out, b"NextUploadIdMarker", upload, root)
    token = _xml_text(query.get("continuation-token", ""))
    return _set_element(out, b"NextContinuationToken", token, b"ListBucketResult")


def _has_body(req: ProxyRequest) -> bool:
    """Whether a request's head announces a body of at least one byte."""
    length = req.headers.get("content-length", "")
    return (length.isdigit() and int(length) > 0) or "chunked" in req.headers.get(
        "transfer-encoding", ""
    ).lower()


def _chunk_spans(raw: bytes | bytearray) -> list[tuple[int, int]]:
    """``(start, length)`` of each chunk's data in a raw chunked body (framing excluded)."""
    spans: list[tuple[int, int]] = []
    at = 0
    while True:
        eol = raw.index(b"\r\n", at)
        size = int(bytes(raw[at:eol]).split(b";", 1)[0].strip(), 16)
        if size == 0:
            return spans
        spans.append((eol + 2, size))
        at = eol + 2 + size + 2


def _data_offset(spans: list[tuple[int, int]], fraction: float) -> int | None:
    """The raw offset of the data byte ``fraction`` of the way through ``spans``."""
    total = sum(n for _, n in spans)
    if total == 0:
        return None
    target = min(total - 1, int(fraction * total))
    for start, n in spans:
        if target < n:
            return start + target
        target -= n
    raise AssertionError("unreachable")
