"""Scale-out: one plan, many engines (issue 12; see docs/scaling.md).

Above the engine, below the client: the client hands a tree operation here
when it has an explicit list of files (``files=``, ``--files-from``), runs
on several processes (``TransferConfig.processes``) or on Dask
(``Client(dask=...)``). Nothing here is imported by ``import synxfer`` or
the CLI unless one of those is asked for, and nothing here imports the
client: planning, running and the clean-up of abandoned uploads are
:mod:`synxfer.engine.tree`'s, which the client calls too; this package only
places shards (docs/decisions/0040-one-home-for-tree-operations.md).

The driver (this module, in the caller's process) plans once: it lists and
compares as a one-engine sync would, keeps the deletions for itself, and
splits the transfers into shards balanced by bytes and files
(:mod:`._shards`). Each shard runs in its own engine -- its own process or
Dask task, event loop, engine and backends (built from the driver's
:class:`ClientSettings`, as its client built its own), with its share of the machine's limits
-- as an explicit list of items planned again by the sync rules
(:mod:`synxfer.engine.items`), so a shard run twice transfers only what has
not landed. Results merge into one :class:`~synxfer.TransferResult`; deletions
run only after every shard finished.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterable, Sequence
from dataclasses import replace

from .._backends import Backends
from .._exceptions import ConfigError
from .._models import Action, Event, EventKind, TransferResult, WriteOptions
from ..engine import tree
from ..engine.core import Job, Run
from ..engine.items import Item, TreeOp, as_items, plan_items, read_files_from
from ..engine.jobs import CopyJob, DownloadJob, UploadJob
from ..engine.plan import PlanArgs
from ..engine.tree import TreeHost, open_op, plan_tree, run_items, tree_kind
from ._shards import (
    ClientSettings,
    PackedEvent,
    Runner,
    ShardSpec,
    engine_config,
    merge,
    read_pins,
    shard_failed,
    split,
    unpack_event,
)

__all__ = [
    "ClientSettings",
    "FileSpec",
    "Item",
    "Runner",
    "read_files_from",
    "run_tree",
]

log = logging.getLogger("synxfer")

#: ``files=``: names relative to both roots, (source, destination) pairs, or items.
FileSpec = Iterable[str | tuple[str, str] | Item]


# --------------------------------------------------------------------------- the driver


async def run_tree(
    host: TreeHost,
    backends: Backends,
    dask: object | None,
    src: str,
    dst: str,
    args: PlanArgs,
    dryrun: bool,
    files: FileSpec | None,
    write_options: WriteOptions | None = None,
) -> TransferResult:
    """A sync or recursive copy of ``src`` to ``dst`` for the client that
    passed its ``host`` (engine, backends) and ``backends`` (whose settings
    a shard builds its own from).

    With ``files``, only those (names relative to both roots). With
    ``config.processes > 1`` or a ``dask`` target, planned here and run in
    shards (each engine's config carries the call's ``write_options``); a
    dry run is planned and reported here alone.
    """
    items = None if files is None else as_items(files)
    if items is not None and args.delete:
        raise ConfigError(
            "--delete cannot be combined with --files-from (files=): an explicit list "
            "says what to copy, not what the destination should hold"
        )
    kind = tree_kind(host, src, dst)
    engine = host.engine
    scaled = engine.config.processes > 1 or dask is not None
    if not scaled or dryrun:
        op = await open_op(host, kind, src, dst, args.mode, args.filters)
        if items is not None:
            return await run_items(engine, op, items, dryrun=dryrun, write_options=write_options)
        return await tree.run_tree(engine, op, args, dryrun=dryrun, write_options=write_options)
    settings = ClientSettings(
        endpoint_url=backends.options.endpoint_url,
        region=backends.options.region,
        profile=backends.options.profile,
        endpoints=dict(backends.endpoints),
        backend_options={k: dict(v) for k, v in backends.extra.items()},
        follow_symlinks=host.follow_symlinks,
        layers=backends.layers,
    )
    runner = await open_runner(engine.config.processes, dask)  # a bad Dask target fails here
    try:
        return await _drive(host, settings, runner, kind, src, dst, args, items, write_options)
    finally:
        await runner.close()


async def open_runner(processes: int, dask: object | None) -> Runner:
    if dask is not None:
        from ._dask import DaskRunner

        return await DaskRunner.open(dask)
    from ._processes import ProcessRunner

    return ProcessRunner(processes)


async def _drive(
    host: TreeHost,
    settings: ClientSettings,
    runner: Runner,
    kind: Action,
    src: str,
    dst: str,
    args: PlanArgs,
    items: list[Item] | None,
    write_options: WriteOptions | None = None,
) -> TransferResult:
    engine = host.engine
    config = engine.config
    op = await open_op(host, kind, src, dst, args.mode, args.filters)
    run = Run()
    if items is None:
        jobs = await plan_tree(engine, run, op, args)
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
    settings = _picklable(settings)
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
