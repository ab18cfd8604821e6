"""A minimal asyncio HTTP/1.1 client: the S3 data path, GCS media reads, any plugin's.

Why not aiohttp: see ``docs/decisions/0007-own-s3-data-plane.md``. In short,
aiohttp receives every chunk as a fresh ``bytes`` (``data_received``) that a
reader then copies again; this client is an :class:`asyncio.BufferedProtocol`
whose ``get_buffer`` hands the socket the caller's own memoryview, so a GET
body goes from the kernel straight into the caller's buffer, and a request
costs a few tens of microseconds of Python.

What it does, and no more:

* keep-alive connections pooled per ``(scheme, host, port)``, at most
  ``max_connections`` per pool (callers beyond that wait), TLS through an
  :class:`ssl.SSLContext` for ``https``; idle connections older than
  ``idle_timeout`` are closed rather than reused;
* a request's line and headers go out in one ``write``; a body (one
  buffer, or a sequence of buffers sent one after the other, e.g. a
  multipart head, the data and its tail) is written from memoryviews in
  slices, each after the previous one has left the transport's buffer (so at
  most part of one slice is ever copied);
* the response is parsed in place by :class:`._protocol.Connection`:
  status line, headers, then the body -- with ``Content-Length`` received
  *directly* into a caller-given memoryview (``sink``, for 2xx answers) or
  into a buffer of exactly that size; ``Transfer-Encoding: chunked`` and
  read-until-close bodies are decoded into an internal buffer; ``1xx``
  interim answers are skipped;
* ``Connection: close`` (or HTTP/1.0) answers close the connection after;
* a reused connection that turns out to have died while idle (no byte of
  an answer came back) is retried once on a new connection -- for any
  method if nothing was written yet, and otherwise only for idempotent
  methods (``GET``, ``HEAD``, ``PUT``, ``DELETE``). A ``POST`` that may
  have reached the server is never re-sent here: the caller's retry policy
  decides (S3's CompleteMultipartUpload and CreateMultipartUpload are
  POSTs);
* connect timeouts, stalls (no byte received or sent for ``read_timeout``
  seconds), resets and an end of stream before the body's end raise
  :class:`~synxfer.TransientError`; so does a malformed answer (bad
  framing: a chunk size, a header line), damaged in transit as a reset
  connection is; an answer that is not HTTP at all (the wrong port) raises
  :class:`~synxfer.BackendError`, and a body larger than the caller's
  buffer :class:`BodyTooLarge` (a BackendError).

Nothing here logs; request headers (which carry signatures and tokens) are
never part of an exception message.
"""

from __future__ import annotations

import asyncio
import calendar
import collections
import ssl
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Final

from .._exceptions import BackendError, ConfigError, TransientError
from ._options import choice_of
from ._protocol import BodyReceiver, Connection, Dropped, HttpResponse, Malformed, TooLarge
from ._tls import Connected, TlsConnection, TlsThreads
from ._tls import connect as tls_connect
from ._tlsfast import native_choice

__all__ = ["Body", "BodyTooLarge", "HttpClient", "HttpResponse"]

Body = bytes | bytearray | memoryview

#: Bodies up to this size go out in the same write as the head (one copy of
#: a small body beats a second syscall).
_INLINE_BODY: Final = 16 * 1024
_IDEMPOTENT: Final = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
#: Chooses the ``https`` receive path of every client not told otherwise.
TLS_RECEIVE_ENV: Final = "SYNXFER_TLS_RECEIVE"
_TLS_RECEIVE: Final = ("threads", "loop")


class BodyTooLarge(BackendError):
    """An answer's body is larger than the caller's buffer (``sink``)."""


class _Pool:
    """Keep-alive connections to one ``(scheme, host, port)``, at most ``limit``."""

    def __init__(
        self,
        client: HttpClient,
        scheme: str,
        host: str,
        port: int,
    ) -> None:
        self.client = client
        self.scheme = scheme
        self.host = host
        self.port = port
        self.limit = client.max_connections
        self.idle: collections.deque[Connection] = collections.deque()
        self.open = 0
        self.waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self.closed = False
        #: The TLS session of the last connection released (threaded TLS):
        #: new connections resume it, a shorter handshake.
        self.session: ssl.SSLSession | None = None

    async def acquire(self) -> tuple[Connection, bool]:
        """A connection, and whether it was reused from the idle set."""
        idle_timeout = self.client.idle_timeout
        while True:
            if self.idle:
                now = time.monotonic()
                while self.idle:
                    conn = self.idle.pop()  # the most recently used
                    fresh = now - conn.idle_since < idle_timeout
                    if conn.reusable and not conn.closed and fresh and conn.alive():
                        return conn, True
                    conn.abort()
                    self.open -= 1
            if self.open < self.limit:
                self.open += 1
                try:
                    conn = await self._connect()
                except BaseException:
                    self.open -= 1
                    self._wake()
                    raise
                return conn, False
            fut = self.client.loop.create_future()
            self.waiters.append(fut)
            try:
                await fut
            except BaseException:
                if fut in self.waiters:
                    self.waiters.remove(fut)
                elif fut.done() and not fut.cancelled():
                    self._wake()  # pass the wake-up on
                raise

    async def _connect(self) -> Connection:
        loop = self.client.loop
        ssl_ctx = self.client.ssl_context() if self.scheme == "https" else None
        threads = self.client.tls_threads
        try:
            if ssl_ctx is not None and threads is not None:
                return await self._connect_tls(ssl_ctx, threads)
            async with asyncio.timeout(self.client.connect_timeout):
                receiver = self.client.receiver if ssl_ctx is None else None
                _, conn = await loop.create_connection(
                    lambda: Connection(loop, receiver),
                    self.host,
                    self.port,
                    ssl=ssl_ctx,
                    server_hostname=self.host if ssl_ctx is not None else None,
                )
        except TimeoutError:
            raise TransientError(
                f"connect timeout ({self.client.connect_timeout:g} s) to "
                f"{self.scheme}://{self.host}:{self.port}"
            ) from None
        except ssl.SSLCertVerificationError as exc:
            raise BackendError(
                f"TLS certificate of {self.host}:{self.port} not trusted: {exc.verify_message}"
            ) from exc
        except OSError as exc:
            raise TransientError(
                f"cannot connect to {self.scheme}://{self.host}:{self.port}: {exc.strerror or exc}"
            ) from exc
        return conn

    async def _connect_tls(self, ssl_ctx: ssl.SSLContext, threads: TlsThreads) -> TlsConnection:
        """A blocking TLS connection, connected and verified on a worker thread,
        resuming the pool's last TLS session when the server allows."""
        fut = threads.submit(
            tls_connect,
            self.host,
            self.port,
            ssl_ctx,
            self.client.connect_timeout,
            self.session,
            threads.native,
        )
        try:
            made = await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            # The thread may still connect: close what it makes.
            fut.add_done_callback(_close_made)
            raise
        sock = made.sock
        threads.handshakes += 1
        threads.resumed += bool(sock.session_reused)
        return TlsConnection(self.client.loop, sock, threads, made.native, made.ptr)

    def release(self, conn: Connection) -> None:
        if conn.reusable and not conn.closed and not self.closed:
            conn.idle_since = time.monotonic()
            if isinstance(conn, TlsConnection) and not conn.session_kept:
                # Once per connection: its first answer has brought the
                # server's session ticket (TLS 1.3) by now.
                conn.session_kept = True
                self.session = conn.sock.session or self.session
            self.idle.append(conn)
        else:
            conn.abort()
            self.open -= 1
        self._wake()

    def _wake(self) -> None:
        while self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    def close(self) -> None:
        self.closed = True
        while self.idle:
            self.idle.pop().abort()
            self.open -= 1


class HttpClient:
    """Pooled HTTP/1.1 requests. Create and use it inside one event loop.

    ``ssl_context`` (or a ``ca_bundle`` file for the default context)
    decides which servers are trusted over ``https``.

    ``request`` never raises a foreign exception: network trouble and a
    garbled answer are a :class:`~synxfer.TransientError`, an answer that is
    not HTTP a :class:`~synxfer.BackendError`; any status (including 4xx/5xx) is a
    normal :class:`HttpResponse`.
    """

    def __init__(
        self,
        *,
        max_connections: int = 16,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        idle_timeout: float = 15.0,
        ssl_context: ssl.SSLContext | None = None,
        ca_bundle: str | None = None,
        write_chunk: int = 256 * 1024,
        recv_threads: bool = False,
        tls_receive: str | None = None,
        tls_native: str | None = None,
    ) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1 (got {max_connections})")
        #: ``https`` exchanges on blocking TLS sockets in worker threads
        #: (``"threads"``, the default) or on the event loop's SSL transport
        #: (``"loop"``); see docs/decisions/0037-tls-receive-path.md.
        self.tls_receive = _tls_receive(tls_receive)
        #: On the threads path, read-ahead and the C body loop where they can
        #: run (``"auto"``) or never (``"off"``, or ``SYNXFER_TLS_NATIVE=off``);
        #: see docs/decisions/0046-tls-native-receive.md.
        self.tls_native = native_choice(tls_native)
        self.tls_threads = (
            TlsThreads(max_connections, native=self.tls_native == "auto")
            if self.tls_receive == "threads"
            else None
        )
        #: Worker threads (one per connection allowed) that receive large
        #: ``http`` bodies off the event loop; None: every body on the loop.
        self.receiver = BodyReceiver(max_connections) if recv_threads else None
        self.max_connections = max_connections
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.idle_timeout = idle_timeout
        self.write_chunk = write_chunk
        self._ssl = ssl_context
        self._ca_bundle = ca_bundle
        self._pools: dict[tuple[str, str, int], _Pool] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<HttpClient pools={len(self._pools)} max_connections={self.max_connections}>"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        return loop

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context: the one given, else the system's trust store (or
        ``ca_bundle``), made on first use."""
        if self._ssl is None:
            try:
                self._ssl = ssl.create_default_context(cafile=self._ca_bundle)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"cannot load the CA bundle {self._ca_bundle!r}: {exc}") from exc
        return self._ssl

    async def aclose(self) -> None:
        """Close every idle connection; later requests raise RuntimeError."""
        self._closed = True
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
        if self.receiver is not None:
            await self.receiver.aclose()
        if self.tls_threads is not None:
            await self.tls_threads.aclose()

    async def request(
        self,
        method: str,
        scheme: str,
        host: str,
        port: int,
        target: str,
        headers: Mapping[str, str],
        body: Body | Sequence[Body] | None = None,
        *,
        sink: memoryview | None = None,
        sink_status: int = 0,
        label: str = "",
    ) -> HttpResponse:
        """Send one request and return its complete answer.

        ``target`` is the encoded path and query; ``headers`` must include
        ``host`` (``Content-Length`` is added here). ``body`` is one buffer
        or a sequence of them, sent in order, none copied whole. A 2xx body with a
        ``Content-Length`` is received straight into ``sink`` when given (it
        must be large enough; ``response.length`` says how much arrived);
        with ``sink_status``, only an answer with that status goes there (a
        200 to a ranged GET -- a server that ignored ``Range`` -- does not).
        ``label`` (a URL) names the request in error messages.
        """
        if self._closed:
            raise RuntimeError("HttpClient is closed")
        key = (scheme, host, port)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = _Pool(self, scheme, host, port)
        pieces = _pieces(body)
        head = _request_head(method, target, headers, sum(len(p) for p in pieces))
        where = label or f"{scheme}://{host}:{port}{target.split('?', 1)[0]}"
        head_only = method == "HEAD"
        for attempt in (1, 2):
            try:
                conn, reused = await pool.acquire()
            except BackendError as exc:  # could not connect: name the request
                if exc.url is None:
                    exc.url = where
                raise
            try:
                if isinstance(conn, TlsConnection):
                    await conn.exchange(
                        head,
                        pieces,
                        sink,
                        sink_status,
                        head_only,
                        self.read_timeout,
                        self.write_chunk,
                    )
                else:
                    await self._exchange(conn, head, pieces, sink, sink_status, head_only)
                response = conn.take_response()
            except Dropped as exc:
                await _discard(pool, conn)
                safe = not conn.sent or method in _IDEMPOTENT
                if attempt == 1 and reused and not exc.received and not exc.timeout and safe:
                    continue  # it died while idle: the server never answered this request
                raise TransientError(f"network error: {exc}", url=where) from None
            except Malformed as exc:
                await _discard(pool, conn)
                if isinstance(exc, TooLarge):
                    raise BodyTooLarge(str(exc), url=where, status=conn.status) from None
                # A framing error is damage to one answer in transit: retried
                # (by the caller's policy) like a connection reset mid-answer.
                error = TransientError if exc.transient else BackendError
                raise error(f"malformed HTTP response: {exc}", url=where) from None
            except BaseException:  # cancelled mid-exchange: the stream is unusable
                await _discard(pool, conn)
                raise
            conn.end()
            pool.release(conn)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def _exchange(
        self,
        conn: Connection,
        head: bytes,
        pieces: tuple[memoryview, ...],
        sink: memoryview | None,
        sink_status: int,
        head_only: bool,
    ) -> None:
        """Write the request and wait for the answer (in ``conn``)."""
        transport = conn.transport
        conn.sent = False
        if transport is None or transport.is_closing() or conn.closed:
            raise Dropped("connection closed before the request", received=False)
        conn.begin(sink, sink_status, head_only)
        timeout = self.read_timeout
        conn.sent = True
        if sum(len(p) for p in pieces) <= _INLINE_BODY:
            transport.write(b"".join([head, *pieces]))
        else:
            transport.write(head)
            step = self.write_chunk
            for view in pieces:
                for start in range(0, len(view), step):
                    await conn.drain(timeout)
                    if conn.answered or conn.closed:
                        # An early answer (an error, usually) or a dead connection:
                        # stop sending; the rest of the body would be garbage.
                        conn.reusable = False
                        await conn.wait_answer(timeout)
                        return
                    transport.write(view[start : start + step])
        await conn.wait_answer(timeout)


#: Answers worth the same request again: a timeout, throttling (429; 509,
#: which botocore's legacy mode reads as a limit exceeded) and the 5xx
#: botocore's standard mode retries (500, 502, 503, 504). Any other 5xx --
#: 501 Not Implemented (a feature an S3-compatible server lacks), 505 --
#: would be answered again: failing at once says so without the backoff.
TRANSIENT_STATUS: Final = frozenset({408, 429, 500, 502, 503, 504, 509})


_MONTHS: Final = {
    m: i
    for i, m in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}


def parse_http_date(text: str | None) -> float | None:
    """An HTTP date (``Last-Modified``) as seconds since the epoch; None if
    absent or unreadable.

    The form servers send (``Tue, 02 Jan 2024 03:04:05 GMT``) is read here;
    only the obsolete forms go through :mod:`email.utils`, imported then: it
    loads some 16 modules that every download's start-up would pay. A date
    that names no zone (asctime, ``-0000``) is GMT, as HTTP defines every
    date, never the machine's local time.
    """
    if not text:
        return None
    parts = text.split()
    if len(parts) == 6 and parts[5] == "GMT":
        month = _MONTHS.get(parts[2])
        clock = parts[4].split(":")
        if month is not None and len(clock) == 3:
            try:
                day, year = int(parts[1]), int(parts[3])
                hms = (int(clock[0]), int(clock[1]), int(clock[2]))
                return float(calendar.timegm((year, month, day, *hms, 0, 0, 0)))
            except ValueError:
                pass
    from email.utils import parsedate_tz

    parsed = parsedate_tz(text)
    if parsed is None:
        return None
    return float(calendar.timegm(parsed[:9]) - (parsed[9] or 0))


def _tls_receive(choice: str | None) -> str:
    """The ``https`` receive path: ``choice``, else the environment's, else threads."""
    return choice_of(choice, option="tls_receive", env=TLS_RECEIVE_ENV, choices=_TLS_RECEIVE)


def _close_made(fut: Future[Connected]) -> None:
    """Close the socket a cancelled connect made after all."""
    if not fut.cancelled() and fut.exception() is None:
        fut.result().sock.close()


async def _discard(pool: _Pool, conn: Connection) -> None:
    """Drop a connection whose exchange failed; give its slot back to the pool.

    A receiver thread may still be writing into the caller's ``sink``: it is
    stopped and waited for (briefly) before the request returns.
    """
    conn.abort()
    try:
        await conn.settle()
    finally:
        pool.release(conn)


def _pieces(body: Body | Sequence[Body] | None) -> tuple[memoryview, ...]:
    """The body as byte views, sent one after the other (none: no body)."""
    if body is None:
        return ()
    parts = (body,) if isinstance(body, bytes | bytearray | memoryview) else tuple(body)
    views = []
    for part in parts:
        view = part if isinstance(part, memoryview) else memoryview(part)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        views.append(view)
    return tuple(views)


def _request_head(method: str, target: str, headers: Mapping[str, str], length: int) -> bytes:
    lines = [f"{method} {target} HTTP/1.1\r\n"]
    lines += [f"{k}: {v}\r\n" for k, v in headers.items()]
    if length or method in ("PUT", "POST"):
        lines.append(f"content-length: {length}\r\n")
    lines.append("\r\n")
    text = "".join(lines)
    if text.count("\n") != len(lines) or text.count("\r") != len(lines):
        # A line break inside a value (a token read with its newline) would
        # split the request: refused, never sent.
        bad = next((k for k, v in headers.items() if "\n" in k + v or "\r" in k + v), "")
        raise _bad_header(bad, "a line break")
    try:
        return text.encode("ascii")
    except UnicodeEncodeError:
        bad = next((k for k, v in headers.items() if not (k + v).isascii()), "")
        raise _bad_header(bad, "non-ASCII characters") from None


def _bad_header(name: str, what: str) -> ConfigError:
    """The error for a header that cannot be sent, naming it, never its value
    (an ``authorization`` header is a credential)."""
    if not name:
        return ConfigError(f"the HTTP request line has {what}: check the URL")
    carried = (
        "the credentials or token in use"
        if name.lower() in ("authorization", "x-amz-security-token")
        else "the value given for it"
    )
    return ConfigError(f"HTTP header {name!r} has {what}: check {carried}")
