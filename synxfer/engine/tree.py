"""Tree operations: the one home of plan -> jobs -> execute.

A sync, a recursive copy, a ``files=`` list or one shard of a scaled-out
run are the same operation: two sides (a local directory or a remote
prefix each, :class:`TreeOp`), planned into jobs by the sync rules (a walk
and a listing, :mod:`.plan`; or an explicit list, :mod:`.items`), then run
by one engine. :class:`~synxfer.Client` and scale-out (``synxfer._scaleout``,
which places shards on processes or Dask) both call this module; neither
reads the other's internals. The refusals a tree operation makes before
anything moves (a missing source directory, two local paths) live here too,
so a one-engine run and a scaled-out one refuse alike.

Whoever runs a tree operation hands its engine and its backends (a
:class:`BackendSource`: the client's, or a shard's, ``synxfer._backends``)
in a :class:`TreeHost`: the engine never imports the client. What each
client method does with a tree (options, wildcards, the scale-out decision,
moves, deletions) is :mod:`.ops`'s, on top of this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .._exceptions import ConfigError
from .._models import Action, TransferResult, WriteOptions
from .._url import Location, parse_location
from ..backend import Backend
from .compare import Compare
from .core import Engine, Job, Run
from .filters import Filters
from .items import Item, Side, TreeOp, plan_items
from .plan import PlanArgs, plan_copy, plan_download, plan_upload
from .upload import abort_abandoned_uploads

__all__ = [
    "BackendSource",
    "Item",
    "Side",
    "TreeHost",
    "TreeOp",
    "as_prefix",
    "dest_dir",
    "existing_dir",
    "local_remote_error",
    "open_op",
    "plan_tree",
    "run_items",
    "run_tree",
    "tree_kind",
]


class BackendSource(Protocol):
    """Opens the (layered) backends of a tree operation's remote sides."""

    async def open(self, loc: Location) -> Backend:
        """The backend serving ``loc``'s bucket, opened."""
        ...

    async def writable(self, loc: Location, write_options: WriteOptions | None) -> Backend:
        """The backend of ``loc``, refusing ``write_options`` it cannot honour."""
        ...

    def check_endpoints(self, *locations: Location) -> None:
        """Refuse one ``endpoint_url`` for two services."""
        ...


@dataclass(frozen=True, slots=True)
class TreeHost:
    """What a tree operation takes from whoever runs it (a client, a shard):
    its engine, its backends, and whether local sources follow symlinks."""

    engine: Engine
    backends: BackendSource
    follow_symlinks: bool = False


# --------------------------------------------------------------------------- refusals


def as_prefix(key: str) -> str:
    """``key`` as a prefix: the tree under it, never its siblings (``a`` is not ``ab``)."""
    return key if not key or key.endswith("/") else key + "/"


def existing_dir(path: Path) -> Path:
    """``path``, the source directory of a tree operation, or a ConfigError."""
    if not path.exists():
        raise ConfigError(f"{path}: no such directory")
    if not path.is_dir():
        raise ConfigError(f"{path} is a file, not a directory; use cp to copy one file")
    return path


def dest_dir(path: Path) -> Path:
    """``path``, the destination directory of a tree operation, or a ConfigError."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{path} exists and is not a directory")
    return path


def local_remote_error(s: Location, d: Location) -> ConfigError:
    return ConfigError(f"{s} and {d} are both local paths; one side must be a URL")


def tree_kind(host: TreeHost, src: str, dst: str) -> Action:
    """Upload, download or copy from ``src`` to ``dst``, or the ConfigError a
    tree operation between them raises before anything moves."""
    s, d = parse_location(src), parse_location(dst)
    if s.is_local and not d.is_local:
        assert s.path is not None
        existing_dir(s.path)
        return Action.UPLOAD
    if d.is_local and not s.is_local:
        assert d.path is not None
        dest_dir(d.path)
        return Action.DOWNLOAD
    if not s.is_local and not d.is_local:
        host.backends.check_endpoints(s, d)  # endpoint_url is ambiguous between two services
        return Action.COPY
    raise local_remote_error(s, d)


# ---------------------------------------------------------------- plan -> jobs -> execute


async def open_op(
    host: TreeHost,
    kind: Action,
    src: str,
    dst: str,
    mode: Compare,
    filters: Filters | None = None,
) -> TreeOp:
    """The sides of a tree operation, remote ones opened through ``host``."""

    async def side(value: str, local: bool) -> Side:
        loc = parse_location(value)
        if local:
            assert loc.path is not None, value
            return Side(root=loc.path)
        return Side(backend=await host.backends.open(loc), prefix=as_prefix(loc.key))

    return TreeOp(
        kind,
        await side(src, kind is Action.UPLOAD),
        await side(dst, kind is Action.DOWNLOAD),
        mode,
        filters or Filters(),
        host.follow_symlinks,
    )


async def plan_tree(engine: Engine, run: Run, op: TreeOp, args: PlanArgs) -> list[Job]:
    """The jobs of a whole tree: a walk or a listing of the source, compared."""
    if op.kind is Action.UPLOAD:
        backend, prefix = op.dst.remote()
        return await plan_upload(engine, run, op.src.local(), backend, prefix, args)
    if op.kind is Action.DOWNLOAD:
        backend, prefix = op.src.remote()
        return await plan_download(engine, run, backend, prefix, op.dst.local(), args)
    src, src_prefix = op.src.remote()
    dst, dst_prefix = op.dst.remote()
    return await plan_copy(engine, run, src, src_prefix, dst, dst_prefix, args)


async def run_tree(
    engine: Engine,
    op: TreeOp,
    args: PlanArgs,
    *,
    dryrun: bool = False,
    write_options: WriteOptions | None = None,
) -> TransferResult:
    """A whole tree through one engine: planned, then run."""
    run = Run(dryrun, write_options=write_options)
    jobs = await plan_tree(engine, run, op, args)
    await engine.execute(jobs, run)
    return run.finish()


async def run_items(
    engine: Engine,
    op: TreeOp,
    items: Sequence[Item],
    *,
    dryrun: bool = False,
    remote_count: int | None = None,
    private_journal: bool = False,
    write_options: WriteOptions | None = None,
) -> TransferResult:
    """``items`` through one engine: planned, then run.

    ``private_journal``: the engine's journal serves this run alone (a
    shard's), so uploads it holds under the destination that this run will
    not resume are aborted (they would hold storage forever).
    ``write_options``: the object options of the call (None: the config's).
    """
    run = Run(dryrun, write_options=write_options)
    jobs = await plan_items(engine, run, op, items, remote_count)
    if private_journal and op.kind is Action.UPLOAD and not dryrun:
        backend, prefix = op.dst.remote()
        await abort_abandoned_uploads(engine, backend, prefix, {j.dst for j in jobs})
    await engine.execute(jobs, run)
    return run.finish()
