"""Downloading one object to a local file: received into pooled buffers, verified.

An object of one range is one GET and one worker-thread call (write, hash,
verify, tag, rename). A bigger one is fetched in ranges through the
scheduler (:meth:`~.scheduler.Scheduler.map_parts`), which reserves each
range's bytes and lends it a pooled buffer before its task exists, so tasks
and memory stay bounded however big the object is; it is journaled, so an
interrupted download resumes. Each byte is received into a pooled buffer,
written from it once, and its checksums are computed in the same
worker-thread call that wrote it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import logging
import os
from pathlib import Path

from .._exceptions import IntegrityError, PreconditionFailed
from .._models import ObjectInfo
from ..backend import Backend
from .core import Engine
from .localfile import TEMP_SUFFIX, LocalFile, temp_path_for, write_whole_file
from .meta import stored_mtime, stored_part_size
from .parts import (
    Part,
    crc32c_combine,
    etag_parts,
    have_crc32c,
    multipart_etag,
    plan_part_size,
    split,
)
from .scheduler import Lease

__all__ = ["PartSums", "download_object", "resume_temp_path"]

log = logging.getLogger("synxfer")


async def download_object(
    engine: Engine,
    backend: Backend,
    key: str,
    dest: Path,
    size: int,
    etag: str | None = None,
) -> int:
    """Download ``key`` (expected ``size`` bytes) to ``dest``; returns bytes fetched.

    Every range is received into a pooled buffer (``backend.read_into``) and
    written from it with positional writes, hashed in the same worker-thread
    call. Data lands in a hidden temp file beside ``dest``, is checked, given
    the source's mtime, then renamed over ``dest`` atomically; on failure the
    temp file is removed: no file that looks whole is ever left behind.

    An object that fits in one range takes :func:`_download_single`: one GET,
    one worker-thread call, no journal. A bigger one is fetched in ranges;
    when interrupted (cancelled) with the journal on, its temp file and
    journal entry stay, and the next run fetches only the missing parts.
    Every ranged GET after the first carries the object's ETag (If-Match), so
    an object replaced mid-download is detected instead of stitched together.
    """
    caps = backend.capabilities
    if caps.ranged_reads:
        part_size = plan_part_size(size, engine.config.part_size, caps)
    else:
        part_size = max(size, 1)
    if size <= part_size:
        return await _download_single(engine, backend, key, dest, size, part_size, etag)
    return await _download_ranges(engine, backend, key, dest, size, part_size, etag)


async def _download_single(
    engine: Engine,
    backend: Backend,
    key: str,
    dest: Path,
    size: int,
    part_size: int,
    etag: str | None,
) -> int:
    """One GET into a pooled buffer, then ONE worker-thread call that writes,
    hashes, verifies, tags and renames (:func:`.localfile.write_whole_file`).

    Nothing to resume, so no journal; nothing exists on disk until the data
    is in memory, and the thread call removes its temp file on any failure.
    """
    scheduler = engine.scheduler
    resumable = engine.resumable
    # With the journal on, the stable name an interrupted run would have left
    # (overwritten here); without it, a unique one.
    tmp = resume_temp_path(dest) if resumable else temp_path_for(dest)
    async with scheduler.reserve(size) as lease:
        view = lease.view()
        info = await backend.read_into(key, 0, view, if_match=etag)
        src = backend.url(key)
        _check_size(src, size, info)
        sums = PartSums(1)
        sums.plan(info, size, part_size)

        def check(md5: bytes | None, crc: int | None) -> None:
            sums.record(0, md5, crc)
            sums.verify(src, info, [size])

        await scheduler.io_holding(
            functools.partial(
                write_whole_file,
                dest,
                tmp,
                view,
                exclusive=not resumable,
                md5=sums.want_md5,
                crc32c=sums.want_crc,
                check=check,
                mtime_ns=_mtime_ns(info),
                etag=info.etag,
            )
        )
    engine.progress(size, "down")
    return size


async def _download_ranges(
    engine: Engine,
    backend: Backend,
    key: str,
    dest: Path,
    size: int,
    part_size: int,
    etag: str | None,
) -> int:
    """Ranged GETs into pooled buffers, journaled so an interrupted run resumes."""
    scheduler = engine.scheduler
    parts = split(size, part_size)
    src = backend.url(key)
    resumable = engine.resumable
    tmp = resume_temp_path(dest) if resumable else temp_path_for(dest)
    sums = PartSums(len(parts))
    info = await _resume_download(engine, backend, key, dest, tmp, size, part_size, sums)
    if info is None:
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if resumable else os.O_EXCL)
    else:
        flags = os.O_WRONLY
    f = await LocalFile.open(tmp, flags, scheduler.executor, parents=True)
    committed = keep = False
    fetched = 0
    try:
        if info is None:
            await f.allocate(size)
            # The first part tells us the object's etag, metadata and checksums.
            length0 = parts[0].length
            async with scheduler.reserve(length0) as lease:
                view = lease.view()
                info = await backend.read_into(key, 0, view, if_match=etag)
                _check_size(src, size, info)
                sums.plan(info, size, part_size)
                md5, crc = await f.write(0, view, sums.want_md5, sums.want_crc)
            sums.record(0, md5, crc)
            fetched += length0
            await engine.journal.download_start(
                str(dest), src, info.etag, size, part_size, str(tmp)
            )
            await engine.journal.download_part(str(dest), str(tmp), 1, md5, crc)
            engine.progress(length0, "down")
        else:
            sums.plan(info, size, part_size)
        if_match = info.etag or etag

        async def fetch(part: Part, lease: Lease) -> tuple[bytes | None, int | None]:
            view = lease.view()
            await backend.read_into(key, part.offset, view, if_match=if_match)
            return await f.write(part.offset, view, sums.want_md5, sums.want_crc)

        async def fetched_part(part: Part, written: tuple[bytes | None, int | None]) -> None:
            nonlocal fetched
            md5, crc = written
            sums.record(part.index, md5, crc)
            fetched += part.length
            await engine.journal.download_part(str(dest), str(tmp), part.number, md5, crc)
            engine.progress(part.length, "down")

        # Parts written in this run or an earlier one are skipped.
        todo = (part for part in parts if not sums.written(part.index))
        await scheduler.map_parts(todo, fetch, fetched_part)

        sums.verify(src, info, [part.length for part in parts])
        await f.finish(_mtime_ns(info), info.etag)
        await f.close()
        await scheduler.io(os.replace, tmp, dest)
        committed = True
        await engine.journal.download_done(str(dest))
        return fetched
    except asyncio.CancelledError:
        keep = resumable  # the next run picks up from the journal
        raise
    except BaseException:
        await engine.journal.download_done(str(dest))
        raise
    finally:
        if not committed:
            await f.close()
            if not keep:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def _check_size(src: str, size: int, info: ObjectInfo) -> None:
    if info.size != size:
        raise PreconditionFailed(
            f"changed on the server during the download "
            f"(size {size} -> {info.size}); run the command again",
            url=src,
        )


def _mtime_ns(info: ObjectInfo) -> int | None:
    """The mtime to give the file: synxfer's stored one, else the object's."""
    mtime_ns = stored_mtime(info.metadata)
    if mtime_ns is None and info.mtime is not None:
        mtime_ns = int(info.mtime * 1_000_000_000)
    return mtime_ns


def resume_temp_path(dest: Path) -> Path:
    """The temp file a resumable download of ``dest`` uses (stable across runs)."""
    return dest.with_name(f".{dest.name}{TEMP_SUFFIX}")


class PartSums:
    """Per-part checksums of one download, and the whole-object checks they allow.

    Computed in the worker thread that writes each part, so nothing is read
    twice. Checked at the end, when available:

    * the S3-style ETag (plain MD5, or MD5 of part MD5s ``-N``) of objects
      synxfer uploaded (see :func:`_expected_etag_parts`);
    * ``info.checksums["md5"]`` for objects fetched in one range;
    * ``info.checksums["crc32c"]``, folded from part CRCs with
      :func:`crc32c_combine` (needs google-crc32c, the ``gcs`` extra).
    """

    def __init__(self, nparts: int) -> None:
        self.parts: list[tuple[bytes | None, int | None] | None] = [None] * nparts
        self.etag_parts: int | None = None
        self.want_md5 = False
        self.want_crc = False

    def plan(self, info: ObjectInfo, size: int, part_size: int) -> None:
        self.etag_parts = _expected_etag_parts(info, size, part_size, len(self.parts))
        single = len(self.parts) == 1
        self.want_md5 = self.etag_parts is not None or (single and "md5" in info.checksums)
        self.want_crc = "crc32c" in info.checksums and have_crc32c()

    def written(self, index: int) -> bool:
        return self.parts[index] is not None

    def record(self, index: int, md5: bytes | None, crc: int | None) -> None:
        self.parts[index] = (md5, crc)

    def md5s(self) -> list[bytes] | None:
        """Every part's MD5, if every part has one."""
        got = [p[0] for p in self.parts if p is not None]
        if len(got) != len(self.parts) or any(m is None for m in got):
            return None
        return [m for m in got if m is not None]

    def crc32c_b64(self, lengths: list[int]) -> str | None:
        """The whole object's CRC32C (base64, as on the wire), if every part has one."""
        got = [p[1] for p in self.parts if p is not None]
        if len(got) != len(self.parts) or any(c is None for c in got):
            return None
        total = 0
        for crc, length in zip(got, lengths, strict=True):
            assert crc is not None
            total = crc32c_combine(total, crc, length)
        return base64.b64encode(total.to_bytes(4, "big")).decode()

    def verify(self, url: str, info: ObjectInfo, lengths: list[int]) -> None:
        """Raise IntegrityError on any mismatch with what the source vouches for;
        skip checks that lack a sum (parts an earlier run wrote without it)."""
        if any(p is None for p in self.parts):
            raise IntegrityError(f"{url}: a part was never written")
        digests = self.md5s() if self.want_md5 else None
        if digests is not None:
            if self.etag_parts is not None:
                actual = digests[0].hex() if self.etag_parts == 0 else multipart_etag(digests)
                _mismatch(url, "ETag", actual, info.etag)
            if len(digests) == 1 and "md5" in info.checksums:
                actual = base64.b64encode(digests[0]).decode()
                _mismatch(url, "MD5", actual, info.checksums["md5"])
        crc = self.crc32c_b64(lengths) if "crc32c" in info.checksums else None
        if crc is not None:
            _mismatch(url, "CRC32C", crc, info.checksums["crc32c"])


def _mismatch(url: str, what: str, actual: str, expected: str | None) -> None:
    """IntegrityError unless the two agree."""
    if actual != expected:
        raise IntegrityError(
            f"{url}: downloaded data does not match the object's {what} "
            f"({actual} != {expected}); the partial download was discarded"
        )


async def _resume_download(
    engine: Engine,
    backend: Backend,
    key: str,
    dest: Path,
    tmp: Path,
    size: int,
    part_size: int,
    sums: PartSums,
) -> ObjectInfo | None:
    """The object's info if an earlier run's temp file can be continued.

    Records in ``sums`` the parts already written. A download of another
    object, another version (ETag or size differ) or with another part size
    is stale: its temp file is removed and its entry forgotten.
    """
    entry = await engine.journal.download_get(str(dest))
    if entry is None:
        return None
    src = backend.url(key)
    same = (entry.src, entry.size, entry.part_size, entry.temp) == (src, size, part_size, str(tmp))
    usable = same and entry.etag is not None
    if usable:
        try:
            usable = os.stat(tmp).st_size == size
        except OSError:
            usable = False
    if usable:
        info: ObjectInfo = await backend.stat(key)
        if info.etag == entry.etag and info.size == size:
            for number, (md5, crc) in entry.parts.items():
                if 1 <= number <= len(sums.parts):
                    sums.record(number - 1, md5, crc)
            log.info("resuming %s: %d part(s) already written", dest, len(entry.parts))
            return info
    with contextlib.suppress(OSError):
        os.unlink(entry.temp)
    await engine.journal.download_done(str(dest))
    return None


def _expected_etag_parts(info: ObjectInfo, size: int, part_size: int, nranges: int) -> int | None:
    """How the ETag can be checked: 0 = plain MD5, N = N-part MD5, None = cannot.

    Only objects synxfer uploaded (they carry ``synxfer-part-size``) are
    checked: for them the ETag is known to be MD5-based on S3-compatible
    stores without KMS encryption, and the ranges line up with the parts.
    """
    stored = stored_part_size(info.metadata)
    n = etag_parts(info.etag)
    if stored is None or n is None:
        return None
    if n == 0 and stored == 0 and nranges == 1:
        return 0
    if n > 0 and stored == part_size and n == nranges and size > 0:
        return n
    return None
