"""Downloading one object to a local file: received into pooled buffers, verified.

An object of one range is one GET and one worker-thread call (write, hash,
verify, tag, rename), batched with other files' on the same thread hop
(:meth:`~.scheduler.Scheduler.io_batched`). A bigger one is fetched in ranges through the
scheduler (:meth:`~.scheduler.Scheduler.map_parts`), which reserves each
fetch's bytes and lends it a pooled buffer before its task exists, so tasks
and memory stay bounded however big the object is; a fetch is one GET of
up to :data:`FETCH_RANGES` adjacent ranges (:func:`fetch_size`). It is
journaled per range, so an interrupted download resumes. Each byte is
received into a pooled buffer, written from it once, and its checksum is
computed in the same worker-thread call that wrote it.

Every download is checked against the strongest checksum its source
vouches for (:mod:`.verify`); data that does not match is fetched again
under the client's retry policy (the same attempts and backoff as a
transient error), and never renamed into place. A download whose source
vouches for nothing is done but reported as not verified.

An object a codec stored (:mod:`.compress`; its metadata names it) takes
the same path: its stored bytes are fetched, journaled and verified like
any object's, so an interrupted download of it resumes like any other; the
decode is the last stage, from the verified stored bytes into the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
from collections.abc import Callable
from pathlib import Path

from .._exceptions import IntegrityError
from .._models import ObjectInfo
from ..backend import Backend
from ._os import OPEN_FLAGS, pread_into
from .checksums import CRC_KINDS, Kind, new_hash, to_bytes
from .compress import Codec, Decoder, Undecodable, decoding_of
from .core import Engine, keep_existing
from .journal import DownloadEntry
from .localfile import (
    TEMP_SUFFIX,
    LocalFile,
    commit_temp,
    place,
    temp_path_for,
    write_whole_file,
)
from .meta import stored_mtime
from .parts import (
    Part,
    plan_part_size,
)
from .scheduler import Lease
from .verify import (
    Mismatch,
    Plan,
    Settled,
    Sums,
    Vouching,
    check_size,
    check_version,
    fetch_checked,
    gather_claims,
    gave_up,
    plan,
    primary,
    retry_mismatch,
    unit_value,
)

__all__ = ["download_object", "resume_temp_path"]

log = logging.getLogger("synxfer")


async def download_object(
    engine: Engine,
    backend: Backend,
    key: str,
    dest: Path,
    size: int,
    etag: str | None = None,
) -> tuple[int, bool]:
    """Download ``key`` (expected ``size`` bytes) to ``dest``.

    Returns the bytes fetched and whether the data was verified (against a
    checksum the source vouches for, or by a backend that checks its reads).

    Every range is received into a pooled buffer (``backend.read_into``) and
    written from it with positional writes, hashed in the same worker-thread
    call. Data lands in a hidden temp file beside ``dest``, is checked, given
    the source's mtime, then renamed over ``dest`` atomically; on failure the
    temp file is removed: no file that looks whole is ever left behind.

    An object of at most :data:`SINGLE_GET_PARTS` ranges takes
    :func:`_download_single`: one GET, one worker-thread call, no journal. A
    bigger one is fetched in ranges; when interrupted (cancelled) with the
    journal on, its temp file and journal entry stay, and the next run
    fetches only the missing parts.
    Every ranged GET carries the object's ETag (If-Match), so an object
    replaced mid-download is detected instead of stitched together.

    An object a codec stored (zstd; its metadata says so) is fetched and
    verified as stored, then decoded and checked against its recorded size
    before the rename (:mod:`.compress`); the bytes returned are the stored
    ones.
    """
    caps = backend.capabilities
    if caps.ranged_reads:
        part_size = plan_part_size(size, engine.config.part_size, caps)
    else:
        part_size = max(size, 1)
    single = min(part_size * SINGLE_GET_PARTS, engine.config.memory_budget)
    if size <= max(part_size, single):
        return await _download_single(engine, backend, key, dest, size, etag)
    return await _download_ranges(engine, backend, key, dest, size, part_size, etag)


#: Objects up to this many parts long come in one GET (:func:`_download_single`).
#: Ranges would buy parallelism that a tree of files already has, at the cost
#: of a HEAD, one more GET, a preallocation and four journal rows per file
#: (s5cmd fetches up to 50 MB and rclone up to 256 MiB in one stream). The
#: buffer is held whole, so this stays small, and within the memory budget.
SINGLE_GET_PARTS = 2


async def _download_single(
    engine: Engine,
    backend: Backend,
    key: str,
    dest: Path,
    size: int,
    etag: str | None,
) -> tuple[int, bool]:
    """One GET into a pooled buffer, then ONE worker-thread call that writes,
    hashes, verifies, tags and renames (:func:`.localfile.write_whole_file`),
    batched with other files' (:meth:`~.scheduler.Scheduler.io_batched`).

    Nothing to resume, so no journal; nothing exists on disk until the data
    is in memory, and the thread call removes its temp file on any failure.
    A mismatch is fetched again under the retry policy. A multipart object
    checked by a composite checksum asks for its part layout first
    (:func:`.verify.gather_claims`), and hashes each part's slice. When
    the planned checksum does not match, or none could be planned, the
    others are tried on the bytes in memory (:class:`.verify.Vouching`).
    """
    scheduler = engine.scheduler
    resumable = engine.resumable
    src = backend.url(key)
    attempts = 0
    verified_reads = backend.capabilities.verified_reads
    vouching: Vouching | None = None
    async with scheduler.reserve(size) as lease:
        view = lease.view()

        async def attempt() -> None:
            nonlocal attempts, vouching
            attempts += 1
            # With the journal on, the stable name an interrupted run would
            # have left (overwritten here); without it, a unique one.
            tmp = resume_temp_path(dest) if resumable else temp_path_for(dest)
            # As a whole: S3 sends no whole-object checksum with a range.
            info = await backend.read_into(key, 0, view, if_match=etag, whole=True)
            engine.progress(size, "down")
            check_size(src, size, info, "download")
            claims = await gather_claims(backend, key, info, info.etag or etag)
            exp, layout = primary(claims)
            if exp is None and not verified_reads:
                # Some services send no whole-object checksum with a ranged
                # GET (S3 may not, even for a range that covers the object):
                # ask a HEAD before calling the file unverified.
                head = await backend.stat(key)
                if head.etag == info.etag and head.size == info.size:
                    info = dataclasses.replace(
                        info, checksums=head.checksums, encryption=head.encryption
                    )
                    claims = await gather_claims(backend, key, head, head.etag or etag)
                    exp, layout = primary(claims)
            if vouching is None:
                vouching = Vouching(src, info, claims)
            else:
                vouching.update(info, claims)
            check = None
            if exp is not None:
                whole = plan(size, max(size, 1), exp, layout)
                check = functools.partial(_check_whole, whole, src, vouching)
            elif not verified_reads:
                check = functools.partial(_vouch_whole, vouching)
            # An encoded object is checked as stored, then decoded (.compress).
            decoding = decoding_of(info, src)
            write = (
                write_whole_file
                if decoding is None
                else functools.partial(_write_decoded, *decoding, url=src)
            )
            await scheduler.io_batched(
                functools.partial(
                    write,
                    dest,
                    tmp,
                    view,
                    exclusive=not resumable,
                    check=check,
                    mtime_ns=_mtime_ns(info),
                    etag=info.etag,
                    keep_existing=keep_existing(),
                )
            )

        try:
            await retry_mismatch(engine, "download", attempt)
        except Settled as settled:
            raise gave_up(settled.error, attempts, dest, same=True) from None
        except Undecodable as bad:
            raise gave_up(bad.error, attempts, dest, same=attempts > 1) from None
        except IntegrityError as exc:
            raise gave_up(exc, attempts, dest) from None
    assert vouching is not None
    if vouching.note is not None:
        engine.warn(vouching.note, vouching.note_kind)
    return size, verified_reads or vouching.verified


def _write_decoded(
    codec: Codec,
    limit: int,
    dest: Path,
    tmp: Path,
    data: memoryview,
    *,
    url: str,
    exclusive: bool,
    check: Callable[[memoryview], None] | None,
    mtime_ns: int | None,
    etag: str | None,
    keep_existing: bool = False,
) -> None:
    """:func:`.localfile.write_whole_file` for an encoded object held whole
    in ``data``: ``check`` the stored bytes first, then decode them into
    ``tmp`` (at most ``limit`` bytes, exactly that many at the end), tag,
    rename. ONE blocking call (a worker thread); on any failure ``tmp`` is
    removed."""
    if check is not None:
        check(data)

    def fill(fd: int) -> None:
        decoder = codec.decoder(fd, limit, url)
        decoder.feed(data)
        decoder.finish()

    commit_temp(
        dest,
        tmp,
        fill,
        exclusive=exclusive,
        mtime_ns=mtime_ns,
        etag=etag,
        keep_existing=keep_existing,
    )


async def _decode_into_place(
    engine: Engine,
    codec: Codec,
    limit: int,
    stored: Path,
    size: int,
    dest: Path,
    url: str,
    info: ObjectInfo,
    chunk: int,
) -> None:
    """Decode the verified stored bytes in ``stored`` (``size`` of them)
    into a new temp file beside ``dest``, check it decoded whole to
    ``limit`` bytes, tag it and rename it into place.

    The stored file is read ``chunk`` bytes at a time into a buffer the
    budget lends, each chunk read and decoded in one worker-thread call, in
    order; between chunks the loop is free and a cancellation stops the
    pass (the stored bytes and their journal stay: a rerun decodes again
    without fetching). :class:`.compress.Undecodable` when the bytes do not
    decode to the file their metadata describes.
    """
    scheduler = engine.scheduler
    out_tmp = temp_path_for(dest)
    src = await LocalFile.open(stored, os.O_RDONLY, scheduler.executor)
    placed = False
    try:
        out = await LocalFile.open(
            out_tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, scheduler.executor
        )
        try:
            decoder = codec.decoder(out.fd, limit, url)
            async with scheduler.reserve(chunk) as lease:
                buf = lease.view()
                offset = 0
                while offset < size:
                    view = buf[: min(chunk, size - offset)]
                    await scheduler.io_holding(_decode_chunk, decoder, src.fd, view, offset, url)
                    offset += len(view)
            await scheduler.io(decoder.finish)
            await out.finish(_mtime_ns(info), info.etag)
            await out.close()
            await scheduler.io(place, out_tmp, dest, keep_existing())
            placed = True
        finally:
            if not placed:
                await out.close()
                with contextlib.suppress(OSError):
                    os.unlink(out_tmp)
    finally:
        await src.close()


def _decode_chunk(decoder: Decoder, fd: int, view: memoryview, offset: int, url: str) -> None:
    """Read ``len(view)`` stored bytes at ``offset`` of ``fd`` and decode them (a worker thread)."""
    n = 0
    while n < len(view):
        got = pread_into(fd, view[n:], offset + n)
        if not got:
            raise Undecodable(IntegrityError(f"{url}: its downloaded bytes shrank on disk"))
        n += got
    decoder.feed(view)


def _check_whole(p: Plan, url: str, vouching: Vouching, data: memoryview) -> None:
    """Check an object held whole in ``data`` (in the thread that wrote it)
    against its planned claim, else against the others (:class:`.verify.Vouching`);
    :class:`.verify.Settled` when it failed the same way before."""
    sums = Sums(p)
    for unit, members in enumerate(p.units):
        (index,) = members  # one range per unit: the plan's ranges are whole parts
        r = p.ranges[index]
        sums.record(unit, unit_value(p.kind, data[r.offset : r.offset + r.length]))
    try:
        sums.check(url)
    except Mismatch as exc:
        vouching.whole(exc, data)


def _vouch_whole(vouching: Vouching, data: memoryview) -> None:
    """Nothing was planned: try what can vouch for ``data`` after the fact."""
    vouching.unverified(data, len(data))


async def _download_ranges(
    engine: Engine,
    backend: Backend,
    key: str,
    dest: Path,
    size: int,
    part_size: int,
    etag: str | None,
) -> tuple[int, bool]:
    """Ranged GETs into pooled buffers, journaled so an interrupted run resumes.

    A HEAD first (``backend.stat``: ranged GETs carry no whole-object
    checksum) tells what to verify against, and the part layout when that
    needs it; the ranges are planned for it (:func:`.verify.plan`). After
    the last range, the object's checksum is computed from the ranges' and
    compared; on a mismatch the ranges still in doubt are fetched again
    (see :mod:`.verify`), under the retry policy.
    """
    scheduler = engine.scheduler
    src = backend.url(key)
    resumable = engine.resumable
    tmp = resume_temp_path(dest) if resumable else temp_path_for(dest)
    # The journal's lookup (its first use opens the database) runs on the
    # journal's thread while the HEAD is on the wire.
    entry = asyncio.ensure_future(engine.journal.download_get(str(dest)))
    try:
        info = await backend.stat(key)
        check_size(src, size, info, "download")
        check_version(src, etag, info)
        claims = await gather_claims(backend, key, info, info.etag)
        exp, layout = primary(claims)
        vouching = Vouching(src, info, claims)
        # Refused before anything is fetched: an encoding this synxfer cannot decode.
        decoding = decoding_of(info, src)
        if exp is None and not backend.capabilities.verified_reads:
            # Layouts to try after the fact: each range's CRC tells whether
            # it came back the same, so only doubtful ranges are fetched again.
            exp = vouching.fingerprint()
        p = plan(size, part_size, exp, layout)
        journaled = await entry
    finally:
        entry.cancel()  # a no-op once it is done
    kind = p.kind
    sums = Sums(p)
    resumed = await _resume_download(engine, journaled, src, dest, tmp, info, size, part_size, sums)
    if resumed is None:
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if resumable else os.O_EXCL)
    else:
        flags = os.O_WRONLY
    f = await LocalFile.open(tmp, flags, scheduler.executor, parents=True)
    committed = keep = False
    fetched = 0
    started: asyncio.Task[None] | None = None

    async def recorded() -> None:
        """Wait until the download's own journal record is written (without
        cancelling it when we are cancelled); its error is the download's, as
        when the record was awaited in line."""
        if started is None:
            return
        if not started.done():
            await asyncio.wait([started])
        if not started.cancelled():
            started.result()

    try:
        if resumed is None:
            resumed = set()
            await f.allocate(size)
            # Written on the journal's thread while the first ranges are on
            # the wire; a range's record, or the entry's removal, waits for it.
            started = asyncio.ensure_future(
                engine.journal.download_start(str(dest), src, info.etag, size, part_size, str(tmp))
            )
        if_match = info.etag or etag

        async def fetch(part: Part, lease: Lease) -> Values:
            view = lease.view()
            await backend.read_into(key, part.offset, view, if_match=if_match)
            if not p.chained:
                # A fetch of one or more whole ranges (group_ranges): each range's
                # value from its slice, in the thread that writes them.
                then = None
                if kind is not None:
                    then = functools.partial(_range_values, kind, part.offset, p.covering(part))
                return await f.write(part.offset, view, then)
            # A hashed unit of several ranges: written and hashed in order.
            unit = p.unit_of[part.index]
            members = p.units[unit]
            pos = members.index(part.index)
            if pos > 0:
                await turns[members[pos - 1]].wait()
            else:
                assert kind is not None
                sums.hashers[unit] = new_hash(kind)
            hasher = sums.hashers[unit]
            last = pos == len(members) - 1

            def write_then(data: memoryview) -> bytes | None:
                hasher.update(data)
                return hasher.digest() if last else None

            value = await f.write(part.offset, view, write_then)
            turns[part.index].set()
            return [value]

        async def fetched_part(part: Part, values: Values) -> None:
            nonlocal fetched
            fetched += part.length
            members = p.covering(part)
            await recorded()
            records: list[tuple[int, bytes | None, int | None]] = []
            for r, value in zip(members, values or [None] * len(members), strict=True):
                if p.last_of_unit(r.index):
                    sums.record(p.unit_of[r.index], value)
                records.append((r.number, _journal_value(kind, value), None))
            # One journal call and one transaction for the fetch's ranges.
            await engine.journal.download_parts(str(dest), str(tmp), records)
            engine.progress(part.length, "down")

        verified_reads = backend.capabilities.verified_reads

        async def vouch(error: IntegrityError | None, settled: bool) -> None:
            # The bytes are in the temp file: what else vouches for them is
            # computed from it, off the loop, without fetching again.
            if error is None and verified_reads:
                return
            await scheduler.io(_vouch_file, vouching, tmp, size, error, settled)

        turns: dict[int, asyncio.Event] = {}
        await fetch_checked(
            engine,
            "download",
            sums,
            src,
            dest,
            turns,
            fetch,
            fetched_part,
            have=resumed,
            fetch_size=fetch_size(engine.config.memory_budget, part_size),
            vouch=vouch,
        )
        if decoding is None:
            await f.finish(_mtime_ns(info), info.etag)
            await f.close()
            await scheduler.io(place, tmp, dest, keep_existing())
        else:
            await f.close()
            try:
                await _decode_into_place(engine, *decoding, tmp, size, dest, src, info, part_size)
            except Undecodable as bad:
                raise gave_up(bad.error, 1, dest) from None
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        committed = True
        await recorded()
        await engine.journal.download_done(str(dest))
        if vouching.note is not None:
            engine.warn(vouching.note, vouching.note_kind)
        return min(fetched, size), vouching.verified or verified_reads
    except asyncio.CancelledError:
        keep = resumable  # the next run picks up from the journal
        raise
    except BaseException:
        await recorded()
        await engine.journal.download_done(str(dest))
        raise
    finally:
        if not committed:
            await f.close()
            if not keep:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def _vouch_file(
    vouching: Vouching, path: Path, size: int, error: IntegrityError | None, settled: bool
) -> None:
    """:meth:`.verify.Vouching.rescue` (``error``: the planned check's) or
    :meth:`~.verify.Vouching.unverified` over the temp file at ``path``.
    Blocking: a worker thread."""
    fd = os.open(path, os.O_RDONLY | OPEN_FLAGS)
    try:
        if error is None:
            vouching.unverified(fd, size)
        else:
            vouching.rescue(error, fd, size, settled=settled)
    finally:
        os.close(fd)


#: What a fetch gives back: its ranges' unit values, in order (None: unchecked).
Values = list[int | bytes | None] | None

#: A ranged download gets up to this many of its ranges in one GET when the
#: memory budget holds two such fetches (:func:`fetch_size`).
FETCH_RANGES = 2


def fetch_size(memory_budget: int, part_size: int) -> int:
    """Bytes a ranged download asks for per GET: :data:`FETCH_RANGES` ranges
    when the budget holds two such fetches, else one range.

    The budget (``max_threads * part_size`` by default) is unchanged: the
    same bytes are in flight in half as many, twice as long, GETs. Each
    request costs the server and the client a fixed amount, so fewer, longer
    GETs are faster where the two share the CPU (docs/decisions/0015).
    """
    size = part_size * FETCH_RANGES
    return size if 2 * size <= memory_budget else part_size


def _range_values(kind: Kind, base: int, ranges: list[Part], data: memoryview) -> Values:
    """Each range's value from its slice of ``data`` (fetched from ``base``)."""
    return [unit_value(kind, data[r.offset - base : r.offset - base + r.length]) for r in ranges]


def _journal_value(kind: Kind | None, value: int | bytes | None) -> bytes:
    """A range's journal record: ``kind:`` and its unit's value (empty for
    a range whose unit's value is not known yet, or an unchecked download)."""
    raw = b"" if kind is None or value is None else to_bytes(kind, value)
    return f"{kind or '-'}:".encode() + raw


def _journaled_units(
    p: Plan, parts: dict[int, tuple[bytes | None, int | None]]
) -> dict[int, int | bytes | None] | None:
    """Units an earlier run wrote whole, with their values; None if its
    records were written for another check (the download starts afresh).

    A hashed unit counts only when all its ranges were written (its running
    hash died with that run); its other ranges are fetched again.
    """
    kind = p.kind
    tag = f"{kind or '-'}".encode()
    by_range: dict[int, bytes] = {}
    for number, (blob, _) in parts.items():
        head, sep, raw = (blob or b"").partition(b":")
        if not sep or head != tag or not 1 <= number <= len(p.ranges):
            return None
        by_range[number - 1] = raw
    done: dict[int, int | bytes | None] = {}
    for unit, members in enumerate(p.units):
        if not all(i in by_range for i in members):
            continue
        raw = by_range[members[-1]]
        if kind is None:
            done[unit] = None
        elif raw:
            done[unit] = int.from_bytes(raw, "big") if kind in CRC_KINDS else raw
    return done


async def _resume_download(
    engine: Engine,
    entry: DownloadEntry | None,
    src: str,
    dest: Path,
    tmp: Path,
    info: ObjectInfo,
    size: int,
    part_size: int,
    sums: Sums,
) -> set[int] | None:
    """The units an earlier run's temp file already holds (its journal
    ``entry``), or None to start afresh.

    Records their values in ``sums``. A download of another object, another
    version (ETag or size differ), with another part size or checked another
    way is stale: its temp file is removed and its entry forgotten.
    """
    if entry is None:
        return None
    same = (entry.src, entry.size, entry.part_size, entry.temp) == (src, size, part_size, str(tmp))
    usable = same and entry.etag is not None and entry.etag == info.etag
    if usable:
        try:
            usable = os.stat(tmp).st_size == size
        except OSError:
            usable = False
    done = _journaled_units(sums.plan, entry.parts) if usable else None
    if done is not None:
        for unit, value in done.items():
            sums.record(unit, value)
        log.info("resuming %s: %d range(s) already written", dest, len(entry.parts))
        return set(done)
    with contextlib.suppress(OSError):
        os.unlink(entry.temp)
    await engine.journal.download_done(str(dest))
    return None


def _mtime_ns(info: ObjectInfo) -> int | None:
    """The mtime to give the file: synxfer's stored one, else the object's."""
    mtime_ns = stored_mtime(info.metadata)
    if mtime_ns is None and info.mtime is not None:
        mtime_ns = int(info.mtime * 1_000_000_000)
    return mtime_ns


def resume_temp_path(dest: Path) -> Path:
    """The temp file a resumable download of ``dest`` uses (stable across runs)."""
    return dest.with_name(f".{dest.name}{TEMP_SUFFIX}")
