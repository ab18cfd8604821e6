"""The file backend's class: the SDK's primitives on a local directory.

The async methods run the ``_*_sync`` implementations in worker threads
(:func:`~synxfer.backend.to_thread_holding` where they read the caller's
buffer); see :mod:`synxfer_file` for the layout on disk.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import json
import os
import re
import secrets
import shutil
import stat as stat_mod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, NoReturn

from synxfer import (
    BackendError,
    BucketNotFound,
    CompletedPart,
    ConfigError,
    ListPage,
    MultipartUpload,
    NotFound,
    ObjectInfo,
    PreconditionFailed,
    ReadResult,
    TransientError,
    WriteOptions,
)
from synxfer.backend import (
    Backend,
    BackendOptions,
    Capabilities,
    Checksum,
    Payload,
    to_thread_holding,
)

from . import _layout as layout
from ._errors import mapped_os_errors
from ._options import FileOptions

__all__ = ["FileBackend"]

_PART_FILE = re.compile(r"^part-(\d{5})$")
_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")


class FileBackend(Backend):
    """A local directory as a bucket. See the module docstring for the layout.

    ``bucket`` is the root directory (``"/"`` for ``file://`` URLs); it must
    exist when the backend is opened.
    """

    scheme: ClassVar[str] = "file"
    capabilities: Capabilities = Capabilities(
        multipart=True,
        min_part_size=1,
        max_parts=10_000,
        ranged_reads=True,
        server_side_copy=True,
        metadata=True,
        batch_delete=False,
        part_checksum="md5",
        list_parts=True,
    )

    def __init__(self, bucket: str, options: BackendOptions | None = None) -> None:
        if not bucket or "\x00" in bucket:
            raise ConfigError(f"file backend root {bucket!r} must be a directory path")
        self.options = options or BackendOptions()
        self.root = os.path.abspath(bucket)
        self.bucket = self.root
        settings = FileOptions.read(self.options)
        self._fsync, self._page_size = settings.fsync, settings.list_page_size

    def url(self, key: str = "") -> str:
        """``file://`` + the absolute path of ``key`` (``file:///`` + key for root ``/``)."""
        return "file://" + self.root.rstrip("/") + "/" + key

    # -- lifecycle -----------------------------------------------------------

    async def open(self) -> None:
        """Check that the root directory exists."""
        if not await asyncio.to_thread(os.path.isdir, self.root):
            raise BucketNotFound(f"no such directory: {self.root}", url=self.url(), status=404)

    # -- primitives ----------------------------------------------------------

    async def stat(self, key: str) -> ObjectInfo:
        """Info of ``key`` with its metadata; NotFound if it is not a file."""
        return await asyncio.to_thread(self._stat_sync, key)

    async def list_page(self, prefix: str, cursor: str | None = None) -> ListPage:
        """Up to ``list_page_size`` objects whose keys start with ``prefix``, after ``cursor``."""
        return await asyncio.to_thread(self._list_sync, prefix, cursor)

    async def read(
        self,
        key: str,
        offset: int = 0,
        length: int | None = None,
        *,
        if_match: str | None = None,
    ) -> ReadResult:
        """Bytes ``[offset, offset+length)`` of ``key``, from one open file."""
        if offset < 0 or (length is not None and length < 0):
            raise ValueError(f"offset and length must be >= 0 (got {offset}, {length})")
        return await asyncio.to_thread(self._read_sync, key, offset, length, if_match)

    async def put(
        self,
        key: str,
        data: Payload,
        options: WriteOptions,
        checksum: Checksum | None = None,
    ) -> ObjectInfo:
        """Write ``key`` atomically; verify ``checksum`` first (TransientError if wrong)."""
        return await to_thread_holding(self._put_sync, key, data, options, checksum)

    async def delete(self, key: str) -> None:
        """Remove ``key`` and its sidecar; a missing key is fine."""
        await asyncio.to_thread(self._delete_sync, key)

    async def copy(self, src_key: str, dst_key: str, options: WriteOptions) -> ObjectInfo:
        """Copy ``src_key`` to ``dst_key`` with ``options`` as the new object's metadata."""
        return await asyncio.to_thread(self._copy_sync, src_key, dst_key, options)

    async def create_multipart(self, key: str, options: WriteOptions) -> MultipartUpload:
        """Create the staging directory of a new upload of ``key``."""
        return await asyncio.to_thread(self._create_multipart_sync, key, options)

    async def upload_part(
        self,
        upload: MultipartUpload,
        number: int,
        data: Payload,
        checksum: Checksum | None = None,
    ) -> CompletedPart:
        """Store part ``number``; a part sent again replaces the earlier one."""
        return await to_thread_holding(self._upload_part_sync, upload, number, data, checksum)

    async def complete_multipart(
        self, upload: MultipartUpload, parts: Sequence[CompletedPart]
    ) -> ObjectInfo:
        """Concatenate ``parts`` in number order into the object (parts not listed are dropped)."""
        return await asyncio.to_thread(self._complete_sync, upload, list(parts))

    async def abort_multipart(self, upload: MultipartUpload) -> None:
        """Remove the upload's staging directory; an unknown upload is fine."""
        await asyncio.to_thread(self._abort_sync, upload)

    async def list_parts(self, upload: MultipartUpload) -> list[CompletedPart]:
        """The staged parts of an upload in progress (their MD5s read back)."""
        return await asyncio.to_thread(self._list_parts_sync, upload)

    def _list_parts_sync(self, upload: MultipartUpload) -> list[CompletedPart]:
        with self._errors(upload.key):
            staging, _ = self._load_upload(upload)
            parts = []
            for name in sorted(os.listdir(staging)):
                m = _PART_FILE.match(name)
                if m is None:
                    continue
                digest = layout.md5()
                with open(os.path.join(staging, name), "rb") as f:
                    while chunk := f.read(layout.CHUNK):
                        digest.update(chunk)
                size = os.path.getsize(os.path.join(staging, name))
                parts.append(CompletedPart(int(m.group(1)), digest.hexdigest(), size))
        return parts

    # -- keys and paths ------------------------------------------------------

    def _path(self, key: str) -> str:
        """The filesystem path of ``key``; BackendError if the key is not a safe one."""
        if not isinstance(key, str) or not key:
            self._bad_key(key, "empty key")
        if "\x00" in key:
            self._bad_key(key, "contains a NUL character")
        if key.startswith("/") or key.endswith("/"):
            self._bad_key(key, "starts or ends with '/'")
        parts = key.split("/")
        for part in parts:
            if part in ("", ".", ".."):
                self._bad_key(key, "has an empty, '.' or '..' component")
            if layout.is_hidden(part):
                self._bad_key(key, "uses a name reserved for synxfer's own files")
        return os.path.join(self.root, *parts)

    def _bad_key(self, key: object, why: str) -> NoReturn:
        raise BackendError(f"invalid key {key!r} for the file backend: {why}", status=400)

    def _staging_dir(self, upload: MultipartUpload) -> str:
        if not isinstance(upload.upload_id, str) or not _UPLOAD_ID.match(upload.upload_id):
            raise NotFound(
                f"no such multipart upload {upload.upload_id!r}",
                url=self.url(upload.key),
                status=404,
            )
        path = self._path(upload.key)
        return os.path.join(os.path.dirname(path), layout.MPU_PREFIX + upload.upload_id)

    def _errors(self, key: str, *, writing: bool = False) -> AbstractContextManager[None]:
        """Map OSErrors raised inside the block to synxfer's exception tree."""
        return mapped_os_errors(self.url(key), writing=writing)

    def _write_temp(self, target: str, chunks: Iterable[Payload]) -> str:
        """Write ``chunks`` to a new temp file next to ``target``; return its path."""
        return layout.write_temp(target, chunks, fsync=self._fsync)

    def _verify(self, key: str, digest: bytes, checksum: Checksum | None) -> None:
        if checksum is None:
            return
        if checksum.algorithm != "md5":
            raise BackendError(
                f"the file backend verifies md5 checksums, not {checksum.algorithm}",
                url=self.url(key),
                status=400,
            )
        if base64.b64encode(digest).decode("ascii") != checksum.value:
            raise TransientError(
                f"checksum mismatch (BadDigest): the data received for {self.url(key)} "
                f"does not match Content-MD5 {checksum.value}",
                url=self.url(key),
                status=400,
            )

    # -- sync implementations (run in worker threads) ------------------------

    def _stat_sync(self, key: str) -> ObjectInfo:
        path = self._path(key)
        with self._errors(key):
            st = os.stat(path)
            if not stat_mod.S_ISREG(st.st_mode):
                raise FileNotFoundError(errno.ENOENT, "not a file", path)
            return layout.info(key, st, layout.load_sidecar(path, st))

    def _list_sync(self, prefix: str, cursor: str | None) -> ListPage:
        limit = self._page_size
        out: list[ObjectInfo] = []
        head = prefix.rpartition("/")[0]
        if head:
            parts = head.split("/")
            if any(p in ("", ".", "..") or layout.is_hidden(p) for p in parts) or "\x00" in head:
                return ListPage(items=[])
            start, base = os.path.join(self.root, *parts), head + "/"
        else:
            start, base = self.root, ""
        with self._errors(prefix):
            self._walk(start, base, prefix, cursor, out, limit + 1)
        if len(out) > limit:
            return ListPage(items=out[:limit], cursor=out[limit - 1].key)
        return ListPage(items=out)

    def _walk(
        self,
        dirpath: str,
        base: str,
        prefix: str,
        after: str | None,
        out: list[ObjectInfo],
        limit: int,
    ) -> bool:
        """Append objects under ``dirpath`` in key order; True once ``limit`` is reached.

        Entries are visited sorted by name, directories as ``name + "/"``:
        then every key in a subtree sorts between its neighbours, so a
        depth-first walk yields keys in global order and can skip whole
        subtrees that lie before ``after`` or outside ``prefix``.
        """
        try:
            with os.scandir(dirpath) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError):
            return False
        names = {e.name for e in entries}
        ordered: list[tuple[str, os.DirEntry[str], bool]] = []
        for entry in entries:
            if layout.is_hidden(entry.name):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    ordered.append((entry.name + "/", entry, True))
                elif entry.is_file():
                    ordered.append((entry.name, entry, False))
            except OSError:
                continue
        ordered.sort(key=lambda t: t[0])
        for sort_key, entry, is_dir in ordered:
            key = base + sort_key
            if is_dir:
                if not (key.startswith(prefix) or prefix.startswith(key)):
                    continue
                if after is not None and after > key and not after.startswith(key):
                    continue
                if self._walk(entry.path, key, prefix, after, out, limit):
                    return True
                continue
            if not key.startswith(prefix) or (after is not None and key <= after):
                continue
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue  # removed while we listed
            sidecar = None
            if layout.sidecar_name(entry.name) in names:
                sidecar = layout.load_sidecar(entry.path, st)
            out.append(layout.info(key, st, sidecar))
            if len(out) >= limit:
                return True
        return False

    def _read_sync(
        self, key: str, offset: int, length: int | None, if_match: str | None
    ) -> ReadResult:
        path = self._path(key)
        with self._errors(key), open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat_mod.S_ISREG(st.st_mode):
                raise FileNotFoundError(errno.ENOENT, "not a file", path)
            sidecar = layout.load_sidecar(path, st)
            info = layout.info(key, st, sidecar)
            if if_match is not None and info.etag != if_match.strip('"'):
                raise PreconditionFailed(
                    f"{self.url(key)} changed: ETag is {info.etag!r}, expected {if_match!r}",
                    url=self.url(key),
                    status=412,
                )
            if offset >= st.st_size:
                return ReadResult(data=b"", info=info)
            f.seek(offset)
            remaining = st.st_size - offset
            data = f.read(remaining if length is None else min(length, remaining))
            return ReadResult(data=data, info=info)

    def _put_sync(
        self, key: str, data: Payload, options: WriteOptions, checksum: Checksum | None
    ) -> ObjectInfo:
        path = self._path(key)
        digest = layout.md5()
        digest.update(data)
        self._verify(key, digest.digest(), checksum)
        with self._errors(key, writing=True):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = self._write_temp(path, [data])
            return self._install(tmp, key, path, digest.hexdigest(), options)

    def _install(
        self, tmp: str, key: str, path: str, etag: str, options: WriteOptions
    ) -> ObjectInfo:
        """Rename the written ``tmp`` over ``path``, write its sidecar, return its info.

        The sidecar records the temp file's inode and mtime, which the rename
        keeps: if anything replaces ``path`` after us, the sidecar stops
        matching instead of describing the other file.
        """
        try:
            st = os.stat(tmp)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        layout.replace(tmp, path)
        layout.write_sidecar(
            path, st, etag, options.metadata, options.content_type, fsync=self._fsync
        )
        return ObjectInfo(
            key=key,
            size=st.st_size,
            mtime=st.st_mtime,
            etag=etag,
            metadata=dict(options.metadata),
            content_type=options.content_type,
        )

    def _delete_sync(self, key: str) -> None:
        path = self._path(key)
        with self._errors(key, writing=True):
            for victim in (path, layout.sidecar_path(path)):
                with contextlib.suppress(FileNotFoundError, NotADirectoryError, IsADirectoryError):
                    os.unlink(victim)

    def _copy_sync(self, src_key: str, dst_key: str, options: WriteOptions) -> ObjectInfo:
        src, dst = self._path(src_key), self._path(dst_key)
        digest = layout.md5()
        with self._errors(src_key), open(src, "rb") as f:
            if not stat_mod.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise FileNotFoundError(errno.ENOENT, "not a file", src)

            def chunks() -> Iterator[bytes]:
                while chunk := f.read(layout.CHUNK):
                    digest.update(chunk)
                    yield chunk

            with self._errors(dst_key, writing=True):
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                tmp = self._write_temp(dst, chunks())
        with self._errors(dst_key, writing=True):
            return self._install(tmp, dst_key, dst, digest.hexdigest(), options)

    def _create_multipart_sync(self, key: str, options: WriteOptions) -> MultipartUpload:
        path = self._path(key)
        upload = MultipartUpload(key=key, upload_id=secrets.token_hex(16))
        staging = self._staging_dir(upload)
        doc = {
            "key": key,
            "metadata": dict(options.metadata),
            "content_type": options.content_type,
        }
        with self._errors(key, writing=True):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.mkdir(staging)
            with open(os.path.join(staging, layout.UPLOAD_FILE), "w", encoding="utf-8") as f:
                json.dump(doc, f)
        return upload

    def _load_upload(self, upload: MultipartUpload) -> tuple[str, dict[str, Any]]:
        """The staging directory and ``upload.json`` of ``upload``; NotFound if unknown."""
        staging = self._staging_dir(upload)
        try:
            with open(os.path.join(staging, layout.UPLOAD_FILE), encoding="utf-8") as f:
                doc = json.load(f)
        except (FileNotFoundError, NotADirectoryError, ValueError):
            doc = None
        if not isinstance(doc, dict) or doc.get("key") != upload.key:
            raise NotFound(
                f"no such multipart upload {upload.upload_id} (NoSuchUpload)",
                url=self.url(upload.key),
                status=404,
            )
        return staging, doc

    def _upload_part_sync(
        self, upload: MultipartUpload, number: int, data: Payload, checksum: Checksum | None
    ) -> CompletedPart:
        if not 1 <= number <= self.capabilities.max_parts:
            raise BackendError(
                f"part number {number} is outside 1..{self.capabilities.max_parts}",
                url=self.url(upload.key),
                status=400,
            )
        digest = layout.md5()
        digest.update(data)
        self._verify(upload.key, digest.digest(), checksum)
        with self._errors(upload.key, writing=True):
            staging, _ = self._load_upload(upload)
            part = os.path.join(staging, f"part-{number:05d}")
            tmp = self._write_temp(part, [data])
            layout.replace(tmp, part)
        return CompletedPart(number=number, etag=digest.hexdigest(), size=len(data))

    def _complete_sync(self, upload: MultipartUpload, parts: list[CompletedPart]) -> ObjectInfo:
        url = self.url(upload.key)
        path = self._path(upload.key)
        with self._errors(upload.key):
            staging, doc = self._load_upload(upload)
        parts = sorted(parts, key=lambda p: p.number)
        numbers = [p.number for p in parts]
        if not parts or len(set(numbers)) != len(numbers):
            raise BackendError(
                f"cannot complete {url}: parts must be given, each number once (got {numbers})",
                url=url,
                status=400,
            )
        digests: list[bytes] = []

        def chunks() -> Iterator[bytes]:
            for part in parts:
                part_path = os.path.join(staging, f"part-{part.number:05d}")
                digest = layout.md5()
                try:
                    f = open(part_path, "rb")  # noqa: SIM115 - closed below
                except FileNotFoundError:
                    raise BackendError(
                        f"cannot complete {url}: part {part.number} was not uploaded (InvalidPart)",
                        url=url,
                        status=400,
                    ) from None
                with f:
                    while chunk := f.read(layout.CHUNK):
                        digest.update(chunk)
                        yield chunk
                if digest.hexdigest() != part.etag.strip('"'):
                    raise BackendError(
                        f"cannot complete {url}: part {part.number} has ETag "
                        f"{digest.hexdigest()}, not {part.etag} (InvalidPart)",
                        url=url,
                        status=400,
                    )
                digests.append(digest.digest())

        with self._errors(upload.key, writing=True):
            tmp = self._write_temp(path, chunks())
            etag = f"{layout.md5_hex(b''.join(digests))}-{len(parts)}"
            metadata = doc.get("metadata") or {}
            content_type = doc.get("content_type")
            info = self._install(
                tmp,
                upload.key,
                path,
                etag,
                WriteOptions(
                    metadata={str(k): str(v) for k, v in metadata.items()},
                    content_type=content_type if isinstance(content_type, str) else None,
                ),
            )
            shutil.rmtree(staging, ignore_errors=True)
            return info

    def _abort_sync(self, upload: MultipartUpload) -> None:
        try:
            staging = self._staging_dir(upload)
        except NotFound:
            return
        with (
            self._errors(upload.key, writing=True),
            contextlib.suppress(FileNotFoundError, NotADirectoryError),
        ):
            shutil.rmtree(staging)
