"""The Client: the public entry point for every transfer.

A client owns one engine (and its scheduler, so every limit: requests, files,
memory, threads) and one backend stack per bucket it touches, opened on first
use and closed with the client. Operations that cannot start (a missing local
directory, a missing bucket, a malformed URL) raise; once an operation runs, a
file that fails is recorded in the :class:`~synxfer.TransferResult` and the
rest go on.

A client belongs to the event loop it is first used on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import posixpath
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, TypedDict, Unpack

from ._config import TransferConfig, check_capabilities, check_write_options
from ._customer_key import CustomerKey
from ._exceptions import BucketNotFound, ConfigError, NotFound
from ._models import BucketInfo, Event, ObjectInfo, TransferResult, WriteOptions
from ._url import Location, parse_location
from ._versions import (
    check_versioned,
    check_versioned_copy,
    delete_version_view,
    listed_versions,
    refuse_unversioned,
    stat_version,
    version_view,
)
from .backend import Backend, BackendOptions, customer_key, open_backend, resolve
from .engine.compare import Compare, Overwrite, kept, object_time_ns
from .engine.core import Engine, Job, Run
from .engine.filters import Filters, has_magic, split_glob
from .engine.jobs import CopyJob, DeleteLocalJob, DeleteRemoteJob, DownloadJob, UploadJob
from .engine.plan import (
    PlanArgs,
    delete_jobs,
    list_remote,
    plan_copy,
    plan_download,
    plan_upload,
)
from .engine.stream import (
    BytesReader,
    ObjectReader,
    ObjectStream,
    Readable,
    Writable,
    upload_stream,
    write_to,
)
from .engine.tree import TreeHost, as_prefix, dest_dir, existing_dir, local_remote_error
from .engine.verify import retry_mismatch
from .layers import LimitLayer, RetryLayer, TimeoutLayer

if TYPE_CHECKING:
    from ._scaleout import ClientSettings

__all__ = ["Client"]

PathLike = str | os.PathLike[str]
FilterSpec = Sequence[tuple[str, str]]


class SyncOptions(TypedDict, total=False):
    """Keyword arguments of :meth:`Client.sync_to`, :meth:`~Client.sync_from`
    and :meth:`~Client.sync`.

    ``delete``: remove destination files the source lacks. ``filters``: an
    ordered list of ``("exclude"|"include", glob)``; ``exclude``/``include``
    are appended to it in that order; the last matching filter decides, as in
    aws-cli. ``dryrun``: report, transfer nothing. ``size_only``,
    ``exact_timestamps``, ``checksum``: how files are compared (one at most).
    ``files``: only these, names relative to both roots (or ``(source name,
    destination name)`` pairs), each compared as a sync compares it
    (``--files-from``; not with ``delete``). ``write_options``: the object
    options of what this call writes, in place of
    ``TransferConfig.write_options``. ``no_clobber``: never replace a file or
    object that exists at the destination (aws-cli#2874; see :meth:`Client.copy`).
    """

    delete: bool
    filters: FilterSpec
    exclude: Sequence[str]
    include: Sequence[str]
    dryrun: bool
    size_only: bool
    exact_timestamps: bool
    checksum: bool
    files: Sequence[str | tuple[str, str]]
    write_options: WriteOptions
    no_clobber: bool


class Client:
    """Transfers files between local disk and object stores.

    ``config`` sets every limit (see :class:`~synxfer.TransferConfig`).
    ``endpoint_url``, ``region`` and ``profile`` are passed to every backend
    (as with aws-cli's options of the same names); ``endpoints`` gives a
    scheme its own endpoint (``{"s3": "http://…"}``), which a copy between
    two services needs (``endpoint_url`` alone is refused there with a
    ConfigError: it would be sent to both). Without either, each service's
    own setting applies: ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` for
    ``s3``, ``STORAGE_EMULATOR_HOST`` for ``gs``, ``SCP_ENDPOINT_URL`` for
    ``scp``. ``backend_options`` passes backend-specific settings
    by scheme (``{"blocks": {"cluster": "sites.toml"}}``, which become
    ``BackendOptions.extra``). ``on_event`` receives progress
    :class:`~synxfer.Event` objects on the event loop; keep it quick.
    Symlinks in local sources are skipped unless ``follow_symlinks``.
    ``layers`` wrap every backend the client opens, innermost first, inside
    the client's own retry and concurrency layers (so a fault-injecting
    layer's errors are retried like real ones).
    ``dask`` runs tree operations on Dask (the ``synxfer[dask]`` extra): a
    ``distributed.Client``, a scheduler address, or ``"local:N"`` for N
    worker processes here; ``config.processes`` runs them on this machine's
    cores (docs/scaling.md).

    Objects written (uploads, remote copies) get ``config.write_options``
    (:class:`~synxfer.WriteOptions`: content type, storage class, encryption,
    ACL, metadata...), or a call's ``write_options=``; an option the
    destination does not honour is a ConfigError before anything moves.

    ``sse_c_read_key`` and ``sse_c_write_key`` are customer-provided
    encryption keys (S3's SSE-C; a :class:`~synxfer.CustomerKey`, or
    its 32 raw bytes): the first is sent on every request that reads an
    object (HEAD, ranged GET, the source of a server-side copy), the second
    on every request that writes one (put, each part, complete, a copy's
    destination). aws-cli's ``--sse-c-key`` is the write key of an upload
    or a copy and the read key of a download; ``--sse-c-copy-source-key``
    the read key of a copy. A store that cannot take them refuses them
    (ConfigError); they are never shown, logged or written to the journal,
    and not sent to worker processes (``processes``/``dask`` refuse them).
    """

    def __init__(
        self,
        config: TransferConfig | None = None,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        profile: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        follow_symlinks: bool = False,
        layers: Sequence[Callable[[Backend], Backend]] = (),
        endpoints: Mapping[str, str] | None = None,
        backend_options: Mapping[str, Mapping[str, str]] | None = None,
        dask: object | None = None,
        sse_c_read_key: CustomerKey | bytes | str | None = None,
        sse_c_write_key: CustomerKey | bytes | str | None = None,
    ) -> None:
        self.config = config or TransferConfig()
        self._dask = dask
        self._layers = tuple(layers)
        self._endpoints = {k.lower(): v for k, v in (endpoints or {}).items()}
        self._extra = {k.lower(): dict(v) for k, v in (backend_options or {}).items()}
        self.follow_symlinks = follow_symlinks
        self._engine = Engine(self.config, on_event)
        # Backends get the scheduler's request limiter for the calls they fan
        # out; the LimitLayer of every stack holds the same one for the rest.
        self._options = BackendOptions(
            endpoint_url=endpoint_url,
            region=region,
            profile=profile,
            max_connections=self.config.max_threads,
            connect_timeout=self.config.connect_timeout,
            read_timeout=self.config.read_timeout,
            requests=self._engine.scheduler.requests,
            sse_c_read_key=customer_key(sse_c_read_key, "Client(sse_c_read_key=...)"),
            sse_c_write_key=customer_key(sse_c_write_key, "Client(sse_c_write_key=...)"),
        )
        self._backends: dict[tuple[str, str], Backend] = {}
        self._lock = asyncio.Lock()
        self._closed = False

    def __repr__(self) -> str:
        c = self.config
        return (
            f"<Client max_threads={c.max_threads} max_files={c.max_files} part_size={c.part_size}>"
        )

    # -- lifecycle -----------------------------------------------------------

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every backend and the worker threads. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        backends, self._backends = list(self._backends.values()), {}
        for backend in backends:
            await backend.aclose()
        self._engine.close()

    async def backend(self, url: str) -> tuple[Backend, str]:
        """The (layered, opened) backend serving ``url``, and the key in it."""
        loc = self._remote(url)
        return await self._backend(loc), loc.key

    async def _backend(self, loc: Location) -> Backend:
        if self._closed:
            raise ConfigError("this Client is closed")
        ident = (loc.scheme, loc.bucket)
        async with self._lock:
            backend = self._backends.get(ident)
            if backend is None:
                inner = open_backend(loc.scheme, loc.bucket, self._options_for(loc))
                for layer in self._layers:
                    inner = layer(inner)
                if self.config.min_throughput:
                    inner = TimeoutLayer(
                        inner,
                        self.config.read_timeout,
                        self.config.min_throughput,
                        self.config.part_size,
                    )
                backend = RetryLayer(
                    LimitLayer(inner, self._engine.scheduler.requests),
                    self.config.retry,
                    self._engine.on_retry,
                )
                await backend.open()
                try:
                    # Its limits are known now: refuse values that cannot work.
                    check_capabilities(self.config, backend.capabilities, backend.url(""))
                    self._check_customer_keys(backend)
                except ConfigError:
                    await backend.aclose()
                    raise
                self._backends[ident] = backend
        return backend

    def _check_customer_keys(self, backend: Backend) -> None:
        """ConfigError if SSE-C keys are set for a backend that cannot send them."""
        o = self._options
        if (o.sse_c_read_key or o.sse_c_write_key) and not backend.capabilities.customer_keys:
            raise ConfigError(
                f"{backend.url('')} cannot use a customer-provided encryption key "
                "(--sse-c / Client(sse_c_read_key=..., sse_c_write_key=...)): only s3:// "
                "stores take SSE-C; leave the key out for this location"
            )

    def _options_for(self, loc: Location, **changes: object) -> BackendOptions:
        """The backend options of ``loc``'s scheme: the client's, with the
        scheme's own endpoint and settings (and ``changes``)."""
        options = self._options
        if loc.scheme in self._endpoints:
            options = replace(options, endpoint_url=self._endpoints[loc.scheme])
        if loc.scheme in self._extra:
            options = replace(options, extra=self._extra[loc.scheme])
        return replace(options, **changes) if changes else options  # type: ignore[arg-type]

    async def _writable(self, loc: Location, write_options: WriteOptions | None) -> Backend:
        """The backend of ``loc``, which objects will be written to with
        ``write_options`` (None: the config's): ConfigError, before anything
        moves, if it cannot honour one of them."""
        backend = await self._backend(loc)
        options = self.config.write_options if write_options is None else write_options
        check_write_options(options, backend.capabilities, backend.url(""))
        return backend

    def _check_endpoints(self, *locations: Location) -> None:
        """``endpoint_url`` serves one service: refuse it for two unless each has its own.

        ``file://`` is no service (it has no endpoint). Schemes named in
        ``endpoints`` take theirs, so at most one may be left to ``endpoint_url``.
        """
        if self._options.endpoint_url is None:
            return
        unnamed = sorted(
            {loc.scheme for loc in locations if loc.scheme != "file"} - self._endpoints.keys()
        )
        if len(unnamed) > 1:
            schemes = " and ".join(f"{scheme}://" for scheme in unnamed)
            example = ", ".join(f'"{scheme}": "https://..."' for scheme in unnamed)
            raise ConfigError(
                f"endpoint_url is ambiguous for a copy between {schemes}: it would be sent "
                f"to both services; give each its own endpoint, endpoints={{{example}}}"
            )

    @staticmethod
    def _remote(url: str) -> Location:
        loc = parse_location(url)
        if loc.is_local:
            raise ConfigError(f"{url!r} is a local path; expected a URL like s3://bucket/key")
        return loc

    # -- single files --------------------------------------------------------

    async def upload_file(
        self,
        path: PathLike,
        url: str,
        *,
        dryrun: bool = False,
        write_options: WriteOptions | None = None,
    ) -> TransferResult:
        """Upload one local file. A URL ending in ``/`` gets the file's name.

        ``write_options``: the object's options, in place of
        ``TransferConfig.write_options``.
        """
        job = await self._upload_job(path, url, write_options)
        return await self._execute([job], dryrun, write_options)

    async def _upload_job(
        self, path: PathLike, url: str, write_options: WriteOptions | None = None
    ) -> UploadJob:
        src = _existing_file(Path(path))
        loc = self._remote(url)
        key = loc.key + src.name if not loc.key or loc.key.endswith("/") else loc.key
        backend = await self._writable(loc, write_options)
        return UploadJob(src, backend, key, src.stat().st_size)

    async def download_file(
        self, url: str, path: PathLike, *, dryrun: bool = False, version_id: str | None = None
    ) -> TransferResult:
        """Download one object. An existing directory (or a path ending in
        ``/``) as ``path`` receives the object under its own name.
        ``version_id``: that version of the object (docs/versions.md)."""
        job = await self._download_job(url, path, version_id=version_id)
        return await self._execute([job], dryrun)

    async def _download_job(
        self, url: str, path: PathLike, verb: str = "copy", version_id: str | None = None
    ) -> DownloadJob:
        loc = self._remote(url)
        if version_id is not None:
            check_versioned(loc, version_id)  # before the backend is opened
        backend = await self._backend(loc)
        if version_id is not None:
            backend = version_view(backend, loc, version_id)
            info = await stat_version(backend, loc.key, url, version_id)
        elif not loc.key or loc.key.endswith("/"):
            raise _prefix_error(url, verb)
        else:
            info = await _stat_object(backend, loc.key, url, verb)
        dest = Path(path)
        if dest.is_dir() or str(path).endswith(("/", os.sep)):
            name = loc.key
            if loc.scheme in ("http", "https"):
                name = name.split("?", 1)[0]  # a pre-signed URL's query is no name
            dest = dest / posixpath.basename(name)
        return DownloadJob(backend, loc.key, dest, info.size, etag=info.etag)

    # -- trees ---------------------------------------------------------------

    async def sync_to(
        self, local: PathLike, url: str, **options: Unpack[SyncOptions]
    ) -> TransferResult:
        """Make ``url`` (a prefix, treated as a directory) like the local directory.

        Files are copied when missing or different (see ``synxfer.engine.compare``
        for the rules); with ``delete``, objects the source lacks are removed.
        See :class:`SyncOptions` for the options.
        """
        if self._scaled(options.get("files")):
            args = _plan_args(options, self.follow_symlinks)
            files, dryrun = options.get("files"), options.get("dryrun", False)
            return await self._scale_out(
                local, url, args, dryrun, files, options.get("write_options")
            )
        root = existing_dir(Path(local))
        loc = self._remote(url)
        write_options = options.get("write_options")
        backend = await self._writable(loc, write_options)
        overwrite = _overwrite(options.get("no_clobber", False))
        write_options = self._guarded(backend, write_options, overwrite)
        run = Run(options.get("dryrun", False), write_options=write_options)
        jobs = await plan_upload(
            self._engine,
            run,
            root,
            backend,
            as_prefix(loc.key),
            _plan_args(options, self.follow_symlinks),
        )
        await self._engine.execute(jobs, run)
        return run.finish()

    async def sync_from(
        self, url: str, local: PathLike, **options: Unpack[SyncOptions]
    ) -> TransferResult:
        """Make the local directory like ``url``; the mirror of :meth:`sync_to`.

        Object keys that would land outside ``local`` (``..``, absolute
        names) are refused and reported as failures; nothing is written for
        them.
        """
        if self._scaled(options.get("files")):
            args = _plan_args(options, self.follow_symlinks)
            files, dryrun = options.get("files"), options.get("dryrun", False)
            return await self._scale_out(url, local, args, dryrun, files)
        loc = self._remote(url)
        root = dest_dir(Path(local))
        backend = await self._backend(loc)
        run = Run(options.get("dryrun", False), no_clobber=options.get("no_clobber", False))
        jobs = await plan_download(
            self._engine,
            run,
            backend,
            as_prefix(loc.key),
            root,
            _plan_args(options, self.follow_symlinks),
        )
        await self._engine.execute(jobs, run)
        return run.finish()

    async def sync(
        self, src: PathLike, dst: PathLike, **options: Unpack[SyncOptions]
    ) -> TransferResult:
        """:meth:`sync_to` or :meth:`sync_from`, whichever side is local; between
        two remote locations, a copy (server-side within a bucket, else streamed
        through memory, never via local disk)."""
        s, d = parse_location(_str(src)), parse_location(_str(dst))
        if s.is_local and not d.is_local:
            return await self.sync_to(_str(src), _str(dst), **options)
        if d.is_local and not s.is_local:
            return await self.sync_from(_str(src), _str(dst), **options)
        if not s.is_local and not d.is_local:
            if self._scaled(options.get("files")):
                args, dryrun = _plan_args(options, False), options.get("dryrun", False)
                files, write_options = options.get("files"), options.get("write_options")
                return await self._scale_out(src, dst, args, dryrun, files, write_options)
            return await self._copy_tree(
                s,
                d,
                _plan_args(options, False),
                options.get("dryrun", False),
                options.get("write_options"),
            )
        raise local_remote_error(s, d)

    async def copy(
        self,
        src: PathLike,
        dst: PathLike,
        *,
        recursive: bool = False,
        filters: FilterSpec = (),
        dryrun: bool = False,
        files: Sequence[str | tuple[str, str]] | None = None,
        write_options: WriteOptions | None = None,
        no_clobber: bool = False,
        if_size_differ: bool = False,
        if_source_newer: bool = False,
        raw: bool = False,
        version_id: str | None = None,
    ) -> TransferResult:
        """Copy a file or (``recursive``) a directory, without comparing: ``aws s3 cp``.

        ``files``: only these, names relative to both directories (implies
        ``recursive``; see :class:`SyncOptions`). ``write_options``: the
        object options of what it writes, in place of
        ``TransferConfig.write_options``.

        A source with ``*``, ``?`` or ``[...]`` is a wildcard, as in s5cmd
        (``s3://b/logs/2026-*/*.gz``, ``./data/*.csv``): every file it
        matches (``*`` also matches ``/``, as ``--include`` does) is copied
        into ``dst``, a directory or prefix, under its name below the
        wildcard's directory (``s3://b/a/*/x`` gives ``dst/<dir>/x``). A
        remote listing starts at the pattern's literal part. No match raises
        NotFound. ``raw``: take the source literally (a key with ``*``).

        What exists at the destination is replaced unless: ``no_clobber``
        (never; uploads to a store that honours ``WriteOptions.if_none_match``
        are also conditional writes, so a file written meanwhile is kept),
        ``if_size_differ`` (only when the sizes differ), ``if_source_newer``
        (only when the source is newer). Given several, the last of those
        three decides, as in s5cmd. A file kept is a skip, not a failure.

        ``version_id``: copy that version of the source object (one object,
        taken literally; docs/versions.md).
        """
        s, d = parse_location(_str(src)), parse_location(_str(dst))
        if version_id is not None:
            check_versioned_copy(s, recursive, files)
            check_versioned(s, version_id)
            raw = True
        remote_to_remote = not s.is_local and not d.is_local
        overwrite = _overwrite(no_clobber, if_size_differ, if_source_newer)
        if overwrite and self._scaled(files):
            raise _not_scaled(overwrite)
        if not raw and await self._is_wildcard(s, recursive):
            return await self._wildcard(s, d, filters, dryrun, write_options, overwrite)
        if not recursive and files is None:
            job: UploadJob | DownloadJob | CopyJob
            if s.is_local and not d.is_local:
                job = await self._upload_job(_str(src), _str(dst), write_options)
                write_options = self._guarded(job.backend, write_options, overwrite)
                return await self._single(job, dryrun, write_options, overwrite)
            if d.is_local and not s.is_local:
                job = await self._download_job(_str(src), _str(dst), version_id=version_id)
                return await self._single(job, dryrun, None, overwrite)
            if remote_to_remote:
                job = await self._copy_one_job(
                    s, d, write_options=write_options, version_id=version_id
                )
                return await self._single(job, dryrun, write_options, overwrite)
            raise local_remote_error(s, d)
        args = PlanArgs(Filters(filters), Compare.ALWAYS, False, self.follow_symlinks, overwrite)
        if self._scaled(files):
            return await self._scale_out(src, dst, args, dryrun, files, write_options)
        if remote_to_remote:
            return await self._copy_tree(s, d, args, dryrun, write_options)
        run = Run(dryrun, write_options=write_options, no_clobber=_keeps(overwrite))
        if s.is_local and not d.is_local:
            backend = await self._writable(d, write_options)
            run.write_options = self._guarded(backend, write_options, overwrite)
            root = existing_dir(Path(_str(src)))
            jobs = await plan_upload(self._engine, run, root, backend, as_prefix(d.key), args)
        elif d.is_local and not s.is_local:
            backend = await self._backend(s)
            root = dest_dir(Path(_str(dst)))
            jobs = await plan_download(self._engine, run, backend, as_prefix(s.key), root, args)
        else:
            raise local_remote_error(s, d)
        await self._engine.execute(jobs, run)
        return run.finish()

    async def _is_wildcard(self, loc: Location, recursive: bool) -> bool:
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
            await (await self._backend(loc)).stat(text)
        except BucketNotFound:
            raise
        except NotFound:
            return True
        return False

    def _guarded(
        self, backend: Backend, write_options: WriteOptions | None, overwrite: frozenset[Overwrite]
    ) -> WriteOptions | None:
        """``write_options`` as conditional writes (``if_none_match``) when
        ``--no-clobber`` alone is asked and the destination honours them:
        an object written after the listing or HEAD is then kept too."""
        if not _keeps(overwrite):
            return write_options
        if "if_none_match" not in backend.capabilities.write_options:
            return write_options  # the listing or HEAD before the write decides alone
        base = self.config.write_options if write_options is None else write_options
        return replace(base, if_none_match=True)

    async def _single(
        self,
        job: UploadJob | DownloadJob | CopyJob,
        dryrun: bool,
        write_options: WriteOptions | None,
        overwrite: frozenset[Overwrite],
    ) -> TransferResult:
        """Run one file's job, unless ``overwrite`` keeps its existing destination."""
        run = Run(dryrun, write_options=write_options, no_clobber=_keeps(overwrite))
        why = await _kept_single(job, overwrite) if overwrite else None
        if why is not None:
            self._engine.skipped(run, job, why)
            return run.finish()
        await self._engine.execute([job], run)
        return run.finish()

    async def _wildcard_jobs(
        self,
        run: Run,
        s: Location,
        d: Location,
        filters: FilterSpec,
        write_options: WriteOptions | None,
        overwrite: frozenset[Overwrite],
    ) -> list[Job]:
        """The jobs of a wildcard source (see :meth:`copy`); NotFound when it
        matches nothing."""
        if s.is_local and d.is_local:
            raise local_remote_error(s, d)
        sep = os.sep if s.is_local else "/"
        text = str(s.path) if s.is_local else s.key
        base, start, pattern = split_glob(text, sep)
        if s.is_local and sep != "/":
            pattern = pattern.replace(sep, "/")
        flt = Filters(filters).within(pattern)
        jobs: list[Job]
        if s.is_local:
            args = PlanArgs(flt, Compare.ALWAYS, False, self.follow_symlinks, overwrite)
            backend = await self._writable(d, write_options)
            run.write_options = self._guarded(backend, write_options, overwrite)
            root = Path(base or ".")
            if not root.is_dir():
                raise NotFound(f"{s}: no file matches the wildcard ({root} is no directory)")
            jobs = await plan_upload(self._engine, run, root, backend, as_prefix(d.key), args)
        else:
            args = PlanArgs(flt, Compare.ALWAYS, False, self.follow_symlinks, overwrite, start)
            src = await self._backend(s)
            if d.is_local:
                root = dest_dir(Path(_str(d.path or "")))
                jobs = await plan_download(self._engine, run, src, base, root, args)
            else:
                self._check_endpoints(s, d)
                dst = await self._writable(d, write_options)
                prefix = as_prefix(d.key)
                jobs = await plan_copy(self._engine, run, src, base, dst, prefix, args)
        result = run.result
        if not jobs and not result.files_skipped and not result.failures:
            raise NotFound(
                f"{s}: no {'file' if s.is_local else 'object'} matches the wildcard "
                "(give --raw to take '*', '?' and '[' literally)",
                url=None if s.is_local else str(s),
            )
        return jobs

    async def _wildcard(
        self,
        s: Location,
        d: Location,
        filters: FilterSpec,
        dryrun: bool,
        write_options: WriteOptions | None,
        overwrite: frozenset[Overwrite],
    ) -> TransferResult:
        run = Run(dryrun, write_options=write_options, no_clobber=_keeps(overwrite))
        jobs = await self._wildcard_jobs(run, s, d, filters, write_options, overwrite)
        await self._engine.execute(jobs, run)
        return run.finish()

    def _scaled(self, files: object) -> bool:
        """Explicit files, several processes or Dask: synxfer/_scaleout runs the tree."""
        return files is not None or self.config.processes > 1 or self._dask is not None

    async def _scale_out(
        self,
        src: PathLike,
        dst: PathLike,
        args: PlanArgs,
        dryrun: bool,
        files: Sequence[str | tuple[str, str]] | None,
        write_options: WriteOptions | None = None,
    ) -> TransferResult:
        from ._scaleout import ClientSettings, run_tree

        if args.overwrite:
            raise _not_scaled(args.overwrite)
        o = self._options
        if (o.sse_c_read_key or o.sse_c_write_key) and (
            self.config.processes > 1 or self._dask is not None
        ):
            raise ConfigError(
                "a customer-provided encryption key (--sse-c) is never sent to worker "
                "processes: run without --processes / --dask (TransferConfig.processes, dask=)"
            )
        d = parse_location(_str(dst))
        if not d.is_local:
            await self._writable(d, write_options)  # refused here, not in every shard
        settings = ClientSettings(
            shard_host,
            endpoint_url=o.endpoint_url,
            region=o.region,
            profile=o.profile,
            endpoints=dict(self._endpoints),
            backend_options={k: dict(v) for k, v in self._extra.items()},
            follow_symlinks=self.follow_symlinks,
            layers=self._layers,
        )
        return await run_tree(
            self._tree_host(),
            settings,
            self._dask,
            _str(src),
            _str(dst),
            args,
            dryrun,
            files,
            write_options=write_options,
        )

    def _tree_host(self) -> TreeHost:
        """This client's engine and backends, for :mod:`synxfer.engine.tree`."""
        return TreeHost(self._engine, self.backend, self.follow_symlinks, self._check_endpoints)

    async def _copy_one(
        self, s: Location, d: Location, dryrun: bool, write_options: WriteOptions | None = None
    ) -> TransferResult:
        """One object to another remote location; a key ending in ``/`` gets its name."""
        job = await self._copy_one_job(s, d, write_options=write_options)
        return await self._execute([job], dryrun, write_options)

    async def _copy_one_job(
        self,
        s: Location,
        d: Location,
        verb: str = "copy",
        write_options: WriteOptions | None = None,
        version_id: str | None = None,
    ) -> CopyJob:
        if version_id is None and (not s.key or s.key.endswith("/")):
            raise _prefix_error(str(s), verb)
        self._check_endpoints(s, d)
        src, dst = await self._backend(s), await self._writable(d, write_options)
        if version_id is not None:
            src = version_view(src, s, version_id)
            info = await stat_version(src, s.key, str(s), version_id)
        else:
            info = await _stat_object(src, s.key, str(s), verb)
        key = d.key + posixpath.basename(s.key) if not d.key or d.key.endswith("/") else d.key
        if src is dst and key == s.key:
            raise ConfigError(f"{s} and {d} are the same object")
        return CopyJob(src, s.key, dst, key, info.size, info.etag)

    async def move(
        self,
        src: PathLike,
        dst: PathLike,
        *,
        recursive: bool = False,
        filters: FilterSpec = (),
        dryrun: bool = False,
        write_options: WriteOptions | None = None,
        no_clobber: bool = False,
        raw: bool = False,
    ) -> TransferResult:
        """Move a file or (``recursive``) a directory: ``aws s3 mv``.

        Copies as :meth:`copy` does (every transfer checked against the
        checksums its source vouches for), then deletes the source of each
        file whose copy completed, and only those: a file that failed keeps
        its source. Local to remote, remote to local and remote to remote;
        moving a location into itself is refused. Empty local directories
        are left in place. Runs in this process's engine (not scaled out).
        ``write_options``, wildcard sources, ``raw`` and ``no_clobber`` as
        for :meth:`copy`; a file kept by ``no_clobber`` keeps its source.
        """
        s, d = parse_location(_str(src)), parse_location(_str(dst))
        if s.is_local and d.is_local:
            raise local_remote_error(s, d)
        run = Run(dryrun, write_options=write_options, no_clobber=no_clobber)
        overwrite = _overwrite(no_clobber)
        jobs: Sequence[Job]
        if not raw and await self._is_wildcard(s, recursive):
            jobs = await self._wildcard_jobs(run, s, d, filters, write_options, overwrite)
        elif not recursive:
            one: UploadJob | DownloadJob | CopyJob
            if s.is_local:
                one = await self._upload_job(_str(src), _str(dst), write_options)
                run.write_options = self._guarded(one.backend, write_options, overwrite)
            elif d.is_local:
                one = await self._download_job(_str(src), _str(dst), "move")
            else:
                one = await self._copy_one_job(s, d, "move", write_options)
            why = await _kept_single(one, overwrite) if overwrite else None
            if why is not None:
                self._engine.skipped(run, one, why)
                return run.finish()
            jobs = [one]
        else:
            args = PlanArgs(
                Filters(filters), Compare.ALWAYS, False, self.follow_symlinks, overwrite
            )
            if s.is_local:
                backend = await self._writable(d, write_options)
                run.write_options = self._guarded(backend, write_options, overwrite)
                root = existing_dir(Path(_str(src)))
                jobs = await plan_upload(self._engine, run, root, backend, as_prefix(d.key), args)
            elif d.is_local:
                backend = await self._backend(s)
                root = dest_dir(Path(_str(dst)))
                prefix = as_prefix(s.key)
                jobs = await plan_download(self._engine, run, backend, prefix, root, args)
            else:
                self._check_endpoints(s, d)
                if (s.scheme, s.bucket) == (d.scheme, d.bucket):
                    a, b = as_prefix(s.key), as_prefix(d.key)
                    if a.startswith(b) or b.startswith(a):
                        raise ConfigError(f"cannot move {s} into itself ({d})")
                sb, db = await self._backend(s), await self._writable(d, write_options)
                prefix = as_prefix(d.key)
                jobs = await plan_copy(self._engine, run, sb, as_prefix(s.key), db, prefix, args)
        await self._engine.execute(jobs, run)
        # A file that failed, or that the store kept (a conditional write), keeps its source.
        failed = {failure.path for failure in run.result.failures} | run.kept
        await self._engine.execute(_source_deletes([j for j in jobs if j.src not in failed]), run)
        return run.finish()

    async def _copy_tree(
        self,
        s: Location,
        d: Location,
        args: PlanArgs,
        dryrun: bool,
        write_options: WriteOptions | None = None,
    ) -> TransferResult:
        """Everything under one remote prefix to another (copy or sync)."""
        self._check_endpoints(s, d)
        src, dst = await self._backend(s), await self._writable(d, write_options)
        run = Run(dryrun, write_options=write_options)
        jobs = await plan_copy(
            self._engine, run, src, as_prefix(s.key), dst, as_prefix(d.key), args
        )
        await self._engine.execute(jobs, run)
        return run.finish()

    async def ls(
        self, url: str, *, recursive: bool = False, versions: bool = False
    ) -> AsyncIterator[ObjectInfo | str]:
        """Objects under ``url``; without ``recursive``, one level only.

        Without ``recursive``, deeper objects are folded into their first
        "directory", yielded once as a string ending in ``/`` (aws-cli's
        ``PRE``). Keys are full keys. ``versions``: every version and delete
        marker (``version_id``, ``is_latest``, ``delete_marker``), newest
        first within a key (``ls --all-versions``; docs/versions.md).
        """
        loc = self._remote(url)
        if versions:
            refuse_unversioned(loc.scheme, "--all-versions / versions=True")
        backend = await self._backend(loc)
        base = loc.key[: loc.key.rfind("/") + 1]
        last_dir = None
        listing = backend.list_versions(loc.key) if versions else backend.list(loc.key)
        async for info in listed_versions(listing, loc.scheme) if versions else listing:
            if recursive:
                yield info
                continue
            rest = info.key[len(base) :]
            if "/" in rest:
                directory = base + rest.split("/", 1)[0] + "/"
                if directory != last_dir:
                    last_dir = directory
                    yield directory
            else:
                yield info

    async def rm(
        self,
        url: str,
        *,
        recursive: bool = False,
        filters: FilterSpec = (),
        dryrun: bool = False,
        version_id: str | None = None,
    ) -> TransferResult:
        """Delete an object, or (``recursive``) everything under a prefix.

        ``version_id``: delete that version of the object only (a delete
        marker's id removes the marker); docs/versions.md."""
        loc = self._remote(url)
        if version_id is not None:
            check_versioned(loc, version_id)
        backend = await self._backend(loc)
        if version_id is not None:
            view = await delete_version_view(backend, loc, version_id, recursive, filters)
            return await self._execute([DeleteRemoteJob(view, [loc.key])], dryrun)
        if not recursive:
            if not loc.key:
                raise _prefix_error(url, "delete")
            if loc.key.endswith("/"):
                # A folder marker (a key ending in "/") is an object: aws s3 rm
                # deletes it. Without one, the URL names a prefix only.
                await _stat_marker(backend, loc.key, url)
            else:
                # Deleting a missing key succeeds on object stores: say so instead.
                await _stat_object(backend, loc.key, url, "delete")
            return await self._execute([DeleteRemoteJob(backend, [loc.key])], dryrun)
        prefix = as_prefix(loc.key)
        flt = Filters(filters)
        # Folder markers too (the prefix's own included): nothing is left behind.
        listed = await list_remote(backend, prefix, markers=True)
        keys = [info.key for rel, info in listed.items() if flt.included(rel)]
        return await self._execute(delete_jobs(backend, keys), dryrun)

    # -- buckets -------------------------------------------------------------

    async def make_bucket(self, url: str, *, region: str | None = None) -> None:
        """Create the bucket ``url`` names (``s3://bucket``): ``aws s3 mb``.

        ``region``: where (S3: a LocationConstraint unless ``us-east-1``; GCS:
        a location); default the client's ``region``, else the backend's
        (S3: its signing region). A ``region`` other than the client's is
        asked of a backend opened for that region alone (as aws-cli's
        ``--region``: S3 signs, and sends to that region's endpoint). A
        bucket that exists already raises BackendError; a scheme without
        buckets to make, ConfigError.
        """
        backend = await self._bucket_backend(url, "create_bucket")
        if region is not None and region != self._options.region:
            loc = self._remote(url)
            inner = open_backend(loc.scheme, loc.bucket, self._options_for(loc, region=region))
            backend = RetryLayer(
                LimitLayer(inner, self._engine.scheduler.requests), self.config.retry
            )
            async with backend:
                await backend.create_bucket(region=region)
            return
        try:
            await backend.create_bucket(region=region)
        except NotImplementedError:
            raise _no_buckets(backend.scheme, "create_bucket") from None

    async def remove_bucket(
        self, url: str, *, force: bool = False, dryrun: bool = False
    ) -> TransferResult:
        """Delete the bucket ``url`` names: ``aws s3 rb``.

        The bucket must be empty, unless ``force``: then every object in it
        is deleted first (as ``rm(url, recursive=True)`` would, with the
        same events and result), and the bucket only if all of them were.
        Returns the deletions' result (empty without ``force``); a dry run
        deletes nothing.
        """
        backend = await self._bucket_backend(url, "delete_bucket")
        result = TransferResult(dryrun=dryrun)
        if force:
            listed = await list_remote(backend, "", markers=True)
            result = await self._execute(
                delete_jobs(backend, [i.key for i in listed.values()]), dryrun
            )
            if not result.ok or dryrun:
                return result
        if not dryrun:
            try:
                await backend.delete_bucket()
            except NotImplementedError:
                raise _no_buckets(backend.scheme, "delete_bucket") from None
        return result

    async def list_buckets(self, scheme: str = "s3") -> list[BucketInfo]:
        """The buckets the credentials can see on ``scheme``'s service
        (``"s3"`` or ``"s3://"``): ``aws s3 ls``, ``synxfer ls``.

        Uses the client's endpoint, region and profile for that scheme, as
        any other call. A scheme whose backend cannot list buckets raises
        ConfigError; an unknown one, UnknownScheme.
        """
        name = scheme.lower().removesuffix("://")
        _refuse_without(name, "list_buckets")
        backend = await self._backend(Location(name, "", "", None))
        try:
            return await backend.list_buckets()
        except NotImplementedError:
            raise _no_buckets(name, "list_buckets") from None

    # -- streams (docs/streams.md) -------------------------------------------

    async def put_bytes(
        self,
        url: str,
        data: bytes | bytearray | memoryview,
        *,
        write_options: WriteOptions | None = None,
    ) -> int:
        """Write ``data`` as the object ``url``: one put, or a multipart upload
        whose parts are read from ``data`` as they go; returns the bytes sent."""
        return await self.put_stream(
            url, BytesReader(data), expected_size=len(data), write_options=write_options
        )

    async def put_stream(
        self,
        url: str,
        source: Readable,
        *,
        expected_size: int | None = None,
        write_options: WriteOptions | None = None,
    ) -> int:
        """Write what the blocking binary ``source`` gives (``sys.stdin.buffer``,
        an open file) until its end as the object ``url``; returns the bytes
        sent. Parts go up as they are read, memory bounded by the budget;
        ``expected_size`` (about the stream's size) makes the first parts
        large enough (aws-cli's ``--expected-size``). On failure nothing is
        written (the multipart upload is aborted); an empty stream is an
        empty object. syn:// (which wants the content's MD5 first) spools it
        to a temporary file."""
        loc = self._remote(url)
        if not loc.key or loc.key.endswith("/"):
            raise ConfigError(
                f"{url} names a prefix, not an object: a stream is written to a URL "
                f"like {loc.scheme}://bucket/key"
            )
        backend = await self._writable(loc, write_options)
        return await upload_stream(
            self._engine,
            backend,
            loc.key,
            source,
            options=write_options,
            expected_size=expected_size,
        )

    async def _object_stream(self, url: str, verb: str) -> ObjectStream:
        loc = self._remote(url)
        if not loc.key or loc.key.endswith("/"):
            raise _prefix_error(url, verb)
        backend = await self._backend(loc)
        info = await _stat_object(backend, loc.key, url, verb)
        return ObjectStream(self._engine, backend, loc.key, info)

    def open(self, url: str) -> ObjectReader:
        """The object ``url``'s bytes as ordered ``bytes`` chunks (``async for
        chunk in client.open(url)``), ranges fetched ahead within the memory
        budget and checked as they pass; a mismatch raises IntegrityError
        after the last chunk. ``async with client.open(url) as reader``
        cancels the ranges in flight when left early."""
        return ObjectReader(lambda: self._object_stream(url, "read"))

    async def get_bytes(self, url: str) -> bytes:
        """The whole object ``url`` in memory, verified (data that does not
        match is fetched again under the retry policy, as downloads are)."""

        async def attempt() -> bytes:
            stream = await self._object_stream(url, "read")
            info = await stream.start()
            out = bytearray(info.size)
            at = 0
            async for view in stream.views():
                end = at + len(view)
                await asyncio.to_thread(out.__setitem__, slice(at, end), view)
                at = end
            return bytes(out) if len(out) < (1 << 16) else await asyncio.to_thread(bytes, out)

        return await retry_mismatch(self._engine, "download", attempt)

    async def get_stream(self, url: str, out: Writable) -> int:
        """Write the object ``url`` to the blocking binary ``out``
        (``sys.stdout.buffer``) in order, ranges fetched in parallel, checked
        as they pass; returns the bytes written. A mismatch raises
        IntegrityError after the last byte (what was written cannot be
        recalled); an error writing (BrokenPipeError) cancels the ranges."""
        return await write_to(await self._object_stream(url, "read"), out)

    # -- presigned URLs --------------------------------------------------------

    async def presign(
        self, url: str, *, expires_in: int = 3600, method: Literal["GET", "PUT"] = "GET"
    ) -> str:
        """A URL that lets anyone without credentials GET (download) or PUT
        (upload) the object ``url`` names for ``expires_in`` seconds:
        ``aws s3 presign``, ``synxfer presign``.

        Signed locally, with the client's credentials, endpoint and region
        for that scheme; nothing is sent, so the object need not exist. The
        URL is a bearer credential until it expires: hand it only to whom
        it is for. Bounds of ``expires_in`` are the service's (S3: 1 second
        to 7 days); values outside them, a scheme that cannot presign, or
        credentials that cannot sign raise ConfigError saying what to do.
        """
        if method not in ("GET", "PUT"):
            raise ConfigError(f"presign: method={method!r}: expected 'GET' or 'PUT'")
        if isinstance(expires_in, bool) or not isinstance(expires_in, int) or expires_in < 1:
            raise ConfigError(
                f"--expires-in / expires_in={expires_in!r}: give a whole number of seconds, "
                "at least 1"
            )
        loc = self._remote(url)
        if not loc.key or loc.key.endswith("/"):
            raise ConfigError(
                f"presign needs an object URL like {loc.scheme}://bucket/key, not {url!r}"
            )
        _refuse_without(loc.scheme, "presign")
        backend = await self._backend(loc)
        try:
            return await backend.presign(loc.key, method, expires_in)
        except NotImplementedError:
            raise _no_buckets(loc.scheme, "presign") from None

    async def _bucket_backend(self, url: str, primitive: str) -> Backend:
        """The backend of the bucket ``url`` names, whose class has ``primitive``."""
        loc = self._remote(url)
        _refuse_without(loc.scheme, primitive)
        if loc.key.strip("/"):
            raise ConfigError(
                f"{url} names an object, not a bucket: give a URL like {loc.scheme}://{loc.bucket}"
            )
        return await self._backend(loc)

    async def _execute(
        self, jobs: Sequence[Job], dryrun: bool, write_options: WriteOptions | None = None
    ) -> TransferResult:
        run = Run(dryrun, write_options=write_options)
        await self._engine.execute(jobs, run)
        return run.finish()


# -- helpers ---------------------------------------------------------------------


@contextlib.asynccontextmanager
async def shard_host(
    config: TransferConfig,
    settings: ClientSettings,
    on_event: Callable[[Event], None] | None,
) -> AsyncIterator[TreeHost]:
    """The client of one scale-out shard, built as the driver's was.

    Scale-out reaches it through :class:`~synxfer._scaleout.ClientSettings`
    (it pickles by name), so scale-out never imports the client.
    """
    async with Client(
        config,
        endpoint_url=settings.endpoint_url,
        region=settings.region,
        profile=settings.profile,
        endpoints=settings.endpoints,
        backend_options=settings.backend_options,
        follow_symlinks=settings.follow_symlinks,
        layers=settings.layers,
        on_event=on_event,
    ) as client:
        yield client._tree_host()


def _str(value: PathLike) -> str:
    return os.fspath(value)


def _plan_args(options: SyncOptions, follow_symlinks: bool) -> PlanArgs:
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
    overwrite = _overwrite(options.get("no_clobber", False))
    return PlanArgs(flt, mode, options.get("delete", False), follow_symlinks, overwrite)


def _overwrite(
    no_clobber: bool, if_size_differ: bool = False, if_source_newer: bool = False
) -> frozenset[Overwrite]:
    chosen = (
        (no_clobber, Overwrite.NO_CLOBBER),
        (if_size_differ, Overwrite.IF_SIZE_DIFFER),
        (if_source_newer, Overwrite.IF_SOURCE_NEWER),
    )
    return frozenset(kind for on, kind in chosen if on)


def _keeps(overwrite: frozenset[Overwrite]) -> bool:
    """``--no-clobber`` alone: no later condition may allow a replacement."""
    return overwrite == {Overwrite.NO_CLOBBER}


def _not_scaled(overwrite: frozenset[Overwrite]) -> ConfigError:
    names = " and ".join(f"--{kind.value}" for kind in sorted(overwrite, key=lambda k: k.value))
    return ConfigError(
        f"{names} cannot be combined with --files-from, --processes or --dask yet: "
        "leave one of them out"
    )


async def _kept_single(
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


def _existing_file(path: Path) -> Path:
    if not path.exists():
        raise ConfigError(f"{path}: no such file")
    if path.is_dir():
        raise ConfigError(f"{path} is a directory: copy it with recursive=True, or sync it")
    return path


def _prefix_error(url: str, verb: str) -> ConfigError:
    return ConfigError(
        f"{url} names a prefix, not an object: {verb} everything under it with recursive=True"
    )


async def _stat_object(backend: Backend, key: str, url: str, verb: str) -> ObjectInfo:
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
            raise _prefix_error(url, verb) from None
        raise NotFound(f"{url}: no such object", url=url, status=exc.status) from None


async def _stat_marker(backend: Backend, key: str, url: str) -> ObjectInfo:
    """The folder marker ``key`` (ending in ``/``); a prefix without one says
    to use ``recursive``, and nothing at all raises NotFound naming ``url``."""
    try:
        return await backend.stat(key)
    except BucketNotFound:
        raise
    except NotFound as exc:
        if (await backend.list_page(key)).items:
            raise _prefix_error(url, "delete") from None
        raise NotFound(f"{url}: no such object", url=url, status=exc.status) from None


def _source_deletes(done: Sequence[Job]) -> list[Job]:
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
    remote = [j for backend, names in keys.values() for j in delete_jobs(backend, names)]
    return local + remote


def _refuse_without(scheme: str, primitive: str) -> None:
    """ConfigError when ``scheme``'s backend class leaves the bucket
    ``primitive`` to :class:`Backend` (which cannot do it)."""
    factory = resolve(scheme)
    if isinstance(factory, type) and getattr(factory, primitive) is getattr(Backend, primitive):
        raise _no_buckets(scheme, primitive)


def _no_buckets(scheme: str, primitive: str) -> ConfigError:
    if primitive == "presign":
        return ConfigError(f"{scheme}:// cannot presign URLs (its backend has no presign)")
    verbs = {"create_bucket": "created", "delete_bucket": "removed", "list_buckets": "listed"}
    verb = verbs[primitive]
    return ConfigError(
        f"{scheme}:// buckets cannot be {verb} here (the backend has no {primitive})"
    )
