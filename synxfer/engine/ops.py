"""The operations behind :class:`~synxfer.Client`'s transfer methods.

Each of ``sync_to``, ``sync_from``, ``sync``, ``copy``, ``move``, ``rm``,
``upload_file`` and ``download_file`` is planned and run here: options
checked, sides opened, jobs planned (a walk and a listing, :mod:`.plan`;
a wildcard's listing from its literal part; one file's job), the scale-out
decision taken (explicit files, several processes, Dask), jobs executed and
the result assembled. The client only translates its arguments and calls
:class:`TreeOps` (as httpx's ``_api.py`` calls its ``_client.py``), so what
a call does can be read in one module, and scale-out shares the same
:mod:`.tree` functions for the pieces it runs.

Backends come from the :class:`~.tree.TreeHost`'s backend source (the
client's :class:`synxfer._backends.Backends`); a scaled-out run is handed to
the host's ``scale_out`` (the client binds it to ``synxfer._scaleout``, which
the engine never imports: it builds layered clients in other processes).
"""

from __future__ import annotations

import asyncio
import os
import posixpath
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .._exceptions import BucketNotFound, ConfigError, NotFound, UnknownScheme
from .._models import ObjectInfo, TransferResult, WriteOptions
from .._url import Location, parse_location
from ..backend import Backend
from .compare import Compare, Overwrite, kept, object_time_ns
from .core import Job, Run
from .filters import Filters, has_magic, split_glob
from .jobs import CopyJob, DeleteLocalJob, DeleteRemoteJob, DownloadJob, UploadJob
from .plan import PlanArgs, delete_jobs, list_remote, plan_copy, plan_download, plan_upload
from .tree import TreeHost, as_prefix, dest_dir, existing_dir, local_remote_error

__all__ = [
    "FileList",
    "PlanArgs",
    "ScaleOut",
    "TreeOps",
    "plan_args",
    "prefix_error",
    "stat_object",
]

FilterSpec = Sequence[tuple[str, str]]
#: ``files=``: names relative to both roots, or (source, destination) pairs.
FileList = Sequence[str | tuple[str, str]]
#: Runs a tree operation on several engines (processes, Dask) or from an
#: explicit list: ``(host, src, dst, args, dryrun, files, write_options)``.
ScaleOut = Callable[
    [TreeHost, str, str, PlanArgs, bool, FileList | None, WriteOptions | None],
    Awaitable[TransferResult],
]


@dataclass(frozen=True, slots=True)
class TreeOps:
    """A client's transfer operations over ``host`` (engine, backends).

    ``scale_out`` runs a tree elsewhere; ``wide``: the client runs trees on
    several engines (``TransferConfig.processes > 1`` or ``dask=``).
    ``customer_keys``: SSE-C keys are set (they never travel to workers).
    """

    host: TreeHost
    scale_out: ScaleOut
    wide: bool = False
    customer_keys: bool = False

    @property
    def follow_symlinks(self) -> bool:
        return self.host.follow_symlinks

    # -- single files --------------------------------------------------------

    async def upload_file(
        self, path: str, url: str, dryrun: bool, write_options: WriteOptions | None
    ) -> TransferResult:
        job = await self.upload_job(path, url, write_options)
        return await self.execute([job], dryrun, write_options)

    async def download_file(
        self, url: str, path: str, dryrun: bool, version_id: str | None
    ) -> TransferResult:
        job = await self.download_job(url, path, version_id=version_id)
        return await self.execute([job], dryrun)

    async def upload_job(
        self, path: str, url: str, write_options: WriteOptions | None = None
    ) -> UploadJob:
        src = existing_file(Path(path))
        loc = remote(url)
        backend = await self.host.backends.writable(loc, write_options)
        loc = await sole_object(backend, loc)
        key = loc.key + src.name if not loc.key or loc.key.endswith("/") else loc.key
        return UploadJob(src, backend, key, src.stat().st_size)

    async def download_job(
        self, url: str, path: str, verb: str = "copy", version_id: str | None = None
    ) -> DownloadJob:
        loc = remote(url)
        if version_id is not None:
            # Versions' code is imported where a version is named: a plain
            # transfer never loads it (tests/test_cli_startup.py).
            from .._versions import check_versioned

            check_versioned(loc, version_id)  # before the backend is opened
        backend = await self.host.backends.open(loc)
        loc = await sole_object(backend, loc)
        if version_id is not None:
            from .._versions import stat_version, version_view

            backend = version_view(backend, loc, version_id)
            info = await stat_version(backend, loc.key, url, version_id)
        elif not loc.key or loc.key.endswith("/"):
            raise prefix_error(url, verb)
        else:
            info = await stat_object(backend, loc.key, url, verb)
        dest = Path(path)
        if dest.is_dir() or str(path).endswith(("/", os.sep)):
            name = loc.key
            if loc.scheme in ("http", "https"):
                name = name.split("?", 1)[0]  # a pre-signed URL's query is no name
            dest = dest / posixpath.basename(name)
        if (kind := special_file(dest)) is not None:
            # A download is renamed into place: it would replace the device or pipe
            # (/dev/null included) with a regular file.
            raise ConfigError(
                f"{dest} is a {kind}, not a file: a download would replace it; write to it "
                "as a stream with Client.get_stream"
            )
        return DownloadJob(backend, loc.key, dest, info.size, etag=info.etag)

    async def copy_one_job(
        self,
        s: Location,
        d: Location,
        verb: str = "copy",
        write_options: WriteOptions | None = None,
        version_id: str | None = None,
    ) -> CopyJob:
        """One object to another remote location; a key ending in ``/`` gets its name."""
        if version_id is None and (s.key.endswith("/") or not (s.key or names_objects(s.scheme))):
            raise prefix_error(str(s), verb)
        backends = self.host.backends
        backends.check_endpoints(s, d)
        src, dst = await backends.open(s), await backends.writable(d, write_options)
        s, d = await sole_object(src, s), await sole_object(dst, d)  # syn://syn456: that File
        if version_id is None and not s.key:
            raise prefix_error(str(s), verb)
        if version_id is not None:
            from .._versions import stat_version, version_view

            src = version_view(src, s, version_id)
            info = await stat_version(src, s.key, str(s), version_id)
        else:
            info = await stat_object(src, s.key, str(s), verb)
        key = d.key + posixpath.basename(s.key) if not d.key or d.key.endswith("/") else d.key
        if src is dst and key == s.key:
            raise ConfigError(f"{s} and {d} are the same object")
        return CopyJob(src, s.key, dst, key, info.size, info.etag)

    # -- trees ---------------------------------------------------------------

    def scaled(self, files: object) -> bool:
        """Explicit files, several processes or Dask: scale-out runs the tree."""
        return files is not None or self.wide

    async def sync_to(self, local: str, url: str, options: Mapping[str, Any]) -> TransferResult:
        if self.scaled(options.get("files")):
            args = plan_args(options, self.follow_symlinks)
            files, dryrun = options.get("files"), options.get("dryrun", False)
            return await self.scaled_tree(
                local, url, args, dryrun, files, options.get("write_options")
            )
        root = existing_dir(Path(local))
        loc = remote(url)
        write_options = options.get("write_options")
        backend = await self.host.backends.writable(loc, write_options)
        overwrite = overwrite_of(options.get("no_clobber", False))
        write_options = self.guarded(backend, write_options, overwrite)
        run = Run(options.get("dryrun", False), write_options=write_options)
        engine = self.host.engine
        args = plan_args(options, self.follow_symlinks)
        jobs = await plan_upload(engine, run, root, backend, as_prefix(loc.key), args)
        await engine.execute(jobs, run)
        return run.finish()

    async def sync_from(self, url: str, local: str, options: Mapping[str, Any]) -> TransferResult:
        if self.scaled(options.get("files")):
            args = plan_args(options, self.follow_symlinks)
            files, dryrun = options.get("files"), options.get("dryrun", False)
            return await self.scaled_tree(url, local, args, dryrun, files)
        loc = remote(url)
        root = dest_dir(Path(local))
        backend = await self.host.backends.open(loc)
        run = Run(options.get("dryrun", False), no_clobber=options.get("no_clobber", False))
        engine = self.host.engine
        args = plan_args(options, self.follow_symlinks)
        jobs = await plan_download(engine, run, backend, as_prefix(loc.key), root, args)
        await engine.execute(jobs, run)
        return run.finish()

    async def sync(self, src: str, dst: str, options: Mapping[str, Any]) -> TransferResult:
        s, d = parse_location(src), parse_location(dst)
        if s.is_local and not d.is_local:
            return await self.sync_to(src, dst, options)
        if d.is_local and not s.is_local:
            return await self.sync_from(src, dst, options)
        if not s.is_local and not d.is_local:
            if self.scaled(options.get("files")):
                args, dryrun = plan_args(options, False), options.get("dryrun", False)
                files, write_options = options.get("files"), options.get("write_options")
                return await self.scaled_tree(src, dst, args, dryrun, files, write_options)
            return await self.copy_tree(
                s,
                d,
                plan_args(options, False),
                options.get("dryrun", False),
                options.get("write_options"),
            )
        raise local_remote_error(s, d)

    async def copy(
        self,
        src: str,
        dst: str,
        *,
        recursive: bool,
        filters: FilterSpec,
        dryrun: bool,
        files: FileList | None,
        write_options: WriteOptions | None,
        overwrite: frozenset[Overwrite],
        raw: bool,
        version_id: str | None,
    ) -> TransferResult:
        s, d = parse_location(src), parse_location(dst)
        if version_id is not None:
            from .._versions import check_versioned, check_versioned_copy

            check_versioned_copy(s, recursive, files)
            check_versioned(s, version_id)
            raw = True
        remote_to_remote = not s.is_local and not d.is_local
        if overwrite and self.scaled(files):
            raise not_scaled(overwrite)
        if not raw and await self.is_wildcard(s, recursive):
            return await self.wildcard(s, d, filters, dryrun, write_options, overwrite)
        if not recursive and files is None:
            job: UploadJob | DownloadJob | CopyJob
            if s.is_local and not d.is_local:
                job = await self.upload_job(src, dst, write_options)
                write_options = self.guarded(job.backend, write_options, overwrite)
                return await self.single(job, dryrun, write_options, overwrite)
            if d.is_local and not s.is_local:
                job = await self.download_job(src, dst, version_id=version_id)
                return await self.single(job, dryrun, None, overwrite)
            if remote_to_remote:
                job = await self.copy_one_job(
                    s, d, write_options=write_options, version_id=version_id
                )
                return await self.single(job, dryrun, write_options, overwrite)
            raise local_remote_error(s, d)
        args = PlanArgs(Filters(filters), Compare.ALWAYS, False, self.follow_symlinks, overwrite)
        if self.scaled(files):
            return await self.scaled_tree(src, dst, args, dryrun, files, write_options)
        if remote_to_remote:
            return await self.copy_tree(s, d, args, dryrun, write_options)
        engine, backends = self.host.engine, self.host.backends
        run = Run(dryrun, write_options=write_options, no_clobber=keeps(overwrite))
        if s.is_local and not d.is_local:
            backend = await backends.writable(d, write_options)
            run.write_options = self.guarded(backend, write_options, overwrite)
            root = existing_dir(Path(src))
            jobs = await plan_upload(engine, run, root, backend, as_prefix(d.key), args)
        elif d.is_local and not s.is_local:
            backend = await backends.open(s)
            root = dest_dir(Path(dst))
            jobs = await plan_download(engine, run, backend, as_prefix(s.key), root, args)
        else:
            raise local_remote_error(s, d)
        await engine.execute(jobs, run)
        return run.finish()

    async def move(
        self,
        src: str,
        dst: str,
        *,
        recursive: bool,
        filters: FilterSpec,
        dryrun: bool,
        write_options: WriteOptions | None,
        no_clobber: bool,
        raw: bool,
        version_id: str | None = None,
    ) -> TransferResult:
        s, d = parse_location(src), parse_location(dst)
        if version_id is not None:  # that version moves: read, then deleted, by its view
            from .._versions import check_versioned, check_versioned_copy

            check_versioned_copy(s, recursive, None)
            check_versioned(s, version_id)
            raw = True
        if s.is_local and d.is_local:
            raise local_remote_error(s, d)
        engine, backends = self.host.engine, self.host.backends
        run = Run(dryrun, write_options=write_options, no_clobber=no_clobber)
        overwrite = overwrite_of(no_clobber)
        jobs: Sequence[Job]
        if not raw and await self.is_wildcard(s, recursive):
            jobs = await self.wildcard_jobs(run, s, d, filters, write_options, overwrite)
        elif not recursive:
            one: UploadJob | DownloadJob | CopyJob
            if s.is_local:
                one = await self.upload_job(src, dst, write_options)
                run.write_options = self.guarded(one.backend, write_options, overwrite)
            elif d.is_local:
                one = await self.download_job(src, dst, "move", version_id)
            else:
                one = await self.copy_one_job(s, d, "move", write_options, version_id)
            why = await kept_single(one, overwrite) if overwrite else None
            if why is not None:
                engine.skipped(run, one, why)
                return run.finish()
            jobs = [one]
        else:
            args = PlanArgs(
                Filters(filters), Compare.ALWAYS, False, self.follow_symlinks, overwrite
            )
            if s.is_local:
                backend = await backends.writable(d, write_options)
                run.write_options = self.guarded(backend, write_options, overwrite)
                root = existing_dir(Path(src))
                jobs = await plan_upload(engine, run, root, backend, as_prefix(d.key), args)
            elif d.is_local:
                backend = await backends.open(s)
                root = dest_dir(Path(dst))
                prefix = as_prefix(s.key)
                jobs = await plan_download(engine, run, backend, prefix, root, args)
            else:
                backends.check_endpoints(s, d)
                if (s.scheme, s.bucket) == (d.scheme, d.bucket):
                    a, b = as_prefix(s.key), as_prefix(d.key)
                    if a.startswith(b) or b.startswith(a):
                        raise ConfigError(f"cannot move {s} into itself ({d})")
                sb, db = await backends.open(s), await backends.writable(d, write_options)
                prefix = as_prefix(d.key)
                jobs = await plan_copy(engine, run, sb, as_prefix(s.key), db, prefix, args)
        await engine.execute(jobs, run)
        # A file that failed, or that the store kept (a conditional write), keeps its source.
        failed = {failure.path for failure in run.result.failures} | run.kept
        await engine.execute(source_deletes([j for j in jobs if j.src not in failed]), run)
        return run.finish()

    async def rm(
        self,
        url: str,
        *,
        recursive: bool,
        filters: FilterSpec,
        dryrun: bool,
        version_id: str | None,
        all_versions: bool = False,
    ) -> TransferResult:
        loc = remote(url)
        if all_versions:  # every version and delete marker (synxfer._versions)
            from .._versions import all_versions_jobs, check_all_versions

            check_all_versions(loc, recursive, version_id)
            backend = await self.host.backends.open(loc)
            versions = await all_versions_jobs(backend, loc, recursive, filters)
            return await self.execute(versions, dryrun)
        if version_id is not None:
            from .._versions import check_versioned

            check_versioned(loc, version_id)
        backend = await self.host.backends.open(loc)
        if version_id is not None:
            from .._versions import delete_version_view

            view = await delete_version_view(backend, loc, version_id, recursive, filters)
            return await self.execute([DeleteRemoteJob(view, [loc.key])], dryrun)
        if not recursive:
            loc = await sole_object(backend, loc)
            if not loc.key:
                raise prefix_error(url, "delete")
            if loc.key.endswith("/"):
                # A folder marker (a key ending in "/") is an object: aws s3 rm
                # deletes it. Without one, the URL names a prefix only.
                await stat_marker(backend, loc.key, url)
            else:
                # Deleting a missing key succeeds on object stores: say so instead.
                await stat_object(backend, loc.key, url, "delete")
            return await self.execute([DeleteRemoteJob(backend, [loc.key])], dryrun)
        prefix = as_prefix(loc.key)
        flt = Filters(filters)
        # Folder markers too (the prefix's own included): nothing is left behind.
        listed = await list_remote(backend, prefix, markers=True)
        keys = [info.key for rel, info in listed.items() if flt.included(rel)]
        return await self.execute(delete_jobs(backend, keys), dryrun)

    async def empty_bucket(self, backend: Backend, dryrun: bool) -> TransferResult:
        """Delete every object of ``backend``'s bucket (``rb --force``)."""
        listed = await list_remote(backend, "", markers=True)
        return await self.execute(delete_jobs(backend, [i.key for i in listed.values()]), dryrun)

    # -- the pieces ----------------------------------------------------------

    async def execute(
        self, jobs: Sequence[Job], dryrun: bool, write_options: WriteOptions | None = None
    ) -> TransferResult:
        run = Run(dryrun, write_options=write_options)
        await self.host.engine.execute(jobs, run)
        return run.finish()

    async def is_wildcard(self, loc: Location, recursive: bool) -> bool:
        """Whether the source ``loc`` is a glob: it has ``*``, ``?`` or ``[``
        and names nothing as it is -- a file or object called ``a[1].txt``
        (one stat) is itself, and so is a prefix ending in ``/`` copied with
        ``recursive`` (fsspec and scripts pass such names as they are)."""
        if loc.scheme in ("http", "https"):
            return False  # a URL's "?" starts its query, and the web cannot be listed
        text = str(loc.path) if loc.is_local else loc.key
        if not has_magic(text):
            return False
        if loc.is_local:
            return not os.path.lexists(text)
        if recursive and text.endswith("/"):
            return False
        try:
            await (await self.host.backends.open(loc)).stat(text)
        except BucketNotFound:
            raise
        except NotFound:
            return True
        return False

    def guarded(
        self, backend: Backend, write_options: WriteOptions | None, overwrite: frozenset[Overwrite]
    ) -> WriteOptions | None:
        """``write_options`` as conditional writes (``if_none_match``) when
        ``--no-clobber`` alone is asked and the destination honours them:
        an object written after the listing or HEAD is then kept too."""
        if not keeps(overwrite):
            return write_options
        if "if_none_match" not in backend.capabilities.write_options:
            return write_options  # the listing or HEAD before the write decides alone
        config = self.host.engine.config
        base = config.write_options if write_options is None else write_options
        return replace(base, if_none_match=True)

    async def single(
        self,
        job: UploadJob | DownloadJob | CopyJob,
        dryrun: bool,
        write_options: WriteOptions | None,
        overwrite: frozenset[Overwrite],
    ) -> TransferResult:
        """Run one file's job, unless ``overwrite`` keeps its existing destination."""
        engine = self.host.engine
        run = Run(dryrun, write_options=write_options, no_clobber=keeps(overwrite))
        why = await kept_single(job, overwrite) if overwrite else None
        if why is not None:
            engine.skipped(run, job, why)
            return run.finish()
        await engine.execute([job], run)
        return run.finish()

    async def wildcard_jobs(
        self,
        run: Run,
        s: Location,
        d: Location,
        filters: FilterSpec,
        write_options: WriteOptions | None,
        overwrite: frozenset[Overwrite],
    ) -> list[Job]:
        """The jobs of a wildcard source (see :meth:`synxfer.Client.copy`);
        NotFound when it matches nothing."""
        if s.is_local and d.is_local:
            raise local_remote_error(s, d)
        engine, backends = self.host.engine, self.host.backends
        sep = os.sep if s.is_local else "/"
        text = str(s.path) if s.is_local else s.key
        base, start, pattern = split_glob(text, sep)
        if s.is_local and sep != "/":
            pattern = pattern.replace(sep, "/")
        flt = Filters(filters).within(pattern)
        jobs: list[Job]
        if s.is_local:
            args = PlanArgs(flt, Compare.ALWAYS, False, self.follow_symlinks, overwrite)
            backend = await backends.writable(d, write_options)
            run.write_options = self.guarded(backend, write_options, overwrite)
            root = Path(base or ".")
            if not root.is_dir():
                raise NotFound(f"{s}: no file matches the wildcard ({root} is no directory)")
            jobs = await plan_upload(engine, run, root, backend, as_prefix(d.key), args)
        else:
            args = PlanArgs(flt, Compare.ALWAYS, False, self.follow_symlinks, overwrite, start)
            src = await backends.open(s)
            if d.is_local:
                root = dest_dir(Path(os.fspath(d.path or "")))
                jobs = await plan_download(engine, run, src, base, root, args)
            else:
                backends.check_endpoints(s, d)
                dst = await backends.writable(d, write_options)
                prefix = as_prefix(d.key)
                jobs = await plan_copy(engine, run, src, base, dst, prefix, args)
        result = run.result
        if not jobs and not result.files_skipped and not result.failures:
            raise NotFound(
                f"{s}: no {'file' if s.is_local else 'object'} matches the wildcard "
                "(give --raw to take '*', '?' and '[' literally)",
                url=None if s.is_local else str(s),
            )
        return jobs

    async def wildcard(
        self,
        s: Location,
        d: Location,
        filters: FilterSpec,
        dryrun: bool,
        write_options: WriteOptions | None,
        overwrite: frozenset[Overwrite],
    ) -> TransferResult:
        run = Run(dryrun, write_options=write_options, no_clobber=keeps(overwrite))
        jobs = await self.wildcard_jobs(run, s, d, filters, write_options, overwrite)
        await self.host.engine.execute(jobs, run)
        return run.finish()

    async def scaled_tree(
        self,
        src: str,
        dst: str,
        args: PlanArgs,
        dryrun: bool,
        files: FileList | None,
        write_options: WriteOptions | None = None,
    ) -> TransferResult:
        """A tree for scale-out (refused here when it cannot go there)."""
        if args.overwrite:
            raise not_scaled(args.overwrite)
        if self.customer_keys and self.wide:
            raise ConfigError(
                "a customer-provided encryption key (--sse-c) is never sent to worker "
                "processes: run without --processes / --dask (TransferConfig.processes, dask=)"
            )
        d = parse_location(dst)
        if not d.is_local:
            await self.host.backends.writable(d, write_options)  # refused here, not in shards
        return await self.scale_out(self.host, src, dst, args, dryrun, files, write_options)

    async def copy_tree(
        self,
        s: Location,
        d: Location,
        args: PlanArgs,
        dryrun: bool,
        write_options: WriteOptions | None = None,
    ) -> TransferResult:
        """Everything under one remote prefix to another (copy or sync)."""
        engine, backends = self.host.engine, self.host.backends
        backends.check_endpoints(s, d)
        src, dst = await backends.open(s), await backends.writable(d, write_options)
        run = Run(dryrun, write_options=write_options)
        jobs = await plan_copy(engine, run, src, as_prefix(s.key), dst, as_prefix(d.key), args)
        await engine.execute(jobs, run)
        return run.finish()


# -- helpers ---------------------------------------------------------------------


def names_objects(scheme: str) -> bool:
    """Whether a bare URL of ``scheme`` may name one object (its backend class
    has :meth:`~synxfer.backend.Backend.sole_key`: ``syn://syn456``)."""
    from ..backend import resolve

    try:
        factory = resolve(scheme)
    except UnknownScheme:
        return False  # said when the backend is opened, as before
    return (
        isinstance(factory, type)
        and issubclass(factory, Backend)
        and factory.sole_key is not Backend.sole_key
    )


async def sole_object(backend: Backend, loc: Location) -> Location:
    """``loc`` with the key its bare URL names (:meth:`Backend.sole_key`:
    ``syn://syn456`` is the File syn456's name), else ``loc`` as it is."""
    if loc.key or not names_objects(loc.scheme):
        return loc
    key = await backend.sole_key()
    return loc if key is None else replace(loc, key=key)


def remote(url: str) -> Location:
    """``url`` as a remote location; a local path is a ConfigError."""
    loc = parse_location(url)
    if loc.is_local:
        raise ConfigError(f"{url!r} is a local path; expected a URL like s3://bucket/key")
    return loc


def plan_args(options: Mapping[str, Any], follow_symlinks: bool) -> PlanArgs:
    """Validate sync options into the planner's arguments."""
    modes = (Compare.SIZE_ONLY, Compare.EXACT_TIMESTAMPS, Compare.CHECKSUM)
    chosen = [m for m in modes if options.get(m.value.replace("-", "_"), False)]
    if len(chosen) > 1:
        names = " and ".join(f"{m.value.replace('-', '_')}=True" for m in chosen)
        raise ConfigError(f"{names} cannot be combined; choose one way to compare")
    flt = Filters.build(
        options.get("filters", ()), options.get("exclude", ()), options.get("include", ())
    )
    mode = chosen[0] if chosen else Compare.DEFAULT
    overwrite = overwrite_of(options.get("no_clobber", False))
    return PlanArgs(flt, mode, options.get("delete", False), follow_symlinks, overwrite)


def overwrite_of(
    no_clobber: bool, if_size_differ: bool = False, if_source_newer: bool = False
) -> frozenset[Overwrite]:
    """The ``--no-clobber``/``--if-size-differ``/``--if-source-newer`` asked."""
    chosen = (
        (no_clobber, Overwrite.NO_CLOBBER),
        (if_size_differ, Overwrite.IF_SIZE_DIFFER),
        (if_source_newer, Overwrite.IF_SOURCE_NEWER),
    )
    return frozenset(kind for on, kind in chosen if on)


def keeps(overwrite: frozenset[Overwrite]) -> bool:
    """``--no-clobber`` alone: no later condition may allow a replacement."""
    return overwrite == {Overwrite.NO_CLOBBER}


def not_scaled(overwrite: frozenset[Overwrite]) -> ConfigError:
    names = " and ".join(f"--{kind.value}" for kind in sorted(overwrite, key=lambda k: k.value))
    return ConfigError(
        f"{names} cannot be combined with --files-from, --processes or --dask yet: "
        "leave one of them out"
    )


async def kept_single(
    job: UploadJob | DownloadJob | CopyJob, overwrite: frozenset[Overwrite]
) -> str | None:
    """Why one file's existing destination stays (a HEAD, or a local stat), or None."""
    if isinstance(job, DownloadJob):
        try:
            st = await asyncio.to_thread(os.stat, job.dest)
        except FileNotFoundError:
            return None
        info = await job.backend.stat(job.key)
        return kept(overwrite, info.size, object_time_ns(info), st.st_size, st.st_mtime_ns)
    try:
        theirs = await job.backend.stat(job.key)
    except BucketNotFound:
        raise
    except NotFound:
        return None
    src_ns: int | None
    if isinstance(job, UploadJob):
        st = await asyncio.to_thread(os.stat, job.path)
        src_size, src_ns = st.st_size, st.st_mtime_ns
    else:
        info = await job.src_backend.stat(job.src_key)
        src_size, src_ns = info.size, object_time_ns(info)
    return kept(overwrite, src_size, src_ns, theirs.size, object_time_ns(theirs))


def existing_file(path: Path) -> Path:
    if not path.exists():
        if path.is_symlink():
            raise ConfigError(
                f"{path} is a symbolic link to {os.readlink(path)!r}, which does not exist"
            )
        raise ConfigError(f"{path}: no such file")
    if path.is_dir():
        raise ConfigError(f"{path} is a directory: copy it with recursive=True, or sync it")
    if (kind := special_file(path)) is not None:
        # Opening a pipe waits for a writer; its size is unknown: a stream, not a file.
        raise ConfigError(f"{path} is a {kind}, not a file: upload it with Client.put_stream")
    return path


def special_file(path: Path) -> str | None:
    """What ``path`` is if it exists and is neither a regular file nor a
    directory (``named pipe``, ``character device``...), else None."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    for test, kind in (
        (stat.S_ISFIFO, "named pipe"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return kind
    return None


def prefix_error(url: str, verb: str) -> ConfigError:
    if verb == "read":  # a stream (get_stream, open, cat) reads one object: no recursive=
        return ConfigError(
            f"{url} names a prefix, not an object: name one object under it, "
            f"like {url.rstrip('/')}/KEY"
        )
    return ConfigError(
        f"{url} names a prefix, not an object: {verb} everything under it with recursive=True"
    )


async def stat_object(backend: Backend, key: str, url: str, verb: str) -> ObjectInfo:
    """The object's info; a missing key that is a prefix says to use ``recursive``.

    Raises NotFound (BucketNotFound for a missing bucket) naming ``url`` otherwise.
    """
    try:
        return await backend.stat(key)
    except BucketNotFound:
        raise
    except NotFound as exc:
        page = await backend.list_page(key + "/")
        if page.items:
            raise prefix_error(url, verb) from None
        raise NotFound(f"{url}: no such object", url=url, status=exc.status) from None


async def stat_marker(backend: Backend, key: str, url: str) -> ObjectInfo:
    """The folder marker ``key`` (ending in ``/``); a prefix without one says
    to use ``recursive``, and nothing at all raises NotFound naming ``url``."""
    try:
        return await backend.stat(key)
    except BucketNotFound:
        raise
    except NotFound as exc:
        if (await backend.list_page(key)).items:
            raise prefix_error(url, "delete") from None
        raise NotFound(f"{url}: no such object", url=url, status=exc.status) from None


def source_deletes(done: Sequence[Job]) -> list[Job]:
    """Jobs deleting the sources of ``done`` transfers (remote keys batched by backend)."""
    local: list[Job] = []
    keys: dict[int, tuple[Backend, list[str]]] = {}
    for job in done:
        if isinstance(job, UploadJob):
            local.append(DeleteLocalJob(job.path, src=job.src))
        elif isinstance(job, DownloadJob):
            keys.setdefault(id(job.backend), (job.backend, []))[1].append(job.key)
        elif isinstance(job, CopyJob):
            keys.setdefault(id(job.src_backend), (job.src_backend, []))[1].append(job.src_key)
    remote_jobs = [j for backend, names in keys.values() for j in delete_jobs(backend, names)]
    return local + remote_jobs
