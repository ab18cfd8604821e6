"""Scale-out: one plan, many engines (issue 12; see docs/scaling.md).

Above the engine, beside the client: the client hands a tree operation here
when it has an explicit list of files (``files=``, ``--files-from``), runs
on several processes (``TransferConfig.processes``) or on Dask
(``Client(dask=...)``). Nothing here is imported by ``import synxfer`` or
the CLI unless one of those is asked for.

The driver (this module, in the caller's process) plans once: it lists and
compares as a one-engine sync would, keeps the deletions for itself, and
splits the transfers into shards balanced by bytes and files
(:mod:`._shards`). Each shard runs in its own engine -- its own process or
Dask task, event loop and :class:`~synxfer.Client`, with its share of the
machine's limits -- as an explicit list of items planned again by the sync
rules (:mod:`._items`), so a shard run twice transfers only what has not
landed. Results merge into one :class:`~synxfer.TransferResult`; deletions
run only after every shard finished.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from .._exceptions import ConfigError
from .._models import Action, Event, EventKind, TransferResult, WriteOptions
from .._url import parse_location
from ..engine.compare import Compare
from ..engine.core import Engine, Job, Run
from ..engine.filters import Filters
from ..engine.jobs import CopyJob, DownloadJob, UploadJob
from ..engine.plan import PlanArgs, plan_copy, plan_download, plan_upload
from ._items import Item, Side, TreeOp, as_items, plan_items, read_files_from
from ._shards import (
    ClientSettings,
    PackedEvent,
    ShardSpec,
    engine_config,
    merge,
    read_pins,
    shard_failed,
    split,
    unpack_event,
)

if TYPE_CHECKING:
    from ..client import Client

__all__ = [
    "FileSpec",
    "Item",
    "Runner",
    "open_op",
    "read_files_from",
    "run_items",
    "run_tree",
]

log = logging.getLogger("synxfer")

#: ``files=``: names relative to both roots, (source, destination) pairs, or items.
FileSpec = Iterable[str | tuple[str, str] | Item]


class Runner(Protocol):
    """Runs shard specs somewhere (a process pool, a Dask cluster)."""

    #: Shards to cut the plan into (engines that run at once, in all).
    slots: int
    #: Engines that run at once on one machine: each gets 1/share of the limits.
    share: int

    async def run(
        self, specs: Sequence[ShardSpec], deliver: DeliverEvents
    ) -> list[TransferResult | BaseException]: ...

    async def close(self) -> None: ...


class DeliverEvents(Protocol):
    def __call__(self, batch: Sequence[PackedEvent]) -> None: ...


# --------------------------------------------------------------------------- one engine


async def open_op(
    client: Client,
    kind: Action,
    src: str,
    dst: str,
    mode: Compare,
    filters: Filters | None = None,
) -> TreeOp:
    """The sides of a tree operation, remote ones opened through ``client``."""

    async def side(value: str, local: bool) -> Side:
        loc = parse_location(value)
        if local:
            assert loc.path is not None, value
            return Side(root=loc.path)
        backend, key = await client.backend(value)
        return Side(backend=backend, prefix=_as_prefix(key))

    return TreeOp(
        kind,
        await side(src, kind is Action.UPLOAD),
        await side(dst, kind is Action.DOWNLOAD),
        mode,
        filters or Filters(),
        client.follow_symlinks,
    )


async def run_items(
    client: Client,
    op: TreeOp,
    items: Sequence[Item],
    *,
    dryrun: bool = False,
    remote_count: int | None = None,
    private_journal: bool = False,
    write_options: WriteOptions | None = None,
) -> TransferResult:
    """``items`` through one engine (the client's): planned, then run.

    ``private_journal``: the engine's journal serves this shard alone, so
    uploads it holds under the destination that this run will not resume
    are aborted (they would hold storage forever). ``write_options``: the
    object options of the call (None: the client's config's).
    """
    engine: Engine = client._engine
    run = Run(dryrun, write_options=write_options)
    jobs = await plan_items(engine, run, op, items, remote_count)
    if private_journal and op.kind is Action.UPLOAD and not dryrun:
        await _abort_abandoned(engine, op, {j.dst for j in jobs})
    await engine.execute(jobs, run)
    return run.finish()


async def _abort_abandoned(engine: Engine, op: TreeOp, wanted: set[str]) -> None:
    from ..engine.upload import abort_abandoned_uploads

    backend, prefix = op.dst.remote()
    await abort_abandoned_uploads(engine, backend, prefix, wanted)


# --------------------------------------------------------------------------- the driver


def _kind(client: Client, src: str, dst: str) -> Action:
    """Upload, download or copy; refuses what a one-engine run refuses."""
    from ..client import _dest_dir, _existing_dir, _local_remote_error

    s, d = parse_location(src), parse_location(dst)
    if s.is_local and not d.is_local:
        assert s.path is not None
        _existing_dir(s.path)
        return Action.UPLOAD
    if d.is_local and not s.is_local:
        assert d.path is not None
        _dest_dir(d.path)
        return Action.DOWNLOAD
    if not s.is_local and not d.is_local:
        check = getattr(client, "_check_endpoints", None)
        if check is not None:
            check(s, d)  # endpoint_url is ambiguous between two services
        return Action.COPY
    raise _local_remote_error(s, d)


async def run_tree(
    client: Client,
    src: str,
    dst: str,
    args: PlanArgs,
    dryrun: bool,
    files: FileSpec | None,
    *,
    write_options: WriteOptions | None = None,
) -> TransferResult:
    """A sync or recursive copy of ``src`` to ``dst``, the client's way.

    With ``files``, only those (names relative to both roots). With
    ``client.config.processes > 1`` or a Dask target, planned here and run
    in shards (each engine's config carries the call's ``write_options``);
    a dry run is planned and reported here alone.
    """
    items = None if files is None else as_items(files)
    if items is not None and args.delete:
        raise ConfigError(
            "--delete cannot be combined with --files-from (files=): an explicit list "
            "says what to copy, not what the destination should hold"
        )
    kind = _kind(client, src, dst)
    dask = getattr(client, "_dask", None)
    scaled = client.config.processes > 1 or dask is not None
    if not scaled or dryrun:
        op = await open_op(client, kind, src, dst, args.mode, args.filters)
        if items is not None:
            return await run_items(client, op, items, dryrun=dryrun, write_options=write_options)
        run = Run(dryrun, write_options=write_options)
        jobs = await _plan_tree(client._engine, run, op, args)
        await client._engine.execute(jobs, run)
        return run.finish()
    runner = await open_runner(client, dask)  # a missing or unreachable Dask fails here
    try:
        return await _drive(client, runner, kind, src, dst, args, items, write_options)
    finally:
        await runner.close()


async def open_runner(client: Client, dask: object | None) -> Runner:
    if dask is not None:
        from ._dask import DaskRunner

        return await DaskRunner.open(dask)
    from ._processes import ProcessRunner

    return ProcessRunner(client.config.processes)


async def _plan_tree(engine: Engine, run: Run, op: TreeOp, args: PlanArgs) -> list[Job]:
    if op.kind is Action.UPLOAD:
        backend, prefix = op.dst.remote()
        return await plan_upload(engine, run, op.src.local(), backend, prefix, args)
    if op.kind is Action.DOWNLOAD:
        backend, prefix = op.src.remote()
        return await plan_download(engine, run, backend, prefix, op.dst.local(), args)
    src, src_prefix = op.src.remote()
    dst, dst_prefix = op.dst.remote()
    return await plan_copy(engine, run, src, src_prefix, dst, dst_prefix, args)


async def _drive(
    client: Client,
    runner: Runner,
    kind: Action,
    src: str,
    dst: str,
    args: PlanArgs,
    items: list[Item] | None,
    write_options: WriteOptions | None = None,
) -> TransferResult:
    engine: Engine = client._engine
    config = client.config
    op = await open_op(client, kind, src, dst, args.mode, args.filters)
    run = Run()
    if items is None:
        jobs = await _plan_tree(engine, run, op, args)
    else:
        jobs = await plan_items(engine, run, op, items)
    transfers = [j for j in jobs if j.action is not Action.DELETE]
    deletes = [j for j in jobs if j.action is Action.DELETE]
    work = [_item_of(op, j) for j in transfers]
    pins = await engine.scheduler.io(
        read_pins, config.state_dir, runner.slots, [j.dst for j in transfers]
    )
    # Keys known under the prefixes a shard looks up (its listing's cost).
    known = run.result.files_skipped + len(transfers) if items is None else None
    per_engine = engine_config(config, runner.share)
    if write_options is not None:
        per_engine = replace(per_engine, write_options=write_options)
    settings = _picklable(ClientSettings.of(client))
    specs = [
        ShardSpec(
            index,
            kind,
            src,
            dst,
            tuple(shard),
            args.mode,
            per_engine,
            settings,
            known,
            engine.wanted,
            config.state_dir,
        )
        for index, shard in enumerate(split(work, runner.slots, pins))
        if shard
    ]
    log.debug("%d files in %d shards on %s", len(work), len(specs), type(runner).__name__)

    def deliver(batch: Sequence[PackedEvent]) -> None:
        for packed in batch:
            engine.emit(unpack_event(packed))

    outcomes = await runner.run(specs, deliver) if specs else []
    finished = True
    for spec, outcome in zip(specs, outcomes, strict=True):
        if isinstance(outcome, TransferResult):
            merge(run.result, outcome)
        else:
            finished = False
            log.warning("shard %d did not finish: %r", spec.index, outcome)
            for failure in shard_failed(spec, outcome):
                run.result.failures.append(failure)
                engine.emit(
                    Event(EventKind.FAILED, spec.kind, failure.path, dst, error=failure.error)
                )
    if deletes:
        if finished:
            await engine.execute(deletes, run)
        else:
            log.warning("deletions skipped: not every shard finished; rerun to delete")
    return run.finish()


def _picklable(settings: ClientSettings) -> ClientSettings:
    """Settings travel to other processes: refuse at start what cannot."""
    try:
        pickle.dumps(settings)
    except Exception as exc:
        raise ConfigError(
            "layers= must be picklable to run in several processes or on Dask "
            f"(module-level classes or functions, not lambdas or local ones): {exc}"
        ) from None
    return settings


def _item_of(op: TreeOp, job: Job) -> Item:
    """The shard item of a planned job: its names under both roots, its size."""
    if isinstance(job, UploadJob):
        rel = job.path.relative_to(op.src.local()).as_posix()
        return Item(rel, job.key[len(op.dst.prefix) :], job.size)
    if isinstance(job, DownloadJob):
        rel = job.dest.relative_to(op.dst.local()).as_posix()
        return Item(job.key[len(op.src.prefix) :], rel, job.size)
    if isinstance(job, CopyJob):
        return Item(job.src_key[len(op.src.prefix) :], job.key[len(op.dst.prefix) :], job.size)
    raise TypeError(f"cannot shard {job!r}")


def _as_prefix(key: str) -> str:
    return key if not key or key.endswith("/") else key + "/"
