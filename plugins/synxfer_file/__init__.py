"""The ``file`` backend: a local directory served as a bucket.

This is the reference implementation of the backend SDK (see
:mod:`synxfer.backend`): every primitive, multipart included, on a plain
POSIX filesystem, with no dependency beyond the standard library. It passes
the conformance kit in :mod:`synxfer.testing`.

``file:///data/dir/key`` is served by ``FileBackend("/", options)`` with key
``data/dir/key``; any other absolute directory can be the root too.

Layout on disk, next to each object ``dir/name``:

``dir/.name.synxfer-meta``
    A JSON sidecar with the object's ETag, user metadata and content type
    (for names over 200 bytes, ``name`` is replaced by a hash of it),
    and the ``(size, mtime_ns, inode)`` of the file it describes. If the file
    no longer matches (something else rewrote it), the sidecar is ignored
    and the object has no ETag and no metadata. A file without a sidecar is
    an object too, with ETag ``None``.
``dir/.name.synxfer-tmp-<hex>``
    A write in progress. Every write goes to such a temp file in the target's
    directory and is renamed over the target with :func:`os.replace`, so
    readers see the old object or the new one, never a mix.
``dir/.synxfer-mpu-<upload id>/``
    The staging directory of a multipart upload of a key in ``dir``: an
    ``upload.json`` with the options and one ``part-NNNNN`` file per part.
    Completing concatenates the parts into a temp file that is renamed over
    the target; aborting removes the directory. It lives next to the target
    rather than under the root so that the final rename never crosses a
    filesystem boundary (the root of ``file:///`` URLs is ``/``).

Listings never show sidecars, temp files or staging directories, and keys
whose components look like them are refused.

ETags follow S3: the MD5 hex digest of the content for a single put or a
copy, and ``md5(part digests) + "-N"`` for a multipart upload of N parts.

``part_checksum`` is ``"md5"``: a put or part sent with a Content-MD5 that
does not match the bytes received is refused with
:class:`~synxfer.TransientError` (S3's ``BadDigest``), because the bytes
were damaged on the way and sending them again is the cure; nothing is
stored.

Options (``BackendOptions.extra``):

``fsync``
    ``"true"`` to fsync every file before it is renamed into place (slower,
    crash-safe). Default ``"false"``.
``list_page_size``
    Objects per :meth:`FileBackend.list_page` page. Default ``1000``.

Blocking filesystem calls all run in worker threads via
:func:`asyncio.to_thread`; the event loop never waits on the disk.
Keys may not contain ``..``, ``.`` or empty components, a NUL, or start or
end with ``/``: such keys raise :class:`~synxfer.BackendError` naming them.
Symbolic links to files are served; symbolic links to directories are not
followed by listings.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import stat as stat_mod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NoReturn, TypeVar

from synxfer import (
    BackendError,
    BucketNotFound,
    ConfigError,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    SynxferError,
    TransientError,
)
from synxfer._models import (
    CompletedPart,
    ListPage,
    MultipartUpload,
    ObjectInfo,
    ReadResult,
    WriteOptions,
)
from synxfer.backend import Backend, BackendOptions, Capabilities, Checksum, Payload

__all__ = ["FileBackend"]

_META_SUFFIX = ".synxfer-meta"
_TMP_MARK = ".synxfer-tmp-"
_MPU_PREFIX = ".synxfer-mpu-"
_UPLOAD_FILE = "upload.json"
_CHUNK = 1024 * 1024

_HIDDEN = re.compile(
    r"^\..*\.synxfer-meta$|^\..*\.synxfer-tmp-[0-9a-f]{16}$|^\.synxfer-mpu-[0-9a-f]{32}$",
    re.DOTALL,
)
_PART_FILE = re.compile(r"^part-(\d{5})$")
_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")

#: errno values worth retrying: the condition is expected to pass.
_TRANSIENT_ERRNOS = frozenset(
    getattr(errno, name)
    for name in ("EAGAIN", "EBUSY", "EINTR", "ETIMEDOUT", "ESTALE", "EWOULDBLOCK")
    if hasattr(errno, name)
)

_TRUE = frozenset({"1", "true", "yes", "on"})


T = TypeVar("T")


async def _holding_buffer(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` in a worker thread, and wait for it even if cancelled.

    A thread cannot be interrupted. If the caller were released on
    cancellation while the thread still reads the caller's buffer, the
    engine could refill that buffer under it (see :data:`synxfer.backend.Payload`).
    """
    task = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved: the caller was cancelled, its result is moot
        raise


def _md5() -> Any:
    return hashlib.md5(usedforsecurity=False)


def _is_hidden(name: str) -> bool:
    return _HIDDEN.match(name) is not None


def _sidecar_name(name: str) -> str:
    """``.name.synxfer-meta``; a hash stands in for names too long to extend."""
    if len(name.encode("utf-8", "surrogateescape")) > 200:
        name = "long-" + hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()
    return f".{name}{_META_SUFFIX}"


@dataclass(frozen=True, slots=True)
class _Sidecar:
    """What a sidecar records about one version of an object's file."""

    etag: str | None
    metadata: Mapping[str, str]
    content_type: str | None


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
        extra = self.options.extra
        self._fsync = extra.get("fsync", "false").strip().lower() in _TRUE
        try:
            self._page_size = int(extra.get("list_page_size", "1000"))
        except ValueError:
            raise ConfigError(
                f"list_page_size must be an integer (got {extra['list_page_size']!r})"
            ) from None
        if self._page_size < 1:
            raise ConfigError(f"list_page_size must be >= 1 (got {self._page_size})")

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
        return await _holding_buffer(self._put_sync, key, data, options, checksum)

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
        return await _holding_buffer(self._upload_part_sync, upload, number, data, checksum)

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
                digest = _md5()
                with open(os.path.join(staging, name), "rb") as f:
                    while chunk := f.read(_CHUNK):
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
            if _is_hidden(part):
                self._bad_key(key, "uses a name reserved for synxfer's own files")
        return os.path.join(self.root, *parts)

    def _bad_key(self, key: object, why: str) -> NoReturn:
        raise BackendError(f"invalid key {key!r} for the file backend: {why}", status=400)

    @staticmethod
    def _sidecar_path(path: str) -> str:
        head, name = os.path.split(path)
        return os.path.join(head, _sidecar_name(name))

    def _staging_dir(self, upload: MultipartUpload) -> str:
        if not isinstance(upload.upload_id, str) or not _UPLOAD_ID.match(upload.upload_id):
            raise NotFound(
                f"no such multipart upload {upload.upload_id!r}",
                url=self.url(upload.key),
                status=404,
            )
        path = self._path(upload.key)
        return os.path.join(os.path.dirname(path), _MPU_PREFIX + upload.upload_id)

    @contextlib.contextmanager
    def _errors(self, key: str, *, writing: bool = False) -> Iterator[None]:
        """Map OSErrors raised inside the block to synxfer's exception tree."""
        url = self.url(key)
        try:
            yield
        except SynxferError:
            raise
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError, FileExistsError) as exc:
            if writing:
                raise BackendError(
                    f"cannot write {url}: {exc.strerror or exc} "
                    "(is a parent of the key a file, or the key a directory?)",
                    url=url,
                ) from exc
            raise NotFound(f"no such object: {url}", url=url, status=404) from exc
        except PermissionError as exc:
            raise PermissionDenied(
                f"permission denied: {url}: {exc.strerror or exc}", url=url, status=403
            ) from exc
        except OSError as exc:
            cls = TransientError if exc.errno in _TRANSIENT_ERRNOS else BackendError
            raise cls(f"{url}: {exc.strerror or exc}", url=url) from exc

    # -- sidecars ------------------------------------------------------------

    def _load_sidecar(self, path: str, st: os.stat_result) -> _Sidecar | None:
        """The sidecar of ``path`` if it describes the file ``st`` describes."""
        try:
            with open(self._sidecar_path(path), "rb") as f:
                raw = json.loads(f.read())
        except (OSError, ValueError):
            return None
        if not isinstance(raw, dict):
            return None
        if (raw.get("size"), raw.get("mtime_ns"), raw.get("ino")) != (
            st.st_size,
            st.st_mtime_ns,
            st.st_ino,
        ):
            return None  # the file was replaced or rewritten behind our back
        metadata = raw.get("metadata") or {}
        etag = raw.get("etag")
        content_type = raw.get("content_type")
        return _Sidecar(
            etag=etag if isinstance(etag, str) else None,
            metadata={str(k): str(v) for k, v in metadata.items()}
            if isinstance(metadata, dict)
            else {},
            content_type=content_type if isinstance(content_type, str) else None,
        )

    def _write_sidecar(
        self,
        path: str,
        st: os.stat_result,
        etag: str,
        metadata: Mapping[str, str],
        content_type: str | None,
    ) -> None:
        doc = {
            "etag": etag,
            "metadata": dict(metadata),
            "content_type": content_type,
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "ino": st.st_ino,
        }
        side = self._sidecar_path(path)
        tmp = self._write_temp(side, [json.dumps(doc, sort_keys=True).encode()])
        self._replace(tmp, side)

    @staticmethod
    def _info(key: str, st: os.stat_result, sidecar: _Sidecar | None) -> ObjectInfo:
        if sidecar is None:
            return ObjectInfo(key=key, size=st.st_size, mtime=st.st_mtime)
        return ObjectInfo(
            key=key,
            size=st.st_size,
            mtime=st.st_mtime,
            etag=sidecar.etag,
            metadata=sidecar.metadata,
            content_type=sidecar.content_type,
        )

    # -- temp files ----------------------------------------------------------

    def _write_temp(self, target: str, chunks: Iterable[Payload]) -> str:
        """Write ``chunks`` to a new temp file next to ``target``; return its path."""
        head, name = os.path.split(target)
        tmp = os.path.join(head, f".{name[:64]}{_TMP_MARK}{secrets.token_hex(8)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as f:
                for chunk in chunks:
                    f.write(chunk)
                if self._fsync:
                    f.flush()
                    os.fsync(f.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return tmp

    @staticmethod
    def _replace(tmp: str, target: str) -> None:
        try:
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

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
            return self._info(key, st, self._load_sidecar(path, st))

    def _list_sync(self, prefix: str, cursor: str | None) -> ListPage:
        limit = self._page_size
        out: list[ObjectInfo] = []
        head = prefix.rpartition("/")[0]
        if head:
            parts = head.split("/")
            if any(p in ("", ".", "..") or _is_hidden(p) for p in parts) or "\x00" in head:
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
            if _is_hidden(entry.name):
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
            if _sidecar_name(entry.name) in names:
                sidecar = self._load_sidecar(entry.path, st)
            out.append(self._info(key, st, sidecar))
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
            sidecar = self._load_sidecar(path, st)
            info = self._info(key, st, sidecar)
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
        digest = _md5()
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
        self._replace(tmp, path)
        self._write_sidecar(path, st, etag, options.metadata, options.content_type)
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
            for victim in (path, self._sidecar_path(path)):
                with contextlib.suppress(FileNotFoundError, NotADirectoryError, IsADirectoryError):
                    os.unlink(victim)

    def _copy_sync(self, src_key: str, dst_key: str, options: WriteOptions) -> ObjectInfo:
        src, dst = self._path(src_key), self._path(dst_key)
        digest = _md5()
        with self._errors(src_key), open(src, "rb") as f:
            if not stat_mod.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise FileNotFoundError(errno.ENOENT, "not a file", src)

            def chunks() -> Iterator[bytes]:
                while chunk := f.read(_CHUNK):
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
            with open(os.path.join(staging, _UPLOAD_FILE), "w", encoding="utf-8") as f:
                json.dump(doc, f)
        return upload

    def _load_upload(self, upload: MultipartUpload) -> tuple[str, dict[str, Any]]:
        """The staging directory and ``upload.json`` of ``upload``; NotFound if unknown."""
        staging = self._staging_dir(upload)
        try:
            with open(os.path.join(staging, _UPLOAD_FILE), encoding="utf-8") as f:
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
        digest = _md5()
        digest.update(data)
        self._verify(upload.key, digest.digest(), checksum)
        with self._errors(upload.key, writing=True):
            staging, _ = self._load_upload(upload)
            part = os.path.join(staging, f"part-{number:05d}")
            tmp = self._write_temp(part, [data])
            self._replace(tmp, part)
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
                digest = _md5()
                try:
                    f = open(part_path, "rb")  # noqa: SIM115 - closed below
                except FileNotFoundError:
                    raise BackendError(
                        f"cannot complete {url}: part {part.number} was not uploaded (InvalidPart)",
                        url=url,
                        status=400,
                    ) from None
                with f:
                    while chunk := f.read(_CHUNK):
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
            etag = f"{_md5_hex(b''.join(digests))}-{len(parts)}"
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


def _md5_hex(data: bytes) -> str:
    digest = _md5()
    digest.update(data)
    return str(digest.hexdigest())
