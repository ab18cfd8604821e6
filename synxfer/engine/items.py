"""Explicit work: a list of (source, destination) names, planned by the sync rules.

The one path for ``--files-from FILE`` (``files=`` in the API) and for a
shard of a scaled-out run: each item is looked up on both sides (local
files by ``stat`` in a worker thread; remote objects by one listing of their
common prefix when that is cheaper than a HEAD each, else a HEAD each) and
compared as :func:`~synxfer.engine.compare.decide` says, so running the same
list twice transfers nothing the second time.
"""

from __future__ import annotations

import asyncio
import math
import os
import posixpath
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._exceptions import ConfigError, NotFound, UnsafePathError
from .._models import Action, ObjectInfo
from ..backend import Backend
from .compare import SKIP, Check, Compare, decide, decide_copy
from .core import Engine, Job, Run
from .filters import Filters
from .jobs import CopyJob, DownloadJob, UploadJob
from .localtree import LocalEntry, read_tag, safe_join
from .plan import Noted, list_remote

__all__ = [
    "LIST_PAGE",
    "STAT_LIMIT",
    "Item",
    "Side",
    "TreeOp",
    "as_items",
    "plan_items",
    "read_files_from",
]

#: Keys per listing page (S3's); a listing costs ``ceil(keys / LIST_PAGE)`` requests.
LIST_PAGE = 1000
#: Without a count of the keys under the prefix, an explicit list of at most
#: this many items is looked up with a HEAD each; a longer one lists the prefix.
STAT_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class Item:
    """One file to sync: its name under the source and under the destination
    (relative, ``/``-separated), and its size when the planner knows it (the
    shards are balanced by it)."""

    src: str
    dst: str
    size: int = 0


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a tree operation: a local directory or a remote prefix."""

    root: Path | None = None  # local
    backend: Backend | None = None  # remote (opened by the client)
    prefix: str = ""

    def remote(self) -> tuple[Backend, str]:
        assert self.backend is not None, "a remote side"
        return self.backend, self.prefix

    def local(self) -> Path:
        assert self.root is not None, "a local side"
        return self.root


@dataclass(frozen=True, slots=True)
class TreeOp:
    """What a tree operation moves, and how it compares."""

    kind: Action  # UPLOAD, DOWNLOAD or COPY
    src: Side
    dst: Side
    mode: Compare
    filters: Filters = field(default_factory=Filters)
    follow_symlinks: bool = False


def read_files_from(path: str | os.PathLike[str]) -> list[Item]:
    """The items of a ``--files-from`` file.

    One item a line: a name relative to both roots, or ``SRC<TAB>DST`` to give
    the destination another name. Blank lines and lines starting with ``#``
    are ignored; a leading ``./`` is dropped. Names are checked when planned
    (absolute names and ``..`` are refused then, per item).
    """
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--files-from {os.fspath(path)!r}: cannot read it: {exc}") from None
    items = []
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        src, tab, dst = line.partition("\t")
        items.append(Item(_clean(src), _clean(dst) if tab else _clean(src)))
    return items


def as_items(files: Iterable[str | tuple[str, str] | Item]) -> list[Item]:
    """``files=`` of the API: names, (source name, destination name) pairs or items."""
    out = []
    for f in files:
        if isinstance(f, Item):
            out.append(f)
        elif isinstance(f, str):
            out.append(Item(_clean(f), _clean(f)))
        else:
            src, dst = f
            out.append(Item(_clean(src), _clean(dst)))
    return out


def _clean(name: str) -> str:
    name = name.replace(os.sep, "/") if os.sep != "/" else name
    while name.startswith("./"):
        name = name[2:]
    return name


# --------------------------------------------------------------------------- planning


async def plan_items(
    engine: Engine,
    run: Run,
    op: TreeOp,
    items: Sequence[Item],
    remote_count: int | None = None,
) -> list[Job]:
    """Jobs for ``items``: each compared by ``op.mode`` as a sync would compare it.

    ``remote_count``: keys known under the remote prefix being checked (from
    the driver's listing), to choose between one listing and a HEAD per item.
    Missing sources and unsafe names are recorded as failures of their item.
    """
    items = [it for it in items if op.filters.included(it.src)]
    if op.kind is Action.UPLOAD:
        return await _plan_upload(engine, run, op, items, remote_count)
    if op.kind is Action.DOWNLOAD:
        return await _plan_download(engine, run, op, items, remote_count)
    return await _plan_copy(engine, run, op, items, remote_count)


async def _plan_upload(
    engine: Engine, run: Run, op: TreeOp, items: Sequence[Item], remote_count: int | None
) -> list[Job]:
    root = op.src.local()
    backend, prefix = op.dst.remote()
    follow = op.follow_symlinks
    entries = await engine.scheduler.io(
        lambda: [_stat_source(root, it.src, follow) for it in items]
    )
    present = [it.dst for it, e in zip(items, entries, strict=True) if isinstance(e, LocalEntry)]
    remote = await _lookup(engine, backend, prefix, present, op.mode, remote_count)
    # Stored compressed: a listed size (the stored one) that differs from the
    # file's is settled by a HEAD (the original size), as a sync does.
    compressed = engine.config.compress is not None
    jobs: list[Job] = []
    for it, entry in zip(items, entries, strict=True):
        key = prefix + it.dst
        if isinstance(entry, str):
            engine.failed(run, Noted(Action.UPLOAD, str(root / it.src), backend.url(key)), entry)
            continue
        theirs = remote.get(it.dst)
        if isinstance(theirs, BaseException):
            engine.failed(run, Noted(Action.UPLOAD, str(entry.path), backend.url(key)), theirs)
            continue
        job = UploadJob(entry.path, backend, key, entry.size, local=entry)
        decision = decide(op.mode, entry, theirs, upload=True, compressed=compressed)
        _add(engine, run, jobs, job, decision)
    return jobs


async def _plan_download(
    engine: Engine, run: Run, op: TreeOp, items: Sequence[Item], remote_count: int | None
) -> list[Job]:
    backend, prefix = op.src.remote()
    root = op.dst.local()
    sources = await _sources(engine, backend, prefix, items, remote_count)
    dests: list[Path | str] = []
    for it in items:
        try:
            dests.append(safe_join(root, it.dst))
        except UnsafePathError as exc:
            dests.append(str(exc))
    local = await engine.scheduler.io(
        lambda: [
            _stat_dest(d, it.dst) if isinstance(d, Path) else None
            for it, d in zip(items, dests, strict=True)
        ]
    )
    jobs: list[Job] = []
    for it, dest, mine in zip(items, dests, local, strict=True):
        info = sources.get(it.src)
        where = backend.url(prefix + it.src)
        if not isinstance(dest, Path):
            engine.failed(run, Noted(Action.DOWNLOAD, where, str(root / it.dst)), dest)
            continue
        if not isinstance(info, ObjectInfo):
            engine.failed(run, Noted(Action.DOWNLOAD, where, str(dest)), _missing(info, where))
            continue
        job = DownloadJob(backend, info.key, dest, info.size, etag=info.etag, local=mine)
        _add(engine, run, jobs, job, decide(op.mode, mine, info, upload=False))
    return jobs


async def _plan_copy(
    engine: Engine, run: Run, op: TreeOp, items: Sequence[Item], remote_count: int | None
) -> list[Job]:
    src, src_prefix = op.src.remote()
    dst, dst_prefix = op.dst.remote()
    sources = await _sources(engine, src, src_prefix, items, remote_count)
    present = [it.dst for it in items if isinstance(sources.get(it.src), ObjectInfo)]
    target = await _lookup(engine, dst, dst_prefix, present, op.mode, remote_count)
    jobs: list[Job] = []
    for it in items:
        info = sources.get(it.src)
        key = dst_prefix + it.dst
        where = src.url(src_prefix + it.src)
        if not isinstance(info, ObjectInfo):
            engine.failed(run, Noted(Action.COPY, where, dst.url(key)), _missing(info, where))
            continue
        theirs = target.get(it.dst)
        if isinstance(theirs, BaseException):
            engine.failed(run, Noted(Action.COPY, where, dst.url(key)), theirs)
            continue
        job = CopyJob(src, info.key, dst, key, info.size, info.etag, op.mode)
        _add(engine, run, jobs, job, decide_copy(op.mode, info, theirs))
    return jobs


def _add(engine: Engine, run: Run, jobs: list[Job], job: Job, decision: str | Check) -> None:
    if decision == SKIP:
        engine.skipped(run, job)
        return
    if isinstance(decision, Check):
        job.check = decision  # type: ignore[attr-defined]
    jobs.append(job)


def _missing(found: ObjectInfo | BaseException | None, where: str) -> BaseException | str:
    return found if isinstance(found, BaseException) else f"{where}: no such object"


async def _sources(
    engine: Engine, backend: Backend, prefix: str, items: Sequence[Item], remote_count: int | None
) -> dict[str, ObjectInfo | BaseException | None]:
    """The source objects of ``items``, looked up now (the listing the driver
    saw may be stale; a download needs the object's current size and ETag)."""
    return await _lookup(engine, backend, prefix, [it.src for it in items], None, remote_count)


async def _lookup(
    engine: Engine,
    backend: Backend,
    prefix: str,
    names: Sequence[str],
    mode: Compare | None,
    remote_count: int | None,
) -> dict[str, ObjectInfo | BaseException | None]:
    """``prefix + name`` for each name: its info, None when missing, or the error.

    ``mode`` ALWAYS (a copy that does not compare) needs no lookup at all.
    One listing of the names' common directory when it costs fewer requests
    than a HEAD each (by ``remote_count`` when known), else a HEAD each.
    """
    if mode is Compare.ALWAYS or not names:
        return {}
    if remote_count is not None:
        use_list = math.ceil(remote_count / LIST_PAGE) < len(names)
    else:
        use_list = len(names) > STAT_LIMIT
    if use_list:
        common = _common_dir(names)
        listed = await list_remote(backend, prefix + common)
        return {name: listed.get(name[len(common) :]) for name in names}
    return await _stat_each(engine, backend, prefix, names)


async def _stat_each(
    engine: Engine, backend: Backend, prefix: str, names: Sequence[str]
) -> dict[str, ObjectInfo | BaseException | None]:
    """A HEAD for each name, at most ``max_files`` at once (each holds a request slot)."""
    out: dict[str, ObjectInfo | BaseException | None] = {}

    async def one(name: str) -> None:
        try:
            out[name] = await backend.stat(prefix + name)
        except NotFound:
            out[name] = None
        except Exception as exc:
            out[name] = exc

    step = engine.config.max_files
    for i in range(0, len(names), step):
        await asyncio.gather(*(one(n) for n in names[i : i + step]))
    return out


def _common_dir(names: Sequence[str]) -> str:
    """The deepest directory (ending in ``/``, or empty) holding every name."""
    common = posixpath.commonprefix(list(names))
    return common[: common.rfind("/") + 1]


# --------------------------------------------------------------------------- local files


def _stat_source(root: Path, rel: str, follow: bool) -> LocalEntry | str:
    """The local file ``root/rel`` to upload, or why it cannot be (blocking)."""
    try:
        path = safe_join(root, rel)
    except UnsafePathError as exc:
        return str(exc)
    try:
        st = os.stat(path, follow_symlinks=follow)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return f"{path}: symlink not followed (use --follow-symlinks)"
    if not stat.S_ISREG(st.st_mode):
        return f"{path}: not a regular file"
    return LocalEntry(rel, path, st.st_size, st.st_mtime_ns)


def _stat_dest(path: Path, rel: str) -> LocalEntry | None:
    """The file a download would replace, with its download tag; None if absent."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return LocalEntry(rel, path, st.st_size, st.st_mtime_ns, read_tag(path, st.st_mtime_ns))
