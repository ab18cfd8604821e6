"""A minimal asyncio HTTP/1.1 client for the S3 data path.

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
* a request's line and headers go out in one ``write``; a body is written
  from a memoryview in slices, each after the previous one has left the
  transport's buffer (so at most part of one slice is ever copied);
* the response is parsed in place: status line, headers, then the body --
  with ``Content-Length`` received *directly* into a caller-given
  memoryview (``sink``, for 2xx answers) or into a buffer of exactly that
  size; ``Transfer-Encoding: chunked`` and read-until-close bodies are
  decoded into an internal buffer; ``1xx`` interim answers are skipped;
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
  :class:`~synxfer.TransientError`; a malformed answer raises
  :class:`~synxfer.BackendError`.

Nothing here logs; request headers (which carry signatures and tokens) are
never part of an exception message.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import time
from collections.abc import Mapping
from typing import Final

from synxfer.backend import BackendError, ConfigError, TransientError

__all__ = ["HttpClient", "HttpResponse"]

Body = bytes | bytearray | memoryview

_BUF: Final = 64 * 1024
#: Largest response head (status line and headers) accepted.
_HEAD_MAX: Final = 256 * 1024
#: Receive size while a head is awaited and the body goes to a sink.
_HEAD_BITE: Final = 4096
#: Bodies up to this size go out in the same write as the head (one copy of
#: a small body beats a second syscall).
_INLINE_BODY: Final = 16 * 1024
_IDEMPOTENT: Final = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})

# Connection states.
_IDLE: Final = 0
_HEAD: Final = 1
_BODY_INTO: Final = 2  # Content-Length body, received into _body_view
_CHUNKED: Final = 3
_UNTIL_EOF: Final = 4
_DONE: Final = 5


class HttpResponse:
    """A complete response: status, headers (lower-case names), body.

    ``body`` is empty when the body went into the caller's ``sink``;
    ``length`` is the number of body bytes received either way.
    """

    __slots__ = ("body", "headers", "length", "reason", "status")

    def __init__(
        self,
        status: int,
        reason: str,
        headers: dict[str, str],
        body: bytes | bytearray,
        length: int,
    ) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
        self.length = length

    def __repr__(self) -> str:
        return f"<HttpResponse {self.status} {self.reason} ({self.length} bytes)>"


class _Dropped(Exception):
    """The connection ended before a complete answer; ``received``: any byte of one."""

    def __init__(self, message: str, *, received: bool, timeout: bool = False) -> None:
        super().__init__(message)
        self.received = received
        self.timeout = timeout


class _Malformed(Exception):
    """The server's answer is not HTTP/1.x as we know it."""


class _TooLarge(_Malformed):
    """A body larger than the caller's buffer (the object changed, or no Range)."""


class _Connection(asyncio.BufferedProtocol):
    """One HTTP/1.1 connection; parses answers into its buffer or the caller's."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self.reusable = True
        self.sent = False  # any byte of the current request written
        # Receive buffer for heads, short bodies and chunked data.
        self._buf = bytearray(_BUF)
        self._n = 0  # bytes in _buf
        self._pos = 0  # parse position in _buf
        self._state = _IDLE
        self._waiter: asyncio.Future[None] | None = None
        self._drain: asyncio.Future[None] | None = None
        self._paused = False
        self._progress = 0  # bumped on every receive and write resume
        self._received = 0  # bytes of the current answer received
        self._error: BaseException | None = None
        # The current request and answer.
        self._head_only = False
        self._sink: memoryview | None = None
        self._sink_status = 0
        self._body_view: memoryview | None = None
        self._body: bytearray | None = None
        self._expected = 0
        self._got = 0
        self._chunk_left = -1  # -1: expecting a chunk-size line
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}

    # -- asyncio protocol ----------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        # Pause as soon as anything is left unsent: a body slice is written
        # only once the previous one has gone, so the transport never copies
        # more than the tail of one slice. (Not high=0: the TLS transport
        # then pauses after every write, even when nothing is left, and never
        # resumes.)
        transport.set_write_buffer_limits(high=1, low=0)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._state == _BODY_INTO:
            assert self._body_view is not None
            return self._body_view[self._got : self._expected]
        free = len(self._buf) - self._n
        if free < 4096:
            try:
                self._make_room()
            except _Malformed as exc:  # a head that never ends: give up on this stream
                self._fail(exc)
                if self.transport is not None:
                    self.transport.abort()
                return memoryview(bytearray(4096))
        if self._state == _HEAD and self._sink is not None:
            # Read the head in small bites, so that little of a body meant for
            # the sink lands here first (and has to be copied over).
            return memoryview(self._buf)[self._n : self._n + _HEAD_BITE]
        return memoryview(self._buf)[self._n :]

    def buffer_updated(self, nbytes: int) -> None:
        self._progress += 1
        self._received += nbytes
        if self._state == _BODY_INTO:
            self._got += nbytes
            if self._got >= self._expected:
                self._finish()
            return
        self._n += nbytes
        if self._state == _IDLE or self._state == _DONE:
            # Bytes nobody asked for: the connection cannot be trusted.
            self.reusable = False
            if self.transport is not None:
                self.transport.close()
            return
        try:
            self._parse()
        except _Malformed as exc:
            self._fail(exc)
            if self.transport is not None:
                self.transport.abort()

    def eof_received(self) -> bool:
        self.reusable = False
        if self._state == _UNTIL_EOF:
            self._finish_until_eof()
        return False  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if self._state == _UNTIL_EOF:
            self._finish_until_eof()
        elif self._state in (_HEAD, _BODY_INTO, _CHUNKED):
            detail = f": {exc}" if exc else ""
            self._fail(
                _Dropped(
                    f"connection closed before the end of the response{detail}",
                    received=self._received > 0,
                )
            )
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._progress += 1
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    # -- parsing -------------------------------------------------------------

    def _make_room(self) -> None:
        """Compact parsed bytes away, or grow the receive buffer."""
        if self._pos > 0:
            rest = self._n - self._pos
            self._buf[:rest] = self._buf[self._pos : self._n]
            self._n, self._pos = rest, 0
        if len(self._buf) - self._n < 4096:
            if self._state == _HEAD and len(self._buf) >= _HEAD_MAX:
                raise _Malformed(f"response head larger than {_HEAD_MAX} bytes")
            self._buf.extend(bytes(len(self._buf)))

    def _parse(self) -> None:
        while True:
            state = self._state
            if state == _HEAD:
                if not self._parse_head():
                    return
            elif state == _CHUNKED:
                if not self._parse_chunks():
                    return
            else:
                return  # _UNTIL_EOF keeps accumulating; _DONE: finished

    def _parse_head(self) -> bool:
        end = self._buf.find(b"\r\n\r\n", self._pos, self._n)
        if end < 0:
            if self._n - self._pos > _HEAD_MAX:
                raise _Malformed(f"response head larger than {_HEAD_MAX} bytes")
            return False
        head = self._buf[self._pos : end].decode("latin-1")
        self._pos = end + 4
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise _Malformed(f"bad status line {lines[0][:100]!r}")
        status = int(parts[1])
        if 100 <= status < 200:  # interim (100 Continue): the real answer follows
            return True
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise _Malformed(f"bad header line {line[:100]!r}")
            name = name.strip().lower()
            value = value.strip()
            old = headers.get(name)
            headers[name] = value if old is None else f"{old}, {value}"
        self.status = status
        self.reason = parts[2] if len(parts) > 2 else ""
        self.headers = headers
        connection = headers.get("connection", "").lower()
        if parts[0] == "HTTP/1.0":
            self.reusable = self.reusable and "keep-alive" in connection
        elif "close" in connection:
            self.reusable = False
        self._start_body()
        return True

    def _sink_for(self, status: int) -> memoryview | None:
        wanted = self._sink_status
        if wanted:
            return self._sink if status == wanted else None
        return self._sink if 200 <= status < 300 else None

    def _start_body(self) -> None:
        status = self.status
        headers = self.headers
        if self._head_only or status == 204 or status == 304:
            self._finish()
            return
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._state = _CHUNKED
            self._chunk_left = -1
            self._body = bytearray()
            return
        cl = headers.get("content-length")
        if cl is None:
            self._state = _UNTIL_EOF
            self.reusable = False
            return
        if not cl.isdigit():  # "n, n" (a repeated header) is fine; anything else is not
            values = {v.strip() for v in cl.split(",")}
            cl = values.pop() if len(values) == 1 else ""
            if not cl.isdigit():
                raise _Malformed(f"bad Content-Length {headers['content-length'][:50]!r}")
        length = int(cl)
        self._expected = length
        sink = self._sink_for(status)
        if sink is not None:
            if length > len(sink):
                raise _TooLarge(
                    f"response body of {length} bytes does not fit the {len(sink)}-byte buffer"
                )
            view = sink
        else:
            self._body = bytearray(length)
            view = memoryview(self._body)
        # What arrived with the head goes in first (a small copy).
        have = min(self._n - self._pos, length)
        if have:
            view[:have] = memoryview(self._buf)[self._pos : self._pos + have]
            self._pos += have
        if self._pos < self._n:
            self.reusable = False  # more than the body: do not trust the stream
        self._got = have
        if have >= length:
            self._finish()
        else:
            self._body_view = view
            self._state = _BODY_INTO

    def _parse_chunks(self) -> bool:
        buf = self._buf
        body = self._body
        assert body is not None
        while True:
            left = self._chunk_left
            if left == -1:  # a chunk-size line
                eol = buf.find(b"\r\n", self._pos, self._n)
                if eol < 0:
                    if self._n - self._pos > 4096:
                        raise _Malformed("chunk-size line too long")
                    return False
                size_text = bytes(buf[self._pos : eol]).split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    size = -1
                if size < 0:
                    raise _Malformed(f"bad chunk size {size_text[:20]!r}")
                self._pos = eol + 2
                self._chunk_left = size if size else -2
                continue
            if left == -2:  # after the last chunk: trailers, then an empty line
                while True:
                    eol = buf.find(b"\r\n", self._pos, self._n)
                    if eol < 0:
                        return False
                    empty = eol == self._pos
                    self._pos = eol + 2
                    if empty:
                        self._finish_chunked()
                        return True
            if left > 0:  # chunk data
                take = min(left, self._n - self._pos)
                if take:
                    body += memoryview(buf)[self._pos : self._pos + take]
                    self._pos += take
                    self._chunk_left = left = left - take
                if left > 0:
                    self._compact()
                    return False
            # The CRLF after a chunk's data.
            if self._n - self._pos < 2:
                return False
            if buf[self._pos : self._pos + 2] != b"\r\n":
                raise _Malformed("chunk data not followed by CRLF")
            self._pos += 2
            self._chunk_left = -1

    def _compact(self) -> None:
        """Drop parsed bytes when the buffer is fully consumed (cheap, common)."""
        if self._pos == self._n:
            self._pos = self._n = 0

    def _finish_chunked(self) -> None:
        body = self._body
        assert body is not None
        sink = self._sink_for(self.status)
        if sink is not None:
            if len(body) > len(sink):
                raise _TooLarge(
                    f"response body of {len(body)} bytes does not fit the {len(sink)}-byte buffer"
                )
            sink[: len(body)] = body
            self._got = len(body)
            self._body = bytearray()
        else:
            self._got = len(body)
        if self._pos < self._n:
            self.reusable = False
        self._finish()

    def _finish_until_eof(self) -> None:
        data = self._buf[self._pos : self._n]
        self._pos = self._n
        sink = self._sink_for(self.status)
        if sink is not None:
            if len(data) > len(sink):
                self._fail(
                    _TooLarge(
                        f"response body of {len(data)}+ bytes does not fit the "
                        f"{len(sink)}-byte buffer"
                    )
                )
                return
            sink[: len(data)] = data
            self._body = bytearray()
        else:
            self._body = data
        self._got = len(data)
        self._finish()

    def _finish(self) -> None:
        self._state = _DONE
        self._body_view = None
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        drain = self._drain
        if drain is not None and not drain.done():
            drain.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        self._state = _DONE
        self.reusable = False
        self._body_view = None
        if self._error is None:
            self._error = exc
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        drain = self._drain
        if drain is not None and not drain.done():
            drain.set_result(None)

    # -- one exchange --------------------------------------------------------

    def begin(self, sink: memoryview | None, sink_status: int, head_only: bool) -> None:
        """Prepare for a request's answer (called before anything is written)."""
        if len(self._buf) > _BUF:
            self._buf = bytearray(_BUF)
        self._n = self._pos = 0
        self._state = _HEAD
        self._sink = sink
        self._sink_status = sink_status
        self._head_only = head_only
        self._body = None
        self._body_view = None
        self._received = 0
        self._got = 0
        self._error = None
        self._waiter = self.loop.create_future()

    def end(self) -> None:
        """Forget the request (its answer has been taken)."""
        self._state = _IDLE
        self._sink = None
        self._body = None
        self._body_view = None
        self._waiter = None
        self._drain = None
        if self._n != self._pos:
            self.reusable = False
        self._n = self._pos = 0

    @property
    def answered(self) -> bool:
        return self._state == _DONE

    def take_response(self) -> HttpResponse:
        if self._error is not None:
            raise self._error
        body: bytes | bytearray = self._body if self._body is not None else b""
        return HttpResponse(self.status, self.reason, self.headers, body, self._got)

    async def wait_answer(self, stall: float) -> None:
        waiter = self._waiter
        assert waiter is not None
        if not waiter.done():
            await self._watch(waiter, stall)

    async def drain(self, stall: float) -> None:
        """Wait until the transport's buffer is empty (or the answer is in)."""
        if not self._paused or self._state == _DONE or self.closed:
            return
        drain = self._drain = self.loop.create_future()
        await self._watch(drain, stall)

    async def _watch(self, fut: asyncio.Future[None], stall: float) -> None:
        """Await ``fut``; ``stall`` seconds without progress abort the connection."""
        seen = self._progress
        handle: asyncio.TimerHandle | None = None

        def check() -> None:
            nonlocal seen, handle
            if fut.done():
                return
            if self._progress != seen:
                seen = self._progress
                handle = self.loop.call_later(stall, check)
                return
            self._fail(
                _Dropped(
                    f"no data for {stall:g} s (stalled)",
                    received=self._received > 0,
                    timeout=True,
                )
            )
            if not fut.done():
                fut.set_result(None)
            if self.transport is not None:
                self.transport.abort()

        handle = self.loop.call_later(stall, check)
        try:
            await fut
        finally:
            if handle is not None:
                handle.cancel()

    def abort(self) -> None:
        self.reusable = False
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


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
        self.idle: collections.deque[_Connection] = collections.deque()
        self.open = 0
        self.waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self.closed = False

    async def acquire(self) -> tuple[_Connection, bool]:
        """A connection, and whether it was reused from the idle set."""
        idle_timeout = self.client.idle_timeout
        while True:
            if self.idle:
                now = time.monotonic()
                while self.idle:
                    conn = self.idle.pop()  # the most recently used
                    if conn.reusable and not conn.closed and now - conn.idle_since < idle_timeout:
                        transport = conn.transport
                        if transport is not None and not transport.is_closing():
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

    async def _connect(self) -> _Connection:
        loop = self.client.loop
        ssl_ctx = self.client.ssl_context() if self.scheme == "https" else None
        try:
            async with asyncio.timeout(self.client.connect_timeout):
                _, conn = await loop.create_connection(
                    lambda: _Connection(loop),
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

    def release(self, conn: _Connection) -> None:
        if conn.reusable and not conn.closed and not self.closed:
            conn.idle_since = time.monotonic()
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

    ``request`` never raises a foreign exception: network trouble is a
    :class:`~synxfer.TransientError`, a malformed answer a
    :class:`~synxfer.BackendError`; any status (including 4xx/5xx) is a
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
    ) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1 (got {max_connections})")
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

    async def request(
        self,
        method: str,
        scheme: str,
        host: str,
        port: int,
        target: str,
        headers: Mapping[str, str],
        body: Body | None = None,
        *,
        sink: memoryview | None = None,
        sink_status: int = 0,
        label: str = "",
    ) -> HttpResponse:
        """Send one request and return its complete answer.

        ``target`` is the encoded path and query; ``headers`` must include
        ``host`` (``Content-Length`` is added here). A 2xx body with a
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
        if isinstance(body, memoryview) and (body.format != "B" or body.ndim != 1):
            body = body.cast("B")
        head = _request_head(method, target, headers, 0 if body is None else len(body))
        where = label or f"{scheme}://{host}:{port}{target.split('?', 1)[0]}"
        head_only = method == "HEAD"
        for attempt in (1, 2):
            conn, reused = await pool.acquire()
            try:
                await self._exchange(conn, head, body, sink, sink_status, head_only)
                response = conn.take_response()
            except _Dropped as exc:
                conn.abort()
                pool.release(conn)
                safe = not conn.sent or method in _IDEMPOTENT
                if attempt == 1 and reused and not exc.received and not exc.timeout and safe:
                    continue  # it died while idle: the server never answered this request
                raise TransientError(f"network error: {exc}", url=where) from None
            except _Malformed as exc:
                conn.abort()
                pool.release(conn)
                what = "" if isinstance(exc, _TooLarge) else "malformed HTTP response: "
                raise BackendError(f"{what}{exc}", url=where) from None
            except BaseException:  # cancelled mid-exchange: the stream is unusable
                conn.abort()
                pool.release(conn)
                raise
            conn.end()
            pool.release(conn)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def _exchange(
        self,
        conn: _Connection,
        head: bytes,
        body: Body | None,
        sink: memoryview | None,
        sink_status: int,
        head_only: bool,
    ) -> None:
        """Write the request and wait for the answer (in ``conn``)."""
        transport = conn.transport
        conn.sent = False
        if transport is None or transport.is_closing() or conn.closed:
            raise _Dropped("connection closed before the request", received=False)
        conn.begin(sink, sink_status, head_only)
        timeout = self.read_timeout
        conn.sent = True
        if body is None or len(body) == 0:
            transport.write(head)
        elif len(body) <= _INLINE_BODY:
            transport.write(head + body)
        else:
            transport.write(head)
            view = body if isinstance(body, memoryview) else memoryview(body)
            step = self.write_chunk
            for start in range(0, len(view), step):
                await conn.drain(timeout)
                if conn.answered or conn.closed:
                    # An early answer (an error, usually) or a dead connection:
                    # stop sending; the rest of the body would be garbage.
                    conn.reusable = False
                    break
                transport.write(view[start : start + step])
        await conn.wait_answer(timeout)


def _request_head(method: str, target: str, headers: Mapping[str, str], length: int) -> bytes:
    lines = [f"{method} {target} HTTP/1.1\r\n"]
    lines += [f"{k}: {v}\r\n" for k, v in headers.items()]
    if length or method in ("PUT", "POST"):
        lines.append(f"content-length: {length}\r\n")
    lines.append("\r\n")
    text = "".join(lines)
    try:
        return text.encode("ascii")
    except UnicodeEncodeError:
        bad = next(k for k, v in headers.items() if not (k + v).isascii())
        raise ValueError(f"HTTP header {bad!r} has non-ASCII characters") from None
