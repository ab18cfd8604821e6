"""HTTPS exchanges on worker threads: blocking ``ssl.SSLSocket`` connections.

Why (``docs/decisions/0037-tls-receive-path.md``): asyncio's SSL transport
receives ciphertext on the event loop into a 256 KiB buffer, copies it into
a memory BIO, and has OpenSSL copy it out again and decrypt it, one TLS
record (16 KiB) per Python-level iteration, all holding the GIL on the one
loop thread. A blocking ``SSLSocket`` on a worker thread lets OpenSSL read
from the socket and decrypt straight into the caller's buffer with the GIL
released, and spreads the work over the cores as Go clients do.

:class:`TlsConnection` is a :class:`~._protocol.Connection` (the same HTTP
parser, the same caller-buffer ``sink``) whose bytes come from a blocking
socket driven by one worker thread per exchange: the request head and body
are written and the whole answer is received on that thread, and the event
loop awaits the result. The semantics are the loop path's:

* a stall (no TLS record for ``read_timeout`` seconds) is the socket's
  timeout, and fails the answer as ``Dropped(timeout=True)``;
* a failed or cancelled request stops the thread (the socket is shut down
  under it) and *waits for it* (:meth:`TlsConnection.settle`) before the
  request returns, because the thread writes into the caller's buffer;
* an early answer while a body is being sent (an error, usually) stops the
  upload and is read;
* certificates are verified by the client's :class:`ssl.SSLContext`
  exactly as on the loop path.

Where :mod:`._tlsfast` can (decision 0046), a connection reads ahead and a
``Content-Length`` body is received in one C call that holds no GIL
(:meth:`TlsConnection._recv_body`); the Python loop here stays the
reference and the fallback.

Nothing here logs; request heads (signatures, tokens) never reach an
exception message.
"""

from __future__ import annotations

import _socket
import asyncio
import contextlib
import os
import select
import socket
import ssl
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from . import _tlsfast
from ._protocol import _BODY_INTO, _DONE, Connection, Dropped

__all__ = ["TlsConnection", "TlsThreads", "connect"]

_T = TypeVar("_T")

#: Bodies up to this size go out in the same write as the head.
_INLINE_BODY = 16 * 1024


class TlsThreads:
    """The worker threads of one :class:`~._http.HttpClient`'s HTTPS exchanges.

    One thread per connection allowed: an exchange holds its thread from
    the request's first byte to the answer's last, and the pool never lets
    more than ``threads`` exchanges run per host.
    """

    def __init__(self, threads: int, *, native: bool = True) -> None:
        self.threads = threads
        #: Whether connections try :mod:`._tlsfast` (read-ahead, the C body loop).
        self.native = native
        self._executor: ThreadPoolExecutor | None = None
        #: TLS handshakes done, and how many of them resumed a session.
        self.handshakes = 0
        self.resumed = 0
        #: Bodies received by the C loop (:mod:`._tlsfast`), for tests and reports.
        self.native_bodies = 0

    def __repr__(self) -> str:
        return f"<TlsThreads threads={self.threads} handshakes={self.handshakes}>"

    def submit(self, fn: Callable[..., _T], *args: Any) -> Future[_T]:
        executor = self._executor
        if executor is None:
            executor = self._executor = ThreadPoolExecutor(
                self.threads, thread_name_prefix="synxfer-tls"
            )
        return executor.submit(fn, *args)

    async def aclose(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.to_thread(executor.shutdown, wait=True)


class Connected:
    """A new TLS socket, and its ``SSL *`` where :mod:`._tlsfast` tuned it."""

    __slots__ = ("native", "ptr", "sock")

    def __init__(
        self, sock: ssl.SSLSocket, native: _tlsfast.Native | None, ptr: int | None
    ) -> None:
        self.sock = sock
        self.native = native
        self.ptr = ptr


def connect(
    host: str,
    port: int,
    context: ssl.SSLContext,
    timeout: float,
    session: ssl.SSLSession | None,
    native: bool = True,
) -> Connected:
    """A connected, verified TLS socket (blocking; run on a worker thread).

    ``session``: a previous connection's TLS session to resume (a shorter
    handshake); the server may refuse it, and the handshake is then full.
    ``native``: read ahead and receive bodies in C where :mod:`._tlsfast`
    can (its first use may compile it: this thread, not the loop, waits).
    Raises what :func:`socket.create_connection` and the handshake raise.
    """
    raw = socket.create_connection((host, port), timeout=timeout)
    try:
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock = context.wrap_socket(raw, server_hostname=host, session=session)
    except BaseException:
        raw.close()
        raise
    fast = _tlsfast.load() if native else None
    ptr = fast.tune(sock) if fast is not None else None
    return Connected(sock, fast if ptr is not None else None, ptr)


class TlsConnection(Connection):
    """One HTTPS connection whose exchanges run on a :class:`TlsThreads` thread.

    The parser is :class:`~._protocol.Connection`'s, fed from
    ``sock.recv_into``; ``transport`` stays None.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: ssl.SSLSocket,
        threads: TlsThreads,
        native: _tlsfast.Native | None = None,
        ptr: int | None = None,
    ) -> None:
        super().__init__(loop, None)
        self.sock = sock
        #: :mod:`._tlsfast` and this socket's ``SSL *`` (None: the Python loop only).
        self.native = native
        self._ptr = ptr
        self._threads = threads
        self._lock = threading.Lock()
        self._busy = False  # a thread has (or is about to have) the socket
        self._fut: Future[None] | None = None  # the current exchange's thread
        self._stop = False
        self.session_kept = False  # its TLS session handed to the pool

    def __repr__(self) -> str:
        return f"<TlsConnection closed={self.closed} reusable={self.reusable}>"

    def alive(self) -> bool:
        """Whether an idle connection can take a request: open, and nothing
        (an end of stream, an alert, stray bytes) has arrived while idle."""
        if self.closed or not self.reusable:
            return False
        native, ptr = self.native, self._ptr
        try:
            if native is not None and ptr is not None and native.can_check_idle:
                # On the loop, before every request: without giving up the GIL.
                return not native.idle_busy(ptr, self.sock.fileno())
            if self._pending():
                return False
            return not _readable(self.sock)
        except (OSError, ValueError):
            return False

    # -- one exchange ----------------------------------------------------------

    async def exchange(
        self,
        head: bytes,
        pieces: tuple[memoryview, ...],
        sink: memoryview | None,
        sink_status: int,
        head_only: bool,
        stall: float,
        step: int,
    ) -> None:
        """Send the request and receive its answer on a worker thread.

        The outcome is in the parser (``take_response`` raises its error).
        A cancellation while the thread runs leaves it to the caller's
        clean-up (:meth:`abort`, then :meth:`settle`).
        """
        if self.closed:
            raise Dropped("connection closed before the request", received=False)
        self.begin(sink, sink_status, head_only)
        self._waiter = None  # the thread finishes the answer; nobody awaits the parser
        self._stop = False
        self.sent = True
        with self._lock:
            self._busy = True
        waiter = self.loop.create_future()
        try:
            fut = self._fut = self._threads.submit(self._work, waiter, head, pieces, stall, step)
        except BaseException:
            self._release()
            raise
        try:
            await waiter
        except asyncio.CancelledError:
            if fut.cancel():  # not taken by a thread yet: it never runs
                self._release()
            raise

    def _work(
        self,
        waiter: asyncio.Future[None],
        head: bytes,
        pieces: tuple[memoryview, ...],
        stall: float,
        step: int,
    ) -> None:
        """The thread's job: :meth:`_run`, then wake the loop's ``waiter``
        with one ``call_soon_threadsafe`` (no ``wrap_future``: a concurrent
        future's callbacks, locks and state copy per request, on the loop and
        here). :meth:`settle` still waits for the thread's own future."""
        error: BaseException | None = None
        try:
            self._run(head, pieces, stall, step)
        except BaseException as exc:  # handed to the request that waits
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            self.loop.call_soon_threadsafe(_wake, waiter, error)

    def _release(self) -> None:
        """The socket is the loop's again; closed now if it was aborted meanwhile."""
        with self._lock:
            self._busy = False
            if self.closed:
                _close(self.sock)

    def _run(self, head: bytes, pieces: tuple[memoryview, ...], timeout: float, step: int) -> None:
        """The worker thread: write the request, receive the whole answer."""
        sock = self.sock
        try:
            if sock.gettimeout() != timeout:  # setting it gives up the GIL (an ioctl)
                sock.settimeout(timeout)
            self._send(sock, head, pieces, step, timeout)
            self._receive(sock)
            if self._state == _DONE and self._pending():
                self.reusable = False  # more than the answer: do not trust the stream
        except TimeoutError:
            self._fail(
                Dropped(
                    f"no data for {timeout:g} s (stalled)",
                    received=self._received > 0,
                    timeout=True,
                )
            )
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            self.connection_lost(OSError("connection aborted") if self._stop else exc)
        finally:
            self._release()

    def _pending(self) -> bool:
        """Whether TLS data is buffered past the answer: decrypted (``pending``)
        or, with read-ahead, still raw in OpenSSL's buffer."""
        native, ptr = self.native, self._ptr
        if native is not None and ptr is not None and native.can_check_idle:
            return native.pending(ptr)  # both, without giving up the GIL
        if self.sock.pending():
            return True
        return ptr is not None and native is not None and native.pending(ptr)

    def _send(
        self,
        sock: ssl.SSLSocket,
        head: bytes,
        pieces: tuple[memoryview, ...],
        step: int,
        stall: float,
    ) -> None:
        if sum(len(p) for p in pieces) <= _INLINE_BODY:
            sock.sendall(b"".join([head, *pieces]))
            return
        sock.sendall(head)
        for view in pieces:
            for start in range(0, len(view), step):
                if self._stop:
                    raise OSError("connection aborted")
                if _readable(sock) and self._early_answer(sock, stall):
                    # An early answer (an error, usually): stop sending, read it.
                    self.reusable = False
                    return
                sock.sendall(view[start : start + step])

    def _early_answer(self, sock: ssl.SSLSocket, stall: float) -> bool:
        """Whether the server has started answering (or closed) mid-upload.

        Readable is not enough: TLS 1.3 servers send session tickets after
        the handshake, which OpenSSL consumes without any byte for us.
        """
        sock.settimeout(0.0)
        try:
            n = sock.recv_into(self.get_buffer(-1))
        except ssl.SSLWantReadError:
            return False  # a handshake message (a ticket): nothing of an answer
        finally:
            sock.settimeout(stall)
        if n:
            self.buffer_updated(n)
        return True

    def _receive(self, sock: ssl.SSLSocket) -> None:
        """Feed the parser until the answer is complete (or failed)."""
        while self._state != _DONE:
            if self._stop:
                raise OSError("connection aborted")
            if self._state == _BODY_INTO:
                self._recv_body(sock)
                continue
            n = sock.recv_into(self.get_buffer(-1))
            if not n:
                self.reusable = False
                self.eof_received()
                self.connection_lost(None)
                return
            self.buffer_updated(n)

    def _recv_body(self, sock: ssl.SSLSocket) -> None:
        """A ``Content-Length`` body straight into its buffer: OpenSSL decrypts
        each record into the caller's memory with the GIL released."""
        view = self._body_view
        assert view is not None
        got = self._got
        end = self._expected
        native, ptr = self.native, self._ptr
        if native is not None and ptr is not None and native.can_fill and not self._stop:
            self._recv_body_native(sock, native, ptr, view[got:end])
            return
        read = _reader(sock)
        try:
            while got < end:
                if self._stop:
                    raise OSError("connection aborted")
                try:
                    n = read(end - got, view[got:end])
                except ssl.SSLEOFError:  # the peer closed without close_notify
                    n = 0
                if not n:
                    self.reusable = False
                    self.connection_lost(None)
                    return
                got += n
        finally:
            self._received += got - self._got
            self._got = got
        self._finish()

    def _recv_body_native(
        self, sock: ssl.SSLSocket, native: _tlsfast.Native, ptr: int, view: memoryview
    ) -> None:
        """The body in one C call (:meth:`._tlsfast.Native.fill`), GIL released.

        An :meth:`abort` meanwhile shuts the socket down under it, which ends
        its wait as an end of stream. Outcomes as in the Python loop: a stall
        is a ``TimeoutError``, an end of stream or a TLS error a lost connection.
        """
        timeout = sock.gettimeout()
        assert timeout is not None  # _run set it: the socket is non-blocking, polled here
        n, status, err = native.fill(ptr, sock.fileno(), view, timeout)
        self._got += n
        self._received += n
        self._threads.native_bodies += 1
        if status == _tlsfast.FULL:
            self._finish()
            return
        self.reusable = False
        if status == _tlsfast.TIMEOUT:
            raise TimeoutError
        if self._stop:
            raise OSError("connection aborted")
        if status == _tlsfast.EOF:
            self.connection_lost(None)
            return
        raise OSError(err, os.strerror(err)) if err else ssl.SSLError("TLS error in the body")

    # -- clean-up, on the loop -------------------------------------------------

    def abort(self) -> None:
        """Close the connection; a thread still using it is woken (its socket
        is shut down under it) and closes the socket when it is done."""
        self.reusable = False
        self.closed = True
        self._stop = True
        with self._lock:
            if not self._busy:
                _close(self.sock)
                return
        # The plain socket's shutdown: SSLSocket.shutdown would also drop its
        # SSL object under the thread, which would then read ciphertext.
        with contextlib.suppress(OSError):
            _socket.socket.shutdown(self.sock, socket.SHUT_RDWR)

    async def settle(self) -> None:
        """Wait for a thread still busy with this connection (after :meth:`abort`).

        It may be writing into the caller's buffer: a failed request must not
        return before it is done. A cancellation that arrives meanwhile is
        raised once the thread is done.
        """
        fut = self._fut
        if fut is None or fut.done():
            return
        self._stop = True
        cancelled = False
        while not fut.done():
            try:
                await asyncio.shield(asyncio.wrap_future(fut))
            except asyncio.CancelledError:
                cancelled = True
            except Exception:  # its outcome is in the parser
                pass
        if cancelled:
            raise asyncio.CancelledError


def _wake(waiter: asyncio.Future[None], error: BaseException | None) -> None:
    """On the loop: an exchange's thread is done (``error``: what it raised)."""
    if waiter.done():  # the request was cancelled meanwhile
        return
    if error is None:
        waiter.set_result(None)
    else:
        waiter.set_exception(error)


def _readable(sock: ssl.SSLSocket) -> bool:
    """Whether the socket has something to read now (poll: no FD_SETSIZE limit)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def _reader(sock: ssl.SSLSocket) -> Callable[[int, memoryview], int]:
    """``read(n, buffer) -> count`` of ``sock``: the C object's own when it has one.

    ``SSLSocket.recv_into`` costs two Python frames per TLS record (16 KiB);
    on a connected blocking socket it does nothing else but map a ragged
    end of stream (``SSLEOFError``) to 0, which the caller does.
    """
    read: Callable[[int, memoryview], int] | None = getattr(
        getattr(sock, "_sslobj", None), "read", None
    )
    if read is None:
        return lambda n, buf: sock.recv_into(buf, n)
    return read


def _close(sock: ssl.SSLSocket) -> None:
    with contextlib.suppress(OSError):
        sock.close()
