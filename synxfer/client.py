"""The Client: the public entry point for every transfer.

A client owns one engine (and its scheduler, so every limit: requests, files,
memory, threads) and one backend stack per bucket it touches, opened on first
use and closed with the client. Operations that cannot start (a missing local
directory, a missing bucket, a malformed URL) raise; once an operation runs, a
file that fails is recorded in the :class:`~synxfer.TransferResult` and the
rest go on.

A client belongs to the event loop it is first used on.

This module is the user's face only: each transfer method translates its
arguments and calls :class:`synxfer.engine.ops.TreeOps`, which plans and
runs it; backends are opened and layered by :class:`synxfer._backends.Backends`,
which a scale-out shard builds the same way without a client
(docs/decisions/0040-one-home-for-tree-operations.md).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Literal, TypedDict, Unpack

from ._backends import Backends
from ._config import TransferConfig
from ._customer_key import CustomerKey
from ._exceptions import ConfigError
from ._models import BucketInfo, Event, ObjectInfo, TransferResult, WriteOptions
from ._url import Location
from .backend import Backend, BackendOptions, resolve
from .engine.core import Engine
from .engine.ops import (
    FileList,
    PlanArgs,
    TreeOps,
    names_objects,
    overwrite_of,
    prefix_error,
    remote,
    sole_object,
    stat_object,
)
from .engine.tree import TreeHost
from .engine.verify import retry_mismatch

if TYPE_CHECKING:
    # Streams (cp -, Client.open) and versions are imported where they are
    # used: a plain cp/sync never loads them (tests/test_cli_startup.py).
    from .engine.stream import ObjectReader, ObjectStream, Readable, Writable

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
        if config is not None and not isinstance(config, TransferConfig):
            raise ConfigError(
                f"Client(config) must be a synxfer.TransferConfig, like "
                f"Client(TransferConfig(max_threads=16)) (got a {type(config).__name__})"
            )
        self.config = config or TransferConfig()
        self._dask = dask
        self.follow_symlinks = follow_symlinks
        self._engine = Engine(self.config, on_event)
        self._backends = Backends(
            self.config,
            self._engine,
            endpoint_url=endpoint_url,
            region=region,
            profile=profile,
            layers=layers,
            endpoints=endpoints,
            backend_options=backend_options,
            sse_c_read_key=sse_c_read_key,
            sse_c_write_key=sse_c_write_key,
        )
        self._closed = False

    @property
    def _options(self) -> BackendOptions:
        """The options every backend of this client gets."""
        return self._backends.options

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
        await self._backends.aclose()
        self._engine.close()

    async def backend(self, url: str) -> tuple[Backend, str]:
        """The (layered, opened) backend serving ``url``, and the key in it."""
        loc = remote(url)
        return await self._backends.open(loc), loc.key

    def _ops(self) -> TreeOps:
        """This client's transfer operations (:mod:`synxfer.engine.ops`)."""
        host = TreeHost(self._engine, self._backends, self.follow_symlinks)
        wide = self.config.processes > 1 or self._dask is not None
        return TreeOps(host, self._scale_out, wide, self._backends.customer_keys)

    async def _scale_out(
        self,
        host: TreeHost,
        src: str,
        dst: str,
        args: PlanArgs,
        dryrun: bool,
        files: FileList | None,
        write_options: WriteOptions | None,
    ) -> TransferResult:
        """A tree on synxfer/_scaleout (imported only when asked for)."""
        from ._scaleout import run_tree

        return await run_tree(
            host, self._backends, self._dask, src, dst, args, dryrun, files, write_options
        )

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
        return await self._ops().upload_file(_str(path), url, dryrun, write_options)

    async def download_file(
        self, url: str, path: PathLike, *, dryrun: bool = False, version_id: str | None = None
    ) -> TransferResult:
        """Download one object. An existing directory (or a path ending in
        ``/``) as ``path`` receives the object under its own name.
        ``version_id``: that version of the object (docs/versions.md)."""
        return await self._ops().download_file(url, _str(path), dryrun, version_id)

    # -- trees ---------------------------------------------------------------

    async def sync_to(
        self, local: PathLike, url: str, **options: Unpack[SyncOptions]
    ) -> TransferResult:
        """Make ``url`` (a prefix, treated as a directory) like the local directory.

        Files are copied when missing or different (see ``synxfer.engine.compare``
        for the rules); with ``delete``, objects the source lacks are removed.
        See :class:`SyncOptions` for the options.
        """
        return await self._ops().sync_to(_str(local), url, options)

    async def sync_from(
        self, url: str, local: PathLike, **options: Unpack[SyncOptions]
    ) -> TransferResult:
        """Make the local directory like ``url``; the mirror of :meth:`sync_to`.

        Object keys that would land outside ``local`` (``..``, absolute
        names) are refused and reported as failures; nothing is written for
        them.
        """
        return await self._ops().sync_from(url, _str(local), options)

    async def sync(
        self, src: PathLike, dst: PathLike, **options: Unpack[SyncOptions]
    ) -> TransferResult:
        """:meth:`sync_to` or :meth:`sync_from`, whichever side is local; between
        two remote locations, a copy (server-side within a bucket, else streamed
        through memory, never via local disk)."""
        return await self._ops().sync(_str(src), _str(dst), options)

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
        return await self._ops().copy(
            _str(src),
            _str(dst),
            recursive=recursive,
            filters=filters,
            dryrun=dryrun,
            files=files,
            write_options=write_options,
            overwrite=overwrite_of(no_clobber, if_size_differ, if_source_newer),
            raw=raw,
            version_id=version_id,
        )

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
        version_id: str | None = None,
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
        ``version_id``: move that version of the source object (copied, then
        that version deleted; docs/versions.md).
        """
        return await self._ops().move(
            _str(src),
            _str(dst),
            recursive=recursive,
            filters=filters,
            dryrun=dryrun,
            write_options=write_options,
            no_clobber=no_clobber,
            raw=raw,
            version_id=version_id,
        )

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
        loc = remote(url)
        if versions:
            from ._versions import refuse_unversioned

            refuse_unversioned(loc.scheme, "--all-versions / versions=True")
        backend = await self._backends.open(loc)
        base = loc.key[: loc.key.rfind("/") + 1]
        last_dir = None
        if versions:
            from ._versions import listed_versions

            listing = listed_versions(backend.list_versions(loc.key), loc.scheme)
        else:
            listing = backend.list(loc.key)
        async for info in listing:
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
        all_versions: bool = False,
    ) -> TransferResult:
        """Delete an object, or (``recursive``) everything under a prefix.

        ``version_id``: delete that version of the object only (a delete
        marker's id removes the marker); ``all_versions``: every version and
        delete marker of the object, or under the prefix; docs/versions.md."""
        return await self._ops().rm(
            url,
            recursive=recursive,
            filters=filters,
            dryrun=dryrun,
            version_id=version_id,
            all_versions=all_versions,
        )

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
            backend = self._backends.open_in_region(remote(url), region)
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
            result = await self._ops().empty_bucket(backend, dryrun)
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
        backend = await self._backends.open(Location(name, "", "", None))
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
        from .engine.stream import BytesReader

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
        from .engine.stream import upload_stream

        loc = remote(url)
        if not loc.key or loc.key.endswith("/"):
            raise ConfigError(
                f"{url} names a prefix, not an object: a stream is written to a URL "
                f"like {loc.scheme}://bucket/key"
            )
        backend = await self._backends.writable(loc, write_options)
        return await upload_stream(
            self._engine,
            backend,
            loc.key,
            source,
            options=write_options,
            expected_size=expected_size,
        )

    async def _object_stream(
        self, url: str, verb: str, version_id: str | None = None
    ) -> ObjectStream:
        from ._versions import check_versioned, open_version
        from .engine.stream import ObjectStream

        loc = remote(url)
        if version_id is not None:
            check_versioned(loc, version_id)  # before the backend is opened
        elif loc.key.endswith("/") or not (loc.key or names_objects(loc.scheme)):
            raise prefix_error(url, verb)
        backend = await self._backends.open(loc)
        loc = await sole_object(backend, loc)  # syn://syn456: that File
        if not loc.key:
            raise prefix_error(url, verb)
        if version_id is not None:
            backend, info = await open_version(backend, loc, version_id)
        else:
            info = await stat_object(backend, loc.key, url, verb)
        return ObjectStream(self._engine, backend, loc.key, info)

    def open(self, url: str, *, version_id: str | None = None) -> ObjectReader:
        """The object ``url``'s bytes as ordered ``bytes`` chunks (``async for
        chunk in client.open(url)``), ranges fetched ahead within the memory
        budget and checked as they pass; a mismatch raises IntegrityError
        after the last chunk. ``async with client.open(url) as reader``
        cancels the ranges in flight when left early. ``version_id``: that
        version of the object (docs/versions.md), as for the two below."""
        from .engine.stream import ObjectReader

        return ObjectReader(lambda: self._object_stream(url, "read", version_id))

    async def get_bytes(self, url: str, *, version_id: str | None = None) -> bytes:
        """The whole object ``url`` in memory, verified (data that does not
        match is fetched again under the retry policy, as downloads are)."""

        async def attempt() -> bytes:
            stream = await self._object_stream(url, "read", version_id)
            info = await stream.start()
            out = bytearray(info.size)
            at = 0
            async for view in stream.views():
                end = at + len(view)
                await asyncio.to_thread(out.__setitem__, slice(at, end), view)
                at = end
            return bytes(out) if len(out) < (1 << 16) else await asyncio.to_thread(bytes, out)

        return await retry_mismatch(self._engine, "download", attempt)

    async def get_stream(self, url: str, out: Writable, *, version_id: str | None = None) -> int:
        """Write the object ``url`` to the blocking binary ``out``
        (``sys.stdout.buffer``) in order, ranges fetched in parallel, checked
        as they pass; returns the bytes written. A mismatch raises
        IntegrityError after the last byte (what was written cannot be
        recalled); an error writing (BrokenPipeError) cancels the ranges."""
        from .engine.stream import write_to

        return await write_to(await self._object_stream(url, "read", version_id), out)

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
        loc = remote(url)
        if not loc.key or loc.key.endswith("/"):
            raise ConfigError(
                f"presign needs an object URL like {loc.scheme}://bucket/key, not {url!r}"
            )
        _refuse_without(loc.scheme, "presign")
        backend = await self._backends.open(loc)
        try:
            return await backend.presign(loc.key, method, expires_in)
        except NotImplementedError:
            raise _no_buckets(loc.scheme, "presign") from None

    async def _bucket_backend(self, url: str, primitive: str) -> Backend:
        """The backend of the bucket ``url`` names, whose class has ``primitive``."""
        loc = remote(url)
        _refuse_without(loc.scheme, primitive)
        if loc.key.strip("/"):
            raise ConfigError(
                f"{url} names an object, not a bucket: give a URL like {loc.scheme}://{loc.bucket}"
            )
        return await self._backends.open(loc)


# -- helpers ---------------------------------------------------------------------


def _str(value: PathLike) -> str:
    return os.fspath(value)


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
