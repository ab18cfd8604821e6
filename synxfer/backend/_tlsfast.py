"""Two things Python's ``ssl`` module cannot do, for the HTTPS receive threads.

Why (``docs/decisions/0046-tls-native-receive.md``): on the thread path of
decision 0037 each TLS record (16 KiB) of a body is one ``SSLSocket.read``
call that gives the GIL up and takes it back, and OpenSSL reads each record
with two ``read`` system calls (its 5-byte header, then the rest). With the
receive threads, the event loop and the file-writing threads all wanting the
GIL, that hand-over per record showed as ~340,000 futex calls for 1000
files of 1 MiB (~100,000 with this module). So, on a connected
:class:`ssl.SSLSocket`:

* :func:`tune` turns OpenSSL's *read-ahead* on (one ``read`` fetches what
  has arrived, not one header at a time);
* :meth:`Native.fill` receives a whole body into the caller's buffer in one
  C call (``_tlsread.c``: a ``SSL_read_ex`` loop) during which the GIL is
  released once.

Both call the OpenSSL that ``_ssl`` itself is linked with (looked up in
``_ssl``'s link map, checked against :data:`ssl.OPENSSL_VERSION_NUMBER`),
on the ``SSL *`` of Python's own socket object (the first fields of
CPython's ``PySSLSocket``, unchanged from 3.11 to 3.15; checked against
``SSL_get_fd``). The C file is compiled with the system's C compiler on
first use into ``$XDG_CACHE_HOME/synxfer`` (``~/.cache/synxfer``); with no
compiler, read-ahead alone is used, and anything unexpected (another
Python, a statically linked OpenSSL, no ``/proc``-style ``dlopen``) leaves
the pure-Python path of ``_tls.py``, which stays the reference.
``SYNXFER_TLS_NATIVE=off`` turns both off.
"""

from __future__ import annotations

import os
import ssl
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import ctypes

from ._options import choice_of

__all__ = ["NATIVE_ENV", "Native", "load", "native_choice"]

#: ``off`` keeps every HTTPS body on the pure-Python loop; ``auto`` (the default) tries.
NATIVE_ENV: Final = "SYNXFER_TLS_NATIVE"
_CHOICES: Final = ("auto", "off")
_SOURCE: Final = Path(__file__).with_name("_tlsread.c")

#: ``synxfer_tls_fill``'s statuses (``_tlsread.c``).
FULL, TIMEOUT, EOF, ERROR = 0, 1, 2, 3

# ctypes (and what builds the C loop) is imported at the first HTTPS
# connection, not with the SDK: a process that never speaks TLS loads none of it.


def native_choice(choice: str | None = None) -> str:
    """``auto`` or ``off``: ``choice``, else the environment's; anything else is a ConfigError."""
    return choice_of(choice, option="tls_native", env=NATIVE_ENV, choices=_CHOICES)


class Native:
    """OpenSSL's functions as ``_ssl`` links them, and the compiled body loop (or None)."""

    def __init__(self, libssl: ctypes.CDLL, fill: Any, held: ctypes.PyDLL | None = None) -> None:
        import ctypes

        _P = ctypes.c_void_p
        _INT_P = ctypes.POINTER(ctypes.c_int)
        self._ssl_offset = _ssl_offset()
        # The same functions called with the GIL held (``held``: a ctypes.PyDLL
        # handle): each is a microsecond, where giving the GIL up and taking
        # it back from the other threads is a hand-over (futex calls, a wait).
        # Where one of them cannot be found, the checks give the GIL up as before.
        self._held: tuple[Any, Any, Any] | None = None
        if held is not None:
            try:
                held_pending, held_has_pending = held.SSL_pending, held.SSL_has_pending
                poll = ctypes.PyDLL(None).poll
            except (OSError, AttributeError):
                pass
            else:
                for fn in (held_pending, held_has_pending):
                    fn.argtypes = [_P]
                    fn.restype = ctypes.c_int
                poll.argtypes = [_P, ctypes.c_ulong, ctypes.c_int]
                poll.restype = ctypes.c_int
                self._held = held_pending, held_has_pending, poll
        self._pollfd = _pollfd_type()
        self._set_read_ahead = libssl.SSL_set_read_ahead
        self._set_read_ahead.argtypes = [_P, ctypes.c_int]
        self._set_read_ahead.restype = None
        self._get_read_ahead = libssl.SSL_get_read_ahead
        self._get_read_ahead.argtypes = [_P]
        self._get_fd = libssl.SSL_get_fd
        self._get_fd.argtypes = [_P]
        self._has_pending = libssl.SSL_has_pending
        self._has_pending.argtypes = [_P]
        self._fill = fill
        if fill is not None:
            fill.restype = ctypes.c_long
            fill.argtypes = [_P, _P, _P, _P, ctypes.c_int, _P, ctypes.c_long, ctypes.c_int]
            fill.argtypes += [_INT_P, _INT_P]
        self._read_ex = ctypes.cast(libssl.SSL_read_ex, _P).value
        self._get_error = ctypes.cast(libssl.SSL_get_error, _P).value
        self._clear_error = ctypes.cast(libssl.ERR_clear_error, _P).value

    @property
    def can_fill(self) -> bool:
        """Whether the compiled body loop is there (else read-ahead only)."""
        return self._fill is not None

    def tune(self, sock: ssl.SSLSocket) -> int | None:
        """The ``SSL *`` of a connected ``sock`` with read-ahead on, or None
        (not the layout expected: leave the socket as it is)."""
        import ctypes

        obj = getattr(sock, "_sslobj", None)
        size = ctypes.sizeof(ctypes.c_void_p)
        if obj is None or type(obj).__basicsize__ < self._ssl_offset + size:
            return None
        ptr = ctypes.c_void_p.from_address(id(obj) + self._ssl_offset).value
        if not ptr or self._get_fd(ptr) != sock.fileno():
            return None
        self._set_read_ahead(ptr, 1)
        return ptr

    def read_ahead(self, ptr: int) -> bool:
        """Whether read-ahead is on for ``ptr``."""
        return bool(self._get_read_ahead(ptr))

    def pending(self, ptr: int) -> bool:
        """Whether OpenSSL holds any data of ``ptr``'s stream, decrypted or not."""
        held = self._held
        if held is not None:
            return bool(held[0](ptr) > 0 or held[1](ptr))
        return bool(self._has_pending(ptr))

    @property
    def can_check_idle(self) -> bool:
        """Whether :meth:`idle_busy` can run (without giving up the GIL)."""
        return self._held is not None

    def idle_busy(self, ptr: int, fd: int) -> bool:
        """Whether anything arrived on an idle connection: data in OpenSSL's
        buffers (decrypted or not), or the socket readable (stray bytes, an
        alert, an end of stream) -- ``SSL_pending``, ``SSL_has_pending`` and
        a ``poll`` of no wait, none of which gives up the GIL (the event loop
        asks this before every request on a pooled connection). An error of
        ``poll`` counts as busy: the connection is not trusted."""
        import ctypes

        held = self._held
        assert held is not None
        pending, has_pending, poll = held
        if pending(ptr) > 0 or has_pending(ptr):
            return True
        pfd = self._pollfd(fd, _POLLIN, 0)
        return bool(poll(ctypes.addressof(pfd), 1, 0) != 0)

    def fill(self, ptr: int, fd: int, view: memoryview, timeout: float) -> tuple[int, int, int]:
        """Receive ``len(view)`` bytes into ``view`` (GIL released meanwhile):
        ``(count, status, errno)``, status one of FULL, TIMEOUT, EOF, ERROR."""
        import ctypes

        assert self._fill is not None
        n = len(view)
        target = (ctypes.c_char * n).from_buffer(view)
        status, err = ctypes.c_int(), ctypes.c_int()
        try:
            got = self._fill(
                self._read_ex,
                self._get_error,
                self._clear_error,
                ptr,
                fd,
                ctypes.addressof(target),
                n,
                max(1, min(int(timeout * 1000), 2**31 - 1)),
                ctypes.byref(status),
                ctypes.byref(err),
            )
        finally:
            del target  # the buffer's export
        return int(got), status.value, err.value


_POLLIN: Final = 0x001  # <poll.h>, the same on Linux, the BSDs and macOS


def _pollfd_type() -> Any:
    """``struct pollfd`` (made when ctypes is: at the first HTTPS connection)."""
    import ctypes

    class PollFd(ctypes.Structure):
        _fields_ = [("fd", ctypes.c_int), ("events", ctypes.c_short), ("revents", ctypes.c_short)]

    return PollFd


def _ssl_offset() -> int:
    """Offset of ``SSL *ssl`` in CPython's ``PySSLSocket``: after PyObject_HEAD
    and ``PyObject *Socket``."""
    import ctypes

    return object.__basicsize__ + ctypes.sizeof(ctypes.c_void_p)


_lock = threading.Lock()
_loaded = False
_native: Native | None = None


def load() -> Native | None:
    """The process's :class:`Native` (made once; blocking: call it off the loop),
    or None where this Python or its OpenSSL is not the one expected."""
    global _loaded, _native
    if _loaded:
        return _native
    with _lock:
        if not _loaded:
            try:
                _native = _make()
            except (OSError, AttributeError, ValueError):
                _native = None
            _loaded = True
    return _native


def _make() -> Native | None:
    import ctypes

    if sys.implementation.name != "cpython" or not (3, 11) <= sys.version_info[:2] <= (3, 15):
        return None
    import _ssl

    path = getattr(_ssl, "__file__", None)
    mode = getattr(os, "RTLD_NOLOAD", None)
    if path is None or mode is None:
        return None
    # _ssl's own handle: its symbol lookups go through its link map, so this
    # is the OpenSSL that Python's SSLSocket objects were made by.
    libssl = ctypes.CDLL(path, mode=mode | os.RTLD_NOW)
    version = libssl.OpenSSL_version_num
    version.restype = ctypes.c_ulong
    if version() != ssl.OPENSSL_VERSION_NUMBER:
        return None
    fill = _compiled()
    try:
        held: ctypes.PyDLL | None = ctypes.PyDLL(path, mode=mode | os.RTLD_NOW)
    except OSError:
        held = None
    return Native(libssl, fill.synxfer_tls_fill if fill is not None else None, held)


def _compiled() -> ctypes.CDLL | None:
    """``_tlsread.c`` built with the system's C compiler (cached), or None."""
    from ._build import compiled

    return compiled(_SOURCE, "tlsread")
