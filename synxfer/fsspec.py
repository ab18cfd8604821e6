"""An fsspec filesystem over any synxfer backend: ``sx+s3://bucket/key`` and friends.

pandas, xarray, Dask and everything else that speaks fsspec get synxfer's
engine: bulk ``put``/``get`` go through a :class:`synxfer.Client` (parts in
parallel, checksums off the event loop, the client's limits on requests,
files and memory, retries, resume), ``open(..., "rb")`` reads by ranged
requests and ``open(..., "wb")`` buffers to a local temporary file and
uploads it with the engine on close (multipart when large).

Protocols are ``sx+<scheme>``, one per synxfer backend, so they never clash
with s3fs (``s3://``) or gcsfs (``gs://``)::

    import pandas as pd
    df = pd.read_csv("sx+s3://bucket/data.csv", storage_options={"endpoint_url": "..."})

    import fsspec
    fs = fsspec.filesystem("sx+s3", config=synxfer.TransferConfig(max_threads=16))
    fs.put("./dataset", "bucket/prefix", recursive=True)

``sx+s3``, ``sx+gs``, ``sx+scp``, ``sx+blocks`` and ``sx+file`` are
registered through fsspec's ``fsspec.specs`` entry points when synxfer is
installed with the ``fsspec`` extra; :func:`register` adds any other
installed scheme. Paths are ``bucket/key`` (``/abs/path`` for ``sx+file``).
Storage options are the :class:`~synxfer.Client`'s: ``config``,
``endpoint_url``, ``endpoints``, ``region``, ``profile``,
``backend_options``, ``follow_symlinks`` (default true, as fsspec follows
links), plus fsspec's ``asynchronous``, ``loop`` and ``batch_size``.

Object stores have no directories: a "directory" is a prefix with objects
under it, ``mkdir`` does nothing and an empty directory does not exist.
``ls("")`` lists the buckets.

fsspec's promises kept: inside ``with fs.transaction:`` files written with
``open(..., "wb")`` (and ``pipe``) wait in local temporary files and are
uploaded only when the block ends without an error, else discarded;
``modified()``/``created()`` give the object's time (an object is written
whole, so it was created when it was last modified); ``sign()`` is
:meth:`synxfer.Client.presign`; writing into a missing bucket raises
FileNotFoundError naming the bucket.

Object versions as in s3fs: with ``version_aware=True``, a path
``bucket/key?versionId=V`` (or ``open(path, version_id=V)``) reads, gets,
copies and removes that version only, ``info`` reports ``VersionId``, and
``ls(path, versions=True)`` lists every version (docs/versions.md). Without
it, ``?versionId=`` is part of the key, as any character is.

This module uses only synxfer's public API (the Client and the backend SDK).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import errno
import os
import posixpath
import shutil
import tempfile
import weakref
from collections.abc import Iterator, Mapping
from glob import has_magic
from typing import Any, ClassVar

import fsspec  # type: ignore[import-untyped]
from fsspec.asyn import AsyncFileSystem, sync, sync_wrapper  # type: ignore[import-untyped]
from fsspec.callbacks import DEFAULT_CALLBACK  # type: ignore[import-untyped]
from fsspec.spec import AbstractBufferedFile  # type: ignore[import-untyped]

from synxfer import (
    BucketNotFound,
    Client,
    ConfigError,
    NotFound,
    ObjectInfo,
    SynxferError,
    TransferConfig,
    TransferResult,
)
from synxfer.backend import Backend, resolve

__all__ = [
    "SynxferFile",
    "SynxferFileSystem",
    "filesystem_class",
    "register",
]

#: The schemes synxfer ships backends for, registered as ``sx+<scheme>``.
BUILTIN_SCHEMES = ("s3", "gs", "scp", "blocks", "file")
PREFIX = "sx+"


class SynxferFileSystem(AsyncFileSystem):  # type: ignore[misc]
    """fsspec's async filesystem on one synxfer scheme (``scheme``).

    Use a scheme's class (:func:`filesystem_class`, or ``fsspec.filesystem("sx+s3")``);
    the base class is abstract.
    """

    scheme: ClassVar[str] = ""
    protocol: ClassVar[tuple[str, ...]] = ("synxfer",)
    root_marker = ""
    async_impl = True

    def __init__(
        self,
        *,
        config: TransferConfig | Mapping[str, Any] | None = None,
        endpoint_url: str | None = None,
        endpoints: Mapping[str, str] | None = None,
        region: str | None = None,
        profile: str | None = None,
        backend_options: Mapping[str, Mapping[str, str]] | None = None,
        follow_symlinks: bool = True,
        version_aware: bool = False,
        **kwargs: Any,
    ) -> None:
        if not self.scheme:
            raise TypeError("use a scheme's filesystem: filesystem_class('s3') or sx+s3://")
        super().__init__(**kwargs)
        if isinstance(config, Mapping):
            config = TransferConfig(**config)
        self.config = config or TransferConfig()
        self._client_kwargs: dict[str, Any] = {
            "endpoint_url": endpoint_url,
            "endpoints": dict(endpoints or {}),
            "region": region,
            "profile": profile,
            "backend_options": {k: dict(v) for k, v in (backend_options or {}).items()},
            "follow_symlinks": follow_symlinks,
        }
        self._client: Client | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self.blocksize = self.config.part_size
        #: ``path?versionId=V`` names a version (s3fs's option of the same name).
        self.version_aware = version_aware

    # -- paths ------------------------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        for proto in cls.protocol:
            for sep in ("://", "::"):
                if path.startswith(proto + sep):
                    path = path[len(proto) + len(sep) :]
                    break
        if cls.scheme == "file":
            path = "/" + path.lstrip("/")
            return path.rstrip("/") or "/"
        return path.strip("/")

    def unstrip_protocol(self, name: str) -> str:
        return f"{self.protocol[0]}://{name.lstrip('/') if self.scheme != 'file' else name}"

    def _url(self, path: str) -> str:
        """The synxfer URL of an fsspec path."""
        path = self._strip_protocol(path)
        if self.scheme == "file":
            return "file://" + path
        bucket, _, key = path.partition("/")
        if not bucket:
            raise FileNotFoundError(errno.ENOENT, "no bucket in the path", path)
        return f"{self.scheme}://{bucket}/{key}"

    def _root(self, path: str) -> str:
        """The path's bucket part: ``bucket`` (or ``""`` for ``sx+file``)."""
        return "" if self.scheme == "file" else path.partition("/")[0]

    def _name(self, root: str, key: str) -> str:
        return "/" + key if self.scheme == "file" else f"{root}/{key}"

    def _is_root(self, path: str) -> bool:
        return path == "/" if self.scheme == "file" else "/" not in path

    # -- the client ---------------------------------------------------------------

    async def _get_client(self) -> Client:
        """One Client per event loop (a Client belongs to the loop it is used on)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = Client(self.config, **self._client_kwargs)
            self._client_loop = loop
            weakref.finalize(self, _close_client, self._client, loop)
        return self._client

    def _split_version(self, path: str) -> tuple[str, str | None]:
        """``(path, version id)`` of s3fs's ``path?versionId=V`` when
        ``version_aware``; otherwise the path as it is, and no version."""
        if self.version_aware and _VERSION_ID in path:
            path, _, version = path.partition(_VERSION_ID)
            return path, version
        return path, None

    async def _backend(self, path: str) -> tuple[Backend, str]:
        """The backend and key of ``path``: a view of its version, if it names one."""
        path, version = self._split_version(path)
        client = await self._get_client()
        backend, key = await client.backend(self._url(path))
        if version is None:
            return backend, key
        try:
            return backend.at_version(version), key
        except NotImplementedError:
            raise ValueError(f"{self.protocol[0]}:// has no object versions: {path}") from None

    async def _close(self) -> None:
        """Close the client (its connections and worker threads)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def close(self) -> None:
        """Close the client; the filesystem opens a new one if used again."""
        if self._client is not None and self._client_loop is self.loop:
            sync(self.loop, self._close)

    # -- metadata -----------------------------------------------------------------

    def _file_entry(self, root: str, info: ObjectInfo) -> dict[str, Any]:
        entry = {
            "name": self._name(root, info.key),
            "size": info.size,
            "type": "file",
            "mtime": info.mtime,
            "etag": info.etag,
            "content_type": info.content_type,
        }
        if self.version_aware and info.version_id is not None:
            entry["VersionId"] = info.version_id  # s3fs's name
        return entry

    def _dir_entry(self, name: str) -> dict[str, Any]:
        return {"name": name, "size": 0, "type": "directory"}

    async def _info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        path = self._strip_protocol(path)
        if kwargs.get("version_id"):
            path = self._versioned_path(path, kwargs["version_id"])
        if self._split_version(path)[1] is not None:
            backend, key = await self._backend(path)
            return self._file_entry(self._root(path), await backend.stat(key))
        if not path and self.scheme != "file":
            return self._dir_entry("")  # the service: its buckets are its "directories"
        backend, key = await self._backend(path)
        root = self._root(path)
        if self._is_root(path):
            await backend.list_page("")  # the bucket exists
            return self._dir_entry(path)
        try:
            return self._file_entry(root, await backend.stat(key))
        except BucketNotFound:
            raise
        except NotFound:
            if (await backend.list_page(key + "/")).items:
                return self._dir_entry(path)
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        path = self._strip_protocol(path)
        client = await self._get_client()
        if not path and self.scheme != "file":
            buckets = await client.list_buckets(self.scheme)
            listed = [self._dir_entry(b.name) for b in buckets]
            return listed if detail else sorted(e["name"] for e in listed)
        root = self._root(path)
        url = self._url(path)
        prefix_url = url if url.endswith("/") else url + "/"
        entries: list[dict[str, Any]] = []
        versions = bool(kwargs.get("versions"))
        if versions and not self.version_aware:
            raise ValueError("ls(versions=True) needs a version_aware filesystem (as s3fs)")
        async for item in client.ls(prefix_url, versions=versions):
            if isinstance(item, ObjectInfo) and item.delete_marker:
                continue  # no file: a version listing's record of a delete
            if isinstance(item, str):
                entries.append(self._dir_entry(self._name(root, item.rstrip("/"))))
            elif not item.key.endswith("/"):  # a "directory marker" is no file
                entries.append(self._file_entry(root, item))
        if not entries and not self._is_root(path):
            info = await self._info(path)  # FileNotFoundError if nothing is there
            if info["type"] == "file":
                entries = [info]
        return entries if detail else sorted(e["name"] for e in entries)

    async def _find(
        self,
        path: str,
        maxdepth: int | None = None,
        withdirs: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Everything under ``path`` from one recursive listing (not one per directory)."""
        if maxdepth is not None:
            return await super()._find(path, maxdepth=maxdepth, withdirs=withdirs, **kwargs)
        detail = kwargs.pop("detail", False)
        path = self._strip_protocol(path)
        client = await self._get_client()
        root = self._root(path)
        url = self._url(path)
        out: dict[str, dict[str, Any]] = {}
        async for item in client.ls(url if url.endswith("/") else url + "/", recursive=True):
            assert isinstance(item, ObjectInfo)
            name = self._name(root, item.key)
            if withdirs:
                parent = posixpath.dirname(name.rstrip("/"))
                while len(parent) > len(path) and parent not in out:
                    out[parent] = self._dir_entry(parent)
                    parent = posixpath.dirname(parent)
            if not item.key.endswith("/"):
                out[name] = self._file_entry(root, item)
        if withdirs and out and path:
            out[path] = self._dir_entry(path)
        if not out:
            with contextlib.suppress(FileNotFoundError):
                info = await self._info(path)
                if info["type"] == "file" or withdirs:
                    out[path] = info
        names = sorted(out)
        return {n: out[n] for n in names} if detail else names

    async def _modified(self, path: str) -> datetime.datetime:
        """When the object was last written, by the store's clock (S3's
        LastModified), as an aware UTC datetime."""
        info = await self._info(path)
        if info["type"] != "file":
            raise IsADirectoryError(errno.EISDIR, "a directory has no time", path)
        if info.get("mtime") is None:
            raise NotImplementedError(f"{self.protocol[0]}:// reports no time for {path}")
        return datetime.datetime.fromtimestamp(info["mtime"], tz=datetime.UTC)

    async def _created(self, path: str) -> datetime.datetime:
        """The same as :meth:`modified`: an object is written whole, never
        changed in place, so the object there now was created then."""
        return await self._modified(path)

    async def _sign(self, path: str, expiration: int = 100, **kwargs: Any) -> str:
        """A presigned GET URL for ``path`` valid ``expiration`` seconds
        (fsspec's default 100); ``method="PUT"`` gives an upload URL
        (:meth:`synxfer.Client.presign`)."""
        factory = resolve(self.scheme)
        if getattr(factory, "presign", Backend.presign) is Backend.presign:
            raise NotImplementedError(f"{self.protocol[0]}:// cannot sign URLs")
        client = await self._get_client()
        method = kwargs.pop("method", "GET")
        if kwargs:
            raise TypeError(f"sign() got unexpected arguments {sorted(kwargs)}")
        try:
            return await client.presign(self._url(path), expires_in=expiration, method=method)
        except ConfigError as exc:  # a bad expiration or method, as fsspec callers expect
            raise ValueError(str(exc)) from exc

    # fsspec mirrors only the coroutines it knows of into blocking methods.
    modified = sync_wrapper(_modified)
    created = sync_wrapper(_created)
    sign = sync_wrapper(_sign)

    # -- whole objects --------------------------------------------------------------

    async def _cat_file(
        self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any
    ) -> bytes:
        """Bytes ``[start, end)`` by one ranged read (negative: from the end)."""
        backend, key = await self._backend(path)
        if (start is not None and start < 0) or (end is not None and end < 0):
            size = (await backend.stat(key)).size
            start = max(size + start, 0) if start is not None and start < 0 else start
            end = max(size + end, 0) if end is not None and end < 0 else end
        offset = start or 0
        if end is not None and end <= offset:
            return b""
        length = None if end is None else end - offset
        try:
            return (await backend.read(key, offset, length)).data
        except ConfigError:
            raise
        except SynxferError:
            if offset > 0 and (await backend.stat(key)).size <= offset:
                return b""  # a range past the end, as files read
            raise

    async def _pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kw: Any) -> None:
        if mode == "create" and await self._exists(path):
            raise FileExistsError(errno.EEXIST, "exists", path)
        if self._intrans:
            # Held, as a file opened in the transaction is, until it commits.
            with self.open(path, "wb") as f:  # no I/O but a local temp file
                f.write(value)
            return
        with _spooled() as (spool, name):
            spool.write(value)
            spool.close()
            await self._put_file(name, path)

    async def _put_file(self, lpath: str, rpath: str, **kwargs: Any) -> None:
        """One local file to one object, through the engine (multipart when large)."""
        if os.path.isdir(lpath):
            return  # object stores have no directories
        client = await self._get_client()
        result = await client.upload_file(lpath, self._url(rpath))
        if result.failures:
            await self._raise_if_no_bucket(rpath)
        _check(result)

    async def _raise_if_no_bucket(self, path: str) -> None:
        """FileNotFoundError naming the bucket if ``path``'s bucket is missing
        (asked only after a write failed: a missing bucket otherwise reads
        as a failure of the local temporary file that was being sent)."""
        if self.scheme == "file":
            return
        root = self._root(self._strip_protocol(path))
        backend, _ = await self._backend(root)
        try:
            await backend.list_page("")
        except BucketNotFound as exc:
            raise FileNotFoundError(
                errno.ENOENT,
                f"the bucket {self.protocol[0]}://{root} does not exist; create it first "
                f"(fs.mkdir does not create buckets; synxfer mb {self.scheme}://{root})",
                path,
            ) from exc
        except SynxferError:
            return  # another problem: the transfer's own error says it

    async def _get_file(self, rpath: str, lpath: str, **kwargs: Any) -> None:
        """One object to one local file, through the engine (checked, atomic)."""
        if os.path.isdir(lpath):
            return  # a "directory": fsspec made it already
        client = await self._get_client()
        rpath, version = self._split_version(rpath)
        try:
            _check(await client.download_file(self._url(rpath), lpath, version_id=version))
        except ConfigError:
            if (await self._info(rpath))["type"] != "directory":
                raise
            os.makedirs(lpath, exist_ok=True)

    async def _cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        """Object to object: server-side within a bucket, else streamed."""
        client = await self._get_client()
        path1, version = self._split_version(path1)
        try:
            _check(await client.copy(self._url(path1), self._url(path2), version_id=version))
        except ConfigError:
            if (await self._info(path1))["type"] != "directory":
                raise

    async def _rm_file(self, path: str, **kwargs: Any) -> None:
        backend, key = await self._backend(path)
        await backend.delete(key)

    async def _expand_path(
        self, path: Any, recursive: bool = False, maxdepth: int | None = None, **kwargs: Any
    ) -> Any:
        """A version's path (``?versionId=``, version aware) is itself, no glob
        (its ``?`` is not a wildcard): ``cat``, ``get`` and ``rm`` take it."""
        if isinstance(path, str):
            stripped = self._strip_protocol(path)
            if self._split_version(stripped)[1] is not None:
                await self._info(stripped)  # FileNotFoundError if it is not there
                return [stripped]
        return await super()._expand_path(path, recursive=recursive, maxdepth=maxdepth, **kwargs)

    async def _rm(self, path: Any, recursive: bool = False, **kwargs: Any) -> None:
        """Delete in batches (one request per up to 1,000 keys where the store can)."""
        expanded = await self._expand_path(path, recursive=recursive)
        by_root: dict[str, list[str]] = {}
        for p in expanded:
            by_root.setdefault(self._root(p), []).append(p)
        markers = await self._markers(path) if recursive else {}
        for root in markers:
            by_root.setdefault(root, [])
        for root, paths in by_root.items():
            first = paths[0] if paths else root
            backend, _ = await self._backend(first)
            keys = [(await self._backend(p))[1] for p in paths]
            keys += markers.get(root, [])
            failed = await backend.delete_many(list(dict.fromkeys(k for k in keys if k)))
            if failed:
                key, exc = next(iter(failed.items()))
                raise OSError(errno.EIO, f"{len(failed)} deletes failed, e.g. {key}: {exc}")

    async def _markers(self, path: Any) -> dict[str, list[str]]:
        """The folder markers (keys ending in ``/``) under each path, by bucket.

        ``find`` leaves markers out (they are no files) and fsspec paths
        cannot end in ``/``, so a recursive ``rm`` lists them here, once per
        path given: without this, the "directory" it removed would still be
        listed, and its bucket could not be deleted.
        """
        found: dict[str, list[str]] = {}
        if self.scheme == "file":
            return found
        for p in path if isinstance(path, list) else [path]:
            p = self._strip_protocol(p)
            if has_magic(p):
                continue  # a glob: its matches were expanded, markers are no match
            backend, key = await self._backend(p)
            async for info in backend.list(key + "/" if key else ""):
                if info.key.endswith("/"):
                    found.setdefault(self._root(p), []).append(info.key)
        return found

    async def _mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        """Nothing: object stores have no directories."""

    async def _makedirs(self, path: str, exist_ok: bool = False) -> None:
        """Nothing: object stores have no directories."""

    async def _rmdir(self, path: str) -> None:
        """Nothing: a "directory" goes away with its last object."""

    # -- bulk transfers: one engine run for a whole tree -------------------------------

    async def _put(self, lpath: Any, rpath: Any, recursive: bool = False, **kwargs: Any) -> Any:
        """A whole local directory goes in one engine run (``Client.copy``);
        anything else (globs, lists, ``maxdepth``) file by file, each through
        the engine, under the same client's limits."""
        tree = self._tree_source(lpath, rpath, recursive, kwargs, local_source=True)
        if tree is None or not os.path.isdir(lpath):
            return await super()._put(lpath, rpath, recursive=recursive, **kwargs)
        dest = await self._tree_destination(lpath, rpath)
        client = await self._get_client()
        _check(await client.copy(lpath, self._url(dest) + "/", recursive=True))
        return None

    async def _get(self, rpath: Any, lpath: Any, recursive: bool = False, **kwargs: Any) -> Any:
        """A whole remote "directory" comes in one engine run (``Client.copy``)."""
        if isinstance(rpath, str) and isinstance(lpath, str):
            stripped = self._strip_protocol(rpath)
            key_path, version = self._split_version(stripped)
            if version is not None:  # one version of one object: no glob ('?'), no tree
                if _trailing_sep(lpath) or os.path.isdir(lpath):
                    lpath = os.path.join(lpath, posixpath.basename(key_path))
                return await self._get_file(stripped, lpath)
        tree = self._tree_source(rpath, lpath, recursive, kwargs, local_source=False)
        if tree is None or not await self._isdir(rpath):
            return await super()._get(rpath, lpath, recursive=recursive, **kwargs)
        src = self._strip_protocol(rpath)
        dest = lpath.rstrip("/") or "/"
        if (_trailing_sep(lpath) or os.path.isdir(dest)) and not _trailing_sep(rpath):
            dest = os.path.join(dest, posixpath.basename(src))
        client = await self._get_client()
        _check(await client.copy(self._url(src) + "/", dest, recursive=True))
        return None

    def _tree_source(
        self, src: Any, dst: Any, recursive: bool, kwargs: dict[str, Any], *, local_source: bool
    ) -> str | None:
        """``src`` when this is a plain recursive copy of one tree, else None."""
        if not recursive or kwargs.get("maxdepth") is not None:
            return None
        if not isinstance(src, str) or not isinstance(dst, str) or has_magic(src):
            return None
        if kwargs.get("callback") not in (None, DEFAULT_CALLBACK):
            return None  # a callback wants per-file progress
        return src

    async def _tree_destination(self, lpath: str, rpath: str) -> str:
        """Where ``put(lpath, rpath, recursive=True)`` puts the tree, by fsspec's rule:
        into ``rpath/<basename>`` when ``rpath`` is an existing directory (or ends
        in ``/``) and ``lpath`` does not end in ``/``; else into ``rpath``."""
        dest = str(self._strip_protocol(rpath))
        dest_is_dir = _trailing_sep(rpath) or await self._isdir(dest)
        if dest_is_dir and not _trailing_sep(lpath):
            return f"{dest}/{os.path.basename(lpath.rstrip(os.sep))}"
        return dest

    # -- files ------------------------------------------------------------------------

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: int | None = None,
        autocommit: bool = True,
        cache_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> SynxferFile:
        if mode not in ("rb", "wb", "xb"):
            raise ValueError(f"mode {mode!r}: synxfer files open as 'rb', 'wb' or 'xb'")
        version_id = kwargs.pop("version_id", None)
        if version_id is not None:
            path = self._versioned_path(path, version_id)
        if mode != "rb" and self._split_version(path)[1] is not None:
            raise ValueError(f"a version is read only: open {path!r} with mode 'rb'")
        if mode == "xb":
            if self.exists(path):
                raise FileExistsError(errno.EEXIST, "exists", path)
            mode = "wb"
        return SynxferFile(
            self,
            path,
            mode,
            block_size=block_size or self.blocksize,
            autocommit=autocommit,
            cache_options=cache_options,
            **kwargs,
        )

    def _versioned_path(self, path: str, version_id: str) -> str:
        """``path?versionId=V``; s3fs's ValueError on a filesystem not version aware."""
        if not self.version_aware:
            raise ValueError(
                "version_id cannot be specified if the filesystem is not version aware "
                "(version_aware=True)"
            )
        return f"{self._split_version(path)[0]}{_VERSION_ID}{version_id}"


class SynxferFile(AbstractBufferedFile):  # type: ignore[misc]
    """A file of a :class:`SynxferFileSystem`.

    Reading fetches blocks by ranged reads (fsspec's read-ahead cache).
    Writing appends to a local temporary file; ``close`` uploads it through
    the engine (in parts when large) and removes it, ``discard`` only
    removes it.
    """

    fs: SynxferFileSystem

    def _fetch_range(self, start: int, end: int) -> bytes:
        data: bytes = self.fs.cat_file(self.path, start, end)
        return data

    def _initiate_upload(self) -> None:
        fd, self._spool_name = tempfile.mkstemp(prefix=".synxfer-fsspec-")
        self._spool = os.fdopen(fd, "wb")

    def _upload_chunk(self, final: bool = False) -> bool:
        self.buffer.seek(0)
        shutil.copyfileobj(self.buffer, self._spool)
        if final:
            self._spool.close()
            if self.autocommit:
                self.commit()
            # else (in a transaction): the spool waits for commit() or discard()
        return True

    def commit(self) -> None:
        """Upload the spooled file (at close, or when the transaction commits)."""
        try:
            self.fs.put_file(self._spool_name, self.path)
        finally:
            self.discard()

    def discard(self) -> None:
        """Forget what was written: remove the spool; nothing is uploaded."""
        spool = getattr(self, "_spool", None)
        if spool is None:
            return
        if not spool.closed:
            spool.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._spool_name)


# -- registration ------------------------------------------------------------------------

_CLASSES: dict[str, type[SynxferFileSystem]] = {}


def filesystem_class(scheme: str) -> type[SynxferFileSystem]:
    """The fsspec filesystem class of a synxfer scheme (protocol ``sx+<scheme>``)."""
    scheme = scheme.lower()
    cls = _CLASSES.get(scheme)
    if cls is None:
        name = f"Sx{scheme.title().replace('-', '').replace('.', '')}FileSystem"
        cls = type(
            name,
            (SynxferFileSystem,),
            {"scheme": scheme, "protocol": (PREFIX + scheme,), "__module__": __name__},
        )
        _CLASSES[scheme] = cls
    return cls


def register(scheme: str, *, clobber: bool = False) -> type[SynxferFileSystem]:
    """Register ``sx+<scheme>`` with fsspec at run time (for third-party backends)."""
    cls = filesystem_class(scheme)
    fsspec.register_implementation(cls.protocol[0], cls, clobber=clobber)
    return cls


# The classes the entry points name (``synxfer.fsspec:SxS3FileSystem`` …).
SxS3FileSystem = filesystem_class("s3")
SxGsFileSystem = filesystem_class("gs")
SxScpFileSystem = filesystem_class("scp")
SxBlocksFileSystem = filesystem_class("blocks")
SxFileFileSystem = filesystem_class("file")


# -- helpers --------------------------------------------------------------------------------


#: How a path names an object version (s3fs's spelling).
_VERSION_ID = "?versionId="


def _trailing_sep(path: str) -> bool:
    return path.endswith(("/", os.sep))


def _check(result: TransferResult) -> None:
    if result.failures:
        failure = result.failures[0]
        raise OSError(errno.EIO, f"{failure.path}: {failure.error}")


@contextlib.contextmanager
def _spooled() -> Iterator[tuple[Any, str]]:
    fd, name = tempfile.mkstemp(prefix=".synxfer-fsspec-")
    spool = os.fdopen(fd, "wb")
    try:
        yield spool, name
    finally:
        spool.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def _close_client(client: Client, loop: asyncio.AbstractEventLoop) -> None:
    """Close a collected filesystem's client on its loop, if that loop still runs."""
    with contextlib.suppress(Exception):
        if not loop.is_running() or loop.is_closed():
            return
        if _running_loop() is loop:  # collected on the loop's own thread
            loop.create_task(client.aclose())
        else:
            asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(10)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
