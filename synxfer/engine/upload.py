"""Moving one file: upload (single put or multipart) and download (ranged GETs).

Both directions follow the same shape: reserve a part's bytes in the budget,
*then* create the part's task, so tasks and memory stay bounded however big
the file is. Each byte of a source file is read once, and its checksum is
computed in the same worker-thread call that read it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import os
import time
from pathlib import Path

from .._exceptions import (
    IntegrityError,
    NotFound,
    PreconditionFailed,
    SourceChangedError,
    SynxferError,
)
from .._models import CompletedPart, MultipartUpload, ObjectInfo, WriteOptions
from ..backend import Backend
from ..layers.retry import attempts_of_last_call
from .core import Engine
from .localfile import TEMP_SUFFIX, LocalFile, identity, temp_path_for
from .meta import MTIME_KEY, PART_SIZE_KEY, format_mtime, stored_mtime, stored_part_size
from .parts import (
    crc32c_combine,
    etag_parts,
    have_crc32c,
    multipart_etag,
    part_ranges,
    plan_part_size,
)

__all__ = ["download_object", "upload_path"]

log = logging.getLogger("synxfer")

#: Seconds allowed for aborting a multipart upload during cleanup.
_ABORT_TIMEOUT = 60.0


# -- upload --------------------------------------------------------------------


async def upload_path(engine: Engine, path: Path, backend: Backend, key: str) -> int:
    """Upload the local file ``path`` to ``key``; returns the bytes sent.

    The file's identity (device, inode, size, mtime) is taken when it is
    opened and checked again after the last byte is read and before the
    object is committed; if it changed, nothing is committed.
    """
    caps = backend.capabilities
    cfg = engine.config
    f = await LocalFile.open(path, os.O_RDONLY, engine.executor)
    try:
        st = await f.fstat()
        size = st.st_size
        before = identity(st)
        metadata = {MTIME_KEY: format_mtime(st.st_mtime_ns)}

        async def check_unchanged() -> None:
            now = identity(await f.fstat())
            try:
                on_disk = await asyncio.get_running_loop().run_in_executor(
                    engine.executor, os.stat, path
                )
            except FileNotFoundError:
                on_disk = None
            if now != before or on_disk is None or identity(on_disk)[:2] != before[:2]:
                raise SourceChangedError(
                    f"{path} changed while it was being uploaded; nothing was committed "
                    f"for it -- run the command again to send the new version"
                )

        multipart = caps.multipart and (
            size >= cfg.multipart_threshold or size > caps.max_single_put
        )
        if not multipart:
            metadata[PART_SIZE_KEY] = "0"
            granted = await engine.budget.acquire(size)
            buf = engine.buffers.get(size)
            try:
                n, checksum = await f.read_into(buf, 0, caps.part_checksum)
                if n != size:
                    raise SourceChangedError(f"{path} shrank while it was being uploaded")
                await check_unchanged()
                await backend.put(key, buf, WriteOptions(metadata), checksum)
            finally:
                engine.buffers.put(buf)
                engine.budget.release(granted)
            engine.progress(size, "up")
            return size

        part_size = plan_part_size(size, cfg.part_size, caps)
        metadata[PART_SIZE_KEY] = str(part_size)
        dest = backend.url(key)
        upload, done = await _resume_upload(engine, backend, key, path, before, part_size)
        orphans_since = None
        if upload is None:
            upload, orphans_since = await create_upload(backend, key, WriteOptions(metadata))
            await engine.journal(
                "upload_start", dest, str(path), before, upload.upload_id, part_size
            )
        try:
            sent = await _send_parts(engine, f, backend, upload, size, part_size, done)
            await check_unchanged()
            await backend.complete_multipart(upload, sorted(done.values(), key=_number))
        except asyncio.CancelledError:
            # Interrupted (Ctrl-C, shutdown): with a journal the upload resumes
            # on the next run; without one nothing could, so discard it.
            if not engine.resumable:
                await abort_upload(backend, upload)
            raise
        except BaseException:
            await abort_upload(backend, upload)
            await engine.journal("upload_done", dest)
            await abort_orphans(backend, upload, orphans_since)
            raise
        await engine.journal("upload_done", dest)
        await abort_orphans(backend, upload, orphans_since)
        return sent
    finally:
        await f.close()


def _number(part: CompletedPart) -> int:
    return part.number


async def _resume_upload(
    engine: Engine,
    backend: Backend,
    key: str,
    path: Path,
    ident: tuple[int, int, int, int],
    part_size: int,
) -> tuple[MultipartUpload | None, dict[int, CompletedPart]]:
    """An upload of ``path`` to ``key`` left by an earlier run, and its parts
    that both the journal and the server (ListParts) hold with the same ETag.

    A journal entry for another file, another version of this one (size,
    mtime or inode differ) or another part size is stale: its upload is
    aborted and forgotten.
    """
    dest = backend.url(key)
    entry = await engine.journal("upload_get", dest)
    if entry is None:
        return None, {}
    upload = MultipartUpload(key, entry.upload_id)
    same = entry.src == str(path) and entry.identity == ident and entry.part_size == part_size
    if same and backend.capabilities.list_parts:
        try:
            on_server = {p.number: p for p in await backend.list_parts(upload)}
        except NotFound:
            on_server = None  # the upload was completed or aborted meanwhile
        if on_server is not None:
            done = {
                n: on_server[n]
                for n, (etag, size) in entry.parts.items()
                if n in on_server and (on_server[n].etag, on_server[n].size) == (etag, size)
            }
            log.info("resuming %s: %d part(s) already on the server", dest, len(done))
            return upload, done
    else:
        await abort_upload(backend, upload)
    await engine.journal("upload_done", dest)
    return None, {}


async def _send_parts(
    engine: Engine,
    f: LocalFile,
    backend: Backend,
    upload: MultipartUpload,
    size: int,
    part_size: int,
    done: dict[int, CompletedPart],
) -> int:
    """Send every part not in ``done`` (adding them to it); returns bytes sent."""
    algorithm = backend.capabilities.part_checksum
    dest = backend.url(upload.key)
    sent = 0

    async def send(number: int, offset: int, length: int, granted: int) -> None:
        nonlocal sent
        buf = engine.buffers.get(length)
        try:
            n, checksum = await f.read_into(buf, offset, algorithm)
            if n != length:
                raise SourceChangedError(f"{f.path} shrank while it was being uploaded")
            part = await backend.upload_part(upload, number, buf, checksum)
        finally:
            engine.buffers.put(buf)
            engine.budget.release(granted)
        done[number] = part
        sent += length
        await engine.journal("upload_part", dest, upload.upload_id, number, part.etag, part.size)
        engine.progress(length, "up")

    async with asyncio.TaskGroup() as tg:
        for index, (offset, length) in enumerate(part_ranges(size, part_size)):
            if index + 1 in done:
                continue
            # Reserve the part's memory before its task exists: back-pressure.
            granted = await engine.budget.acquire(length)
            tg.create_task(send(index + 1, offset, length, granted))
    return sent


#: An orphan may have begun this long before our first attempt, by the
#: server's clock (client and server clocks differ a little).
_ORPHAN_CLOCK_SLACK = 60.0
#: A server time further than this from ours is not a clock to compare with
#: (moto, for one, reports a fixed date).
_IMPLAUSIBLE_CLOCK = 86_400.0


async def create_upload(
    backend: Backend, key: str, options: WriteOptions
) -> tuple[MultipartUpload, float | None]:
    """Start a multipart upload; also the time to look for orphans from, if any.

    Creating an upload is not idempotent: if an attempt was applied by the
    server but its reply was lost, the retry creates a second upload and the
    first is orphaned (invisible, but billed until aborted). When the create
    needed more than one attempt, this returns when the first began, for
    :func:`abort_orphans`.
    """
    started = time.time()
    upload = await backend.create_multipart(key, options)
    return upload, (started if attempts_of_last_call() > 1 else None)


async def abort_orphans(backend: Backend, upload: MultipartUpload, since: float | None) -> None:
    """Abort uploads of ``upload.key`` begun since ``since`` that are not ``upload``.

    Best effort, and only after a create that needed a retry: uploads begun
    before our first attempt (by the server's clock, when it agrees with ours
    within a day) are left alone; a backend that cannot list uploads, or a
    listing that fails, leaves them all (a lifecycle rule is the backstop).
    """
    if since is None:
        return
    try:
        pending = await backend.list_uploads(upload.key)
    except (NotImplementedError, SynxferError) as exc:
        log.info("could not look for orphaned uploads of %s: %s", backend.url(upload.key), exc)
        return
    now = time.time()
    for other in pending:
        ours = other.upload.upload_id == upload.upload_id
        when = other.initiated
        if when is not None and abs(now - when) > _IMPLAUSIBLE_CLOCK:
            when = None  # the server's clock cannot be compared with ours
        older = when is not None and when < since - _ORPHAN_CLOCK_SLACK
        if not ours and not older:
            await abort_upload(backend, other.upload)
            log.info(
                "aborted multipart upload %s of %s: created by an attempt whose reply was lost",
                other.upload.upload_id,
                backend.url(upload.key),
            )


async def abort_upload(backend: Backend, upload: MultipartUpload) -> None:
    """Abort a multipart upload even while being cancelled; never raises."""
    try:
        async with asyncio.timeout(_ABORT_TIMEOUT):
            await asyncio.shield(backend.abort_multipart(upload))
    except BaseException as exc:
        log.warning(
            "could not abort multipart upload %s of %s: %s",
            upload.upload_id,
            backend.url(upload.key),
            exc,
        )
        if isinstance(exc, asyncio.CancelledError):
            raise


# -- download ------------------------------------------------------------------


async def download_object(
    engine: Engine,
    backend: Backend,
    key: str,
    dest: Path,
    size: int,
    etag: str | None = None,
) -> int:
    """Download ``key`` (expected ``size`` bytes) to ``dest``; returns bytes fetched.

    Parts are written with positional writes into a hidden temp file beside
    ``dest``, checked, given the source's mtime, then renamed over ``dest``
    atomically. On failure the temp file is removed: no file that looks whole
    is ever left behind. When interrupted (cancelled) with the journal on,
    the temp file and the journal entry stay, and the next run fetches only
    the missing parts. Every ranged GET after the first carries the object's
    ETag (If-Match), so an object replaced mid-download is detected instead
    of stitched together.
    """
    cfg = engine.config
    caps = backend.capabilities
    loop = asyncio.get_running_loop()
    part_size = plan_part_size(size, cfg.part_size, caps) if caps.ranged_reads else max(size, 1)
    ranges = part_ranges(size, part_size)
    src = backend.url(key)
    await loop.run_in_executor(engine.executor, _makedirs, dest.parent)

    resumable = engine.resumable
    tmp = resume_temp_path(dest) if resumable else temp_path_for(dest)
    sums = PartSums(len(ranges))
    info = await _resume_download(engine, backend, key, dest, tmp, size, part_size, sums)
    if info is None:
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if resumable else os.O_EXCL)
    else:
        flags = os.O_WRONLY
    f = await LocalFile.open(tmp, flags, engine.executor)
    committed = keep = False
    fetched = 0
    try:
        if info is None:
            await f.allocate(size)
            # The first part tells us the object's etag, metadata and checksums.
            length0 = ranges[0][1]
            granted = await engine.budget.acquire(length0)
            try:
                # The length is known (its layers may use it), except for an
                # empty object, which must be read without a range (S3: 416).
                res = await backend.read(key, 0, length0 or None, if_match=etag)
                info = res.info
                if info.size != size:
                    raise PreconditionFailed(
                        f"changed on the server during the download "
                        f"(size {size} -> {info.size}); run the command again",
                        url=src,
                    )
                _check_length(backend, key, 0, length0, res.data)
                sums.plan(info, size, part_size)
                md5, crc = await f.write(0, res.data, sums.want_md5, sums.want_crc)
                del res
            finally:
                engine.budget.release(granted)
            sums.record(0, md5, crc)
            fetched += length0
            await engine.journal(
                "download_start", str(dest), src, info.etag, size, part_size, str(tmp)
            )
            await engine.journal("download_part", str(dest), str(tmp), 1, md5, crc)
            engine.progress(length0, "down")
        else:
            sums.plan(info, size, part_size)
        if_match = info.etag or etag

        async def fetch(index: int, offset: int, length: int, granted: int) -> None:
            nonlocal fetched
            try:
                r = await backend.read(key, offset, length, if_match=if_match)
                _check_length(backend, key, offset, length, r.data)
                md5, crc = await f.write(offset, r.data, sums.want_md5, sums.want_crc)
                del r
            finally:
                engine.budget.release(granted)
            sums.record(index, md5, crc)
            fetched += length
            await engine.journal("download_part", str(dest), str(tmp), index + 1, md5, crc)
            engine.progress(length, "down")

        async with asyncio.TaskGroup() as tg:
            for index, (offset, length) in enumerate(ranges):
                if sums.written(index):
                    continue  # in this run or an earlier one
                g = await engine.budget.acquire(length)
                tg.create_task(fetch(index, offset, length, g))

        sums.verify(src, info, [length for _, length in ranges])
        mtime_ns = stored_mtime(info.metadata)
        if mtime_ns is None and info.mtime is not None:
            mtime_ns = int(info.mtime * 1_000_000_000)
        await f.finish(mtime_ns, info.etag)
        await f.close()
        await loop.run_in_executor(engine.executor, os.replace, tmp, dest)
        committed = True
        await engine.journal("download_done", str(dest))
        return fetched
    except asyncio.CancelledError:
        keep = resumable  # the next run picks up from the journal
        raise
    except BaseException:
        await engine.journal("download_done", str(dest))
        raise
    finally:
        if not committed:
            await f.close()
            if not keep:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


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
    entry = await engine.journal("download_get", str(dest))
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
    await engine.journal("download_done", str(dest))
    return None


def _makedirs(path: Path) -> None:
    os.makedirs(path, exist_ok=True)


def _check_length(backend: Backend, key: str, offset: int, length: int, data: bytes) -> None:
    if len(data) != length:
        raise IntegrityError(
            f"{backend.url(key)}: expected {length} bytes at offset {offset}, got {len(data)}"
        )


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


def md5_file_etag(path: Path, part_size: int, parts: int) -> str:
    """The S3-style ETag of a local file (blocking; run in a worker thread).

    ``parts == 0`` gives the plain MD5; otherwise the md5-of-part-md5s form.
    Used by ``--checksum`` comparisons.
    """
    with open(path, "rb") as fh:
        if parts == 0:
            h = hashlib.md5(usedforsecurity=False)
            while chunk := fh.read(1 << 20):
                h.update(chunk)
            return h.hexdigest()
        digests = []
        while True:
            h = hashlib.md5(usedforsecurity=False)
            remaining = part_size
            while remaining:
                chunk = fh.read(min(remaining, 1 << 20))
                if not chunk:
                    break
                h.update(chunk)
                remaining -= len(chunk)
            if remaining == part_size:
                break
            digests.append(h.digest())
            if remaining:
                break
        return multipart_etag(digests)
