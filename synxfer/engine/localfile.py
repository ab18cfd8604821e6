"""Local files: positional reads and writes in worker threads, fd-safe.

Every blocking call runs on the client's thread pool. A :class:`LocalFile`
tracks the thread-pool calls still using its descriptor and waits for them
before closing, so a cancelled transfer can never close a descriptor that a
worker thread is still reading -- and that the OS might already have handed
to another file.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .._exceptions import SourceChangedError
from ..backend import Checksum, ChecksumAlgorithm
from ._os import OPEN_FLAGS, chunked_pwrite, pread_into, preallocate, pwrite_from, set_xattr
from .parts import checksum_of
from .scheduler import hold

__all__ = [
    "PREALLOCATE_MIN",
    "TAG_XATTR",
    "TEMP_SUFFIX",
    "Buffer",
    "DestinationExists",
    "Identity",
    "LocalFile",
    "commit_temp",
    "open_creating_parents",
    "place",
    "pwrite_all",
    "read_whole_file",
    "source_changed",
    "temp_path_for",
    "write_tag",
    "write_whole_file",
]

T = TypeVar("T")

#: What can be written: the bytes of a part, or a view of a pooled buffer.
Buffer = bytes | bytearray | memoryview

#: Suffix of in-progress download files; walks never list them as sources.
TEMP_SUFFIX = ".synxfer-part"
#: Extended attribute a download leaves on its file: ``<etag> <mtime_ns>``.
TAG_XATTR = "user.synxfer.etag"


def temp_path_for(dest: Path) -> Path:
    """A hidden, unique temp name beside ``dest``: ``.name.<hex>.synxfer-part``."""
    return dest.with_name(f".{dest.name}.{os.urandom(4).hex()}{TEMP_SUFFIX}")


Identity = tuple[int, int, int, int]  # (st_dev, st_ino, st_size, st_mtime_ns)


def identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class LocalFile:
    """An open descriptor plus the executor that does its blocking I/O.

    Writes to it are serialized by a lock of its own, taken in the worker
    thread around the ``pwrite`` calls only (what ``write`` computes after
    writing, a checksum, runs outside it). The kernel serializes buffered
    writes to one file anyway (the inode lock), but waiting for that lock
    spins: with several threads writing parts of one file, the spinning
    cost about as much kernel CPU as the copies themselves, on a core the
    server or the receiving loop needed (decision 0012 has the figures). A
    thread waiting on this lock sleeps instead.
    """

    def __init__(self, fd: int, path: Path, executor: concurrent.futures.Executor) -> None:
        self.fd = fd
        self.path = path
        self._executor = executor
        self._pending: set[concurrent.futures.Future[object]] = set()
        self._closed = False
        self._write_lock = threading.Lock()

    @classmethod
    async def open(
        cls,
        path: Path,
        flags: int,
        executor: concurrent.futures.Executor,
        mode: int = 0o666,
        *,
        parents: bool = False,
    ) -> LocalFile:
        """Open ``path``; with ``parents``, create missing parent directories
        (in the same thread call, and only when the open says they are missing)."""
        loop = asyncio.get_running_loop()
        opener = open_creating_parents if parents else os.open
        fd = await loop.run_in_executor(executor, opener, path, flags | OPEN_FLAGS, mode)
        return cls(fd, path, executor)

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        if self._closed:
            raise ValueError(f"{self.path}: file already closed")
        cfut = self._executor.submit(fn, *args)
        self._pending.add(cfut)  # type: ignore[arg-type]
        cfut.add_done_callback(self._pending.discard)
        try:
            # Cancelled, it still waits for the thread: the call may be using
            # a pooled buffer that goes back to the pool right after.
            return await hold(cfut)
        except OSError as exc:
            if exc.filename is None:  # fd-based calls do not know the name
                exc.filename = str(self.path)
            raise

    # -- reads ---------------------------------------------------------------

    async def read_into(
        self, buf: bytearray | memoryview, offset: int, algorithm: ChecksumAlgorithm | None
    ) -> tuple[int, Checksum | None]:
        """Fill ``buf`` from ``offset`` and checksum what was read, in one thread hop.

        Returns the bytes read (fewer than ``len(buf)`` only if the file shrank).
        """
        return await self._run(_preadinto_and_sum, self.fd, buf, offset, algorithm)

    async def fstat(self) -> os.stat_result:
        return await self._run(os.fstat, self.fd)

    async def unchanged_since(self, before: Identity) -> bool:
        """Whether the open file still has identity ``before`` and its path
        still names it (not replaced, renamed away or deleted meanwhile)."""
        if identity(await self.fstat()) != before:
            return False
        try:
            on_disk = await self._run(os.stat, self.path)
        except FileNotFoundError:
            return False
        return identity(on_disk)[:2] == before[:2]

    # -- writes --------------------------------------------------------------

    async def write(
        self, offset: int, data: Buffer, then: Callable[[memoryview], T] | None = None
    ) -> T | None:
        """Write ``data`` at ``offset``, then (in the same worker-thread call)
        return ``then(data)`` -- its checksums, say -- if given."""
        return await self._run(_pwrite_then, self.fd, offset, data, then, self._write_lock)

    async def allocate(self, size: int) -> None:
        """Reserve ``size`` bytes now, so a full disk fails before any transfer."""
        if size > 0:
            await self._run(_allocate, self.fd, size)

    async def finish(self, mtime_ns: int | None, etag: str | None = None) -> None:
        """Set the modification time (atime is left as now) and, with ``etag``,
        tag the file with the object it came from (see ``localtree.read_tag``)."""
        await self._run(_finish, self.fd, mtime_ns, etag)

    # -- close ---------------------------------------------------------------

    async def close(self) -> None:
        """Wait for this file's outstanding thread calls, then close. Idempotent."""
        if self._closed:
            return
        self._closed = True
        pending = list(self._pending)
        if pending:
            await asyncio.shield(asyncio.wait([asyncio.wrap_future(f) for f in pending]))
        os.close(self.fd)


def _preadinto_and_sum(
    fd: int, buf: bytearray | memoryview, offset: int, algorithm: ChecksumAlgorithm | None
) -> tuple[int, Checksum | None]:
    view = memoryview(buf)
    done = 0
    while done < len(buf):
        n = pread_into(fd, view[done:], offset + done)
        if n == 0:
            break  # end of file: the file shrank; the caller reports it
        done += n
    return done, checksum_of(algorithm, view[:done])


def read_whole_file(
    path: Path, buf: bytearray, algorithm: ChecksumAlgorithm | None
) -> tuple[Checksum | None, int] | None:
    """Fill ``buf`` with the whole file at ``path`` and checksum it, in ONE
    blocking call (a worker thread); returns ``(checksum, mtime_ns)``.

    None, having read nothing, when the file's size is not ``len(buf)`` (it
    changed since it was listed; the caller takes the general path). The
    file's identity (device, inode, size, mtime) is taken at open and checked
    after the last byte is read, and the path must still name the same file:
    otherwise :class:`SourceChangedError`, and nothing may be committed.
    """
    fd = os.open(path, os.O_RDONLY | OPEN_FLAGS)
    try:
        st = os.fstat(fd)
        if st.st_size != len(buf):
            return None
        n, checksum = _preadinto_and_sum(fd, buf, 0, algorithm)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    try:
        on_disk: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        on_disk = None
    before = identity(st)
    if n != len(buf) or identity(after) != before or on_disk is None:
        raise source_changed(path)
    if identity(on_disk)[:2] != before[:2]:
        raise source_changed(path)
    return checksum, st.st_mtime_ns


def source_changed(path: Path, detail: str = "") -> SourceChangedError:
    """The error for a file that changed while it was being uploaded
    (``detail``, e.g. ``"it shrank"``, says how, when known)."""
    how = f" ({detail})" if detail else ""
    return SourceChangedError(
        f"{path} changed while it was being uploaded{how}; nothing was committed "
        f"for it -- run the command again to send the new version"
    )


def _pwrite_then(
    fd: int,
    offset: int,
    data: Buffer,
    then: Callable[[memoryview], T] | None,
    lock: threading.Lock,
) -> T | None:
    with lock:
        pwrite_all(fd, data, offset)
    return None if then is None else then(memoryview(data))


#: The most one ``pwrite`` hands the kernel. A write makes the page cache
#: allocate folios up to its own size; on a VM with free-page reporting
#: (this one), a folio above order 3 comes from the buddy allocator's
#: high-order blocks, often pages the host has taken back, and the copy then
#: traps to the hypervisor on every page; 32 KiB (order 3) folios come from
#: the per-CPU lists of recently freed pages (the likely cause; the host's
#: side was not traced). Larger writes were several times slower in kernel
#: time, and unpredictably so; the extra calls cost little user CPU
#: (docs/decisions/0012-write-chunks.md has both).
WRITE_CHUNK = 32 * 1024


def pwrite_all(fd: int, data: Buffer, offset: int) -> None:
    """Write all of ``data`` at ``offset`` (positional writes of at most
    :data:`WRITE_CHUNK` bytes, no copy)."""
    view = memoryview(data).cast("B")
    start, end = 0, len(view)
    if end > WRITE_CHUNK and chunked_pwrite(fd, view, offset, WRITE_CHUNK):
        return  # in one C call: the GIL given up once, not once per chunk
    while start < end:
        written = pwrite_from(fd, view[start : start + WRITE_CHUNK], offset + start)
        start += written


def open_creating_parents(path: Path, flags: int, mode: int = 0o666) -> int:
    """``os.open``, creating the parent directories if the open finds them missing.

    Costs nothing extra when they exist (the common case: many files per
    directory), unlike a ``makedirs`` before every file.
    """
    try:
        return os.open(path, flags, mode)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
    except NotADirectoryError:
        raise _file_in_the_way(path) from None
    try:
        os.makedirs(path.parent, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise _file_in_the_way(path) from None
    return os.open(path, flags, mode)


def _file_in_the_way(path: Path) -> NotADirectoryError:
    """The error naming the file where ``path`` needs a directory (rather
    than the temporary file's name and a bare "Not a directory")."""
    import errno

    for parent in reversed(path.parents):
        if parent.exists() and not parent.is_dir():
            return NotADirectoryError(
                errno.ENOTDIR, "a file, where a directory is needed", str(parent)
            )
    return NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))


#: Whole files at least this big are preallocated before the write: on ext4
#: it pays from about here and gains nothing below (docs/decisions/0008).
PREALLOCATE_MIN = 1 << 20


def write_whole_file(
    dest: Path,
    tmp: Path,
    data: Buffer,
    *,
    exclusive: bool,
    check: Callable[[memoryview], None] | None,
    mtime_ns: int | None,
    etag: str | None,
    keep_existing: bool = False,
) -> None:
    """Put ``data`` at ``dest`` atomically, in ONE blocking call (a worker thread).

    Opens ``tmp`` (a hidden name beside ``dest``; ``exclusive``: it must not
    exist, else it is truncated), creating missing parent directories; writes
    ``data`` with positional writes; ``check(data)`` hashes it and raises if
    it disagrees with the source; sets the mtime and the download tag (``etag``); closes and
    renames ``tmp`` over ``dest``. On any failure ``tmp`` is removed, so
    nothing half-written is left, under either name.
    """

    def fill(fd: int) -> None:
        if len(data) >= PREALLOCATE_MIN:
            with contextlib.suppress(OSError):  # a full disk fails the write anyway
                preallocate(fd, len(data))
        pwrite_all(fd, data, 0)
        if check is not None:
            check(memoryview(data))

    commit_temp(
        dest,
        tmp,
        fill,
        exclusive=exclusive,
        mtime_ns=mtime_ns,
        etag=etag,
        keep_existing=keep_existing,
    )


class DestinationExists(FileExistsError):
    """A download kept an existing file (``--no-clobber``): nothing replaced."""


def place(tmp: Path, dest: Path, keep_existing: bool = False) -> None:
    """Rename the finished ``tmp`` to ``dest`` (blocking).

    ``keep_existing``: never over an existing ``dest``, even one made after
    the plan looked: a hard link fails if the name exists (O_EXCL's promise
    for a rename); where links are refused, the name is reserved with
    O_EXCL first. Raises :class:`DestinationExists` (``tmp`` removed).
    """
    if not keep_existing:
        os.replace(tmp, dest)
        return
    try:
        try:
            os.link(tmp, dest)
        except FileExistsError:
            raise
        except OSError:  # no hard links on this filesystem: reserve the name
            os.close(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | OPEN_FLAGS, 0o600))
            os.replace(tmp, dest)
            return
    except FileExistsError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise DestinationExists(f"{dest} exists (--no-clobber): kept") from None
    os.unlink(tmp)


def commit_temp(
    dest: Path,
    tmp: Path,
    fill: Callable[[int], object],
    *,
    exclusive: bool,
    mtime_ns: int | None,
    etag: str | None,
    keep_existing: bool = False,
) -> None:
    """Create ``tmp`` (``exclusive``: it must not exist, else it is
    truncated; missing parents are made), ``fill(fd)`` it, give it the mtime
    and download tag, close it and rename it over ``dest``. On any failure
    ``tmp`` is removed: nothing half-written is left under either name.
    Blocking: call from a worker thread."""
    flags = os.O_WRONLY | os.O_CREAT | OPEN_FLAGS | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = open_creating_parents(tmp, flags)
    try:
        try:
            fill(fd)
            _finish(fd, mtime_ns, etag)
        finally:
            os.close(fd)
        place(tmp, dest, keep_existing)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _allocate(fd: int, size: int) -> None:
    if not preallocate(fd, size):
        os.ftruncate(fd, size)  # the filesystem or the platform cannot preallocate


def _finish(fd: int, mtime_ns: int | None, etag: str | None) -> None:
    st = os.fstat(fd)
    if mtime_ns is not None:
        os.utime(fd, ns=(st.st_atime_ns, mtime_ns))
    if etag:
        write_tag(fd, etag, st.st_mtime_ns if mtime_ns is None else mtime_ns)


def write_tag(fd: int, etag: str, mtime_ns: int) -> None:
    """Record on an open file the object it was downloaded from (blocking;
    best effort: without extended attributes, the next sync asks the server).
    ``localtree.read_tag`` reads it back while the file keeps that mtime."""
    set_xattr(fd, TAG_XATTR, f"{etag} {mtime_ns}".encode())
