"""What a download is checked against, and how its ranges line up for it.

The strongest checksum the source vouches for (``ObjectInfo.checksums``)
that can be computed here is chosen (:func:`expectations`), cheapest
first among equals: CRCs (cheap per byte, and folded across ranges) before
hashes (a costly pass per byte: decision 0009), a checksum of the whole object
before a composite one (which needs the upload's part layout). Then the
object's ranges are planned for it (:func:`plan`):

* a CRC is computed per range, in any order, and folded: ranges are the
  engine's part size, cut at the upload's part boundaries when the check
  is composite (each part's CRC is folded from its ranges); adjacent
  ranges may be fetched in one GET (:func:`group_ranges`), each range's
  CRC still computed from its own slice;
* a hash must see a hashed run's bytes in order: each run (the whole
  object, or each upload part for a composite check) is a *unit* whose
  ranges are written and hashed one after the other (``Plan.chained``);
  with ranges of the upload's part size there is one range per unit.

Each unit's value is kept; the object's check is computed from them
(:meth:`Sums.actual`). When it fails, the whole object is fetched again
(no whole-object checksum can say which part was wrong), and a unit whose
value comes back equal to one seen before is *confirmed* -- corruption in
transit does not repeat itself -- and not fetched again: so every retry
fetches only the units still in doubt, and the object is committed only
when its check passes.

Downloads (:mod:`.download`, :mod:`.compress`) and streamed copies
(:mod:`.copy`) share the rest of that loop from here: the retry policy for a
mismatch (:func:`retry_mismatch`), the passes over a ranged object's
units until its check passes (:func:`fetch_checked`), the failed pass's
mismatch out of its task group (:func:`raise_mismatch_of`), a mismatch
that fetching again cannot fix (:class:`Settled`), the final error
(:func:`gave_up`), and the checks that the object is still the one listed
(:func:`check_size`, :func:`check_version`).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
import math
import re
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from .._exceptions import BackendError, IntegrityError, NotFound, PreconditionFailed
from .._models import ObjectInfo
from .._retry import Retrier
from ..backend import Backend
from . import checksums as ck
from ._os import pread_into
from .checksums import CRC_KINDS, HASH_KINDS, Hasher, Kind
from .meta import stored_part_size
from .parts import Part, etag_parts

if TYPE_CHECKING:
    from .core import Engine
    from .scheduler import Lease

__all__ = [
    "COMMON_PART_SIZES",
    "MAX_CANDIDATES",
    "Claim",
    "Expectation",
    "Layout",
    "Mismatch",
    "Plan",
    "Settled",
    "Sums",
    "Vouching",
    "candidate_layouts",
    "check_size",
    "check_version",
    "claim_value",
    "expectations",
    "fetch_checked",
    "find_layout",
    "gather_claims",
    "gather_layout",
    "gave_up",
    "group_ranges",
    "plan",
    "primary",
    "raise_mismatch_of",
    "retry_mismatch",
    "unit_value",
    "unverified_reason",
]

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger("synxfer")

_COMPOSITE = "-composite"
_PARTS_SUFFIX = re.compile(r"^(.*)-(\d+)$")


class Expectation(NamedTuple):
    """One checksum the source vouches for: ``kind`` over the whole object
    (``parts`` None) or over its ``parts`` parts' checksums (0: the count
    is not given, the layout's is taken)."""

    kind: Kind
    value: bytes
    parts: int | None
    name: str  # its key in ObjectInfo.checksums

    @property
    def composite(self) -> bool:
        return self.parts is not None

    @property
    def what(self) -> str:
        """How it reads in a message: ``CRC32C``, ``MD5 of the part MD5s (ETag)``."""
        name = ck.label(self.kind)
        if not self.composite:
            return name
        etag = " (multipart ETag)" if self.kind == "md5" else ""
        return f"{name} of the part {name}s{etag}"


def expectations(info: ObjectInfo) -> list[Expectation]:
    """What ``info`` vouches for that can be computed here, best first.

    CRCs before hashes; whole-object before composite; an unparseable
    value is skipped (it can verify nothing).
    """
    out: list[Expectation] = []
    checksums = _with_own_etag(info)
    if checksums is not info.checksums:
        info = dataclasses.replace(info, checksums=checksums)
    # Whole-object CRCs, composite CRCs, whole-object hashes, composite hashes.
    for kinds, composite in ((CRC_KINDS, False), (CRC_KINDS, True), (HASH_KINDS, False)):
        for kind in kinds:
            exp = _parse(info, kind, composite)
            if exp is not None:
                out.append(exp)
    for kind in HASH_KINDS:
        exp = _parse(info, kind, True)
        if exp is not None:
            out.append(exp)
    return [e for e in out if ck.available(e.kind)] if checksums else []


#: Server-side encryption whose S3 ETags are not MD5s of the data.
_OPAQUE_ETAG_ENCRYPTION = ("aws:kms", "aws:kms:dsse", "sse-c")


def _with_own_etag(info: ObjectInfo) -> Mapping[str, str]:
    """``info.checksums``, plus the ETag as an MD5 for objects synxfer
    uploaded (they carry ``synxfer-part-size``) when the backend did not
    report it: on the S3-compatible stores whose ETags look like MD5s they
    are MD5s unless the object is KMS- or customer-key-encrypted."""
    checksums = info.checksums
    if "md5" in checksums or "md5-composite" in checksums:
        return checksums
    if stored_part_size(info.metadata) is None or not info.etag:
        return checksums
    if (info.encryption or "").lower() in _OPAQUE_ETAG_ENCRYPTION:
        return checksums
    n = etag_parts(info.etag)
    if n is None:
        return checksums
    digest = base64.b64encode(bytes.fromhex(info.etag[:32])).decode("ascii")
    if n == 0:
        return {**checksums, "md5": digest}
    return {**checksums, "md5-composite": f"{digest}-{n}"}


def _parse(info: ObjectInfo, kind: Kind, composite: bool) -> Expectation | None:
    name = kind + _COMPOSITE if composite else kind
    raw = info.checksums.get(name)
    if not raw:
        return None
    parts: int | None = None
    if composite:
        m = _PARTS_SUFFIX.match(raw)
        if m is not None:
            raw, parts = m.group(1), int(m.group(2))
        else:
            parts = etag_parts(info.etag) or 0
    value = ck.decode(kind, raw)
    if value is None:
        return None
    return Expectation(kind, value, parts, name)


# -- the upload's part layout ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Layout:
    """Parts of ``part_size`` bytes (the last one shorter), ``count`` of them."""

    part_size: int
    count: int

    def bounds(self, size: int) -> list[tuple[int, int]]:
        """``(offset, length)`` of each part."""
        return [
            (i * self.part_size, min(self.part_size, size - i * self.part_size))
            for i in range(self.count)
        ]


async def find_layout(
    backend: Backend, key: str, size: int, count: int, etag: str | None
) -> Layout | None:
    """How the object was uploaded, asked of the backend (``stat_part``), or None.

    Part 1 gives the part size and the parts count; the layout is taken to
    be parts of that size, the last one shorter (as every S3 tool uploads),
    which the last part is asked to confirm (its size, and its offset when
    the service says). ``count`` is the parts count the checksum names (0:
    unknown). None when the backend cannot tell, or the answers do not fit
    that layout: the object is then checked another way, if it can be.
    """
    # No If-Match on these HEADs: some servers (moto) answer a part's HEAD
    # with the part's ETag and refuse the object's. The ranged GETs that
    # follow carry it, so an object replaced meanwhile is caught there.
    del etag
    try:
        first = await backend.stat_part(key, 1)
        n = first.count
        if count and n != count:
            return None
        layout = Layout(first.size, n)
        if not _fits(layout, size):
            return None
        if n > 1:
            last = await backend.stat_part(key, n)
            offset, length = layout.bounds(size)[-1]
            if last.size != length or last.offset not in (None, offset) or last.count != n:
                return None
        return layout
    except (NotImplementedError, NotFound):
        return None
    except BackendError as exc:
        if exc.status is None or exc.status >= 500 or exc.status in (403, 412):
            raise  # transient (already retried), denied, or changed: not a layout question
        log.info("could not learn the part layout of %s: %s", backend.url(key), exc)
        return None


def _own_layout(info: ObjectInfo) -> Layout | None:
    """The layout synxfer recorded when it uploaded the object, if it fits."""
    part_size = stored_part_size(info.metadata)
    if not part_size:
        return None
    layout = Layout(part_size, max(1, math.ceil(info.size / part_size)))
    return layout if _fits(layout, info.size) else None


def _fits(layout: Layout, size: int) -> bool:
    p, n = layout.part_size, layout.count
    if n < 1 or p < 1:
        return False
    return (n - 1) * p < size <= n * p or (size == 0 and n == 1)


# -- the plan -----------------------------------------------------------------------


class Plan(NamedTuple):
    """The ranges of one download and what is computed over them.

    ``units[u]`` lists the range indexes whose bytes make unit ``u``'s value
    (one range each for CRCs; an upload part's or the whole object's ranges
    for hashes, hashed in order when ``chained``); ``segments`` lists the
    units of each upload part (composite checks) or all of them.
    """

    exp: Expectation | None
    ranges: list[Part]
    units: list[list[int]]
    unit_of: list[int]
    segments: list[list[int]]
    chained: bool

    @property
    def kind(self) -> Kind | None:
        return None if self.exp is None else self.exp.kind

    def unit_length(self, unit: int) -> int:
        return sum(self.ranges[i].length for i in self.units[unit])

    def last_of_unit(self, index: int) -> bool:
        """Whether range ``index`` is the last of its unit."""
        return self.units[self.unit_of[index]][-1] == index

    def covering(self, fetch: Part) -> list[Part]:
        """The ranges a fetch made by :func:`group_ranges` covers (``[fetch]``'s own
        range for one that was not grouped): from range ``fetch.index`` on,
        as many as make up ``fetch.length``."""
        members = [self.ranges[fetch.index]]
        total = members[0].length
        while total < fetch.length:
            members.append(self.ranges[fetch.index + len(members)])
            total += members[-1].length
        if total != fetch.length or members[0].offset != fetch.offset:
            raise ValueError(f"{fetch} is not a run of this plan's ranges")
        return members


def plan(size: int, part_size: int, exp: Expectation | None, layout: Layout | None) -> Plan:
    """Ranges of at most ``part_size`` bytes, cut at the upload's part
    boundaries when ``exp`` is composite (then ``layout`` is required)."""
    if exp is not None and exp.composite:
        assert layout is not None
        bounds = layout.bounds(size)
    else:
        bounds = [(0, size)]
    hashed = exp is not None and exp.kind in HASH_KINDS
    ranges: list[Part] = []
    units: list[list[int]] = []
    segments: list[list[int]] = []
    for offset, length in bounds:
        start = len(ranges)
        n = max(1, math.ceil(length / part_size))
        for j in range(n):
            off = offset + j * part_size
            ranges.append(Part(len(ranges), off, min(part_size, offset + length - off)))
        indexes = list(range(start, len(ranges)))
        if hashed:
            segments.append([len(units)])
            units.append(indexes)
        else:
            segments.append(list(range(len(units), len(units) + len(indexes))))
            units.extend([i] for i in indexes)
    unit_of = [0] * len(ranges)
    for u, members in enumerate(units):
        for i in members:
            unit_of[i] = u
    return Plan(exp, ranges, units, unit_of, segments, hashed and len(ranges) > len(units))


def group_ranges(ranges: Sequence[Part], limit: int) -> list[Part]:
    """``ranges`` merged into fetches of at most ``limit`` bytes: each fetch
    is a run of consecutive, adjacent ranges (``Part(first.index, offset,
    total length)``; :meth:`Plan.covering` gives its ranges back). A range
    is never split, so a fetch still ends on the upload's part boundaries
    and every unit's value can be computed from its slice of the fetch."""
    out: list[Part] = []
    last = -2  # index of the last range merged into out[-1]
    for r in ranges:
        if out:
            run = out[-1]
            if (
                r.index == last + 1
                and run.offset + run.length == r.offset
                and run.length + r.length <= limit
            ):
                out[-1] = Part(run.index, run.offset, run.length + r.length)
                last = r.index
                continue
        out.append(r)
        last = r.index
    return out


# -- values and the final check ------------------------------------------------------


@dataclass
class Sums:
    """Each unit's value in this download (CRC int or digest bytes), the
    values seen for it so far, and which units are confirmed."""

    plan: Plan
    values: list[int | bytes | None] = field(default_factory=list)
    seen: list[set[int | bytes]] = field(default_factory=list)
    confirmed: list[bool] = field(default_factory=list)
    #: Running hashes of chained units, by unit.
    hashers: dict[int, Hasher] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.plan.units)
        self.values = [None] * n
        self.seen = [set() for _ in range(n)]
        self.confirmed = [False] * n

    def record(self, unit: int, value: int | bytes | None) -> None:
        """Unit ``unit`` was written with ``value``; seen before, it is confirmed."""
        self.values[unit] = value
        if value is None:
            return
        if value in self.seen[unit]:
            self.confirmed[unit] = True
        self.seen[unit].add(value)

    def actual(self) -> bytes:
        """The object's checksum from the units' values. Blocking (it folds
        CRCs and hashes part digests): call from a worker thread."""
        exp = self.plan.exp
        assert exp is not None
        kind = exp.kind
        if kind in CRC_KINDS:
            per_segment = [
                ck.to_bytes(kind, self._fold(kind, members)) for members in self.plan.segments
            ]
            if not exp.composite:
                return per_segment[0]
            return ck.composite(kind, per_segment)
        digests = [self._value(u) for u in range(len(self.plan.units))]
        if not exp.composite:
            return ck.to_bytes(kind, digests[0])
        return ck.composite(kind, [ck.to_bytes(kind, d) for d in digests])

    def _value(self, unit: int) -> int | bytes:
        value = self.values[unit]
        if value is None:
            raise IntegrityError(f"unit {unit} of the download has no checksum")
        return value

    def _fold(self, kind: str, members: Sequence[int]) -> int:
        total = 0
        for u in members:
            value = self._value(u)
            assert isinstance(value, int)
            total = ck.crc_combine(kind, total, value, self.plan.unit_length(u))
        return total

    def check(self, url: str) -> None:
        """Raise IntegrityError, naming the checksum compared, unless the
        data matches. Blocking: call from a worker thread."""
        exp = self.plan.exp
        if exp is None:
            return
        got = self.actual()
        if exp.composite and exp.parts and exp.parts != len(self.plan.segments):
            raise IntegrityError(
                f"{url}: the object's {exp.what} covers {exp.parts} parts, "
                f"but {len(self.plan.segments)} were read"
            )
        if not exp.value:  # a fingerprint (Vouching.fingerprint): nothing to match
            raise Mismatch(f"{url}: downloaded data is not verified yet", got)
        if got != exp.value:
            raise Mismatch(
                f"{url}: downloaded data does not match the object's {exp.what} "
                f"({_b64(got)} != {_b64(exp.value)})",
                got,
            )


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def unit_value(kind: Kind | None, data: memoryview) -> int | bytes | None:
    """The value of a unit held whole in ``data``. Blocking (worker thread)."""
    if kind is None:
        return None
    if kind in CRC_KINDS:
        return ck.crc_value(kind, data)
    h = ck.new_hash(kind)
    h.update(data)
    return h.digest()


# -- claims: what vouches for the bytes, and the part layouts to check them with ------


@dataclass(frozen=True, slots=True)
class Claim:
    """One checksum the source vouches for, with the part layout(s) to
    compute it over: none for a whole-object checksum, one when it is
    known (synxfer's metadata, or the store told it), several *candidates*
    (``inferred``) when the store will not tell (:func:`candidate_layouts`)."""

    exp: Expectation
    layouts: tuple[Layout, ...] = ()
    inferred: bool = False


async def gather_claims(
    backend: Backend, key: str, info: ObjectInfo, etag: str | None
) -> list[Claim]:
    """Every checksum ``info`` vouches for that can be computed here, best
    first (:func:`expectations`), each with its layout: the first one that
    is not ``inferred`` is the one a download plans for (:func:`primary`);
    the rest can vouch for the bytes when it does not match (:class:`Vouching`).

    The layout of an object synxfer uploaded is in its metadata
    (``synxfer-part-size``); any other's is asked of the backend
    (:func:`find_layout`), once, and only when no better claim can be
    planned (a fallback costs no request); when that fails or was not
    asked, a composite checksum's candidates are inferred from its parts
    count and the object's size.
    """
    layout: Layout | None = None
    asked = False
    out: list[Claim] = []
    for exp in expectations(info):
        if not exp.composite:
            out.append(Claim(exp))
            continue
        if not asked:
            # One part is the whole object; else synxfer's metadata, else ask
            # (only while nothing is planned: no request for a fallback).
            layout = Layout(max(info.size, 1), 1) if exp.parts == 1 else _own_layout(info)
            if layout is None and all(c.inferred for c in out):
                layout = await find_layout(backend, key, info.size, exp.parts or 0, etag)
            asked = True
        if layout is not None and (not exp.parts or exp.parts == layout.count):
            out.append(Claim(exp, (layout,)))
        elif exp.parts:
            candidates = candidate_layouts(info.size, exp.parts)
            if candidates:
                out.append(Claim(exp, tuple(candidates), inferred=True))
    return out


def primary(claims: Sequence[Claim]) -> tuple[Expectation | None, Layout | None]:
    """The claim a download plans for: the best whose layout is known."""
    for claim in claims:
        if not claim.inferred:
            return claim.exp, (claim.layouts[0] if claim.layouts else None)
    return None, None


async def gather_layout(
    backend: Backend, key: str, info: ObjectInfo, etag: str | None
) -> tuple[Expectation | None, Layout | None]:
    """The best checksum ``info`` vouches for that can be checked here
    (:func:`expectations`), and the part layout it needs, if composite
    (:func:`gather_claims`, :func:`primary`)."""
    return primary(await gather_claims(backend, key, info, etag))


_MiB = 1 << 20

#: Part sizes S3 tools choose, most common first: 8 MiB (aws-cli, boto3's
#: ``upload_file``, synapseclient, synxfer), 5 MiB (S3's minimum; rclone for
#: small files), 16 MiB (rclone), 15 MiB, 50 MiB (s5cmd), 64 MiB, then
#: round figures in MiB and in MB (10^6: tools configured in "MB").
COMMON_PART_SIZES: tuple[int, ...] = (
    8 * _MiB,
    5 * _MiB,
    16 * _MiB,
    15 * _MiB,
    50 * _MiB,
    64 * _MiB,
    8_000_000,
    10 * _MiB,
    32 * _MiB,
    100 * _MiB,
    128 * _MiB,
    5_000_000,
    10_000_000,
    16_000_000,
    50_000_000,
    100_000_000,
)

#: At most this many part layouts are checked for one object whose layout the
#: store will not tell. Each costs a pass over the bytes; docs/decisions/0027
#: records what a pass costs and why this many.
MAX_CANDIDATES = 6


def candidate_layouts(size: int, count: int, limit: int = MAX_CANDIDATES) -> list[Layout]:
    """The part layouts a tool may have uploaded a ``count``-part object of
    ``size`` bytes with, most likely first, at most ``limit``.

    A part size ``p`` fits when ``(count - 1) * p < size <= count * p`` (every
    part full but the last). Tried in order: :data:`COMMON_PART_SIZES`;
    aws-cli's 8 MiB doubled until the parts fit (s3transfer's adjuster);
    ``size / count`` rounded up to a whole MiB, a whole MB and a byte (tools
    that divide); then whole MiB values upwards from the smallest that fits.
    """
    if count < 2 or size < count or limit < 1:
        return []
    lo = -(-size // count)  # the smallest p with count * p >= size
    hi = (size - 1) // (count - 1)  # the largest p with (count - 1) * p < size
    picks: list[int] = []

    def add(p: int) -> None:
        if lo <= p <= hi and p not in picks:
            picks.append(p)

    for p in COMMON_PART_SIZES:
        add(p)
    p = 8 * _MiB
    while p <= hi:
        add(p)
        p *= 2
    whole_mib = -(-lo // _MiB) * _MiB
    add(whole_mib)
    add(-(-lo // 1_000_000) * 1_000_000)
    add(lo)
    p = whole_mib
    while len(picks) < limit and p <= hi:
        add(p)
        p += _MiB
    return [Layout(p, count) for p in picks[:limit]]


#: Bytes read at a time when a claim is computed over a file.
_READ_CHUNK = 8 << 20

#: Where a download's bytes are, for a claim computed after the fact: in
#: memory, or in a file (its descriptor).
Source = memoryview | int


def claim_value(exp: Expectation, layout: Layout | None, src: Source, size: int) -> bytes:
    """``exp``'s checksum computed over ``src`` (``size`` bytes) cut into
    ``layout``'s parts when composite. Blocking: call from a worker thread."""
    if exp.composite:
        assert layout is not None
        bounds = layout.bounds(size)
    else:
        bounds = [(0, size)]
    buf = None if isinstance(src, memoryview) else bytearray(min(_READ_CHUNK, max(size, 1)))
    values = [_run_value(exp.kind, src, offset, length, buf) for offset, length in bounds]
    return ck.composite(exp.kind, values) if exp.composite else values[0]


def _run_value(kind: Kind, src: Source, offset: int, length: int, buf: bytearray | None) -> bytes:
    crc = 0
    hasher = None if kind in CRC_KINDS else ck.new_hash(kind)

    def feed(chunk: memoryview) -> None:
        nonlocal crc
        if hasher is None:
            crc = ck.crc_value(kind, chunk, crc)
        else:
            hasher.update(chunk)

    if isinstance(src, memoryview):
        feed(src[offset : offset + length])
    else:
        assert buf is not None
        view = memoryview(buf)
        while length > 0:
            n = pread_into(src, view[: min(length, len(buf))], offset)
            if n <= 0:
                raise IntegrityError(f"the download's temp file ended at byte {offset}")
            feed(view[:n])
            offset += n
            length -= n
    return ck.to_bytes(kind, crc) if hasher is None else hasher.digest()


#: A ranged download's per-range CRC with no value to match (:meth:`Vouching.fingerprint`).
FINGERPRINT = Expectation("crc32c", b"", None, "")
_FINGERPRINT_ZLIB = Expectation("crc32", b"", None, "")


class Mismatch(IntegrityError):
    """The data does not match the planned claim; ``got`` is what it gave."""

    def __init__(self, message: str, got: bytes) -> None:
        super().__init__(message)
        self.got = got


class Vouching:
    """What vouches for one download's bytes, across its attempts.

    When the planned claim (``planned``) does not match, another claim that
    does vouches for the bytes (:meth:`rescue`): a claim that matches is
    independent evidence (an MD5 or CRC does not match corrupt bytes by
    chance), so the file lands and :attr:`note` names the store's wrong
    claim. When nothing could be planned, the inferred layouts are tried
    (:meth:`unverified`). Its methods are blocking (worker thread).
    """

    def __init__(self, url: str, info: ObjectInfo, claims: Sequence[Claim]) -> None:
        self.url = url
        self.seen: list[tuple[bytes, ...]] = []
        self.mismatches: set[bytes] = set()
        #: Fingerprints of bytes no inferred layout matched.
        self.unmatched: set[bytes] = set()
        self.note: str | None = None
        #: The note's kind (:class:`~synxfer.FileWarning`).
        self.note_kind = "wrong-checksum"
        self.verified = False
        self.update(info, claims)

    def update(self, info: ObjectInfo, claims: Sequence[Claim]) -> None:
        """The claims of this attempt's answer (a fresh GET or HEAD)."""
        self.info = info
        self.planned, _ = primary(claims)
        self.others = [c for c in claims if self.planned is None or c.exp != self.planned]
        self.note = None
        self.note_kind = "wrong-checksum"
        self.verified = self.planned is not None

    def settled(self, error: Mismatch) -> bool:
        """Whether the planned claim failed this same way before (the
        data came back the same: fetching again cannot help)."""
        again = error.got in self.mismatches
        self.mismatches.add(error.got)
        return again

    def _match(
        self, src: Source, size: int, inferred: bool
    ) -> tuple[Claim | None, tuple[bytes, ...]]:
        values: list[bytes] = []
        for claim in self.others:
            if claim.inferred and not inferred:
                continue
            for layout in claim.layouts or (None,):
                value = claim_value(claim.exp, layout, src, size)
                if value == claim.exp.value:
                    return claim, ()
                values.append(value)
        return None, tuple(values)

    def _tried(self, inferred: bool) -> str:
        names = []
        for claim in self.others:
            if claim.inferred and not inferred:
                continue
            n = len(claim.layouts)
            names.append(
                f"its {claim.exp.what} with {n} part sizes tried"
                if claim.inferred
                else f"its {claim.exp.what}"
            )
        return ", ".join(names)

    def fingerprint(self) -> Expectation | None:
        """What a ranged download with nothing planned but inferred layouts
        to try computes per range: a CRC with no expected value
        (:data:`FINGERPRINT`), so a unit that comes back the same is
        confirmed and only the others are fetched again (:meth:`rescue`
        then tries the layouts); None when there is nothing to try."""
        if self.planned is not None or not self.others:
            return None
        return FINGERPRINT if ck.available(FINGERPRINT.kind) else _FINGERPRINT_ZLIB

    def rescue(self, error: IntegrityError, src: Source, size: int, *, settled: bool) -> None:
        """The planned claim did not match ``src``: return when another
        claim does (:attr:`note` names the wrong one), else raise ``error``
        saying what else was tried. ``settled``: the data came back the same
        before; only then are inferred layouts tried (each a pass over the
        bytes), and the error says what the user can do.

        With nothing planned (a :meth:`fingerprint` was), the inferred
        layouts are tried (once for the same bytes); none matching, bytes
        that came back the same (``settled``) land as not verified
        (:attr:`note` says why), others are fetched again."""
        if self.planned is None:
            self._inferred(error, src, size, settled=settled)
            return
        found, _ = self._match(src, size, inferred=settled)
        if found is not None:
            self.note = (
                f"{self.url}: the store's {self.planned.what} is wrong for these bytes; "
                f"verified by the {found.exp.what} instead"
            )
            return
        tried = self._tried(inferred=settled)
        msg = str(error)
        if tried:
            msg += f", nor {tried}"
        if settled:
            msg += (
                "; no checksum the store gives matches the bytes it serves: the object may be "
                "damaged on the server (upload it again from a good copy)"
            )
        raise Mismatch(msg, error.got if isinstance(error, Mismatch) else b"") from None

    def whole(self, error: Mismatch, data: memoryview) -> None:
        """:meth:`rescue` for an object held whole in ``data`` (one GET):
        :class:`Settled` when the planned claim failed this same way before
        and nothing else vouches for the bytes."""
        settled = self.settled(error)
        try:
            self.rescue(error, data, len(data), settled=settled)
        except IntegrityError as other:
            if settled:
                raise Settled(other) from None
            raise

    def _inferred(self, error: IntegrityError, src: Source, size: int, *, settled: bool) -> None:
        self.note_kind = "not-verified"
        got = error.got if isinstance(error, Mismatch) else None
        if got is None or got not in self.unmatched:
            found, _ = self._match(src, size, inferred=True)
            if found is not None:
                self.verified = True
                return
            if got is not None:
                self.unmatched.add(got)
        tried = self._tried(inferred=True)
        if settled:
            self.note = (
                f"{self.url}: not verified: the store does not tell its part layout, "
                f"and {tried} none matched the same bytes fetched twice"
            )
            return
        raise Mismatch(f"{self.url}: downloaded data matches none of {tried}", got or b"")

    def unverified(self, src: Source, size: int) -> None:
        """Nothing could be planned: return when an inferred layout's claim
        matches (:attr:`verified`), or when nothing can vouch for these
        bytes and they came back the same as before (:attr:`note` says why
        per file); raise IntegrityError (fetch again) when the bytes may
        have been damaged on the way."""
        self.note_kind = "not-verified"
        if not self.others:
            self.note = f"{self.url}: not verified: {unverified_reason(self.info)}"
            return
        found, values = self._match(src, size, inferred=True)
        if found is not None:
            self.verified = True
            return
        if values in self.seen:
            self.note = (
                f"{self.url}: not verified: the store does not tell its part layout, "
                f"and {self._tried(inferred=True)} none matched the same bytes twice"
            )
            return
        self.seen.append(values)
        raise IntegrityError(
            f"{self.url}: downloaded data matches none of {self._tried(inferred=True)}"
        )


def unverified_reason(info: ObjectInfo) -> str:
    """Why nothing here can check ``info``'s bytes, in the user's words."""
    if (info.encryption or "").lower() in _OPAQUE_ETAG_ENCRYPTION and not info.checksums:
        return (
            f"it is {info.encryption}-encrypted (its ETag is not an MD5) "
            "and the store gives no checksum"
        )
    kinds = sorted({name.removesuffix(_COMPOSITE) for name in info.checksums})
    missing = [k for k in kinds if k in ck.KINDS and not ck.available(k)]
    if missing:
        return f"its {', '.join(ck.label(k) for k in missing)} cannot be computed here"
    if etag_parts(info.etag) and any(n.endswith(_COMPOSITE) for n in info.checksums):
        return "the store does not tell its part layout"
    return "the store gives no checksum for it"


# -- a mismatch: fetched again, or given up on -------------------------------------


async def retry_mismatch(engine: Engine, op: str, fn: Callable[[], Awaitable[T]]) -> T:
    """``await fn()`` under the client's retry policy (the same attempts and
    backoff as a transient error), retrying data that did not match its
    checksum (:class:`IntegrityError`); the first attempt is a plain call.
    ``op`` names the operation in retry events (``download``, ``copy``)."""
    return await Retrier(engine.config.retry, op, IntegrityError, engine.on_retry)(fn)


class Settled(Exception):
    """A mismatch that fetching again cannot fix (not retried): every unit
    came back the same twice, so the data and the checksum disagree."""

    def __init__(self, error: IntegrityError) -> None:
        super().__init__(str(error))
        self.error = error


def raise_mismatch_of(group: BaseExceptionGroup[BaseException]) -> None:
    """Raise the IntegrityError a failed pass's task group holds, when nothing
    else failed (so the retry policy sees it); else return."""
    mismatch = group.subgroup(IntegrityError)
    other = group.subgroup(
        lambda e: not isinstance(e, IntegrityError | asyncio.CancelledError | BaseExceptionGroup)
    )
    if mismatch is None or other is not None:
        return
    leaf: BaseException = mismatch
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    raise leaf from None


async def fetch_checked(
    engine: Engine,
    op: str,
    sums: Sums,
    url: str,
    target: object,
    turns: dict[int, asyncio.Event],
    work: Callable[[Part, Lease], Awaitable[R]],
    then: Callable[[Part, R], Awaitable[None]],
    *,
    have: Collection[int] = (),
    fetch_size: int = 0,
    vouch: Callable[[IntegrityError | None, bool], Awaitable[None]] | None = None,
) -> None:
    """Move ``sums.plan``'s ranges through the scheduler (``work``, then
    ``then`` records each range's unit value) pass after pass under the retry
    policy until the object's check passes; raise :func:`gave_up`'s error
    (nothing was written to ``target``) when it never does.

    The first pass moves every unit but those in ``have`` (resumed); each
    later one only the units not confirmed. ``turns`` gets a fresh event per
    range of each pass (``work`` waits on them to hash a unit in order).

    With ``fetch_size``, the ranges of a plan that is not chained go in
    fetches of up to that many bytes (:func:`group_ranges`): ``work`` and ``then``
    get each fetch, and find its ranges with :meth:`Plan.covering`.

    ``vouch(error, settled)`` looks at the written bytes when the planned
    check fails (``error``; ``settled``: every unit came back the same) on
    the first pass or for good, and when nothing was planned (``error``
    None): it returns when another claim vouches for them, else raises
    IntegrityError (:class:`Vouching` does the work).
    """
    p = sums.plan
    attempts = 0

    async def one_pass() -> None:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            units = [u for u in range(len(p.units)) if u not in have]
        else:
            units = [u for u in range(len(p.units)) if not sums.confirmed[u]]
        todo = [p.ranges[i] for u in units for i in p.units[u]]
        if fetch_size and not p.chained:
            todo = group_ranges(todo, fetch_size)
        turns.clear()
        turns.update((part.index, asyncio.Event()) for part in todo)
        try:
            await engine.scheduler.map_parts(todo, work, then, even_buffers=True)
        except BaseExceptionGroup as group:
            raise_mismatch_of(group)
            raise
        if p.exp is None:
            if vouch is not None:
                await vouch(None, False)
            return
        try:
            await engine.scheduler.io(sums.check, url)
        except IntegrityError as exc:
            # Every unit came back the same twice: fetching again cannot
            # help, the data and the checksum disagree.
            settled = all(sums.confirmed)
            if vouch is not None and (attempts == 1 or settled):
                try:
                    await vouch(exc, settled)
                    return  # another claim vouches for the bytes
                except IntegrityError as other:
                    exc = other
            if settled:
                raise Settled(exc) from None
            raise exc from None

    try:
        await retry_mismatch(engine, op, one_pass)
    except Settled as settled:
        raise gave_up(settled.error, attempts, target, same=True) from None
    except IntegrityError as exc:
        raise gave_up(exc, attempts, target) from None


def gave_up(
    exc: IntegrityError, attempts: int, target: object, *, same: bool = False
) -> IntegrityError:
    """The final error of a transfer whose data never matched: the mismatch,
    the attempts made (``same``: the data came back the same each time),
    and that nothing was written to ``target`` (a path or URL)."""
    if same:
        how = f"; the data came back the same in {attempts} attempts"
    elif attempts > 1:
        how = f"; {attempts} attempts"
    else:
        how = ""
    return IntegrityError(f"{exc}{how}; nothing was written to {target}")


def check_size(url: str, size: int, info: ObjectInfo, during: str) -> None:
    """PreconditionFailed unless the object read (``info``) still has the
    ``size`` it was listed with; ``during``: ``download``, ``copy``."""
    if info.size != size:
        raise PreconditionFailed(
            f"changed on the server during the {during} (size {size} -> {info.size}); "
            "run the command again",
            url=url,
        )


def check_version(url: str, etag: str | None, info: ObjectInfo) -> None:
    """PreconditionFailed when the object's ETag is no longer the listed ``etag``."""
    if etag and info.etag and info.etag != etag:
        raise PreconditionFailed(
            "changed on the server since it was listed; run the command again", url=url
        )
