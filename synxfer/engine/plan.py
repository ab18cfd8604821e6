"""Planning: which files to copy, skip or delete, as jobs for the engine.

Comparison follows ``aws s3 sync``, with one improvement: synxfer stores the
source file's mtime in the object (``mtime`` metadata) and restores it on
download, so trees synced in either direction compare equal afterwards.

Default rule (copy when missing, when sizes differ, or when the source is
newer than the destination):

* upload: the object's time is its stored ``mtime`` when the listing carries
  metadata, else its LastModified (whole seconds, as S3 lists it);
* download: when the object's LastModified is not newer than the local file,
  skip; otherwise one HEAD fetches the stored ``mtime`` and the object is
  copied only if that is newer than the local file (or absent).

``--size-only`` compares sizes; ``--exact-timestamps`` copies same-size files
whose times differ at all; ``--checksum`` compares content hashes (S3-style
MD5 ETags, reading the local file once to hash it).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .._exceptions import IntegrityError, UnsafePathError
from .._models import Action, MultipartUpload, ObjectInfo
from ..backend import Backend
from .copy import copy_object
from .core import Engine, Job, Run
from .filters import Filters
from .localtree import LocalEntry, WalkProblem, safe_join, walk
from .meta import same_mtime, stored_mtime, stored_part_size
from .parts import etag_parts, plan_part_size
from .transfer import download_object, md5_file_etag, upload_path

__all__ = [
    "DELETE_BATCH",
    "Compare",
    "CopyJob",
    "DeleteLocalJob",
    "DeleteRemoteJob",
    "DownloadJob",
    "PlanArgs",
    "UploadJob",
    "delete_jobs",
    "list_remote",
    "plan_copy",
    "plan_download",
    "plan_upload",
]

log = logging.getLogger("synxfer")

_NS = 1_000_000_000
#: Keys per batched delete request (S3's DeleteObjects limit).
DELETE_BATCH = 1000


class Compare(enum.Enum):
    """How a source and an existing destination are compared."""

    DEFAULT = "default"
    SIZE_ONLY = "size-only"
    EXACT_TIMESTAMPS = "exact-timestamps"
    CHECKSUM = "checksum"
    ALWAYS = "always"  # cp: copy without comparing


@dataclass(frozen=True, slots=True)
class PlanArgs:
    """How to compare and what to include: the options of one sync or copy."""

    filters: Filters
    mode: Compare
    delete: bool = False
    follow_symlinks: bool = False


class _Check(enum.Enum):
    """A comparison that needs a HEAD (and maybe a local hash) to decide."""

    NEWER = "newer"  # copy if the stored mtime is newer (or absent)
    EXACT = "exact"  # copy if the times differ
    CONTENT = "content"  # copy if the hashes differ


_COPY = "copy"
_SKIP = "skip"
Decision = str | _Check


def _remote_time_ns(info: ObjectInfo) -> int | None:
    stored = stored_mtime(info.metadata)
    if stored is not None:
        return stored
    return None if info.mtime is None else int(info.mtime * _NS)


def decide(
    mode: Compare, local: LocalEntry | None, remote: ObjectInfo | None, upload: bool
) -> Decision:
    """Copy, skip, or a check needing a HEAD, for one pair of files."""
    if mode is Compare.ALWAYS or local is None or remote is None:
        return _COPY
    if local.size != remote.size:
        return _COPY
    if mode is Compare.SIZE_ONLY:
        return _SKIP
    if not upload and local.tag is not None and local.tag == remote.etag:
        # This very object was downloaded here and the file is untouched since.
        return _SKIP
    if mode is Compare.CHECKSUM:
        return _Check.CONTENT
    stored = stored_mtime(remote.metadata)
    if mode is Compare.EXACT_TIMESTAMPS:
        if stored is not None:
            return _SKIP if same_mtime(stored, local.mtime_ns) else _COPY
        return _Check.EXACT
    # Compare.DEFAULT: copy when the source is newer.
    if stored is not None:
        newer = local.mtime_ns - stored if upload else stored - local.mtime_ns
        return _COPY if newer > 0 and not same_mtime(stored, local.mtime_ns) else _SKIP
    if remote.mtime is None:
        return _Check.NEWER
    local_s, remote_s = local.mtime_ns // _NS, math.floor(remote.mtime)
    if upload:
        return _COPY if local_s > remote_s else _SKIP
    return _SKIP if remote_s <= local_s else _Check.NEWER


def decide_copy(
    mode: Compare, src: ObjectInfo, dst: ObjectInfo | None, *, final: bool = False
) -> Decision:
    """Copy, skip, or a check needing HEADs, for an object and its remote copy.

    Times compare by the stored source mtime when both sides list it, else by
    LastModified as ``aws s3 sync`` does between buckets (a copy is written
    after its source, so a second sync skips it). Checksums compare by equal
    MD5-style ETags or any checksum both sides vouch for. ``final``: the
    infos come from HEADs, so no further check can be asked for.
    """
    if mode is Compare.ALWAYS or dst is None or src.size != dst.size:
        return _COPY
    if mode is Compare.SIZE_ONLY:
        return _SKIP
    if mode is Compare.CHECKSUM:
        if src.etag and src.etag == dst.etag and etag_parts(src.etag) is not None:
            return _SKIP
        common = set(src.checksums) & set(dst.checksums)
        if common:
            same = all(src.checksums[a] == dst.checksums[a] for a in common)
            return _SKIP if same else _COPY
        return _COPY if final else _Check.CONTENT
    s_ns, d_ns = stored_mtime(src.metadata), stored_mtime(dst.metadata)
    if s_ns is not None and d_ns is not None:
        if mode is Compare.EXACT_TIMESTAMPS:
            return _SKIP if same_mtime(s_ns, d_ns) else _COPY
        return _COPY if s_ns - d_ns > 0 and not same_mtime(s_ns, d_ns) else _SKIP
    if not final and (mode is Compare.EXACT_TIMESTAMPS or src.mtime is None or dst.mtime is None):
        return _Check.EXACT if mode is Compare.EXACT_TIMESTAMPS else _Check.NEWER
    if src.mtime is None or dst.mtime is None:
        return _COPY
    if mode is Compare.EXACT_TIMESTAMPS:
        return _SKIP if math.floor(src.mtime) == math.floor(dst.mtime) else _COPY
    return _COPY if math.floor(src.mtime) > math.floor(dst.mtime) else _SKIP


async def _resolve(
    engine: Engine, check: _Check, backend: Backend, key: str, local: LocalEntry, upload: bool
) -> bool:
    """Settle a check with a HEAD (and a local hash for CONTENT): True = copy."""
    info = await backend.stat(key)
    if info.size != local.size:
        return True
    if check is _Check.CONTENT:
        return await _content_differs(engine, backend, local, info)
    remote_ns = _remote_time_ns(info)
    if remote_ns is None:
        return True
    if check is _Check.EXACT:
        return not same_mtime(remote_ns, local.mtime_ns)
    newer = local.mtime_ns - remote_ns if upload else remote_ns - local.mtime_ns
    return newer > 0 and not same_mtime(remote_ns, local.mtime_ns)


async def _content_differs(
    engine: Engine, backend: Backend, local: LocalEntry, info: ObjectInfo
) -> bool:
    parts = etag_parts(info.etag)
    if parts is None:
        return True  # an opaque ETag cannot be compared: copy to be sure
    part_size = 0
    if parts > 0:
        part_size = stored_part_size(info.metadata) or plan_part_size(
            info.size, engine.config.part_size, backend.capabilities
        )
        if part_size <= 0 or math.ceil(info.size / part_size) != parts:
            return True
    loop = asyncio.get_running_loop()
    etag = await loop.run_in_executor(engine.executor, md5_file_etag, local.path, part_size, parts)
    return etag != info.etag


# -- jobs ----------------------------------------------------------------------


class _TransferJob:
    """Shared flow of upload and download jobs: settle a pending check, honour
    the dry run, transfer, account."""

    action: Action
    src: str
    dst: str
    size: int
    backend: Backend
    key: str
    local: LocalEntry | None
    check: _Check | None

    async def run(self, engine: Engine, run: Run) -> None:
        if (
            self.check is not None
            and self.local is not None
            and not await _resolve(
                engine, self.check, self.backend, self.key, self.local, self.action is Action.UPLOAD
            )
        ):
            engine.skipped(run, self)
            return
        if run.dryrun:
            engine.done(run, self)
            return
        engine.started(run, self)
        engine.done(run, self, await self.transfer(engine))

    async def transfer(self, engine: Engine) -> int:
        raise NotImplementedError


@dataclass
class UploadJob(_TransferJob):
    path: Path
    backend: Backend
    key: str
    size: int
    local: LocalEntry | None = None
    check: _Check | None = None
    action: Action = Action.UPLOAD
    src: str = ""
    dst: str = ""

    def __post_init__(self) -> None:
        self.src = self.src or str(self.path)
        self.dst = self.dst or self.backend.url(self.key)

    async def transfer(self, engine: Engine) -> int:
        return await upload_path(engine, self.path, self.backend, self.key)


@dataclass
class DownloadJob(_TransferJob):
    backend: Backend
    key: str
    dest: Path
    size: int
    etag: str | None = None
    local: LocalEntry | None = None
    check: _Check | None = None
    action: Action = Action.DOWNLOAD
    src: str = ""
    dst: str = ""

    def __post_init__(self) -> None:
        self.src = self.src or self.backend.url(self.key)
        self.dst = self.dst or str(self.dest)

    async def transfer(self, engine: Engine) -> int:
        try:
            return await download_object(
                engine, self.backend, self.key, self.dest, self.size, self.etag
            )
        except IntegrityError as exc:
            # Corrupt or short data that passed the transport: fetch the
            # whole file once more before giving up on it.
            engine.on_retry("download", 1, exc)
            return await download_object(
                engine, self.backend, self.key, self.dest, self.size, self.etag
            )


@dataclass
class CopyJob:
    """One object from one remote location to another."""

    src_backend: Backend
    src_key: str
    backend: Backend  # the destination
    key: str
    size: int
    etag: str | None = None
    mode: Compare = Compare.ALWAYS
    check: _Check | None = None
    action: Action = Action.COPY
    src: str = ""
    dst: str = ""

    def __post_init__(self) -> None:
        self.src = self.src or self.src_backend.url(self.src_key)
        self.dst = self.dst or self.backend.url(self.key)

    async def run(self, engine: Engine, run: Run) -> None:
        if self.check is not None and not await self._needs_copy():
            engine.skipped(run, self)
            return
        if run.dryrun:
            engine.done(run, self)
            return
        engine.started(run, self)
        await copy_object(
            engine, self.src_backend, self.src_key, self.backend, self.key, self.size, self.etag
        )
        engine.done(run, self, self.size)

    async def _needs_copy(self) -> bool:
        """Settle a check with a HEAD on each side (listings may lack metadata)."""
        src, dst = await asyncio.gather(
            self.src_backend.stat(self.src_key), self.backend.stat(self.key)
        )
        return decide_copy(self.mode, src, dst, final=True) != _SKIP


@dataclass
class DeleteRemoteJob:
    """Deletes a batch of keys in one request where the backend batches."""

    backend: Backend
    keys: Sequence[str]
    action: Action = Action.DELETE
    size: int = 0
    src: str = ""
    dst: str = ""

    def __post_init__(self) -> None:
        self.dst = self.dst or self.backend.url(self.keys[0] if self.keys else "")

    async def run(self, engine: Engine, run: Run) -> None:
        failed = {} if run.dryrun else await self.backend.delete_many(self.keys)
        for key in self.keys:
            one = DeleteRemoteJob(self.backend, [key], dst=self.backend.url(key))
            if key in failed:
                engine.failed(run, one, failed[key])
            else:
                engine.done(run, one)


@dataclass
class DeleteLocalJob:
    path: Path
    action: Action = Action.DELETE
    size: int = 0
    src: str = ""
    dst: str = ""

    def __post_init__(self) -> None:
        self.dst = self.dst or str(self.path)

    async def run(self, engine: Engine, run: Run) -> None:
        if not run.dryrun:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(engine.executor, self.path.unlink)
        engine.done(run, self)


# -- planning ------------------------------------------------------------------


def delete_jobs(backend: Backend, keys: Sequence[str]) -> list[Job]:
    """Jobs deleting ``keys``, batched as the backend's batch delete allows."""
    return [
        DeleteRemoteJob(backend, keys[i : i + DELETE_BATCH])
        for i in range(0, len(keys), DELETE_BATCH)
    ]


async def list_remote(backend: Backend, prefix: str) -> dict[str, ObjectInfo]:
    """Objects under ``prefix`` by relative name; "directory" markers dropped."""
    found: dict[str, ObjectInfo] = {}
    async for info in backend.list(prefix):
        rel = info.key[len(prefix) :]
        if rel and not rel.endswith("/"):
            found[rel] = info
    return found


async def walk_local(
    engine: Engine, root: Path, follow_symlinks: bool, tags: bool = False
) -> list[LocalEntry | WalkProblem]:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(
        engine.executor, lambda: list(walk(root, follow_symlinks=follow_symlinks, tags=tags))
    )


@dataclass
class _Noted:
    """A file that was refused or left out at planning time; nothing to run."""

    action: Action
    src: str
    dst: str
    size: int = 0

    async def run(self, engine: Engine, run: Run) -> None:
        return None


def _record_problem(engine: Engine, run: Run, problem: WalkProblem, dst: str) -> None:
    job = _Noted(Action.UPLOAD, str(problem.path), dst)
    if problem.skipped:
        engine.skipped(run, job, problem.reason)
    else:
        engine.failed(run, job, f"{problem.path}: {problem.reason}")


async def plan_upload(
    engine: Engine,
    run: Run,
    root: Path,
    backend: Backend,
    prefix: str,
    args: PlanArgs,
) -> list[Job]:
    """Jobs that make ``backend:prefix`` like the local directory ``root``."""
    filters, mode, delete = args.filters, args.mode, args.delete
    walked = await walk_local(engine, root, args.follow_symlinks)
    remote = await list_remote(backend, prefix) if mode is not Compare.ALWAYS or delete else {}
    jobs: list[Job] = []
    present: set[str] = set()
    protected: list[str] = []  # rel paths whose remote copies must not be deleted
    for item in walked:
        if isinstance(item, WalkProblem):
            rel = _rel(root, item.path)
            if rel is not None and not filters.included(rel):
                continue
            _record_problem(engine, run, item, backend.url(prefix + (rel or "")))
            protected.append(rel or "")
            continue
        if not filters.included(item.rel):
            continue
        present.add(item.rel)
        key = prefix + item.rel
        decision = decide(mode, item, remote.get(item.rel), upload=True)
        job = UploadJob(item.path, backend, key, item.size, local=item)
        if decision == _SKIP:
            engine.skipped(run, job)
            continue
        if isinstance(decision, _Check):
            job.check = decision
        jobs.append(job)
    if delete:
        doomed = [
            prefix + rel
            for rel in remote
            if rel not in present and filters.included(rel) and not _under(rel, protected)
        ]
        jobs.extend(delete_jobs(backend, doomed))
    await _abort_abandoned_uploads(engine, backend, prefix, {j.dst for j in jobs})
    return jobs


async def _abort_abandoned_uploads(
    engine: Engine, backend: Backend, prefix: str, wanted: set[str]
) -> None:
    """Abort journaled uploads under ``prefix`` that this run will not resume.

    They belong to files since deleted, excluded or already in place; left
    alone they would hold storage on the server forever.
    """
    for dest, upload_id in await engine.journal("uploads_under", backend.url(prefix)) or []:
        if dest in wanted:
            continue
        key = dest[len(backend.url("")) :]
        with contextlib.suppress(Exception):
            await backend.abort_multipart(MultipartUpload(key, upload_id))
        await engine.journal("upload_done", dest)
        log.info("aborted the abandoned multipart upload of %s", dest)


async def plan_download(
    engine: Engine,
    run: Run,
    backend: Backend,
    prefix: str,
    root: Path,
    args: PlanArgs,
) -> list[Job]:
    """Jobs that make the local directory ``root`` like ``backend:prefix``."""
    filters, mode, delete = args.filters, args.mode, args.delete
    remote = await list_remote(backend, prefix)
    local: dict[str, LocalEntry] = {}
    if root.exists() and (mode is not Compare.ALWAYS or delete):
        for item in await walk_local(engine, root, args.follow_symlinks, tags=True):
            if isinstance(item, LocalEntry):
                local[item.rel] = item
    jobs: list[Job] = []
    for rel, info in remote.items():
        if not filters.included(rel):
            continue
        try:
            dest = safe_join(root, rel)
        except UnsafePathError as exc:
            engine.failed(run, _Noted(Action.DOWNLOAD, backend.url(info.key), str(root)), exc)
            continue
        mine = local.get(rel)
        decision = decide(mode, mine, info, upload=False)
        job = DownloadJob(backend, info.key, dest, info.size, etag=info.etag, local=mine)
        if decision == _SKIP:
            engine.skipped(run, job)
            continue
        if isinstance(decision, _Check):
            job.check = decision
        jobs.append(job)
    if delete:
        for rel, entry in local.items():
            if rel not in remote and filters.included(rel):
                jobs.append(DeleteLocalJob(entry.path))
    return jobs


async def plan_copy(
    engine: Engine,
    run: Run,
    src: Backend,
    src_prefix: str,
    dst: Backend,
    dst_prefix: str,
    args: PlanArgs,
) -> list[Job]:
    """Jobs that make ``dst:dst_prefix`` like ``src:src_prefix`` (both remote)."""
    filters, mode = args.filters, args.mode
    source = await list_remote(src, src_prefix)
    target = await list_remote(dst, dst_prefix) if mode is not Compare.ALWAYS or args.delete else {}
    jobs: list[Job] = []
    for rel, info in source.items():
        if not filters.included(rel):
            continue
        theirs = target.get(rel)
        job = CopyJob(src, info.key, dst, dst_prefix + rel, info.size, info.etag, mode)
        decision = decide_copy(mode, info, theirs)
        if decision == _SKIP:
            engine.skipped(run, job)
            continue
        if isinstance(decision, _Check):
            job.check = decision
        jobs.append(job)
    if args.delete:
        doomed = [dst_prefix + rel for rel in target if rel not in source and filters.included(rel)]
        jobs.extend(delete_jobs(dst, doomed))
    return jobs


def _rel(root: Path, path: Path) -> str | None:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return None


def _under(rel: str, prefixes: Sequence[str]) -> bool:
    return any(p == "" or rel == p or rel.startswith(p + "/") for p in prefixes)
