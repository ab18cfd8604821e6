"""Planning: which files to copy, skip or delete, as jobs for the engine.

The comparison rules (``aws s3 sync``'s, with stored mtimes) are in
:mod:`.compare`; the jobs in :mod:`.jobs`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from .._exceptions import UnsafePathError
from .._models import Action, ObjectInfo
from ..backend import Backend
from .compare import SKIP, Check, Compare, Overwrite, decide, decide_copy, kept, object_time_ns
from .core import Engine, Job, Run
from .filters import Filters
from .jobs import CopyJob, DeleteLocalJob, DeleteRemoteJob, DownloadJob, UploadJob
from .localtree import LocalEntry, WalkProblem, safe_join, walk
from .upload import abort_abandoned_uploads

__all__ = [
    "DELETE_BATCH",
    "Noted",
    "PlanArgs",
    "delete_jobs",
    "list_remote",
    "plan_copy",
    "plan_download",
    "plan_upload",
]

log = logging.getLogger("synxfer")

#: Keys per batched delete request (S3's DeleteObjects limit).
DELETE_BATCH = 1000


class PlanArgs(NamedTuple):
    """How to compare and what to include: the options of one sync or copy.

    ``overwrite``: when an existing destination is replaced (``--no-clobber``,
    ``--if-size-differ``, ``--if-source-newer``; :func:`.compare.kept`).
    ``start``: list remote sources from ``prefix + start`` only (a wildcard's
    literal part below the prefix), not from the whole prefix.
    """

    filters: Filters
    mode: Compare
    delete: bool = False
    follow_symlinks: bool = False
    overwrite: frozenset[Overwrite] = frozenset()
    start: str = ""


def delete_jobs(backend: Backend, keys: Sequence[str]) -> list[Job]:
    """Jobs deleting ``keys``, batched as the backend's batch delete allows."""
    return [
        DeleteRemoteJob(backend, keys[i : i + DELETE_BATCH])
        for i in range(0, len(keys), DELETE_BATCH)
    ]


async def list_remote(
    backend: Backend, prefix: str, *, markers: bool = False, start: str = ""
) -> dict[str, ObjectInfo]:
    """Objects under ``prefix`` by relative name.

    "Directory" markers (keys ending in ``/``, ``prefix`` itself included,
    as the S3 console and ``aws s3api put-object --key d/`` make them) are
    no files: a transfer leaves them out, so none lands as a file or an
    empty directory. ``markers`` keeps them, for deletions: ``rm
    --recursive`` and ``rb --force`` must leave nothing behind (the marker
    of ``prefix`` itself under the relative name ``""``). ``start``: list
    only keys under ``prefix + start`` (names stay relative to ``prefix``).
    """
    found: dict[str, ObjectInfo] = {}
    async for info in backend.list(prefix + start):
        rel = info.key[len(prefix) :]
        if markers or (rel and not rel.endswith("/")):
            found[rel] = info
    return found


async def walk_local(
    engine: Engine, root: Path, follow_symlinks: bool, tags: bool = False
) -> list[LocalEntry | WalkProblem]:
    return await engine.scheduler.io(
        lambda: list(walk(root, follow_symlinks=follow_symlinks, tags=tags))
    )


@dataclass
class Noted:
    """A file refused or left out at planning time (missing, unsafe, unreadable):
    a job with nothing to run, so the engine records it like any other."""

    action: Action
    src: str
    dst: str
    size: int = 0

    async def run(self, engine: Engine, run: Run) -> None:
        return None


def _record_problem(engine: Engine, run: Run, problem: WalkProblem, dst: str) -> None:
    job = Noted(Action.UPLOAD, str(problem.path), dst)
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
    listed = mode is not Compare.ALWAYS or delete or args.overwrite
    remote = await list_remote(backend, prefix) if listed else {}
    compressed = engine.config.compress is not None
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
        theirs = remote.get(item.rel)
        job = UploadJob(item.path, backend, key, item.size, local=item)
        if theirs is not None and args.overwrite:
            why = kept(
                args.overwrite, item.size, item.mtime_ns, theirs.size, object_time_ns(theirs)
            )
            if why is not None:
                engine.skipped(run, job, why)
                continue
        decision = decide(mode, item, theirs, upload=True, compressed=compressed)
        if decision == SKIP:
            engine.skipped(run, job)
            continue
        if isinstance(decision, Check):
            job.check = decision
        jobs.append(job)
    if delete:
        doomed = [
            prefix + rel
            for rel in remote
            if rel not in present and filters.included(rel) and not _under(rel, protected)
        ]
        jobs.extend(delete_jobs(backend, doomed))
    # Journaled uploads under ``prefix`` that this run will not resume hold
    # storage forever: abort them (an entry goes with its upload).
    await abort_abandoned_uploads(engine, backend, prefix, {j.dst for j in jobs})
    return jobs


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
    remote = await list_remote(backend, prefix, start=args.start)
    local: dict[str, LocalEntry] = {}
    if root.exists() and (mode is not Compare.ALWAYS or delete or args.overwrite):
        for item in await walk_local(engine, root, args.follow_symlinks, tags=True):
            if isinstance(item, LocalEntry):
                local[item.rel] = item
    jobs: list[Job] = []
    resolved: dict[Path, str] = {}  # real paths of the destination's directories
    for rel, info in remote.items():
        if not filters.included(rel):
            continue
        try:
            dest = safe_join(root, rel, resolved)
        except UnsafePathError as exc:
            engine.failed(run, Noted(Action.DOWNLOAD, backend.url(info.key), str(root)), exc)
            continue
        mine = local.get(rel)
        job = DownloadJob(backend, info.key, dest, info.size, etag=info.etag, local=mine)
        if mine is not None and args.overwrite:
            why = kept(args.overwrite, info.size, object_time_ns(info), mine.size, mine.mtime_ns)
            if why is not None:
                engine.skipped(run, job, why)
                continue
        decision = decide(mode, mine, info, upload=False)
        if decision == SKIP:
            engine.skipped(run, job)
            continue
        if isinstance(decision, Check):
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
    source = await list_remote(src, src_prefix, start=args.start)
    listed = mode is not Compare.ALWAYS or args.delete or args.overwrite
    target = await list_remote(dst, dst_prefix) if listed else {}
    jobs: list[Job] = []
    for rel, info in source.items():
        if not filters.included(rel):
            continue
        theirs = target.get(rel)
        job = CopyJob(src, info.key, dst, dst_prefix + rel, info.size, info.etag, mode)
        if theirs is not None and args.overwrite:
            why = kept(
                args.overwrite, info.size, object_time_ns(info), theirs.size, object_time_ns(theirs)
            )
            if why is not None:
                engine.skipped(run, job, why)
                continue
        decision = decide_copy(mode, info, theirs)
        if decision == SKIP:
            engine.skipped(run, job)
            continue
        if isinstance(decision, Check):
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
