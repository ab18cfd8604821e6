"""The few OS calls the engine's file I/O needs, with fallbacks where one is missing.

Linux has them all. macOS has no ``os.posix_fallocate`` and no
``os.getxattr``/``os.setxattr`` (Python offers them on Linux only); Windows has no
``os.preadv``/``os.pwritev``, no ``os.pread``/``os.pwrite`` and no
``O_CLOEXEC``, and opens files in text mode unless told ``O_BINARY``. Every
module that reads or writes local files at an offset comes through here, so
the library imports and transfers everywhere and the fallbacks live in ONE
place (``tests/test_portability.py`` forces each one on Linux).

Each call looks its primitive up when it is made (a dictionary lookup, no
measurable cost next to a system call), so a test can take one away and the
fallback is what runs.

The last fallback, a seek and a read or write, moves a descriptor's shared
file offset: it holds one process-wide lock so that two threads working on
the same descriptor at different offsets cannot interleave.
"""

from __future__ import annotations

import os
import threading
from typing import Any

__all__ = [
    "OPEN_FLAGS",
    "chunked_pwrite",
    "get_xattr",
    "pread",
    "pread_into",
    "preallocate",
    "pwrite_from",
    "set_xattr",
]

#: Flags every ``os.open`` of the engine adds: no inheritance by child
#: processes (POSIX) and binary mode (Windows; without it ``\n`` becomes
#: ``\r\n`` on the way to disk).
OPEN_FLAGS: int = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)

_seek_lock = threading.Lock()


def pread_into(fd: int, view: memoryview, offset: int) -> int:
    """Read into ``view`` from ``offset`` of ``fd``, as one ``preadv`` does:
    the number of bytes read (0 at the end of the file).

    ``os.preadv`` receives straight into ``view``; without it (Windows, older
    macOS) ``os.pread`` and a copy, and without
    that a seek and ``os.read`` under a lock.
    """
    preadv = getattr(os, "preadv", None)
    if preadv is not None:
        n: int = preadv(fd, [view], offset)
        return n
    data = pread(fd, len(view), offset)
    n = len(data)
    view[:n] = data
    return n


def pread(fd: int, n: int, offset: int) -> bytes:
    """Up to ``n`` bytes at ``offset`` of ``fd`` (fewer at the end of the file)."""
    pread_ = getattr(os, "pread", None)
    if pread_ is not None:
        data: bytes = pread_(fd, n, offset)
        return data
    with _seek_lock:
        os.lseek(fd, offset, os.SEEK_SET)
        return os.read(fd, n)


def pwrite_from(fd: int, view: memoryview, offset: int) -> int:
    """Write (some of) ``view`` at ``offset`` of ``fd``; the number written.

    ``os.pwrite``; without it (Windows), a seek and ``os.write`` under a lock.
    """
    pwrite = getattr(os, "pwrite", None)
    if pwrite is not None:
        n: int = pwrite(fd, view, offset)
        return n
    with _seek_lock:
        os.lseek(fd, offset, os.SEEK_SET)
        return os.write(fd, view)


def chunked_pwrite(fd: int, view: memoryview, offset: int, chunk: int) -> bool:
    """Write all of ``view`` (bytes) at ``offset`` of ``fd`` in positional
    writes of at most ``chunk`` bytes, in ONE call that gives the GIL up once
    (``_pwrite.c``, built on first use; decision 0052); whether it ran.

    False (nothing written) where it cannot: no ``os.pwrite``, no C
    compiler, a read-only buffer; the caller's Python loop then writes.
    Raises the ``OSError`` of a failed write, as ``os.pwrite`` does.
    """
    if getattr(os, "pwrite", None) is None:
        return False
    fn = _pwrite_all()
    if fn is None or view.readonly:
        return False
    import ctypes

    start = ctypes.c_char.from_buffer(view)  # holds the buffer's export during the call
    try:
        err = fn(fd, ctypes.addressof(start), len(view), offset, chunk)
    finally:
        del start
    if err:
        raise OSError(err, os.strerror(err))
    return True


_native_lock = threading.Lock()
_native: list[Any] = []  # empty: not tried yet; else [the C function, or None]


def _pwrite_all() -> Any:
    """``synxfer_pwrite_all`` of ``_pwrite.c`` (built once; blocking), or None."""
    if _native:
        return _native[0]
    with _native_lock:
        if not _native:
            fn = None
            try:
                import ctypes
                from pathlib import Path

                from ..backend._build import compiled

                lib = compiled(Path(__file__).with_name("_pwrite.c"), "pwrite")
                if lib is not None:
                    fn = lib.synxfer_pwrite_all
                    fn.restype = ctypes.c_int
                    ll = ctypes.c_longlong
                    fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ll, ll, ll]
            except (OSError, AttributeError, ImportError):
                fn = None
            _native.append(fn)
    return _native[0]


def preallocate(fd: int, size: int) -> bool:
    """Reserve the first ``size`` bytes of ``fd`` on disk; whether it was done.

    ``os.posix_fallocate`` (Linux, the BSDs); where the platform has none
    (macOS, Windows) nothing is reserved and False is returned: a full disk
    then fails at a write instead of before the transfer. Errors of a
    filesystem that cannot preallocate (``EOPNOTSUPP``, ``ENOSYS``,
    ``EINVAL``) also give False; a full disk raises.
    """
    fallocate = getattr(os, "posix_fallocate", None)
    if fallocate is None:
        return False
    try:
        fallocate(fd, 0, size)
    except OSError as exc:
        import errno

        if exc.errno in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            return False
        raise
    return True


def get_xattr(path: str | os.PathLike[str], name: str) -> bytes | None:
    """The extended attribute ``name`` of ``path``; None when it has none, the
    filesystem keeps none, or Python offers no ``os.getxattr`` (all but Linux)."""
    getxattr = getattr(os, "getxattr", None)
    if getxattr is None:
        return None
    try:
        value: bytes = getxattr(path, name)
    except OSError:
        return None
    return value


def set_xattr(fd: int, name: str, value: bytes) -> bool:
    """Set the extended attribute ``name`` on an open file, best effort:
    whether it was set (not on filesystems without them, nor where Python
    offers no ``os.setxattr``)."""
    setxattr = getattr(os, "setxattr", None)
    if setxattr is None:
        return False
    try:
        setxattr(fd, name, value)
    except OSError:
        return False
    return True
