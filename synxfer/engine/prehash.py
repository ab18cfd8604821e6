"""The whole-file MD5 before an upload starts, for services that ask for it.

Synapse (``contentMD5Hex``) and services like it want the content's MD5 when
an upload *starts*, before any part is sent; the engine otherwise hashes
each part as it reads it to send it. For a backend with
``Capabilities.needs_content_md5`` a multipart upload therefore reads the
file twice: this pre-pass, then the sends.

The pre-pass reads each part once, in a worker thread (never on the event
loop), into a buffer leased from the byte budget, and computes from that one
read the whole file's MD5 (in one thread) and the part's MD5 and CRC32C (in
another, at the same time).
It runs in the file's own task, so other files' transfers go on meanwhile.

The sends then reuse the pre-pass's part MD5s (as Content-MD5 and for the
service's ``part_done``) instead of computing them again, and hash each part
they read with CRC32C only -- about a twentieth of MD5's CPU -- to prove
the bytes sent are the bytes the MD5s describe: a part whose CRC32C differs
means the file changed between the two reads, and the file fails with
:func:`.localfile.source_changed` instead of sending bytes the service's
MD5 does not match. Without a CRC32C library the sends compute the part's
MD5 again and compare that. Costs: docs/decisions/0028-the-url-data-plane.md.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path

from .._models import ContentDigests, WriteOptions
from ..backend import Checksum, ChecksumAlgorithm
from . import checksums
from ._os import pread_into
from .core import Engine
from .localfile import LocalFile, source_changed
from .parts import split

__all__ = ["PrePass", "prehash_file", "with_digests"]


@dataclass(frozen=True, slots=True)
class PrePass:
    """What the pre-pass found: the digests the backend gets, and what each
    send checks its part against (``algorithm``: what the send computes;
    ``checks``: that checksum of each part, base64, in part order)."""

    digests: ContentDigests
    algorithm: ChecksumAlgorithm
    checks: tuple[str, ...]

    def check(self, number: int, sent: Checksum | None, path: Path) -> Checksum:
        """The part's Content-MD5 (from the pre-pass), once the checksum of
        the bytes read to send it (``sent``) matches the pre-pass's; raises
        SourceChangedError when it does not."""
        if sent is None or sent.value != self.checks[number - 1]:
            raise source_changed(
                path, f"part {number} differs from when its MD5 was computed before the upload"
            )
        md5 = bytes.fromhex(self.digests.parts[number - 1])
        return Checksum("md5", base64.b64encode(md5).decode("ascii"))


def with_digests(options: WriteOptions, pre: PrePass | None) -> WriteOptions:
    """``options`` carrying the pre-pass's digests (unchanged without one)."""
    return options if pre is None else dataclasses.replace(options, digests=pre.digests)


async def prehash_file(engine: Engine, f: LocalFile, size: int, part_size: int) -> PrePass:
    """Read ``f`` once (a worker-thread call per part) and return its MD5,
    every part's MD5 and the checksum each send will compare."""
    algorithm: ChecksumAlgorithm = "crc32c" if checksums.available("crc32c") else "md5"
    whole = hashlib.md5(usedforsecurity=False)
    md5s: list[str] = []
    checks: list[str] = []
    scheduler = engine.scheduler
    async with scheduler.reserve(min(part_size, max(size, 1))) as lease:
        buf = lease.buffer()
        for part in split(size, part_size):
            view = memoryview(buf)[: part.length]
            if await scheduler.io_holding(_read_part, f.fd, view, part.offset) != part.length:
                raise source_changed(f.path, "it shrank")
            # The whole file's MD5 and the part's sums in two threads at once
            # (hashlib and the CRC libraries release the GIL): the pre-pass
            # takes the time of one MD5, not two, where a second core is free.
            # A task group: neither call outlives the lease of the buffer.
            async with asyncio.TaskGroup() as tg:
                tg.create_task(scheduler.io_holding(whole.update, view))
                sums = tg.create_task(scheduler.io_holding(_part_sums, view, algorithm))
            md5, check = sums.result()
            md5s.append(md5)
            checks.append(check)
    digests = ContentDigests(size, part_size, whole.hexdigest(), tuple(md5s))
    return PrePass(digests, algorithm, tuple(checks))


def _read_part(fd: int, view: memoryview, offset: int) -> int:
    """Fill ``view`` from ``offset``; the bytes read (fewer: the file shrank)."""
    done = 0
    while done < len(view):
        n = pread_into(fd, view[done:], offset + done)
        if n == 0:
            break
        done += n
    return done


def _part_sums(view: memoryview, algorithm: ChecksumAlgorithm) -> tuple[str, str]:
    """The part's MD5 (hex) and its ``algorithm`` checksum (base64)."""
    md5 = hashlib.md5(view, usedforsecurity=False).hexdigest()
    if algorithm == "md5":
        check = base64.b64encode(bytes.fromhex(md5)).decode("ascii")
    else:
        value = checksums.crc_value("crc32c", view)
        check = base64.b64encode(value.to_bytes(4, "big")).decode("ascii")
    return md5, check
