"""Copying one object between two remote locations, never touching local disk.

**Server-side** when the service can: within one bucket, or between two
buckets whose backends have the same :meth:`~synxfer.backend.Backend.copy_scope`
(the same endpoint and credentials; S3 CopyObject or UploadPartCopy, GCS
objects.rewrite): no byte crosses the client, and the source's
metadata and content type are kept, with the user's options over them.

**Streamed** otherwise (s3 → gs, two endpoints): the source is read in
ranges that feed part uploads to the destination through memory, under the
client's limits: parts go through the scheduler
(:meth:`~.scheduler.Scheduler.map_parts`), which reserves each part's bytes
before its task exists, so an object of any size costs at most the budget.

A streamed copy is checked exactly as a download is (:mod:`.verify`):
against the strongest checksum the source vouches for, a composite one (a
multipart ETag, S3's checksum of the part checksums) with the ranges cut at
the source's part boundaries -- each range is then one part of the new
object, so it keeps the source's layout when the destination allows it.
Each range's value for that check and the part checksum the destination
asks for are computed in one worker-thread call, from the buffer being
sent. A mismatch is fetched (and sent) again under the client's retry
policy, the ranges still in doubt only; nothing is committed at the
destination until the check passes (the multipart upload is aborted, the
single put never sent). After the commit, what the destination reports is
compared with the part checksums sent (a mismatch deletes the copy).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
from collections.abc import Mapping
from typing import NamedTuple

from .._exceptions import ConfigError, IntegrityError
from .._models import CompletedPart, ObjectInfo, WriteOptions
from ..backend import Backend, Capabilities, Checksum, ChecksumAlgorithm
from . import checksums as ck
from .checksums import Hasher
from .core import Engine
from .meta import MTIME_KEY, PART_SIZE_KEY, copy_options, format_mtime
from .parts import Part, checksum_of, plan_part_size
from .scheduler import Lease
from .upload import abort_upload
from .verify import (
    Expectation,
    Layout,
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

__all__ = ["copy_object", "server_side"]

log = logging.getLogger("synxfer")


async def copy_object(
    engine: Engine,
    src: Backend,
    src_key: str,
    dst: Backend,
    dst_key: str,
    size: int,
    etag: str | None = None,
    *,
    options: WriteOptions | None = None,
) -> tuple[int, bool | None]:
    """Copy ``src_key`` (``size`` bytes) to ``dst_key``; returns the bytes
    streamed (0 for a server-side copy) and whether a streamed copy was
    verified (checked against a checksum the source vouches for, or read from
    a backend that checks its reads); None for a server-side copy, whose
    bytes never cross the client.

    The copy keeps the source's content type and metadata, with ``options``
    (None: ``TransferConfig.write_options``) over them (see
    :func:`~.meta.copy_options`), and the source's time.
    """
    base = engine.config.write_options if options is None else options
    if server_side(src, dst):
        info = await src.stat(src_key)
        check_version(src.url(src_key), etag, info)
        given = copy_options(base, info, _metadata(info, None))
        if src is dst:
            await dst.copy(src_key, dst_key, given)
        else:
            await dst.copy_from(src.bucket, src_key, dst_key, given)
        return 0, None
    if size < 0:
        raise ConfigError(f"{src.url(src_key)}: negative size {size}")
    caps = dst.capabilities
    multipart = caps.multipart and (
        size >= engine.config.multipart_threshold or size > caps.max_single_put
    )
    if not src.capabilities.ranged_reads:
        if size > caps.max_single_put:
            raise ConfigError(
                f"{src.url(src_key)}: cannot copy {size} bytes to {dst.url(dst_key)}: the "
                f"source cannot read ranges and the destination takes at most "
                f"{caps.max_single_put} bytes in one request"
            )
        multipart = False
    job = _Copy(src, src_key, dst, dst_key, size, etag, base)
    return await (_stream_parts if multipart else _stream_single)(engine, job)


class _Copy(NamedTuple):
    """One streamed copy: the source object (listed with ``size`` and
    ``etag``), its destination, and the options it is written with."""

    src: Backend
    src_key: str
    dst: Backend
    dst_key: str
    size: int
    etag: str | None
    base: WriteOptions


def server_side(src: Backend, dst: Backend) -> bool:
    """Whether a copy from ``src`` to ``dst`` is made by the service: the same
    backend, or two whose :meth:`~synxfer.backend.Backend.copy_scope` match."""
    if not (src.capabilities.server_side_copy and dst.capabilities.server_side_copy):
        return False
    if src is dst:
        return True
    scope = dst.copy_scope()
    return scope is not None and scope == src.copy_scope()


def _metadata(info: ObjectInfo, part_size: int | None) -> dict[str, str]:
    """synxfer's metadata of the copy: the source's time even if the source
    had none stored, and the copy's part size when known (``None``: keep
    the source's; see :func:`_options`)."""
    metadata: dict[str, str] = {}
    if MTIME_KEY not in info.metadata and info.mtime is not None:
        metadata[MTIME_KEY] = format_mtime(int(info.mtime * 1_000_000_000))
    if part_size is not None:
        metadata[PART_SIZE_KEY] = str(part_size)
    return metadata


def _options(base: WriteOptions, info: ObjectInfo, part_size: int | None) -> WriteOptions:
    """The streamed copy's options; ``part_size`` None: the new object's parts
    are not all of one size, so no ``synxfer-part-size`` (not even the
    source's) is stored -- a reader must not cut ranges by it."""
    given = copy_options(base, info, _metadata(info, part_size))
    if part_size is None and PART_SIZE_KEY in given.metadata:
        metadata = {k: v for k, v in given.metadata.items() if k != PART_SIZE_KEY}
        given = dataclasses.replace(given, metadata=metadata)
    return given


# -- the range's sums (in a worker thread) --------------------------------------------


def _sum_range(
    data: bytearray,
    algorithm: ChecksumAlgorithm | None,
    kind: ck.Kind | None,
    hasher: Hasher | None,
    last: bool,
) -> tuple[Checksum | None, int | bytes | None]:
    """The destination's part checksum and the range's value for the source's
    check, in one pass when they are the same checksum. Blocking."""
    if hasher is not None:  # a hashed unit of several ranges, fed in order
        hasher.update(data)
        return checksum_of(algorithm, data), hasher.digest() if last else None
    value = unit_value(kind, memoryview(data))
    return _reused(algorithm, kind, value) or checksum_of(algorithm, data), value


def _reused(
    algorithm: ChecksumAlgorithm | None, kind: ck.Kind | None, value: int | bytes | None
) -> Checksum | None:
    """The destination's checksum of a range, when the source's check computed
    the same algorithm over the same bytes (nothing hashed twice)."""
    if value is None or kind is None or algorithm is None or kind != algorithm:
        return None
    return Checksum(algorithm, base64.b64encode(ck.to_bytes(kind, value)).decode("ascii"))


def _check_whole(
    p: Plan,
    url: str,
    data: bytearray,
    algorithm: ChecksumAlgorithm | None,
    vouching: Vouching | None = None,
) -> Checksum | None:
    """Check an object held whole in ``data`` and return the destination's
    checksum of it; when the planned check fails or none was planned, what
    else vouches for the bytes is tried (:class:`.verify.Vouching`).
    Blocking (worker thread)."""
    sums = Sums(p)
    view = memoryview(data)
    checksum: Checksum | None = None
    for unit, members in enumerate(p.units):
        (index,) = members  # one range per unit: the plan's ranges are whole parts
        r = p.ranges[index]
        value = unit_value(p.kind, view[r.offset : r.offset + r.length])
        sums.record(unit, value)
        if p.exp is not None and not p.exp.composite:
            checksum = _reused(algorithm, p.kind, value)  # the whole object's
    if p.exp is not None:
        try:
            sums.check(url)
        except Mismatch as exc:
            if vouching is None:
                raise
            vouching.whole(exc, view)
    elif vouching is not None and not vouching.verified:
        vouching.unverified(view, len(view))
    return checksum or checksum_of(algorithm, data)


# -- one request -----------------------------------------------------------------------


async def _stream_single(engine: Engine, job: _Copy) -> tuple[int, bool]:
    """One read of the whole object into a pooled buffer, checked (and the
    destination's checksum computed) in one worker-thread call, then one put."""
    src, src_key, dst, dst_key = job.src, job.src_key, job.dst, job.dst_key
    size, etag = job.size, job.etag
    scheduler = engine.scheduler
    url, dst_url = src.url(src_key), dst.url(dst_key)
    algorithm = dst.capabilities.part_checksum
    attempts = 0
    verified_reads = src.capabilities.verified_reads
    vouching: Vouching | None = None
    async with scheduler.reserve(size) as lease:
        buf = lease.buffer()

        async def attempt() -> tuple[ObjectInfo, Checksum | None]:
            nonlocal attempts, vouching
            attempts += 1
            # As a whole: S3 sends no whole-object checksum with a range.
            info = await src.read_into(src_key, 0, memoryview(buf), if_match=etag, whole=True)
            engine.progress(size, "down")
            check_size(url, size, info, "copy")
            claims = await gather_claims(src, src_key, info, info.etag or etag)
            exp, layout = primary(claims)
            if exp is None and not verified_reads:
                # A GET may carry no whole-object checksum: ask a HEAD.
                head = await src.stat(src_key)
                if head.etag == info.etag and head.size == info.size:
                    claims = await gather_claims(src, src_key, head, head.etag or etag)
                    exp, layout = primary(claims)
            _note_unverified(src, url, exp)
            if vouching is None:
                vouching = Vouching(url, info, claims)
            else:
                vouching.update(info, claims)
            p = plan(size, max(size, 1), exp, layout)
            # A backend that checks its reads needs nothing vouched after the fact.
            vouch = vouching if exp is not None or not verified_reads else None
            checksum = await scheduler.io_holding(_check_whole, p, url, buf, algorithm, vouch)
            return info, checksum

        try:
            got = await retry_mismatch(engine, "copy", attempt)
        except Settled as settled:
            raise gave_up(settled.error, attempts, dst_url, same=True) from None
        except IntegrityError as exc:
            raise gave_up(exc, attempts, dst_url) from None
        info, checksum = got
        result = await dst.put(dst_key, buf, _options(job.base, info, 0), checksum)
        engine.progress(size, "up")
    await _reconcile(engine, dst, dst_key, result, [(checksum, size)])
    assert vouching is not None
    if vouching.note is not None:
        engine.warn(vouching.note, vouching.note_kind)
    return size, verified_reads or vouching.verified


def _note_unverified(src: Backend, url: str, exp: Expectation | None) -> None:
    if exp is None and not src.capabilities.verified_reads:
        log.info("%s vouches for no checksum: copied without a check of its bytes", url)


# -- ranges and parts ---------------------------------------------------------------


def _choose_part_size(
    size: int, requested: int, caps: Capabilities, exp: Expectation | None, layout: Layout | None
) -> int | None:
    """The copy's range (and part) size: the engine's, or for a composite
    check one that cuts the source's parts into ranges the destination takes
    as parts (the source's own part size first, when it fits); None when
    no such size exists."""
    base = plan_part_size(size, requested, caps)
    if exp is None or not exp.composite:
        return base
    assert layout is not None
    whole = layout.part_size
    unit = max(caps.part_size_multiple, 1)
    k0 = max(1, round(whole / base))
    candidates: list[tuple[bool, int, int]] = []  # (not uniform, distance, size)
    for k in sorted({1, *range(max(1, k0 - 8), k0 + 9)}):
        p = -(-whole // k)
        p = -(-p // unit) * unit
        ranges = plan(size, p, exp, layout).ranges
        if not _destination_takes(ranges, caps):
            continue
        uniform = all(r.length == p for r in ranges[:-1])
        candidates.append((not uniform, abs(p - base), p))
    return min(candidates)[2] if candidates else None


def _destination_takes(ranges: list[Part], caps: Capabilities) -> bool:
    """Whether each range can be a part of a multipart upload at the destination."""
    unit = max(caps.part_size_multiple, 1)
    if len(ranges) > caps.max_parts or ranges[-1].length > caps.max_part_size:
        return False
    return all(
        caps.min_part_size <= r.length <= caps.max_part_size and r.length % unit == 0
        for r in ranges[:-1]
    )


class _WrongClaim(Exception):
    """The planned claim failed the same way on every read (not an
    IntegrityError: no retry), and another one can be planned instead."""

    def __init__(self, error: IntegrityError) -> None:
        super().__init__(str(error))
        self.error = error


async def _stream_parts(engine: Engine, job: _Copy) -> tuple[int, bool]:
    """Ranged reads feeding the parts of a multipart upload, checked as a
    ranged download is (:mod:`.verify`), the ranges in doubt sent again on
    a mismatch; completed only when the check passes, aborted otherwise.

    The bytes are not kept, so another claim cannot be computed from them
    after the fact (as a download does): when the planned claim fails the
    same way on every read and another one with a known layout exists (the
    MD5 ETag of synxfer's objects on a store whose CRC composite is wrong),
    the copy is made again, checked against that one, and a warning names
    the wrong claim."""
    src, src_key = job.src, job.src_key
    # A HEAD first: ranged GETs carry no whole-object checksum.
    info = await src.stat(src_key)
    url = src.url(src_key)
    check_size(url, job.size, info, "copy")
    check_version(url, job.etag, info)
    claims = await gather_claims(src, src_key, info, info.etag)
    exp, layout = primary(claims)
    fallbacks = [c for c in claims if not c.inferred and c.exp != exp]
    wrong: Expectation | None = None
    while True:
        try:
            done = await _stream_parts_checked(engine, job, info, exp, layout, bool(fallbacks))
        except _WrongClaim as bad:
            if not fallbacks:
                raise bad.error from None
            wrong = wrong or exp
            claim = fallbacks.pop(0)
            exp, layout = claim.exp, (claim.layouts[0] if claim.layouts else None)
            log.info("%s; copying it again, checked against its %s", bad.error, exp.what)
            continue
        if wrong is not None and exp is not None:
            engine.warn(
                f"{url}: the store's {wrong.what} is wrong for these bytes; "
                f"verified by the {exp.what} instead"
            )
        return done


async def _stream_parts_checked(
    engine: Engine,
    job: _Copy,
    info: ObjectInfo,
    exp: Expectation | None,
    layout: Layout | None,
    replan: bool,
) -> tuple[int, bool]:
    """One multipart copy checked against ``exp`` (``replan``: a consistent
    mismatch raises :class:`_WrongClaim`, another claim can be tried)."""
    src, src_key, dst, dst_key = job.src, job.src_key, job.dst, job.dst_key
    size, etag = job.size, job.etag
    scheduler = engine.scheduler
    url, dst_url = src.url(src_key), dst.url(dst_key)
    caps = dst.capabilities
    part_size = _choose_part_size(size, engine.config.part_size, caps, exp, layout)
    if part_size is None:
        log.warning(
            "%s cannot be checked against its %s while copied to %s: its parts cannot be "
            "the destination's parts; copied without that check",
            url,
            exp.what if exp is not None else "checksum",
            dst_url,
        )
        exp = layout = None
        part_size = plan_part_size(size, engine.config.part_size, caps)
    _note_unverified(src, url, exp)
    p = plan(size, part_size, exp, layout)
    uniform = all(r.length == part_size for r in p.ranges[:-1])
    kind = p.kind
    algorithm = caps.part_checksum
    sums = Sums(p)
    done: dict[int, CompletedPart] = {}
    sent: dict[int, Checksum | None] = {}
    turns: dict[int, asyncio.Event] = {}
    if_match = info.etag or etag

    async def move(part: Part, lease: Lease) -> int | bytes | None:
        buf = lease.buffer()
        await src.read_into(src_key, part.offset, memoryview(buf), if_match=if_match)
        engine.progress(part.length, "down")
        hasher: Hasher | None = None
        last = True
        if p.chained:
            # A hashed unit of several ranges: hashed in order.
            unit = p.unit_of[part.index]
            members = p.units[unit]
            pos = members.index(part.index)
            if pos > 0:
                await turns[members[pos - 1]].wait()
            else:
                assert kind is not None
                sums.hashers[unit] = ck.new_hash(kind)
            hasher, last = sums.hashers[unit], pos == len(members) - 1
        checksum, value = await scheduler.io_holding(_sum_range, buf, algorithm, kind, hasher, last)
        turns[part.index].set()
        done[part.number] = await dst.upload_part(upload, part.number, buf, checksum)
        sent[part.number] = checksum
        engine.progress(part.length, "up")
        return value

    async def moved(part: Part, value: int | bytes | None) -> None:
        if p.last_of_unit(part.index):
            sums.record(p.unit_of[part.index], value)

    # Orphans of a retried create are the retry layer's business.
    upload = await dst.create_multipart(
        dst_key, _options(job.base, info, part_size if uniform else None)
    )

    async def vouch(error: IntegrityError | None, settled: bool) -> None:
        if error is not None and settled and replan:
            raise _WrongClaim(error)
        if error is not None:
            raise error

    try:
        await fetch_checked(engine, "copy", sums, url, dst_url, turns, move, moved, vouch=vouch)
        result = await dst.complete_multipart(upload, [done[n] for n in sorted(done)])
    except BaseException:
        await abort_upload(dst, upload)
        raise
    await _reconcile(engine, dst, dst_key, result, [(sent[r.number], r.length) for r in p.ranges])
    return size, exp is not None or src.capabilities.verified_reads


# -- after the commit -----------------------------------------------------------------


async def _reconcile(
    engine: Engine,
    dst: Backend,
    dst_key: str,
    result: ObjectInfo,
    sent: list[tuple[Checksum | None, int]],
) -> None:
    """Check what the destination vouches for against the part checksums sent.

    A mismatch means the destination holds something other than the bytes
    read: the object is deleted, so nothing wrong stays visible.
    """
    if not sent or any(checksum is None for checksum, _ in sent):
        return
    algorithm = sent[0][0].algorithm if sent[0][0] is not None else None
    if algorithm is None or any(c is not None and c.algorithm != algorithm for c, _ in sent):
        return
    reported = result.checksums or (await dst.stat(dst_key)).checksums
    if algorithm not in reported and f"{algorithm}-composite" not in reported:
        return
    values = [(ck.decode(algorithm, c.value) if c else None, n) for c, n in sent]
    if any(v is None for v, _ in values):
        return
    mismatch = await engine.scheduler.io(_compare_reported, algorithm, values, reported)
    if mismatch is not None:
        what, stored, streamed = mismatch
        await dst.delete(dst_key)
        raise IntegrityError(
            f"{dst.url(dst_key)}: the destination's {what} ({stored}) does not match the "
            f"bytes copied ({streamed}); the copy was deleted"
        )


def _compare_reported(
    algorithm: ck.Kind, values: list[tuple[bytes | None, int]], reported: Mapping[str, str]
) -> tuple[str, str, str] | None:
    """The first of the destination's checksums (whole, composite) that the
    part checksums sent contradict: ``(what, stored, streamed)``. Blocking
    (it folds CRCs)."""
    raws = [v for v, _ in values if v is not None]
    name = ck.label(algorithm)
    stored = reported.get(algorithm)
    if stored is not None:
        if algorithm in ck.CRC_KINDS:
            total = 0
            for raw, length in values:
                assert raw is not None
                total = ck.crc_combine(algorithm, total, int.from_bytes(raw, "big"), length)
            whole = ck.to_bytes(algorithm, total)
        elif len(raws) == 1:
            whole = raws[0]
        else:
            whole = b""  # a hash of the whole cannot come from the parts'
        streamed = base64.b64encode(whole).decode("ascii")
        if whole and streamed != stored:
            return name, stored, streamed
    stored = reported.get(f"{algorithm}-composite")
    if stored is not None and len(raws) > 1:
        value, _, count = stored.partition("-")
        streamed = base64.b64encode(ck.composite(algorithm, raws)).decode("ascii")
        if value != streamed or (count and count != str(len(raws))):
            return f"{name} of the part {name}s", stored, f"{streamed}-{len(raws)}"
    return None
