r"""One HTTP/1.1 connection of the SDK's :class:`~synxfer.backend.HttpClient`: a BufferedProtocol.

:class:`Connection` parses answers in place -- status line, headers, then
the body: with ``Content-Length`` received *directly* into a caller-given
memoryview (``sink``, for 2xx answers) or into a buffer of exactly that
size; ``Transfer-Encoding: chunked`` and read-until-close bodies are decoded
into an internal buffer; ``1xx`` interim answers are skipped. Its
``get_buffer`` hands the socket the unfilled part of the caller's buffer
once the head is parsed, so the kernel writes the body straight into it.

With a :class:`BodyReceiver` (plain-TCP connections only, never TLS), a
``Content-Length`` body with at least :data:`OFFLOAD_MIN` bytes still to
come is received by a worker thread instead: the transport stops reading,
the thread ``readv``\s the rest of the body into the same buffer from a
duplicate of the socket's descriptor, and the event loop takes the
connection back (and resumes reading) once the thread is done. The loop
thread then no longer does every body's kernel copy itself
(``docs/decisions/0013-receive-off-the-loop.md``).

The pool, the request loop and the error policy are in :mod:`._http`.
Nothing here logs or keeps request headers.
"""

from __future__ import annotations

import asyncio
import os
import select
from concurrent.futures import ThreadPoolExecutor
from typing import Final

__all__ = [
    "OFFLOAD_MIN",
    "BodyReceiver",
    "Connection",
    "Dropped",
    "HttpResponse",
    "Malformed",
    "TooLarge",
]

_BUF: Final = 64 * 1024
#: Largest response head (status line and headers) accepted.
_HEAD_MAX: Final = 256 * 1024
#: Receive size while a head is awaited and the body goes to a sink.
_HEAD_BITE: Final = 4096
#: A body with at least this much still to come goes to a receiver thread.
OFFLOAD_MIN: Final = 1024 * 1024
#: Looks per ``read_timeout`` of the stall watchdog (see ``Connection._watch``).
_STALL_TICKS: Final = 4
#: How long a receiver thread waits for data before looking at its stop flag.
_POLL_MS: Final = 50

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


class Dropped(Exception):
    """The connection ended before a complete answer; ``received``: any byte of one."""

    def __init__(self, message: str, *, received: bool, timeout: bool = False) -> None:
        super().__init__(message)
        self.received = received
        self.timeout = timeout


class Malformed(Exception):
    """The server's answer is not HTTP/1.x as we know it.

    ``transient``: whether another attempt may succeed. A framing error (a
    bad chunk size, a header line cut or garbled) is what a flipped bit or a
    broken middlebox does to one answer, so it is retried like a reset
    connection; an answer that is not HTTP at all (the wrong port) or that
    breaks a limit of ours would fail the same way every time.
    """

    def __init__(self, message: str, *, transient: bool = True) -> None:
        super().__init__(message)
        self.transient = transient


class TooLarge(Malformed):
    """A body larger than the caller's buffer (the object changed, or no Range)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, transient=False)


class _RecvJob:
    """One body being received by a worker thread (see :meth:`Connection._offload`)."""

    __slots__ = ("eof", "error", "expected", "fd", "fut", "got", "stop", "view")

    def __init__(self, fd: int, view: memoryview, got: int, expected: int) -> None:
        self.fd = fd  # a duplicate of the socket's descriptor, closed by the thread
        self.view = view
        self.got = got
        self.expected = expected
        self.stop = False  # set on the loop: give up at the next wake-up
        self.eof = False
        self.error: OSError | None = None
        self.fut: asyncio.Future[None] | None = None  # the thread's, on the loop


class BodyReceiver:
    """Worker threads that receive large plain-TCP bodies off the event loop.

    At most ``threads`` bodies are received at once; a body that finds them
    all busy stays on the loop. Owned by an :class:`~._http.HttpClient` and
    closed with it.
    """

    def __init__(self, threads: int) -> None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1 (got {threads})")
        self.threads = threads
        self.closed = False
        self._executor: ThreadPoolExecutor | None = None
        self._jobs: set[_RecvJob] = set()

    def __repr__(self) -> str:
        return f"<BodyReceiver threads={self.threads} busy={len(self._jobs)}>"

    @property
    def busy(self) -> int:
        """Bodies being received by a thread now."""
        return len(self._jobs)

    def free(self) -> bool:
        return not self.closed and len(self._jobs) < self.threads

    def submit(
        self, loop: asyncio.AbstractEventLoop, conn: Connection, job: _RecvJob
    ) -> asyncio.Future[None]:
        executor = self._executor
        if executor is None:
            executor = self._executor = ThreadPoolExecutor(
                self.threads, thread_name_prefix="synxfer-s3-recv"
            )
        fut = loop.run_in_executor(executor, conn._receive_body, job)
        self._jobs.add(job)
        return fut

    def done(self, job: _RecvJob) -> None:
        self._jobs.discard(job)

    async def aclose(self) -> None:
        """Stop every thread's body (each is dropped) and end the threads."""
        self.closed = True
        busy = bool(self._jobs)
        for job in self._jobs:
            job.stop = True
        executor, self._executor = self._executor, None
        if executor is None:
            return
        if busy:  # they wake within _POLL_MS and close their descriptors
            await asyncio.to_thread(executor.shutdown, wait=True)
        else:
            executor.shutdown(wait=False)


class Connection(asyncio.BufferedProtocol):
    """One HTTP/1.1 connection; parses answers into its buffer or the caller's.

    ``receiver``: worker threads for large bodies (ignored on TLS transports).
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, receiver: BodyReceiver | None = None
    ) -> None:
        self.loop = loop
        self._receiver = receiver
        self._job: _RecvJob | None = None
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
        if self._receiver is not None and (
            transport.get_extra_info("sslcontext") is not None
            or transport.get_extra_info("socket") is None
        ):
            # TLS is decrypted in userspace by the transport: it stays on the loop.
            self._receiver = None
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
            except Malformed as exc:  # a head that never ends: give up on this stream
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
        except Malformed as exc:
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
        self._stop_job()
        if self._state == _UNTIL_EOF:
            self._finish_until_eof()
        elif self._state in (_HEAD, _BODY_INTO, _CHUNKED):
            detail = f": {exc}" if exc else ""
            self._fail(
                Dropped(
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
                raise Malformed(f"response head larger than {_HEAD_MAX} bytes", transient=False)
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
                raise Malformed(f"response head larger than {_HEAD_MAX} bytes", transient=False)
            return False
        head = self._buf[self._pos : end].decode("latin-1")
        self._pos = end + 4
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            # Not even "HTTP/" (a server of another protocol on that port):
            # no retry helps. A garbled status line of an HTTP answer may.
            http = lines[0].startswith("HTTP/")
            raise Malformed(f"bad status line {lines[0][:100]!r}", transient=http)
        status = int(parts[1])
        if 100 <= status < 200:  # interim (100 Continue): the real answer follows
            return True
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise Malformed(f"bad header line {line[:100]!r}")
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
                raise Malformed(f"bad Content-Length {headers['content-length'][:50]!r}")
        length = int(cl)
        self._expected = length
        sink = self._sink_for(status)
        if sink is not None:
            if length > len(sink):
                raise TooLarge(
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
            if self._receiver is not None and length - have >= OFFLOAD_MIN:
                self._offload()

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
                        raise Malformed("chunk-size line too long")
                    return False
                size_text = bytes(buf[self._pos : eol]).split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    size = -1
                if size < 0:
                    raise Malformed(f"bad chunk size {size_text[:20]!r}")
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
                raise Malformed("chunk data not followed by CRLF")
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
                raise TooLarge(
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
                    TooLarge(
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
        self._stop_job()
        self._body_view = None
        if self._error is None:
            self._error = exc
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        drain = self._drain
        if drain is not None and not drain.done():
            drain.set_result(None)

    # -- bodies received off the loop ------------------------------------------

    def _offload(self) -> None:
        """Hand the rest of the body to a receiver thread, if one is free.

        The transport stops reading; the thread reads from a duplicate of the
        socket's descriptor, so the descriptor number it uses stays valid (and
        cannot name another socket) even if the loop closes the transport
        meanwhile. Called on the loop, in state ``_BODY_INTO``.
        """
        receiver = self._receiver
        transport = self.transport
        view = self._body_view
        if receiver is None or transport is None or view is None:
            return
        if not receiver.free() or transport.is_closing():
            return
        sock = transport.get_extra_info("socket")
        try:
            fd = os.dup(sock.fileno())
        except (OSError, AttributeError):
            return
        job = _RecvJob(fd, view, self._got, self._expected)
        transport.pause_reading()
        try:
            fut = receiver.submit(self.loop, self, job)
        except RuntimeError:  # the executor is shutting down: stay on the loop
            os.close(fd)
            transport.resume_reading()
            return
        job.fut = fut
        self._job = job
        fut.add_done_callback(lambda _: self._offload_done(job))

    def _receive_body(self, job: _RecvJob) -> None:
        """The receiver thread: ``readv`` into ``job.view`` until the body is in.

        Stops (leaving the outcome in ``job``) at the body's end, at end of
        stream, on an error, or when ``job.stop`` is set (seen within
        :data:`_POLL_MS`). Every receive bumps the stall watchdog's counter.
        """
        fd = job.fd
        view = job.view
        got = job.got
        end = job.expected
        poller: select.poll | None = None
        try:
            while got < end and not job.stop:
                try:
                    n = os.readv(fd, [view[got:end]])
                except (BlockingIOError, InterruptedError):
                    if poller is None:
                        poller = select.poll()
                        poller.register(fd, select.POLLIN)
                    poller.poll(_POLL_MS)
                    continue
                except OSError as exc:
                    job.error = exc
                    return
                if n == 0:
                    job.eof = True
                    return
                got += n
                job.got = got
                self._progress += 1
        finally:
            os.close(fd)

    def _offload_done(self, job: _RecvJob) -> None:
        """Back on the loop: finish the answer, or fail it as the loop would have."""
        if self._receiver is not None:
            self._receiver.done(job)
        if self._job is job:
            self._job = None
        transport = self.transport
        if job.stop or self._state != _BODY_INTO or transport is None:
            # Failed meanwhile (stall, cancellation, close): already reported.
            self.reusable = False
            return
        self._received += job.got - self._got
        self._got = job.got
        if job.got >= self._expected:
            transport.resume_reading()
            self._finish()
            return
        detail = f": {job.error}" if job.error is not None else ""
        self._fail(
            Dropped(f"connection closed before the end of the response{detail}", received=True)
        )
        transport.abort()

    def _stop_job(self) -> None:
        job = self._job
        if job is not None:
            job.stop = True

    async def settle(self) -> None:
        """Stop a receiver thread still busy with this answer and wait for it.

        It may be writing into the caller's buffer: a failed request must not
        return before it is done (within :data:`_POLL_MS`). A cancellation
        that arrives meanwhile is raised once the thread is done.
        """
        job = self._job
        if job is None or job.fut is None or job.fut.done():
            return
        job.stop = True
        fut = job.fut
        cancelled = False
        while not fut.done():
            try:
                await asyncio.shield(fut)
            except asyncio.CancelledError:
                if not fut.done():
                    cancelled = True
        if cancelled:
            raise asyncio.CancelledError

    # -- one exchange --------------------------------------------------------

    def alive(self) -> bool:
        """Whether an idle connection can take a request (its transport is open)."""
        transport = self.transport
        return transport is not None and not transport.is_closing()

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
        """Await ``fut``; ``stall`` seconds without progress abort the connection.

        The receive path only bumps a counter (no clock read per receive), so
        the watchdog looks at it :data:`_STALL_TICKS` times per ``stall``: the
        last progress is then known to within one tick, and a body that goes
        silent is abandoned after ``stall`` to ``stall * (1 + 1/_STALL_TICKS)``
        seconds of silence. (Looking once per ``stall`` let progress just
        after a look hide the silence until the look after next: up to twice
        ``stall``.)
        """
        seen = self._progress
        handle: asyncio.TimerHandle | None = None
        tick = stall / _STALL_TICKS
        quiet = 0  # ticks in a row without progress

        def check() -> None:
            nonlocal seen, handle, quiet
            if fut.done():
                return
            if self._progress != seen:
                seen = self._progress
                quiet = 0
            else:
                quiet += 1
            if quiet < _STALL_TICKS:
                handle = self.loop.call_later(tick, check)
                return
            self._fail(
                Dropped(
                    f"no data for {stall:g} s (stalled)",
                    received=self._received > 0,
                    timeout=True,
                )
            )
            if not fut.done():
                fut.set_result(None)
            if self.transport is not None:
                self.transport.abort()

        handle = self.loop.call_later(tick, check)
        try:
            await fut
        finally:
            if handle is not None:
                handle.cancel()

    def abort(self) -> None:
        self.reusable = False
        self.closed = True
        self._stop_job()
        if self.transport is not None:
            self.transport.abort()
